package cuda

import (
	"fmt"
	"runtime"
	"unsafe"
)

// TensorMapDataType is a CUtensorMapDataType: the element type a tensor map
// copies (the copy moves bytes; the type fixes the element size and, for
// the float types, the out-of-bounds NaN fill).
type TensorMapDataType int32

// CUtensorMapDataType values (cuda.h), those this package names.
const (
	TensorMapUint8    TensorMapDataType = 0
	TensorMapUint16   TensorMapDataType = 1
	TensorMapUint32   TensorMapDataType = 2
	TensorMapFloat16  TensorMapDataType = 6
	TensorMapFloat32  TensorMapDataType = 7
	TensorMapBFloat16 TensorMapDataType = 9
)

// size is the element size in bytes (0 for a type this package does not name).
func (t TensorMapDataType) size() int {
	switch t {
	case TensorMapUint8:
		return 1
	case TensorMapUint16, TensorMapFloat16, TensorMapBFloat16:
		return 2
	case TensorMapUint32, TensorMapFloat32:
		return 4
	}
	return 0
}

// TensorMapSwizzle is a CUtensorMapSwizzle: how a copy permutes the 16-byte
// units of each row in shared memory. Note that the numbering differs from
// the swizzle field of a wgmma matrix descriptor.
type TensorMapSwizzle int32

// CUtensorMapSwizzle values (cuda.h).
const (
	TensorMapSwizzleNone TensorMapSwizzle = 0
	TensorMapSwizzle32B  TensorMapSwizzle = 1
	TensorMapSwizzle64B  TensorMapSwizzle = 2
	TensorMapSwizzle128B TensorMapSwizzle = 3
)

// TensorMapTiled describes a tiled tensor map for cuTensorMapEncodeTiled:
// a global tensor of up to 5 dimensions, dimension 0 innermost, copied in
// boxes. Interleave, L2 promotion and the out-of-bounds fill are fixed at
// none, none and zeros (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE).
type TensorMapTiled struct {
	DataType       TensorMapDataType
	Global         DevicePtr // address of element (0, 0, ...)
	Dims           []uint64  // elements per dimension, innermost first
	Strides        []uint64  // byte strides of dimensions 1..rank-1
	Box            []uint32  // box size per dimension
	ElementStrides []uint32  // per dimension; nil means 1 everywhere
	Swizzle        TensorMapSwizzle
}

// TensorMap is an encoded CUtensorMap: 128 bytes that a kernel receives by
// value or, copied to device memory, by address.
type TensorMap [128]byte

// EncodeTensorMapTiled encodes a tiled tensor map (cuTensorMapEncodeTiled,
// CUDA 12.0 and later). The driver checks the description against the
// hardware's limits and returns CUDA_ERROR_INVALID_VALUE for one it cannot
// encode; a driver without the function gives an error wrapping
// [ErrMissingSymbol]. Only lengths are checked here.
func (c *Context) EncodeTensorMapTiled(m TensorMapTiled) (TensorMap, error) {
	var out TensorMap
	if err := c.usable("Context.EncodeTensorMapTiled"); err != nil {
		return out, err
	}
	if c.drv.cuTensorMapEncodeTiled == nil {
		return out, fmt.Errorf("cuda: Context.EncodeTensorMapTiled: %s has no cuTensorMapEncodeTiled (CUDA 12.0 or later): %w", c.drv.path, ErrMissingSymbol)
	}
	rank := len(m.Dims)
	es := m.ElementStrides
	if es == nil {
		es = make([]uint32, rank)
		for i := range es {
			es[i] = 1
		}
	}
	switch {
	case rank < 1 || rank > 5:
		return out, fmt.Errorf("cuda: Context.EncodeTensorMapTiled: rank %d outside 1..5", rank)
	case len(m.Strides) != rank-1 || len(m.Box) != rank || len(es) != rank:
		return out, fmt.Errorf("cuda: Context.EncodeTensorMapTiled: rank %d needs %d strides, %d box sizes and %d element strides (got %d, %d, %d)", rank, rank-1, rank, rank, len(m.Strides), len(m.Box), len(es))
	case m.DataType.size() == 0:
		return out, fmt.Errorf("cuda: Context.EncodeTensorMapTiled: data type %d is not one this package names", m.DataType)
	case m.Swizzle < TensorMapSwizzleNone || m.Swizzle > TensorMapSwizzle128B:
		return out, fmt.Errorf("cuda: Context.EncodeTensorMapTiled: swizzle %d", m.Swizzle)
	}
	// The driver writes 128 bytes at a 64-byte aligned address and reads
	// the arrays during the call: keep them in pinned Go heap memory.
	buf := make([]byte, len(out)+64)
	dims := append([]uint64(nil), m.Dims...)
	strides := append(make([]uint64, 0, 1), m.Strides...)
	if len(strides) == 0 {
		strides = append(strides, 0) // never read for rank 1
	}
	box := append([]uint32(nil), m.Box...)
	es = append([]uint32(nil), es...)
	var pin runtime.Pinner
	pin.Pin(&buf[0])
	pin.Pin(&dims[0])
	pin.Pin(&strides[0])
	pin.Pin(&box[0])
	pin.Pin(&es[0])
	defer pin.Unpin()
	off := int((64 - uintptr(unsafe.Pointer(&buf[0]))%64) % 64)
	dst := unsafe.Pointer(&buf[off])
	err := c.do("cuTensorMapEncodeTiled", func() Result {
		return c.drv.cuTensorMapEncodeTiled(dst, int32(m.DataType), uint32(rank), uintptr(m.Global),
			&dims[0], &strides[0], &box[0], &es[0], 0, int32(m.Swizzle), 0, 0)
	})
	runtime.KeepAlive(buf)
	if err != nil {
		return out, err
	}
	copy(out[:], buf[off:off+len(out)])
	return out, nil
}
