package avo

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/reg"
)

// ISA names an x86 vector instruction set a kernel is written for.
type ISA int

// The instruction sets the emitter lowers to.
const (
	// AVX512 uses 512-bit zmm registers (32 of them), opmask registers for
	// masking, embedded broadcasts and VSCALEFPS. It needs AVX512F (and
	// AVX512VL for the xmm forms it uses on registers 16-31).
	AVX512 ISA = iota
	// AVX2 uses 256-bit ymm registers with FMA3 and never more than 16 of
	// them, so that no instruction needs an EVEX encoding; its half-precision
	// kernels (decode, widening, narrowing) also need F16C.
	AVX2
)

// ISAs lists every instruction set, in the order the generated file holds
// their functions.
var ISAs = []ISA{AVX512, AVX2}

// Dims are the head dimensions of a kernel: QK of q and k (the reduction
// of the scores), V of v and the output. Both are multiples of the vector
// width (16 floats, which AVX2's 8 divide) up to MaxDim.
type Dims struct{ QK, V int }

// Square returns the dims of one head dimension d for q, k and v.
func Square(d int) Dims { return Dims{d, d} }

// MaxDim is the largest head dimension of any kernel.
const MaxDim = 256

// KernelDims lists the head dimensions every kernel (tile, tile with the
// score stage, decode and decode with the score stage) exists for, on
// both ISAs; the generated table (TableFile) lists them in this order. A
// new size is one entry here.
var KernelDims = []Dims{
	Square(32), Square(64), Square(80), Square(96), Square(128), Square(192), Square(256),
	{192, 128},
}

// String is the dims' part of a kernel name: D64 for square dims, D192V128
// where QK and V differ.
func (d Dims) String() string {
	if d.QK == d.V {
		return fmt.Sprintf("D%d", d.QK)
	}
	return fmt.Sprintf("D%dV%d", d.QK, d.V)
}

// doc is the dims in a kernel's doc comment: "D = 64", or "D = 192 (q and
// k), 128 (v and o)".
func (d Dims) doc() string {
	if d.QK == d.V {
		return fmt.Sprintf("D = %d", d.QK)
	}
	return fmt.Sprintf("D = %d (q and k), %d (v and o)", d.QK, d.V)
}

// check panics unless d is a pair a kernel of isa can be written for.
func (d Dims) check(isa ISA) {
	w := isa.lanes()
	if d.QK <= 0 || d.V <= 0 || d.QK > MaxDim || d.V > MaxDim || d.QK%w != 0 || d.V%w != 0 {
		panic(fmt.Sprintf("BUG: no %s kernel for head dimensions %d, %d", isa, d.QK, d.V))
	}
}

// Tile sizes of the microkernel ABI (kernel.TQ and kernel.TK).
const (
	TQ = 48
	TK = 64
)

func (i ISA) String() string {
	switch i {
	case AVX512:
		return "AVX512"
	case AVX2:
		return "AVX2"
	}
	return fmt.Sprintf("ISA(%d)", int(i))
}

// lanes is the number of float32 lanes in one vector register.
func (i ISA) lanes() int {
	if i == AVX512 {
		return 16
	}
	return 8
}

// regs is the number of vector registers a kernel of the ISA may use: 32
// zmm, or 16 ymm (no EVEX encoding on AVX2).
func (i ISA) regs() int {
	if i == AVX512 {
		return 32
	}
	return 16
}

// vec allocates a virtual vector register of the ISA's width.
func (i ISA) vec(ctx *build.Context) reg.VecVirtual {
	if i == AVX512 {
		return ctx.ZMM()
	}
	return ctx.YMM()
}

// TileName is the Go name of the tile kernel for an ISA and head
// dimensions, for example tileAVX512D128 or tileAVX2D192V128.
func TileName(isa ISA, d Dims) string {
	return fmt.Sprintf("tile%s%s", isa, d)
}

// PeakName is the Go name of the FMA peak loop for an ISA: peakFMA512 or
// peakFMA256.
func PeakName(isa ISA) string {
	if isa == AVX512 {
		return "peakFMA512"
	}
	return "peakFMA256"
}

// blocking is the register blocking of the two matrix products in a tile:
// an accumulator block of rows x vecs vector registers.
type blocking struct {
	rows   int  // rows of the accumulator block (broadcast operand)
	vecs   int  // vector registers per row (streamed operand)
	bFirst bool // load the vecs streamed vectors first, then broadcast row by row
	unroll int  // reduction steps per loop iteration
	kc     int  // reduction steps per part (the reduction is split into parts)
}

// blocks returns the blocking of the two products of an ISA: QK^T (rows of
// q broadcast, columns of kt streamed) and PV (probabilities broadcast,
// columns of v streamed).
//
// AVX-512: 6 rows x 4 zmm = 24 accumulators (64 columns); per reduction
// step the 4 streamed vectors are loaded once and each row's value is
// broadcast into one register (VBROADCASTSS from memory, a pure load)
// and used by 4 FMAs: 29 live registers, 10 loads per 24 FMAs. Broadcasting
// through the FMA's memory operand instead costs 28 loads per 24 FMAs, more
// than two load ports give, and measured about 0.6x as fast here.
//
// AVX2: 3 rows x 4 ymm = 12 accumulators (32 columns); per step the 3
// rows are broadcast into 3 registers, then each streamed vector is loaded
// into the 16th register and used by 3 FMAs: 7 loads per 12 FMAs and
// exactly 16 live registers.
//
// kc = 64 splits the reduction of QK^T at D = 128 in two, so that the half
// of kt a column chunk reads (16 KiB) stays in L1 across the row blocks
// (at other D, in the fewest parts of at most 64 steps, as equal as they
// can be: split). vecs is the widest column chunk of P V; where d.V/w is no
// multiple of it the chunks are as equal as they can be (5 vectors: 3 +
// 2), since a chunk of fewer vectors costs more loads per FMA.
func (i ISA) blocks() (qk, pv blocking) {
	if i == AVX512 {
		return blocking{rows: 6, vecs: 4, bFirst: true, unroll: 4, kc: 64}, blocking{rows: 6, vecs: 4, bFirst: true, unroll: 4, kc: 64}
	}
	return blocking{rows: 3, vecs: 4, unroll: 4, kc: 64}, blocking{rows: 3, vecs: 4, unroll: 4, kc: 64}
}

// split divides n (a multiple of unit) into the fewest parts of at most
// most (a multiple of unit) each, each a multiple of unit and as equal as
// they can be, the larger first: split(80, 64, 4) is [40 40],
// split(5, 4, 1) is [3 2], split(128, 64, 4) is [64 64].
func split(n, most, unit int) []int {
	if n <= 0 || unit <= 0 || most < unit || n%unit != 0 || most%unit != 0 {
		panic(fmt.Sprintf("BUG: split(%d, %d, %d)", n, most, unit))
	}
	k := (n + most - 1) / most
	units := n / unit
	parts := make([]int, k)
	for i := range parts {
		parts[i] = units / k * unit
		if i < units%k {
			parts[i] += unit
		}
	}
	return parts
}

// run is a run of equal parts of a split: count parts of size each.
type run struct{ size, count int }

// runs groups consecutive equal parts: one loop of count iterations each.
func runs(parts []int) []run {
	var rs []run
	for _, p := range parts {
		if len(rs) > 0 && rs[len(rs)-1].size == p {
			rs[len(rs)-1].count++
			continue
		}
		rs = append(rs, run{p, 1})
	}
	return rs
}
