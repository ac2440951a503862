// Package gpu describes the GPU kernels generated packages embed: the PTX
// module, its entry, its parameters and its launch geometry, computed here
// once for every target and every package. It imports only the standard
// library and runtime/mask (the residue layout decides how many query
// tiles a grid holds); it does not talk to a GPU (attngen's runner, in
// package cuda, does).
package gpu

import "github.com/attngen/attngen/runtime/mask"

// Kernel is one forward kernel for NVIDIA GPUs.
type Kernel struct {
	Target string // the GPU architecture it needs at least, e.g. "sm_80"
	Elem   string // element type of q, k, v and out: "bf16" or "f16"
	Name   string // entry point in PTX
	PTX    string // the module, for cuModuleLoadData
	// Params lists the kernel parameters in order: name, PTX type, meaning.
	// The scalar ones are SeqQ, SeqK, HeadsQ, HeadsKV and scale*log2(e).
	Params [][3]string

	TileQ     int // query rows per CTA
	Threads   int // threads per CTA
	DynShared int // dynamic shared memory per CTA, bytes
	Stride    int // residue layout stride (1: identity): grid z = batch*Stride
}

// Geometry returns the launch of a call: grid and block dimensions and the
// dynamic shared memory in bytes (which needs
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES when above 48 KiB). One
// CTA runs one query tile of one head of one residue class of one batch.
func (k Kernel) Geometry(batch, headsQ, seqQ, seqK int) (grid, block [3]int, dynShared int) {
	st := max(k.Stride, 1)
	rows := mask.MaxQueries(seqQ, seqK, st)
	return [3]int{(rows + k.TileQ - 1) / k.TileQ, headsQ, batch * st}, [3]int{k.Threads, 1, 1}, k.DynShared
}
