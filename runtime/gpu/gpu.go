// Package gpu describes the GPU kernels generated packages embed: the PTX
// module, its entry, its parameters and its launch geometry, computed here
// once for every target and every package. It imports only the standard
// library and runtime/mask (the residue layout decides how many query
// tiles a grid holds); it does not talk to a GPU (attngen's runner, in
// package cuda, does).
package gpu

import (
	"fmt"

	"github.com/attngen/attngen/runtime/mask"
)

// Kinds of kernels: the forward, and the two kernels of the backward
// pass, launched in this order (the dq kernel writes the delta the dk/dv
// kernel reads).
const (
	KindForward = ""        // one CTA per query tile, query head, batch x class
	KindBwdDQ   = "bwd-dq"  // the forward's grid: dq and delta
	KindBwdDKV  = "bwd-dkv" // one CTA per key tile, key/value head, batch x class: dk and dv
)

// Kernel is one kernel for NVIDIA GPUs.
type Kernel struct {
	Target string // the GPU architecture it needs at least, e.g. "sm_80"
	Elem   string // element type of q, k, v and out: "bf16" or "f16"
	Kind   string // KindForward, KindBwdDQ or KindBwdDKV
	Name   string // entry point in PTX
	PTX    string // the module, for cuModuleLoadData
	// Params lists the kernel parameters in order: name, PTX type, meaning.
	// The scalar ones are SeqQ, SeqK, HeadsQ, HeadsKV and scale*log2(e), and
	// for the backward's kernels the scale itself.
	Params [][3]string

	TileQ     int // query rows per CTA
	TileK     int // keys per CTA of a KindBwdDKV kernel
	Threads   int // threads per CTA
	DynShared int // dynamic shared memory per CTA, bytes
	Stride    int // residue layout stride (1: identity): grid z = batch*Stride
}

// MaxSeq bounds seq_k: the kernels hold positions, and sums of positions
// and mask constants, in 32-bit registers.
const MaxSeq = 1 << 29

// maxGridYZ is CUDA's limit on the grid's y and z dimensions.
const maxGridYZ = 65535

// Geometry returns the launch of a call: grid and block dimensions and the
// dynamic shared memory in bytes (which needs
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES when above 48 KiB). One
// CTA runs one query tile of one head of one residue class of one batch
// (a KindBwdDKV kernel: one key tile of one key/value head).
// A shape the kernel cannot run is an error: a dimension below 1, HeadsQ
// not a multiple of HeadsKV, SeqQ > SeqK, SeqK >= MaxSeq, or a grid past
// CUDA's limits (HeadsQ and Batch*Stride at most 65535).
func (k Kernel) Geometry(batch, headsQ, headsKV, seqQ, seqK int) (grid, block [3]int, dynShared int, err error) {
	st := max(k.Stride, 1)
	switch {
	case k.Kind != KindForward && k.Kind != KindBwdDQ && k.Kind != KindBwdDKV:
		err = fmt.Errorf("gpu: kernel %q has unknown kind %q", k.Name, k.Kind)
	case k.TileQ < 1 || k.Threads < 1 || k.Kind == KindBwdDKV && k.TileK < 1:
		err = fmt.Errorf("gpu: kernel %q has no tile size or thread count", k.Name)
	case batch < 1 || headsQ < 1 || headsKV < 1 || seqQ < 1 || seqK < 1:
		err = fmt.Errorf("gpu: shape %d %d %d %d %d: every dimension must be at least 1", batch, headsQ, headsKV, seqQ, seqK)
	case headsQ%headsKV != 0:
		err = fmt.Errorf("gpu: heads_q %d is not a multiple of heads_kv %d", headsQ, headsKV)
	case seqQ > seqK:
		err = fmt.Errorf("gpu: seq_q %d exceeds seq_k %d", seqQ, seqK)
	case seqK >= MaxSeq:
		err = fmt.Errorf("gpu: seq_k %d: the kernel's 32-bit positions need seq_k < %d", seqK, MaxSeq)
	case headsQ > maxGridYZ || batch > maxGridYZ/st:
		err = fmt.Errorf("gpu: heads_q %d and batch %d x stride %d: the grid allows at most %d of each", headsQ, batch, st, maxGridYZ)
	}
	if err != nil {
		return grid, block, 0, err
	}
	if k.Kind == KindBwdDKV {
		keys := (seqK + st - 1) / st // the most keys of a residue class
		return [3]int{(keys + k.TileK - 1) / k.TileK, headsKV, batch * st}, [3]int{k.Threads, 1, 1}, k.DynShared, nil
	}
	rows := mask.MaxQueries(seqQ, seqK, st)
	return [3]int{(rows + k.TileQ - 1) / k.TileQ, headsQ, batch * st}, [3]int{k.Threads, 1, 1}, k.DynShared, nil
}
