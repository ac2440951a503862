package avo

import (
	"fmt"
	"math/bits"

	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// TileSignature is the Go signature of every tile kernel.
const TileSignature = "func(q, kt, v, s, o, m, l *float32, mask *uint64)"

// tileGen emits one tile kernel: one ISA, one pair of head dimensions.
type tileGen struct {
	ctx     *build.Context
	isa     ISA
	dq, dv  int      // head dimensions: of q and k, of v and o
	w       int      // float32 lanes per vector
	qk, pv  blocking // register blocking of the two products
	c       ConstTable
	alpha   op.Mem // stack local [TQ]float32: alpha of each row
	msafe   op.Mem // stack local [w]float32: the group's maxima, 0 for rows with no key
	scratch op.Mem // stack local [w][w]float32: one partial vector per row of the group
	blockOr op.Mem // stack local [TQ/rows]uint64: OR of the mask words of each row block
	labels  int    // numbers labels emitted more than once in the function (tanh's)
}

// EmitTile adds the tile kernel for isa and head dimensions d to ctx. The
// constant table must have been added to the same context by EmitConsts.
//
// The kernel runs in three phases:
//
//  1. scores: S = Q K^T into s, register-blocked (see ISA.blocks), in column
//     chunks, parts of the reduction over d.QK (as equal as they can be, at
//     most blocking.kc each: 80 is two parts of 40), row blocks, and the
//     reduction loop unrolled by blocking.unroll;
//  2. softmax, in groups of one row per vector lane, with transposing
//     reductions (see softmax); the mask is applied only when mask != nil;
//     rows with no key kept so far and none in this tile are left untouched
//     (alpha = 1, p = 0, m and l unchanged), and no NaN arises on the way;
//  3. O = alpha*O + P V, register-blocked the same way, in column chunks of
//     V that stay in L1: d.V/w vectors in the fewest chunks of at most
//     blocking.vecs, as equal as they can be (AVX-512, D = 80: a chunk of 3
//     vectors, then one of 2), one loop per run of equal chunks.
//
// The nil test of the mask is done once, on entry, and selects one of two
// copies of the whole kernel. The full-tile copy computes everything. The
// masked copy first ORs the mask words of each row block (blockMasks) and
// skips what the mask makes useless: in phase 1 a row block whose rows keep
// nothing, and the vectors of columns that no row of the block keeps (its
// s there is never read unmasked: AVX-512 reads s under the opmask, AVX2
// overwrites masked scores with -Inf before reading them); in phase 3 a row
// block whose rows keep nothing (their p are 0 and alpha is exactly 1, so o
// stays as it is), and the keys outside the range between the lowest and
// highest key the block keeps (their p are 0).
//
// No vector register is ever spilled (avo cannot), and the AVX2 kernels use
// Y0-Y15 only (Generate checks it). Every kernel ends with VZEROUPPER.
func EmitTile(ctx *build.Context, c ConstTable, isa ISA, d Dims) {
	qk, pv := isa.blocks()
	emitTile(ctx, c, isa, d, TileName(isa, d), qk, pv, false)
}

// emitTile emits a tile kernel; with score, the kernel with the score
// stage (TileScoreSignature, EmitScoreKernels): the same kernel with the
// score pass between phases 1 and 2 of both copies.
func emitTile(ctx *build.Context, c ConstTable, isa ISA, d Dims, name string, qk, pv blocking, score bool) {
	w := isa.lanes()
	d.check(isa)
	if TQ%qk.rows != 0 || TK%(qk.vecs*w) != 0 || qk.kc%qk.unroll != 0 || d.QK%qk.unroll != 0 ||
		TQ%pv.rows != 0 || min(pv.kc, TK) != TK || TK%pv.unroll != 0 || qk.rows != pv.rows {
		panic(fmt.Sprintf("BUG: blocking %+v, %+v does not fit %s with %s", qk, pv, isa, d.doc()))
	}
	g := &tileGen{ctx: ctx, isa: isa, dq: d.QK, dv: d.V, w: w, qk: qk, pv: pv, c: c}
	ctx.Function(name)
	ctx.Pragma("noescape")
	if score {
		scoreSignature(ctx, TileScoreSignature)
		ctx.Doc(
			fmt.Sprintf("%s is the tile microkernel with the score stage of sc (see", name),
			fmt.Sprintf("scoreTile) for %s, written for %s. A nil mask means a full", d.doc(), isa.requires()),
			"tile.",
		)
	} else {
		ctx.SignatureExpr(TileSignature)
		ctx.Doc(
			fmt.Sprintf("%s is the tile microkernel (see the package doc for the ABI) for", name),
			fmt.Sprintf("%s, written for %s. A nil mask means a full tile.", d.doc(), isa.requires()),
		)
	}
	g.alpha = ctx.AllocLocal(4 * TQ)
	g.msafe = ctx.AllocLocal(4 * g.w)
	g.scratch = ctx.AllocLocal(4 * g.w * g.w)
	g.blockOr = ctx.AllocLocal(8 * TQ / qk.rows)

	mask := ctx.Load(ctx.Param("mask"), ctx.GP64())
	ctx.TESTQ(mask, mask)
	ctx.JNZ(op.LabelRef("masked"))

	ctx.Comment("Full tile. Phase 1: S = Q K^T into s.")
	g.scores()
	if score {
		ctx.Comment("The score stage.")
		g.scorePass(nil, "fscore")
	}
	ctx.Comment("Phase 2: online softmax row by row.")
	g.softmax(nil, "unmasked")
	ctx.Comment("Phase 3: O = alpha O + P V.")
	g.pvProduct()
	ctx.VZEROUPPER()
	ctx.RET()

	ctx.Label("masked")
	ctx.Comment("Masked tile. The OR of each row block's mask words.")
	g.blockMasks(mask)
	ctx.Comment("Phase 1: S = Q K^T into s, kept row blocks and column vectors only.")
	g.scoresMasked()
	if score {
		ctx.Comment("The score stage, rows that keep a key only.")
		g.scorePass(mask, "mscore")
	}
	ctx.Comment("Phase 2: online softmax row by row, masked.")
	g.softmax(mask, "masked")
	ctx.Comment("Phase 3: O = alpha O + P V, kept row blocks and key ranges only.")
	g.pvMasked()
	ctx.VZEROUPPER()
	ctx.RET()
}

func (i ISA) requires() string {
	if i == AVX512 {
		return "AVX-512 Foundation"
	}
	return "AVX2 and FMA3"
}

func (g *tileGen) vec() reg.VecVirtual { return g.isa.vec(g.ctx) }

func (g *tileGen) param(name string) reg.Register {
	return g.ctx.Load(g.ctx.Param(name), g.ctx.GP64())
}

func mem(base reg.Register, disp int) op.Mem { return op.Mem{Base: base, Disp: disp} }

func (g *tileGen) zero(x reg.VecVirtual) { zero(g.ctx, g.c, g.isa, x) }

// zero sets x to +0 by a broadcast load: avo's liveness analysis does not
// know that VPXORD x, x, x ignores x (it does know it of VXORPS, which
// needs AVX512DQ on zmm), so a VPXORD zeroing would keep x live back to the
// function entry.
func zero(ctx *build.Context, c ConstTable, isa ISA, x reg.VecVirtual) {
	if isa == AVX512 {
		ctx.VBROADCASTSS(c.slot(kZero), x)
	} else {
		ctx.VXORPS(x, x, x)
	}
}

// newAcc allocates a rows x vecs block of accumulators.
func (g *tileGen) newAcc(blk blocking) [][]reg.VecVirtual {
	acc := make([][]reg.VecVirtual, blk.rows)
	for r := range acc {
		acc[r] = make([]reg.VecVirtual, blk.vecs)
		for j := range acc[r] {
			acc[r][j] = g.vec()
		}
	}
	return acc
}

// gemm emits acc[r][j] += sum_k A[r][k] * B[k][j*w:(j+1)*w] for k < klen,
// where A[r][k] is the float32 at a + r*aRow + 4k (broadcast) and B[k] starts
// at b + k*bRow (streamed vectors).
func (g *tileGen) gemm(blk blocking, acc [][]reg.VecVirtual, a reg.Register, aOff, aRow int, b reg.Register, bOff, bRow, klen int, label string) {
	ctx := g.ctx
	ap, bp, n := ctx.GP64(), ctx.GP64(), ctx.GP64()
	ctx.LEAQ(mem(a, aOff), ap)
	ctx.LEAQ(mem(b, bOff), bp)
	ctx.MOVQ(op.U32(uint32(klen/blk.unroll)), n)
	g.gemmLoop(blk, acc, ap, aRow, bp, bRow, n, label)
}

// gemmLoop emits the loop of gemm: n iterations of blk.unroll reduction
// steps, A at ap (rows aRow bytes apart) and B at bp (steps bRow bytes
// apart); it advances ap, bp and counts n down to 0.
func (g *tileGen) gemmLoop(blk blocking, acc [][]reg.VecVirtual, ap reg.Register, aRow int, bp reg.Register, bRow int, n reg.Register, label string) {
	ctx := g.ctx
	u := blk.unroll
	vecs := len(acc[0])
	ctx.Label(label)
	for k := 0; k < u; k++ {
		if blk.bFirst {
			bv := make([]reg.VecVirtual, vecs)
			for j := range bv {
				bv[j] = g.vec()
				ctx.VMOVUPS(mem(bp, k*bRow+j*g.w*4), bv[j])
			}
			for r := range acc {
				x := g.vec()
				ctx.VBROADCASTSS(mem(ap, r*aRow+4*k), x)
				for j := range bv {
					ctx.VFMADD231PS(bv[j], x, acc[r][j])
				}
			}
		} else {
			xs := make([]reg.VecVirtual, len(acc))
			for r := range xs {
				xs[r] = g.vec()
				ctx.VBROADCASTSS(mem(ap, r*aRow+4*k), xs[r])
			}
			for j := 0; j < vecs; j++ {
				y := g.vec()
				ctx.VMOVUPS(mem(bp, k*bRow+j*g.w*4), y)
				for r := range xs {
					ctx.VFMADD231PS(y, xs[r], acc[r][j])
				}
			}
		}
	}
	ctx.ADDQ(op.U32(uint32(4*u)), ap)
	ctx.ADDQ(op.U32(uint32(bRow*u)), bp)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef(label))
}

// scores emits phase 1: s = q kt in column chunks of qk.vecs vectors (the
// outer loop), then parts of at most qk.kc of the reduction over dq (so
// that the part of kt a chunk reads stays in L1), then row blocks of
// qk.rows.
func (g *tileGen) scores() {
	ctx, blk := g.ctx, g.qk
	q, kt, s := g.param("q"), g.param("kt"), g.param("s")
	cw := blk.vecs * g.w
	ch := ctx.GP64()
	ctx.MOVQ(op.U32(uint32(TK/cw)), ch)
	ctx.Label("qk_chunk")
	k0 := 0 // the part's first reduction step
	for part, kc := range split(g.dq, blk.kc, blk.unroll) {
		qr, sr, rb := ctx.GP64(), ctx.GP64(), ctx.GP64()
		ctx.MOVQ(q, qr)
		ctx.MOVQ(s, sr)
		ctx.MOVQ(op.U32(uint32(TQ/blk.rows)), rb)
		ctx.Label(fmt.Sprintf("qk_rows%d", part))
		acc := g.newAcc(blk)
		for r, row := range acc {
			for j, x := range row {
				if part == 0 {
					g.zero(x)
				} else {
					ctx.VMOVUPS(mem(sr, 4*(r*TK+j*g.w)), x)
				}
			}
		}
		g.gemm(blk, acc, qr, 4*k0, 4*g.dq, kt, 4*k0*TK, 4*TK, kc, fmt.Sprintf("qk_d%d", part))
		for r, row := range acc {
			for j, x := range row {
				ctx.VMOVUPS(x, mem(sr, 4*(r*TK+j*g.w)))
			}
		}
		ctx.ADDQ(op.U32(uint32(4*blk.rows*g.dq)), qr)
		ctx.ADDQ(op.U32(uint32(4*blk.rows*TK)), sr)
		ctx.DECQ(rb)
		ctx.JNZ(op.LabelRef(fmt.Sprintf("qk_rows%d", part)))
		k0 += kc
	}
	ctx.ADDQ(op.U32(uint32(4*cw)), kt)
	ctx.ADDQ(op.U32(uint32(4*cw)), s)
	ctx.DECQ(ch)
	ctx.JNZ(op.LabelRef("qk_chunk"))
}

// maxOp and addOp are the two row reductions.
func (g *tileGen) maxOp(a, b, dst reg.Register) { g.ctx.VMAXPS(a, b, dst) }
func (g *tileGen) addOp(a, b, dst reg.Register) { g.ctx.VADDPS(a, b, dst) }

// transposeReduce loads w vectors from the stack scratch and returns one
// vector whose lane r is f over all lanes of vector r. Each merge of two
// vectors costs two shuffles and one f; 15 merges for 16 rows (AVX-512), 7
// for 8 (AVX2), against 8 dependent steps per row for a horizontal
// reduction of each row on its own.
func (g *tileGen) transposeReduce(f func(a, b, dst reg.Register)) reg.VecVirtual {
	vs := make([]reg.VecVirtual, g.w)
	for r := range vs {
		vs[r] = g.vec()
		g.ctx.VMOVUPS(g.scratch.Offset(4*g.w*r), vs[r])
	}
	return g.reduceVecs(vs, f)
}

// reduceVecs is transposeReduce on w vectors in registers: lane r of the
// result is f over all lanes of vs[r].
func (g *tileGen) reduceVecs(vs []reg.VecVirtual, f func(a, b, dst reg.Register)) reg.VecVirtual {
	ctx := g.ctx
	for level := 1; len(vs) > 1; level++ {
		next := make([]reg.VecVirtual, len(vs)/2)
		for i := range next {
			a, b := vs[2*i], vs[2*i+1]
			lo, hi := g.vec(), g.vec()
			switch {
			case level == 1: // [a0 a1 b0 b1] and [a2 a3 b2 b3] in each 128-bit lane
				ctx.VSHUFPS(op.U8(0x44), b, a, lo)
				ctx.VSHUFPS(op.U8(0xee), b, a, hi)
			case level == 2: // [a0 a2 b0 b2] and [a1 a3 b1 b3]
				ctx.VSHUFPS(op.U8(0x88), b, a, lo)
				ctx.VSHUFPS(op.U8(0xdd), b, a, hi)
			case g.isa == AVX2: // [a.lo b.lo] and [a.hi b.hi]
				ctx.VPERM2F128(op.U8(0x20), b, a, lo)
				ctx.VPERM2F128(op.U8(0x31), b, a, hi)
			default: // 128-bit lanes [a0 a2 b0 b2] and [a1 a3 b1 b3]
				ctx.VSHUFF32X4(op.U8(0x88), b, a, lo)
				ctx.VSHUFF32X4(op.U8(0xdd), b, a, hi)
			}
			f(hi, lo, lo)
			next[i] = lo
		}
		vs = next
	}
	return vs[0]
}

// exp2 replaces every lane x of v (x <= 0, -Inf or NaN) by 2^x: n =
// round(x), f = x - n in [-0.5, 0.5], 2^f by a degree-6 polynomial, times
// 2^n. Anything below -125 (-Inf included) gives exactly +0 and nothing
// computes a subnormal on the way: on Intel cores an underflowing result
// costs a microcode assist of about a hundred cycles, and masked keys would
// hit it for every vector. NaN gives NaN: the flush test is "not less
// than", true for NaN, and the clamp takes x as the operand VMAXPS returns
// when one is NaN, so a NaN score of a kept pair reaches p, l and o. On
// AVX-512, lanes whose bit in kmask (if not nil) is clear give +0 too.
func (g *tileGen) exp2(x reg.VecVirtual, kmask reg.Register) {
	ctx, c := g.ctx, g.c
	flush := c.slot(kFlush)
	lo := g.vec()
	ctx.VBROADCASTSS(flush, lo)
	if g.isa == AVX512 {
		keep := ctx.K()
		if kmask != nil {
			ctx.VCMPPS(op.U8(0x15), lo, x, kmask, keep) // kmask && !(x < -125) (NLT_UQ)
		} else {
			ctx.VCMPPS(op.U8(0x15), lo, x, keep) // !(x < -125) (NLT_UQ)
		}
		ctx.VMAXPS(x, lo, x) // max(-125, x), NaN stays NaN
		n := g.vec()
		ctx.VRNDSCALEPS(op.U8(0), x, n) // round to nearest even
		ctx.VSUBPS(n, x, x)
		p := g.vec()
		ctx.VBROADCASTSS(c.coeff(6), p)
		for i := 5; i >= 1; i-- {
			ctx.VFMADD213PS_BCST(c.coeff(i), x, p)
		}
		ctx.VFMADD213PS_BCST(c.slot(kOne), x, p)
		ctx.VSCALEFPS_Z(n, p, keep, x) // x = keep ? p * 2^n : 0
		return
	}
	if kmask != nil {
		panic("BUG: AVX2 exp2 takes no mask")
	}
	keep := g.vec()
	ctx.VCMPPS(op.U8(0x15), lo, x, keep) // !(x < -125) (NLT_UQ)
	ctx.VMAXPS(x, lo, x)                 // max(-125, x), NaN stays NaN
	n := g.vec()
	ctx.VCVTPS2DQ(x, n) // round to nearest even (MXCSR default); NaN gives 0x80000000
	f := g.vec()
	ctx.VCVTDQ2PS(n, f)
	ctx.VSUBPS(f, x, x)
	p := g.vec()
	ctx.VMOVUPS(c.coeff(6), p)
	for i := 5; i >= 1; i-- {
		ctx.VFMADD213PS(c.coeff(i), x, p)
	}
	ctx.VFMADD213PS(c.slot(kOne), x, p)
	ctx.VPSLLD(op.U8(23), n, n)
	ctx.VPADDD(n, p, p)    // p * 2^n through the exponent field; n >= -125 keeps it normal
	ctx.VANDPS(keep, p, x) // +0 where flushed
}

// rowMax emits the partial maxima of the row at srow (row i of the group,
// mask words at mk) into one vector. Masked keys count as -Inf; AVX2 also
// writes -Inf back into s for them so that pass B needs no mask.
func (g *tileGen) rowMax(srow, mk, i reg.Register, negInf reg.VecVirtual) reg.VecVirtual {
	ctx := g.ctx
	nv, vb := TK/g.w, 4*g.w
	maskRow := op.Mem{Base: mk, Index: i, Scale: 8}
	switch {
	case g.isa == AVX512 && mk != nil:
		t := g.vec()
		for j := 0; j < nv; j++ {
			k := ctx.K()
			ctx.KMOVW(maskRow.Offset(2*j), k)
			if j == 0 {
				ctx.VBLENDMPS(mem(srow, 0), negInf, k, t) // t = k ? s : -Inf
			} else {
				ctx.VMAXPS(mem(srow, vb*j), t, k, t) // where k: t = max(t, s)
			}
		}
		return t
	case mk != nil:
		lo, hi := g.vec(), g.vec()
		ctx.VPBROADCASTD(maskRow, lo)
		ctx.VPBROADCASTD(maskRow.Offset(4), hi)
		acc := make([]reg.VecVirtual, 2)
		for j := 0; j < nv; j++ {
			word := lo
			if j >= 4 {
				word = hi
			}
			pat := g.c.slot(kPat0 + j%4)
			x, t := g.vec(), g.vec()
			ctx.VMOVUPS(mem(srow, vb*j), x)
			ctx.VPAND(pat, word, t)
			ctx.VPCMPEQD(pat, t, t)
			ctx.VBLENDVPS(t, x, negInf, x) // x = t ? x : -Inf
			ctx.VMOVUPS(x, mem(srow, vb*j))
			if j < 2 {
				acc[j] = x
			} else {
				ctx.VMAXPS(x, acc[j%2], acc[j%2])
			}
		}
		ctx.VMAXPS(acc[1], acc[0], acc[0])
		return acc[0]
	default:
		acc := []reg.VecVirtual{g.vec(), g.vec()}
		ctx.VMOVUPS(mem(srow, 0), acc[0])
		ctx.VMOVUPS(mem(srow, vb), acc[1])
		for j := 2; j < nv; j++ {
			ctx.VMAXPS(mem(srow, vb*j), acc[j%2], acc[j%2])
		}
		ctx.VMAXPS(acc[1], acc[0], acc[0])
		return acc[0]
	}
}

// rowExp replaces the row at srow by p = exp2(s - ms) (0 where masked) and
// returns the partial row sums as one vector.
func (g *tileGen) rowExp(srow, mk, i reg.Register, ms reg.VecVirtual) reg.VecVirtual {
	ctx := g.ctx
	nv, vb := TK/g.w, 4*g.w
	sums := make([]reg.VecVirtual, 2)
	for j := 0; j < nv; j++ {
		x := g.vec()
		ctx.VMOVUPS(mem(srow, vb*j), x)
		ctx.VSUBPS(ms, x, x)
		var k reg.Register
		if mk != nil && g.isa == AVX512 {
			k = ctx.K()
			ctx.KMOVW(op.Mem{Base: mk, Index: i, Scale: 8, Disp: 2 * j}, k)
		}
		g.exp2(x, k)
		ctx.VMOVUPS(x, mem(srow, vb*j))
		if j < 2 {
			sums[j] = x
		} else {
			ctx.VADDPS(x, sums[j%2], sums[j%2])
		}
	}
	ctx.VADDPS(sums[1], sums[0], sums[0])
	return sums[0]
}

// softmax emits phase 2 for all TQ rows; mask is nil for full tiles. Rows
// go in groups of w, one row per lane of a vector. Pass A reduces each row
// to a vector of partial maxima (scratch), transposeReduce turns them into
// the group's row maxima; the new running maxima, alpha and the safe maxima
// (0 for rows with no key kept so far, so that their p are exactly 0) are
// computed for the whole group at once; pass B replaces the scores by
// p = 2^(s - m) row by row, leaving partial row sums in scratch, reduced
// the same way into the group's l update. With a mask, a group whose rows
// all keep nothing skips both passes: its m and l stay, its alpha is set to
// 1 and its p to 0 (a row block of the P V product may straddle two groups).
func (g *tileGen) softmax(mask reg.Register, pfx string) {
	ctx, c := g.ctx, g.c
	w, vb := g.w, 4*g.w
	s, m, l := g.param("s"), g.param("m"), g.param("l")
	ap := ctx.GP64()
	ctx.LEAQ(g.alpha, ap)
	var negInf reg.VecVirtual
	if mask != nil {
		negInf = g.vec()
		ctx.VBROADCASTSS(c.slot(kNegInf), negInf)
	}
	grp := ctx.GP64()
	ctx.MOVQ(op.U32(uint32(TQ/w)), grp)
	ctx.Label(pfx + "_group")
	if mask != nil {
		// A group whose rows all keep nothing goes to pfx_empty.
		x := ctx.GP64()
		ctx.MOVQ(mem(mask, 0), x)
		for r := 1; r < w; r++ {
			ctx.ORQ(mem(mask, 8*r), x)
		}
		ctx.JZ(op.LabelRef(pfx + "_empty"))
	}

	// Pass A: row maxima.
	i, srow, scr := ctx.GP64(), ctx.GP64(), ctx.GP64()
	ctx.XORQ(i, i)
	ctx.MOVQ(s, srow)
	ctx.LEAQ(g.scratch, scr)
	ctx.Label(pfx + "_max")
	t := g.rowMax(srow, mask, i, negInf)
	ctx.VMOVUPS(t, mem(scr, 0))
	ctx.ADDQ(op.U32(4*TK), srow)
	ctx.ADDQ(op.U8(uint8(vb)), scr)
	ctx.INCQ(i)
	ctx.CMPQ(i, op.U8(uint8(w)))
	ctx.JNE(op.LabelRef(pfx + "_max"))
	mnew := g.transposeReduce(g.maxOp)

	// The group's new maxima, alpha, safe maxima.
	mold := g.vec()
	ctx.VMOVUPS(mem(m, 0), mold)
	ctx.VMAXPS(mold, mnew, mnew)
	ctx.VMOVUPS(mnew, mem(m, 0)) // -Inf stays -Inf for rows with no key
	msafe, alpha := g.vec(), g.vec()
	if g.isa == AVX512 {
		g.alphaAVX512(mnew, mold, msafe, alpha)
	} else {
		g.alphaAVX2(mnew, mold, msafe, alpha)
	}
	ctx.VMOVUPS(msafe, g.msafe)
	ctx.VMOVUPS(alpha, mem(ap, 0))

	// Pass B: probabilities and row sums.
	ctx.XORQ(i, i)
	ctx.MOVQ(s, srow)
	ctx.LEAQ(g.scratch, scr)
	ctx.Label(pfx + "_exp")
	ms := g.vec()
	ctx.VBROADCASTSS(g.msafe.Idx(i, 4), ms)
	sum := g.rowExp(srow, mask, i, ms)
	ctx.VMOVUPS(sum, mem(scr, 0))
	ctx.ADDQ(op.U32(4*TK), srow)
	ctx.ADDQ(op.U8(uint8(vb)), scr)
	ctx.INCQ(i)
	ctx.CMPQ(i, op.U8(uint8(w)))
	ctx.JNE(op.LabelRef(pfx + "_exp"))
	rowsum := g.transposeReduce(g.addOp)
	a := g.vec()
	ctx.VMOVUPS(mem(ap, 0), a)
	ctx.VFMADD231PS(mem(l, 0), a, rowsum) // sum + alpha*l
	ctx.VMOVUPS(rowsum, mem(l, 0))

	ctx.ADDQ(op.U32(uint32(w*4*TK)), s)
	ctx.ADDQ(op.U8(uint8(vb)), m)
	ctx.ADDQ(op.U8(uint8(vb)), l)
	ctx.ADDQ(op.U8(uint8(vb)), ap)
	if mask != nil {
		ctx.ADDQ(op.U8(uint8(8*w)), mask)
	}
	if mask != nil {
		ctx.Label(pfx + "_next")
	}
	ctx.DECQ(grp)
	ctx.JNZ(op.LabelRef(pfx + "_group"))
	if mask == nil {
		return
	}
	ctx.JMP(op.LabelRef(pfx + "_done"))

	// A group keeping nothing: m and l stay, alpha is 1 and p is 0 (the P V
	// product reads the p of these rows when a row block straddles groups).
	ctx.Label(pfx + "_empty")
	one, zero := g.vec(), g.vec()
	ctx.VBROADCASTSS(c.slot(kOne), one)
	ctx.VMOVUPS(one, mem(ap, 0))
	g.zero(zero)
	for r := 0; r < w; r++ {
		for j := 0; j < TK/w; j++ {
			ctx.VMOVUPS(zero, mem(s, 4*(r*TK+j*w)))
		}
	}
	ctx.ADDQ(op.U32(uint32(w*4*TK)), s)
	ctx.ADDQ(op.U8(uint8(vb)), m)
	ctx.ADDQ(op.U8(uint8(vb)), l)
	ctx.ADDQ(op.U8(uint8(vb)), ap)
	ctx.ADDQ(op.U8(uint8(8*w)), mask)
	ctx.JMP(op.LabelRef(pfx + "_next"))
	ctx.Label(pfx + "_done")
}

// alphaAVX512 sets, lane by lane, msafe to the new maximum mnew or 0 where
// it is -Inf (a row with no key kept so far), and alpha to 2^(mold -
// msafe), or 1 where mnew is -Inf (the row stays untouched).
func (g *tileGen) alphaAVX512(mnew, mold, msafe, alpha reg.VecVirtual) {
	ctx, c := g.ctx, g.c
	live, dead := ctx.K(), ctx.K()
	ctx.VCMPPS_BCST(op.U8(0x0c), c.slot(kNegInf), mnew, live) // mnew != -Inf (NEQ_OQ)
	ctx.VMOVAPS_Z(mnew, live, msafe)
	ctx.VSUBPS(msafe, mold, alpha)
	g.exp2(alpha, nil) // 0 where mold = -Inf
	ctx.KNOTW(live, dead)
	ctx.VBROADCASTSS(c.slot(kOne), dead, alpha) // untouched rows: alpha = 1
}

// alphaAVX2 is alphaAVX512 in AVX2 instructions: a compare and blends
// instead of opmasks.
func (g *tileGen) alphaAVX2(mnew, mold, msafe, alpha reg.VecVirtual) {
	ctx, c := g.ctx, g.c
	dead, one := g.vec(), g.vec()
	ctx.VCMPPS(op.U8(0x00), c.slot(kNegInf), mnew, dead) // mnew == -Inf (EQ_OQ)
	ctx.VANDNPS(mnew, dead, msafe)
	ctx.VSUBPS(msafe, mold, alpha)
	g.exp2(alpha, nil)
	ctx.VMOVUPS(c.slot(kOne), one)
	ctx.VBLENDVPS(dead, one, alpha, alpha) // untouched rows: alpha = 1
}

// pvProduct emits phase 3: o = alpha*o + p v in column chunks of at most
// pv.vecs vectors (the outer loops, one per run of equal chunks: see
// pvChunks), then parts of pv.kc keys (so that the part of v a chunk
// reads stays in L1), then row blocks of pv.rows.
func (g *tileGen) pvProduct() {
	ctx := g.ctx
	v, o, s := g.param("v"), g.param("o"), g.param("s")
	for gi, run := range g.pvChunks() {
		sfx := runSuffix(gi)
		blk := g.pv
		blk.vecs = run.size
		rows, cw, kc := blk.rows, blk.vecs*g.w, min(blk.kc, TK)
		ch := ctx.GP64()
		ctx.MOVQ(op.U32(uint32(run.count)), ch)
		ctx.Label("pv_chunk" + sfx)
		for part := 0; part < TK/kc; part++ {
			ap, orow, srow, rb := ctx.GP64(), ctx.GP64(), ctx.GP64(), ctx.GP64()
			if part == 0 {
				ctx.LEAQ(g.alpha, ap)
			}
			ctx.MOVQ(o, orow)
			ctx.MOVQ(s, srow)
			ctx.MOVQ(op.U32(uint32(TQ/rows)), rb)
			ctx.Label(fmt.Sprintf("pv_rows%d%s", part, sfx))
			acc := g.newAcc(blk)
			for r, row := range acc {
				if part > 0 {
					for j, x := range row {
						ctx.VMOVUPS(mem(orow, 4*(r*g.dv+j*g.w)), x)
					}
					continue
				}
				a := g.vec()
				ctx.VBROADCASTSS(mem(ap, 4*r), a)
				for j, x := range row {
					ctx.VMULPS(mem(orow, 4*(r*g.dv+j*g.w)), a, x)
				}
			}
			g.gemm(blk, acc, srow, 4*part*kc, 4*TK, v, 4*part*kc*g.dv, 4*g.dv, kc, fmt.Sprintf("pv_k%d%s", part, sfx))
			for r, row := range acc {
				for j, x := range row {
					ctx.VMOVUPS(x, mem(orow, 4*(r*g.dv+j*g.w)))
				}
			}
			ctx.ADDQ(op.U32(uint32(4*rows*g.dv)), orow)
			ctx.ADDQ(op.U32(uint32(4*rows*TK)), srow)
			if part == 0 {
				ctx.ADDQ(op.U8(uint8(4*rows)), ap)
			}
			ctx.DECQ(rb)
			ctx.JNZ(op.LabelRef(fmt.Sprintf("pv_rows%d%s", part, sfx)))
		}
		ctx.ADDQ(op.U32(uint32(4*cw)), o)
		ctx.ADDQ(op.U32(uint32(4*cw)), v)
		ctx.DECQ(ch)
		ctx.JNZ(op.LabelRef("pv_chunk" + sfx))
	}
}

// pvChunks returns the column chunks of the P V product as runs of equal
// chunks: dv/w vectors split into the fewest chunks of at most pv.vecs,
// as equal as they can be (the fewer vectors a chunk has, the more loads
// each FMA costs, so 5 vectors are 3 + 2 rather than 4 + 1).
func (g *tileGen) pvChunks() []run { return runs(split(g.dv/g.w, g.pv.vecs, 1)) }

// runSuffix tells apart the labels of the loops of run gi of a split (none
// for the first, so that a kernel with one run keeps its labels).
func runSuffix(gi int) string {
	if gi == 0 {
		return ""
	}
	return fmt.Sprintf("_r%d", gi)
}

// log2 is the base-2 logarithm of a power of two.
func log2(x int) uint8 {
	if x <= 0 || x&(x-1) != 0 {
		panic(fmt.Sprintf("BUG: log2(%d)", x))
	}
	return uint8(bits.TrailingZeros(uint(x)))
}

// lea sets dst to base + disp.
func (g *tileGen) lea(base reg.Register, disp int, dst reg.Register) {
	if disp == 0 {
		g.ctx.MOVQ(base, dst)
	} else {
		g.ctx.LEAQ(mem(base, disp), dst)
	}
}

// bitScan sets lo and hi to the indices of the lowest and highest set bit
// of x (not zero). It copies x into both first: avo takes the destination
// of BSF and BSR as read too (it is left as it was for a zero source), which
// would keep lo and hi live back to the function entry.
func bitScan(ctx *build.Context, x, lo, hi reg.Register) {
	ctx.MOVQ(x, lo)
	ctx.MOVQ(x, hi)
	ctx.BSFQ(lo, lo)
	ctx.BSRQ(hi, hi)
}

// blockMasks emits the OR of the mask words of each row block of qk.rows
// rows into the stack local blockOr: zero means the block keeps nothing.
func (g *tileGen) blockMasks(mask reg.Register) {
	ctx, rows := g.ctx, g.qk.rows
	mp, bp, n := ctx.GP64(), ctx.GP64(), ctx.GP64()
	ctx.MOVQ(mask, mp)
	ctx.LEAQ(g.blockOr, bp)
	ctx.MOVQ(op.U32(uint32(TQ/rows)), n)
	ctx.Label("mask_or")
	x := ctx.GP64()
	ctx.MOVQ(mem(mp, 0), x)
	for r := 1; r < rows; r++ {
		ctx.ORQ(mem(mp, 8*r), x)
	}
	ctx.MOVQ(x, mem(bp, 0))
	ctx.ADDQ(op.U8(uint8(8*rows)), mp)
	ctx.ADDQ(op.U8(8), bp)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("mask_or"))
}

// scoresMasked emits phase 1 of a masked tile: the loops of scores (column
// chunks unrolled here), where each row block computes only the vectors of
// its column chunk between the first and the last column that some row of
// the block keeps (one copy of the block code per vector count), and
// nothing when it keeps no column of the chunk. What it skips of s keeps
// whatever it held; the masked softmax never uses it.
func (g *tileGen) scoresMasked() {
	ctx, blk := g.ctx, g.qk
	cw := blk.vecs * g.w
	parts := split(g.dq, blk.kc, blk.unroll)
	for ch := 0; ch < TK/cw; ch++ {
		k0 := 0 // the part's first reduction step
		for part, kc := range parts {
			pfx := fmt.Sprintf("mqk_c%d_p%d", ch, part)
			qr, sr, ktp, orp, rb := ctx.GP64(), ctx.GP64(), ctx.GP64(), ctx.GP64(), ctx.GP64()
			ctx.MOVQ(g.param("q"), qr)
			g.lea(g.param("s"), 4*ch*cw, sr)
			g.lea(g.param("kt"), 4*(ch*cw+k0*TK), ktp)
			ctx.LEAQ(g.blockOr, orp)
			ctx.MOVQ(op.U32(uint32(TQ/blk.rows)), rb)
			ctx.Label(pfx + "_rows")
			// The block's bits of this chunk; skip the block if none.
			bitsr := ctx.GP64()
			switch cw {
			case 64:
				ctx.MOVQ(mem(orp, 0), bitsr)
			case 32:
				ctx.MOVL(mem(orp, 4*ch), bitsr.As32())
			default:
				panic(fmt.Sprintf("BUG: column chunk of %d", cw))
			}
			ctx.TESTQ(bitsr, bitsr)
			ctx.JZ(op.LabelRef(pfx + "_next"))
			// Vectors j0..j1 of the chunk hold every kept column.
			j0, j1 := ctx.GP64(), ctx.GP64()
			bitScan(ctx, bitsr, j0, j1)
			ctx.SHRQ(op.U8(log2(g.w)), j0)
			ctx.SHRQ(op.U8(log2(g.w)), j1)
			ctx.SUBQ(j0, j1)                 // vector count - 1
			ctx.SHLQ(op.U8(log2(4*g.w)), j0) // byte offset of vector j0
			for nv := 1; nv < blk.vecs; nv++ {
				ctx.CMPQ(j1, op.U8(uint8(nv-1)))
				ctx.JE(op.LabelRef(fmt.Sprintf("%s_v%d", pfx, nv)))
			}
			for nv := blk.vecs; nv >= 1; nv-- {
				if nv < blk.vecs {
					ctx.Label(fmt.Sprintf("%s_v%d", pfx, nv))
				}
				sp, bp := ctx.GP64(), ctx.GP64()
				ctx.LEAQ(op.Mem{Base: sr, Index: j0, Scale: 1}, sp)
				ctx.LEAQ(op.Mem{Base: ktp, Index: j0, Scale: 1}, bp)
				b := blk
				b.vecs = nv
				acc := g.newAcc(b)
				for r, row := range acc {
					for j, x := range row {
						if part == 0 {
							g.zero(x)
						} else {
							ctx.VMOVUPS(mem(sp, 4*(r*TK+j*g.w)), x)
						}
					}
				}
				ap, n := ctx.GP64(), ctx.GP64()
				g.lea(qr, 4*k0, ap)
				ctx.MOVQ(op.U32(uint32(kc/blk.unroll)), n)
				g.gemmLoop(b, acc, ap, 4*g.dq, bp, 4*TK, n, fmt.Sprintf("%s_v%d_d", pfx, nv))
				for r, row := range acc {
					for j, x := range row {
						ctx.VMOVUPS(x, mem(sp, 4*(r*TK+j*g.w)))
					}
				}
				if nv > 1 {
					ctx.JMP(op.LabelRef(pfx + "_next"))
				}
			}
			ctx.Label(pfx + "_next")
			ctx.ADDQ(op.U32(uint32(4*blk.rows*g.dq)), qr)
			ctx.ADDQ(op.U32(uint32(4*blk.rows*TK)), sr)
			ctx.ADDQ(op.U8(8), orp)
			ctx.DECQ(rb)
			ctx.JNZ(op.LabelRef(pfx + "_rows"))
			k0 += kc
		}
	}
}

// pvMasked emits phase 3 of a masked tile: the loops of pvProduct, where a
// row block that keeps no key is skipped (o stays bit for bit: its p are 0
// and its alpha exactly 1) and the others run the reduction over the keys
// from the first to the last the block keeps, rounded out to whole unrolled
// steps (the p between are 0 where masked).
func (g *tileGen) pvMasked() {
	ctx := g.ctx
	v, o, s := g.param("v"), g.param("o"), g.param("s")
	for gi, run := range g.pvChunks() {
		sfx := runSuffix(gi)
		blk := g.pv
		blk.vecs = run.size
		rows, cw, u := blk.rows, blk.vecs*g.w, blk.unroll
		ch := ctx.GP64()
		ctx.MOVQ(op.U32(uint32(run.count)), ch)
		ctx.Label("mpv_chunk" + sfx)
		ap, orow, srow, orp, rb := ctx.GP64(), ctx.GP64(), ctx.GP64(), ctx.GP64(), ctx.GP64()
		ctx.LEAQ(g.alpha, ap)
		ctx.MOVQ(o, orow)
		ctx.MOVQ(s, srow)
		ctx.LEAQ(g.blockOr, orp)
		ctx.MOVQ(op.U32(uint32(TQ/rows)), rb)
		ctx.Label("mpv_rows" + sfx)
		bitsr := ctx.GP64()
		ctx.MOVQ(mem(orp, 0), bitsr)
		ctx.TESTQ(bitsr, bitsr)
		ctx.JZ(op.LabelRef("mpv_next" + sfx))
		// Steps lo..hi of u keys hold every kept key.
		lo, n := ctx.GP64(), ctx.GP64()
		bitScan(ctx, bitsr, lo, n)
		ctx.SHRQ(op.U8(log2(u)), lo)
		ctx.SHRQ(op.U8(log2(u)), n)
		ctx.SUBQ(lo, n)
		ctx.INCQ(n)
		ctx.SHLQ(op.U8(log2(4*u)), lo) // byte offset of key u*lo in a row of s
		pa := ctx.GP64()
		ctx.LEAQ(op.Mem{Base: srow, Index: lo, Scale: 1}, pa)
		if g.dv&(g.dv-1) == 0 {
			ctx.SHLQ(op.U8(log2(g.dv)), lo) // byte offset of value row u*lo
		} else {
			ctx.IMUL3Q(op.U32(uint32(g.dv)), lo, lo)
		}
		pb := ctx.GP64()
		ctx.LEAQ(op.Mem{Base: v, Index: lo, Scale: 1}, pb)
		acc := g.newAcc(blk)
		for r, row := range acc {
			a := g.vec()
			ctx.VBROADCASTSS(mem(ap, 4*r), a)
			for j, x := range row {
				ctx.VMULPS(mem(orow, 4*(r*g.dv+j*g.w)), a, x)
			}
		}
		g.gemmLoop(blk, acc, pa, 4*TK, pb, 4*g.dv, n, "mpv_k"+sfx)
		for r, row := range acc {
			for j, x := range row {
				ctx.VMOVUPS(x, mem(orow, 4*(r*g.dv+j*g.w)))
			}
		}
		ctx.Label("mpv_next" + sfx)
		ctx.ADDQ(op.U32(uint32(4*rows*g.dv)), orow)
		ctx.ADDQ(op.U32(uint32(4*rows*TK)), srow)
		ctx.ADDQ(op.U8(uint8(4*rows)), ap)
		ctx.ADDQ(op.U8(8), orp)
		ctx.DECQ(rb)
		ctx.JNZ(op.LabelRef("mpv_rows" + sfx))
		ctx.ADDQ(op.U32(uint32(4*cw)), o)
		ctx.ADDQ(op.U32(uint32(4*cw)), v)
		ctx.DECQ(ch)
		ctx.JNZ(op.LabelRef("mpv_chunk" + sfx))
	}
}
