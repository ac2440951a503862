package avo

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Elem is the element type of the keys and values a decode kernel reads.
type Elem int

// The element types of the decode kernels.
const (
	F32  Elem = iota // float32
	BF16             // bfloat16, widened exactly (VPMOVZXWD, VPSLLD)
	F16              // IEEE half precision, widened exactly (VCVTPH2PS)
)

// Elems lists the element types a decode kernel exists for.
var Elems = []Elem{F32, BF16, F16}

func (e Elem) String() string { return [...]string{"F32", "BF16", "F16"}[e] }

// size is the element's size in bytes.
func (e Elem) size() int {
	if e == F32 {
		return 4
	}
	return 2
}

// DecodeRows lists the row counts a decode kernel exists for.
var DecodeRows = []int{1, 2, 4, 8}

// DecodeName is the AVX-512 decode kernel for keys and values of type e,
// head dimension d and r query rows.
func DecodeName(e Elem, d, r int) string { return fmt.Sprintf("decodeAVX512%sD%dR%d", e, d, r) }

// DecodeSignature is the Go signature of every decode kernel.
const DecodeSignature = "func(q *float32, k, v *byte, off *int, o, m, l *float32)"

// EmitDecode adds the AVX-512 decode kernel for keys and values of type e,
// head dimension d and r query rows (1, 2, 4 or 8): the tile kernel's
// online-softmax step for r rows against one whole key tile that every row
// keeps, reading the TK key and value rows in place (no packed copy) in one
// pass, so that each is read from memory once and at a steady pace.
// Decoding reads every key tile once, from memory, for a handful of rows:
// transposing and packing it costs more than the products.
//
// The ABI: q holds r query rows of d float32, scaled by scale*log2(e); key
// j's row is at byte off[j] of k and its value row at byte off[j] of v (any
// layout: contiguous, paged, strided); o, m and l are the running state of
// the r rows, as in the tile ABI (o rows d floats apart). 16-bit rows are
// widened exactly to float32 as they are loaded.
//
// Scores go in vectors of 16/r keys by r rows (lane j*r + i: key j, row i):
// 16 accumulators; per chunk of 16 dimensions, each key's chunk and each
// row's chunk is loaded once (16/r + r loads for 16 products); then the
// transposing reduction to one vector of scores. The softmax works on those
// vectors as they are: a row's lanes are r apart, so row maxima and sums
// come from folding lanes across keys, and m, l and alpha are vectors
// holding each row's value in every lane of its residue; it computes what
// the tile kernel computes for a full tile (a row whose scores are all
// -Inf takes 0 as its maximum and keeps alpha = 1). The P V product runs
// over the tile once per group of rows whose whole o rows fit in 16
// registers (the first from memory, the others from cache): each key's p of
// the group broadcast once, each value chunk loaded once per group.
func EmitDecode(ctx *build.Context, c ConstTable, e Elem, d, r int) {
	g := &tileGen{ctx: ctx, isa: AVX512, d: d, w: AVX512.lanes(), c: c}
	nc := d / g.w
	if d%g.w != 0 || g.w%r != 0 {
		panic(fmt.Sprintf("BUG: decode kernel for D = %d, %d rows", d, r))
	}
	name := DecodeName(e, d, r)
	ctx.Function(name)
	ctx.Pragma("noescape")
	ctx.SignatureExpr(DecodeSignature)
	ctx.Doc(
		fmt.Sprintf("%s is the decode kernel for %s keys and values, D = %d and %d", name, e, d, r),
		"query rows (AVX-512 Foundation): one online-softmax step against a whole key",
		"tile that every row keeps, key and value row j read in place at byte off[j]",
		"of k and v.",
	)
	es := e.size()
	keys := g.w / r // keys per score vector
	nv := TK / keys // score vectors of the tile
	sbuf := ctx.AllocLocal(4 * TK * r)
	abuf := ctx.AllocLocal(4 * g.w) // alpha, lane i for row i
	// load widens the 16 elements at m into x.
	load := func(m op.Mem, x reg.VecVirtual) {
		switch e {
		case F32:
			ctx.VMOVUPS(m, x)
		case BF16:
			ctx.VPMOVZXWD(m, x)
			ctx.VPSLLD(op.U8(16), x, x)
		case F16:
			ctx.VCVTPH2PS(m, x)
		}
	}
	// With few keys per vector their row addresses stay in registers;
	// with 16 (one row) each load reads its key's offset.
	held := keys <= 8

	ctx.Comment("Scores: vector i holds keys i*keys .. i*keys+keys-1 by rows.")
	q := g.param("q")
	kb, op0, sp, nb := g.param("k"), g.param("off"), ctx.GP64(), ctx.GP64()
	ctx.LEAQ(sbuf, sp)
	ctx.MOVQ(op.U32(uint32(nv)), nb)
	ctx.Label("qk")
	kr := make([]reg.GPVirtual, keys)
	if held {
		for j := range kr {
			kr[j] = ctx.GP64()
			ctx.MOVQ(mem(op0, 8*j), kr[j])
			ctx.ADDQ(kb, kr[j])
		}
	}
	acc := make([]reg.VecVirtual, g.w)
	for ci := 0; ci < nc; ci++ {
		qv := make([]reg.VecVirtual, r)
		for i := range qv {
			qv[i] = g.vec()
			ctx.VMOVUPS(mem(q, 4*(i*d+g.w*ci)), qv[i])
		}
		for j := 0; j < keys; j++ {
			kv := g.vec()
			if held {
				load(mem(kr[j], es*g.w*ci), kv)
			} else {
				t := ctx.GP64()
				ctx.MOVQ(mem(op0, 8*j), t)
				load(op.Mem{Base: kb, Index: t, Scale: 1, Disp: es * g.w * ci}, kv)
			}
			for i := range qv {
				a := &acc[j*r+i]
				if ci == 0 {
					*a = g.vec()
					ctx.VMULPS(kv, qv[i], *a)
				} else {
					ctx.VFMADD231PS(kv, qv[i], *a)
				}
			}
		}
	}
	s := g.reduceVecs(acc, g.addOp)
	ctx.VMOVUPS(s, mem(sp, 0))
	ctx.ADDQ(op.U8(uint8(4*g.w)), sp)
	ctx.ADDQ(op.U8(uint8(8*keys)), op0)
	ctx.DECQ(nb)
	ctx.JNZ(op.LabelRef("qk"))

	ctx.Comment("Row maxima, alpha, p and l, each row's value in every lane of its residue.")
	mx := []reg.VecVirtual{g.vec(), g.vec()}
	ctx.VMOVUPS(sbuf, mx[0])
	ctx.VMOVUPS(sbuf.Offset(4*g.w), mx[1])
	for i := 2; i < nv; i++ {
		ctx.VMAXPS(sbuf.Offset(4*g.w*i), mx[i%2], mx[i%2])
	}
	ctx.VMAXPS(mx[1], mx[0], mx[0])
	mnew := mx[0]
	g.foldKeys(mnew, r, g.maxOp)
	// o, m and l are loaded here, not on entry: the score loop needs the
	// general registers for its key row addresses.
	o, m, l := g.param("o"), g.param("m"), g.param("l")
	rowMask := ctx.K()
	rm := ctx.GP32()
	ctx.MOVL(op.U32(uint32(1)<<r-1), rm)
	ctx.KMOVW(rm, rowMask)
	mold := g.rowVec(m, r)
	ctx.VMAXPS(mold, mnew, mnew)
	ctx.VMOVUPS(mnew, rowMask, mem(m, 0)) // -Inf stays -Inf for a row with no finite score
	msafe, alpha := g.vec(), g.vec()
	g.alphaAVX512(mnew, mold, msafe, alpha)
	ctx.VMOVUPS(alpha, abuf)
	sums := []reg.VecVirtual{nil, nil}
	for i := 0; i < nv; i++ {
		x := g.vec()
		ctx.VMOVUPS(sbuf.Offset(4*g.w*i), x)
		ctx.VSUBPS(msafe, x, x)
		g.exp2(x, nil)
		ctx.VMOVUPS(x, sbuf.Offset(4*g.w*i))
		if i < 2 {
			sums[i] = x
		} else {
			ctx.VADDPS(x, sums[i%2], sums[i%2])
		}
	}
	sum := sums[0]
	ctx.VADDPS(sums[1], sum, sum)
	g.foldKeys(sum, r, g.addOp)
	lold := g.rowVec(l, r)
	ctx.VFMADD231PS(lold, alpha, sum) // sum + alpha*l
	ctx.VMOVUPS(sum, rowMask, mem(l, 0))

	ctx.Comment("o = alpha*o.")
	for i := 0; i < r; i++ {
		a := g.vec()
		ctx.VBROADCASTSS(abuf.Offset(4*i), a)
		for ci := 0; ci < nc; ci++ {
			x := g.vec()
			ctx.VMULPS(mem(o, 4*(i*d+g.w*ci)), a, x)
			ctx.VMOVUPS(x, mem(o, 4*(i*d+g.w*ci)))
		}
	}

	ctx.Comment("o += P V, in groups of rows, each over the whole tile.")
	rg := min(r, g.w/nc) // rows per group: their whole o rows in 16 registers
	const unroll = 4
	for r0 := 0; r0 < r; r0 += rg {
		vb, op1, pp, n := g.param("v"), g.param("off"), ctx.GP64(), ctx.GP64()
		ctx.LEAQ(sbuf, pp)
		ctx.MOVQ(op.U32(uint32(TK/unroll)), n)
		ov := make([][]reg.VecVirtual, rg)
		for i := range ov {
			ov[i] = make([]reg.VecVirtual, nc)
			for ci := range ov[i] {
				ov[i][ci] = g.vec()
				ctx.VMOVUPS(mem(o, 4*((r0+i)*d+g.w*ci)), ov[i][ci])
			}
		}
		label := fmt.Sprintf("pv%d", r0)
		ctx.Label(label)
		for j := 0; j < unroll; j++ {
			vp := ctx.GP64()
			ctx.MOVQ(mem(op1, 8*j), vp)
			ctx.ADDQ(vb, vp)
			pv := make([]reg.VecVirtual, rg)
			for i := range pv {
				pv[i] = g.vec()
				ctx.VBROADCASTSS(mem(pp, 4*(j*r+r0+i)), pv[i])
			}
			for ci := 0; ci < nc; ci++ {
				t := g.vec()
				load(mem(vp, es*g.w*ci), t)
				for i := range ov {
					ctx.VFMADD231PS(t, pv[i], ov[i][ci])
				}
			}
		}
		ctx.ADDQ(op.U32(uint32(4*unroll*r)), pp)
		ctx.ADDQ(op.U8(8*unroll), op1)
		ctx.DECQ(n)
		ctx.JNZ(op.LabelRef(label))
		for i := range ov {
			for ci, x := range ov[i] {
				ctx.VMOVUPS(x, mem(o, 4*((r0+i)*d+g.w*ci)))
			}
		}
	}
	ctx.VZEROUPPER()
	ctx.RET()
}

// foldKeys folds the lanes of x (lane j*r + i: key j, row i) across keys:
// every lane ends with f over the lanes of its row.
func (g *tileGen) foldKeys(x reg.VecVirtual, r int, f func(a, b, dst reg.Register)) {
	ctx := g.ctx
	for span := g.w / 2; span >= r; span /= 2 {
		t := g.vec()
		switch span {
		case 8:
			ctx.VSHUFF32X4(op.U8(0x4e), x, x, t)
		case 4:
			ctx.VSHUFF32X4(op.U8(0xb1), x, x, t)
		case 2:
			ctx.VPERMILPS(op.U8(0x4e), x, t)
		default:
			ctx.VPERMILPS(op.U8(0xb1), x, t)
		}
		f(t, x, x)
	}
}

// rowVec loads the r floats at p into a vector whose lane i holds p[i%r].
func (g *tileGen) rowVec(p reg.Register, r int) reg.VecVirtual {
	ctx := g.ctx
	x := g.vec()
	switch r {
	case 1:
		ctx.VBROADCASTSS(mem(p, 0), x)
	case 2:
		ctx.VPBROADCASTQ(mem(p, 0), x)
	case 4:
		ctx.VBROADCASTF32X4(mem(p, 0), x)
	case 8:
		ctx.VMOVUPS(mem(p, 0), x.AsY())
		ctx.VSHUFF32X4(op.U8(0x44), x, x, x)
	default:
		panic(fmt.Sprintf("BUG: rowVec of %d rows", r))
	}
	return x
}
