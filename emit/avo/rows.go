package avo

import (
	"math"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Names of the AVX-512 row helpers of the driver.
const (
	ScaleRowName    = "scaleRowAVX512"
	NonFiniteName   = "nonFiniteRowsAVX512"
	nonFiniteExpBit = 0x7f800000
)

// EmitRowHelpers adds two loops the driver runs on whole rows, which Go
// would run one element at a time:
//
//   - scaleRowAVX512(dst, src *float32, n int, s float32): dst[i] =
//     src[i]*s for n a multiple of 16 (the output rows, o/l);
//   - nonFiniteRowsAVX512(v *float32, d int) uint64: bit r set when row r of
//     the TK rows of d floats at v (d a multiple of 16) holds a NaN or an
//     infinity, that is an element whose exponent bits are all ones (the
//     value rows of a partial tile, see the masked non-finite rule).
func EmitRowHelpers(ctx *build.Context) {
	ctx.Function(ScaleRowName)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(dst, src *float32, n int, s float32)")
	ctx.Doc(
		ScaleRowName+" writes dst[i] = src[i]*s for i < n (a multiple of 16). It",
		"needs AVX-512 Foundation.",
	)
	dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
	src := ctx.Load(ctx.Param("src"), ctx.GP64())
	n := ctx.Load(ctx.Param("n"), ctx.GP64())
	sx := ctx.Load(ctx.Param("s"), ctx.XMM())
	sc := ctx.ZMM()
	ctx.VBROADCASTSS(sx, sc)
	ctx.SHRQ(op.U8(4), n)
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("loop")
	x := ctx.ZMM()
	ctx.VMULPS(op.Mem{Base: src}, sc, x)
	ctx.VMOVUPS(x, op.Mem{Base: dst})
	ctx.ADDQ(op.U8(64), src)
	ctx.ADDQ(op.U8(64), dst)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("loop"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()

	ctx.Function(NonFiniteName)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(v *float32, d int) uint64")
	ctx.Doc(
		NonFiniteName+" returns the rows of the TK rows of d floats at v (d a",
		"multiple of 16) that hold a NaN or an infinity, as bits. It needs AVX-512",
		"Foundation.",
	)
	v := ctx.Load(ctx.Param("v"), ctx.GP64())
	d := ctx.Load(ctx.Param("d"), ctx.GP64())
	ctx.SHRQ(op.U8(4), d) // vectors per row
	e := broadcastBits(ctx, nonFiniteExpBit)
	res, r := ctx.GP64(), ctx.GP64()
	ctx.XORQ(res, res)
	ctx.XORQ(r, r)
	ctx.Label("row")
	acc := ctx.K()
	ctx.KXORW(acc, acc, acc)
	c := ctx.GP64()
	ctx.MOVQ(d, c)
	ctx.Label("vec")
	t, k := ctx.ZMM(), ctx.K()
	ctx.VPANDD(op.Mem{Base: v}, e, t)
	ctx.VPCMPEQD(e, t, k) // exponent all ones: NaN or infinity
	ctx.KORW(k, acc, acc)
	ctx.ADDQ(op.U8(64), v)
	ctx.DECQ(c)
	ctx.JNZ(op.LabelRef("vec"))
	bits := ctx.GP32()
	ctx.KMOVW(acc, bits)
	ctx.TESTL(bits, bits)
	ctx.JZ(op.LabelRef("next"))
	ctx.BTSQ(r, res)
	ctx.Label("next")
	ctx.INCQ(r)
	ctx.CMPQ(r, op.U8(TK))
	ctx.JNE(op.LabelRef("row"))
	ctx.Store(res, ctx.ReturnIndex(0))
	ctx.VZEROUPPER()
	ctx.RET()
}

// LSEName is the AVX-512 loop that finishes the log-sum-exp of output rows.
const LSEName = "lseAVX512"

// log2Series are the coefficients 2/ln2 * 1/(2i+1), i = 0..5, of log2(x) =
// 2/ln2 * atanh(s) = 2/ln2 * (s + s^3/3 + s^5/5 + ...), s = (x-1)/(x+1), for
// x in [1, 2): s < 1/3, so the first omitted term is below 2e-7.
var log2Series = [6]float64{1, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9, 1.0 / 11}

// EmitLSE adds lseAVX512(dst, m, l *float32, n int): dst[i] = (m[i] +
// log2(l[i])) * ln2 for n a multiple of 16, the log-sum-exp of a row in
// natural-log units from its running maximum (log2 units) and sum. log2(l)
// is the exponent (VGETEXPPS) plus log2 of the mantissa in [1, 2)
// (VGETMANTPS) by the atanh series above; l = +Inf gives +Inf, NaN gives
// NaN, 0 gives -Inf (the driver writes -Inf for such rows itself).
func EmitLSE(ctx *build.Context) {
	ctx.Function(LSEName)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(dst, m, l *float32, n int)")
	ctx.Doc(
		LSEName+" writes dst[i] = (m[i] + log2(l[i])) * ln2 for i < n (a multiple of",
		"16). It needs AVX-512 Foundation.",
	)
	dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
	mp := ctx.Load(ctx.Param("m"), ctx.GP64())
	lp := ctx.Load(ctx.Param("l"), ctx.GP64())
	n := ctx.Load(ctx.Param("n"), ctx.GP64())
	broadcast := func(v float32) op.Op { return broadcastBits(ctx, math.Float32bits(v)) }
	one := broadcast(1)
	ln2 := broadcast(float32(math.Ln2))
	coef := make([]op.Op, len(log2Series))
	for i, c := range log2Series {
		coef[i] = broadcast(float32(2 / math.Ln2 * c))
	}
	ctx.SHRQ(op.U8(4), n)
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("loop")
	x, e, mt := ctx.ZMM(), ctx.ZMM(), ctx.ZMM()
	ctx.VMOVUPS(op.Mem{Base: lp}, x)
	ctx.VGETEXPPS(x, e)
	ctx.VGETMANTPS(op.U8(0), x, mt) // [1, 2), sign of the source
	num, den, s := ctx.ZMM(), ctx.ZMM(), ctx.ZMM()
	ctx.VSUBPS(one, mt, num)
	ctx.VADDPS(one, mt, den)
	ctx.VDIVPS(den, num, s)
	s2, p := ctx.ZMM(), ctx.ZMM()
	ctx.VMULPS(s, s, s2)
	ctx.VMOVAPS(coef[len(coef)-1], p)
	for i := len(coef) - 2; i >= 0; i-- {
		ctx.VFMADD213PS(coef[i], s2, p) // p = p*s2 + c_i
	}
	ctx.VMULPS(s, p, p) // log2 of the mantissa
	ctx.VADDPS(op.Mem{Base: mp}, e, e)
	ctx.VADDPS(p, e, e)
	ctx.VMULPS(ln2, e, e)
	ctx.VMOVUPS(e, op.Mem{Base: dst})
	ctx.ADDQ(op.U8(64), lp)
	ctx.ADDQ(op.U8(64), mp)
	ctx.ADDQ(op.U8(64), dst)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("loop"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()
}

// Names of the AVX-512 narrowing loops of 16-bit outputs.
const (
	NarrowBF16Name = "narrowBF16AVX512"
	NarrowF16Name  = "narrowF16AVX512"
)

// EmitNarrow adds the loops that write a 16-bit output row,
// func(dst *uint16, src *float32, n int, s float32) for n a multiple of 16:
// dst[i] = src[i]*s rounded to nearest, ties to even. Half precision by
// VCVTPS2PH (rounding control 0: to nearest even, through the subnormals,
// to infinity past the largest; a NaN keeps its sign and high payload
// bits and comes out quiet). bfloat16 in integer lanes: u + 0x7fff + bit
// 16 of u, the high half, with NaN lanes (exponent all ones, mantissa not
// zero) taking their high half with the quiet bit set instead.
func EmitNarrow(ctx *build.Context) {
	for _, f16 := range []bool{false, true} {
		name, what := NarrowBF16Name, "bfloat16"
		if f16 {
			name, what = NarrowF16Name, "half-precision"
		}
		ctx.Function(name)
		ctx.Attributes(attr.NOSPLIT)
		ctx.Pragma("noescape")
		ctx.SignatureExpr("func(dst *uint16, src *float32, n int, s float32)")
		ctx.Doc(
			name+" writes dst[i] = src[i]*s rounded to "+what+" (to nearest, ties",
			"to even; NaN stays NaN, quiet) for i < n (a multiple of 16). It needs",
			"AVX-512 Foundation.",
		)
		dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
		src := ctx.Load(ctx.Param("src"), ctx.GP64())
		n := ctx.Load(ctx.Param("n"), ctx.GP64())
		sx := ctx.Load(ctx.Param("s"), ctx.XMM())
		sc := ctx.ZMM()
		ctx.VBROADCASTSS(sx, sc)
		var bias, one, quiet, abs, inf op.Op
		if !f16 {
			bias, one, quiet = broadcastBits(ctx, 0x7fff), broadcastBits(ctx, 1), broadcastBits(ctx, 0x40)
			abs, inf = broadcastBits(ctx, 0x7fffffff), broadcastBits(ctx, 0x7f800000)
		}
		ctx.SHRQ(op.U8(4), n)
		ctx.TESTQ(n, n)
		ctx.JZ(op.LabelRef("done"))
		ctx.Label("loop")
		x := ctx.ZMM()
		ctx.VMULPS(op.Mem{Base: src}, sc, x)
		if f16 {
			ctx.VCVTPS2PH(op.U8(0), x, op.Mem{Base: dst})
		} else {
			// r = (u + 0x7fff + (u>>16 & 1)) >> 16; NaN: u>>16 | 0x40
			t, r, nan := ctx.ZMM(), ctx.ZMM(), ctx.ZMM()
			ctx.VPSRLD(op.U8(16), x, t)
			ctx.VPANDD(one, t, r)
			ctx.VPADDD(bias, r, r)
			ctx.VPADDD(x, r, r)
			ctx.VPSRLD(op.U8(16), r, r)
			ctx.VPORD(quiet, t, nan)
			a, k := ctx.ZMM(), ctx.K()
			ctx.VPANDD(abs, x, a)
			ctx.VPCMPUD(op.U8(6), inf, a, k) // |u| > 0x7f800000: NaN (NLE, unsigned)
			ctx.VMOVDQA32(nan, k, r)
			ctx.VPMOVDW(r, op.Mem{Base: dst})
		}
		ctx.ADDQ(op.U8(64), src)
		ctx.ADDQ(op.U8(32), dst)
		ctx.DECQ(n)
		ctx.JNZ(op.LabelRef("loop"))
		ctx.Label("done")
		ctx.VZEROUPPER()
		ctx.RET()
	}
}

// broadcastBits returns a zmm register holding bits in every 32-bit lane
// (through a general register: no constant table slot needed).
func broadcastBits(ctx *build.Context, bits uint32) reg.VecVirtual {
	x, g := ctx.ZMM(), ctx.GP32()
	ctx.MOVL(op.U32(bits), g)
	ctx.VPBROADCASTD(g, x)
	return x
}
