package cudamock

// MaxParams is mock_cuda.c's MAX_PARAMS: the most parameters a recorded
// launch holds.
const MaxParams = 64

// Launch mirrors struct mock_launch in mock_cuda.c (816 bytes): the last
// launch's function, stream, geometry, dynamic shared memory and
// parameters (their sizes and values, little-endian, zero-extended).
type Launch struct {
	Func    uint64
	Stream  uint64
	Grid    [3]uint32
	Block   [3]uint32
	Shared  uint32
	NParams uint32
	Sizes   [MaxParams]uint32
	Values  [MaxParams]uint64
}
