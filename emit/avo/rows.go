package avo

import (
	"math"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Names of the row helpers of the driver, by ISA: scaleRowAVX512,
// nonFiniteRowsAVX2 and so on.
func ScaleRowName(isa ISA) string     { return "scaleRow" + isa.String() }
func AddScaledRowName(isa ISA) string { return "addScaledRow" + isa.String() }
func NonFiniteName(isa ISA) string    { return "nonFiniteRows" + isa.String() }

const nonFiniteExpBit = 0x7f800000

// EmitRowHelpers adds three loops of an ISA the driver runs on whole rows,
// which Go would run one element at a time (w = 16 floats a vector on
// AVX-512, 8 on AVX2):
//
//   - scaleRow(dst, src *float32, n int, s float32): dst[i] = src[i]*s for
//     n a multiple of w (the output rows, o/l);
//   - addScaledRow(dst, src *float32, n int, s float32): dst[i] +=
//     src[i]*s, the product rounded, then the sum (VMULPS, VADDPS: no
//     FMA, so the bits are those of Go's dst[i] += src[i]*s on amd64), n a
//     multiple of w (merging the parts of a split job);
//   - nonFiniteRows(v *float32, d int) uint64: bit r set when row r of the
//     TK rows of d floats at v (d a multiple of w) holds a NaN or an
//     infinity, that is an element whose exponent bits are all ones (the
//     value rows of a partial tile, see the masked non-finite rule):
//     opmask compares on AVX-512, VPCMPEQD, VPOR and VPTEST on AVX2.
func EmitRowHelpers(ctx *build.Context, c ConstTable, isa ISA) {
	w := isa.lanes()
	name := ScaleRowName(isa)
	doc := []string{name + " writes dst[i] = src[i]*s for i < n (a multiple of 8). It needs AVX2."}
	if isa == AVX512 {
		doc = []string{
			name + " writes dst[i] = src[i]*s for i < n (a multiple of 16). It",
			"needs AVX-512 Foundation.",
		}
	}
	emitRowLoop(ctx, isa, name, doc, func(src, dst reg.Register, sc reg.VecVirtual) {
		x := isa.vec(ctx)
		ctx.VMULPS(op.Mem{Base: src}, sc, x)
		ctx.VMOVUPS(x, op.Mem{Base: dst})
	})

	name = AddScaledRowName(isa)
	doc = []string{
		name + " adds src[i]*s to dst[i] for i < n (a multiple of 8), the",
		"product rounded first (no FMA). It needs AVX2.",
	}
	if isa == AVX512 {
		doc = []string{
			name + " adds src[i]*s to dst[i] for i < n (a multiple of 16), the",
			"product rounded first (no FMA). It needs AVX-512 Foundation.",
		}
	}
	emitRowLoop(ctx, isa, name, doc, func(src, dst reg.Register, sc reg.VecVirtual) {
		x, y := isa.vec(ctx), isa.vec(ctx)
		ctx.VMULPS(op.Mem{Base: src}, sc, x)
		ctx.VMOVUPS(op.Mem{Base: dst}, y)
		ctx.VADDPS(x, y, y) // dst first, as Go's dst += p
		ctx.VMOVUPS(y, op.Mem{Base: dst})
	})

	name = NonFiniteName(isa)
	ctx.Function(name)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(v *float32, d int) uint64")
	if isa == AVX512 {
		ctx.Doc(
			name+" returns the rows of the TK rows of d floats at v (d a",
			"multiple of 16) that hold a NaN or an infinity, as bits. It needs AVX-512",
			"Foundation.",
		)
	} else {
		ctx.Doc(
			name+" returns the rows of the TK rows of d floats at v (d a",
			"multiple of 8) that hold a NaN or an infinity, as bits. It needs AVX2.",
		)
	}
	v := ctx.Load(ctx.Param("v"), ctx.GP64())
	d := ctx.Load(ctx.Param("d"), ctx.GP64())
	ctx.SHRQ(op.U8(log2(w)), d) // vectors per row
	var e reg.VecVirtual
	if isa == AVX512 {
		e = broadcastBits(ctx, nonFiniteExpBit)
	} else {
		e = ctx.YMM()
		ctx.VMOVUPS(c.slot(kInf), e)
	}
	res, r := ctx.GP64(), ctx.GP64()
	ctx.XORQ(res, res)
	ctx.XORQ(r, r)
	ctx.Label("row")
	var acc reg.Register
	if isa == AVX512 {
		acc = ctx.K()
		ctx.KXORW(acc, acc, acc)
	} else {
		y := ctx.YMM()
		ctx.VXORPS(y, y, y)
		acc = y
	}
	cnt := ctx.GP64()
	ctx.MOVQ(d, cnt)
	ctx.Label("vec")
	if isa == AVX512 {
		t, k := ctx.ZMM(), ctx.K()
		ctx.VPANDD(op.Mem{Base: v}, e, t)
		ctx.VPCMPEQD(e, t, k) // exponent all ones: NaN or infinity
		ctx.KORW(k, acc, acc)
	} else {
		t := ctx.YMM()
		ctx.VPAND(op.Mem{Base: v}, e, t)
		ctx.VPCMPEQD(e, t, t) // exponent all ones: NaN or infinity
		ctx.VPOR(t, acc, acc)
	}
	ctx.ADDQ(op.U8(uint8(4*w)), v)
	ctx.DECQ(cnt)
	ctx.JNZ(op.LabelRef("vec"))
	if isa == AVX512 {
		bits := ctx.GP32()
		ctx.KMOVW(acc, bits)
		ctx.TESTL(bits, bits)
	} else {
		ctx.VPTEST(acc, acc)
	}
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

// LSEName is the loop of an ISA that finishes the log-sum-exp of output
// rows: lseAVX512, lseAVX2.
func LSEName(isa ISA) string { return "lse" + isa.String() }

// log2Series are the coefficients 2/ln2 * 1/(2i+1), i = 0..5, of log2(x) =
// 2/ln2 * atanh(s) = 2/ln2 * (s + s^3/3 + s^5/5 + ...), s = (x-1)/(x+1), for
// x in [1, 2): s < 1/3, so the first omitted term is below 2e-7.
var log2Series = [6]float64{1, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9, 1.0 / 11}

// EmitLSE adds lse(dst, m, l *float32, n int) of an ISA: dst[i] = (m[i] +
// log2(l[i])) * ln2 for n a multiple of the ISA's lanes, the log-sum-exp
// of a row in natural-log units from its running maximum (log2 units) and
// sum. log2(l) is the exponent plus log2 of the mantissa in [1, 2) by the
// atanh series above; l = +Inf gives +Inf, NaN gives NaN, 0 gives -Inf (the
// driver writes -Inf for such rows itself). AVX-512 takes exponent and
// mantissa from VGETEXPPS and VGETMANTPS. AVX2 takes them from the bits (a
// subnormal scaled by 2^64 first, and 64 taken off its exponent, as
// VGETEXPPS would see it), so both give the same bits for every l > 0,
// and it blends (l - 1) * +Inf into the lanes where l is 0, +Inf or NaN.
func EmitLSE(ctx *build.Context, c ConstTable, isa ISA) {
	w := isa.lanes()
	name := LSEName(isa)
	ctx.Function(name)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(dst, m, l *float32, n int)")
	if isa == AVX512 {
		ctx.Doc(
			name+" writes dst[i] = (m[i] + log2(l[i])) * ln2 for i < n (a multiple of",
			"16). It needs AVX-512 Foundation.",
		)
	} else {
		ctx.Doc(
			name+" writes dst[i] = (m[i] + log2(l[i])) * ln2 for i < n (a multiple of",
			"8). It needs AVX2 and FMA3.",
		)
	}
	dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
	mp := ctx.Load(ctx.Param("m"), ctx.GP64())
	lp := ctx.Load(ctx.Param("l"), ctx.GP64())
	n := ctx.Load(ctx.Param("n"), ctx.GP64())
	if isa == AVX2 {
		lseAVX2(ctx, c, dst, mp, lp, n)
		return
	}
	broadcast := func(v float32) op.Op { return broadcastBits(ctx, math.Float32bits(v)) }
	one := broadcast(1)
	ln2 := broadcast(float32(math.Ln2))
	coef := make([]op.Op, len(log2Series))
	for i, c := range log2Series {
		coef[i] = broadcast(float32(2 / math.Ln2 * c))
	}
	ctx.SHRQ(op.U8(log2(w)), n)
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

// lseAVX2 is the loop of lseAVX2 (see EmitLSE), its constants read from
// the table.
func lseAVX2(ctx *build.Context, c ConstTable, dst, mp, lp, n reg.Register) {
	ctx.SHRQ(op.U8(3), n)
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("loop")
	l, sub, x := ctx.YMM(), ctx.YMM(), ctx.YMM()
	ctx.VMOVUPS(op.Mem{Base: lp}, l)
	ctx.VCMPPS(op.U8(0x01), c.slot(kMinNormal), l, sub) // l < 2^-126 (LT_OS): subnormal or 0
	ctx.VMULPS(c.slot(kTwo64), l, x)
	ctx.VBLENDVPS(sub, x, l, x) // x = sub ? l*2^64 : l
	bias := ctx.YMM()
	ctx.VMOVUPS(c.slot(kBias127), bias)
	ctx.VBLENDVPS(sub, c.slot(kBias191), bias, bias)
	e, mt := ctx.YMM(), ctx.YMM()
	ctx.VPSRLD(op.U8(23), x, e)
	ctx.VCVTDQ2PS(e, e)
	ctx.VSUBPS(bias, e, e) // the exponent of l
	ctx.VANDPS(c.slot(kMant), x, mt)
	ctx.VORPS(c.slot(kOne), mt, mt) // the mantissa in [1, 2)
	one := ctx.YMM()
	ctx.VMOVUPS(c.slot(kOne), one)
	num, den, s := ctx.YMM(), ctx.YMM(), ctx.YMM()
	ctx.VSUBPS(one, mt, num)
	ctx.VADDPS(one, mt, den)
	ctx.VDIVPS(den, num, s)
	s2, p := ctx.YMM(), ctx.YMM()
	ctx.VMULPS(s, s, s2)
	last := len(log2Series) - 1
	ctx.VMOVUPS(c.slot(kLog2C+last), p)
	for i := last - 1; i >= 0; i-- {
		ctx.VFMADD213PS(c.slot(kLog2C+i), s2, p) // p = p*s2 + c_i
	}
	ctx.VMULPS(s, p, p) // log2 of the mantissa
	ctx.VADDPS(op.Mem{Base: mp}, e, e)
	ctx.VADDPS(p, e, e)
	ctx.VMULPS(c.slot(kLn2), e, e)
	// l = 0, +Inf or NaN: (l - 1) * +Inf is -Inf, +Inf or NaN.
	zero, big, fix := ctx.YMM(), ctx.YMM(), ctx.YMM()
	ctx.VCMPPS(op.U8(0x00), c.slot(kZero), l, zero) // l == 0 (EQ_OQ)
	ctx.VCMPPS(op.U8(0x15), c.slot(kInf), l, big)   // !(l < +Inf) (NLT_UQ): +Inf or NaN
	ctx.VORPS(big, zero, zero)
	ctx.VSUBPS(one, l, fix)
	ctx.VMULPS(c.slot(kInf), fix, fix)
	ctx.VBLENDVPS(zero, fix, e, e)
	ctx.VMOVUPS(e, op.Mem{Base: dst})
	ctx.ADDQ(op.U8(32), lp)
	ctx.ADDQ(op.U8(32), mp)
	ctx.ADDQ(op.U8(32), dst)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("loop"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()
}

// Names of the narrowing loops of 16-bit outputs, by ISA:
// narrowBF16AVX512, narrowF16AVX2 and so on.
func NarrowBF16Name(isa ISA) string { return "narrowBF16" + isa.String() }
func NarrowF16Name(isa ISA) string  { return "narrowF16" + isa.String() }

// EmitNarrow adds the loops of an ISA that write a 16-bit output row,
// func(dst *uint16, src *float32, n int, s float32) for n a multiple of
// the ISA's lanes: dst[i] = src[i]*s rounded to nearest, ties to even.
// Half precision by VCVTPS2PH (rounding control 0: to nearest even,
// through the subnormals, to infinity past the largest; a NaN keeps its
// sign and high payload bits and comes out quiet; the VEX form of F16C on
// AVX2 rounds the same). bfloat16 in integer lanes: u + 0x7fff + bit 16 of
// u, the high half, with NaN lanes (exponent all ones, mantissa not zero)
// taking their high half with the quiet bit set instead; AVX-512 selects
// them with an opmask and narrows with VPMOVDW, AVX2 with VPCMPGTD and
// VBLENDVPS, then VPACKUSDW of the two 128-bit halves (every lane is at
// most 0xffff, so the saturation never acts).
func EmitNarrow(ctx *build.Context, c ConstTable, isa ISA) {
	w := isa.lanes()
	for _, f16 := range []bool{false, true} {
		name, what := NarrowBF16Name(isa), "bfloat16"
		if f16 {
			name, what = NarrowF16Name(isa), "half-precision"
		}
		ctx.Function(name)
		ctx.Attributes(attr.NOSPLIT)
		ctx.Pragma("noescape")
		ctx.SignatureExpr("func(dst *uint16, src *float32, n int, s float32)")
		if isa == AVX512 {
			ctx.Doc(
				name+" writes dst[i] = src[i]*s rounded to "+what+" (to nearest, ties",
				"to even; NaN stays NaN, quiet) for i < n (a multiple of 16). It needs",
				"AVX-512 Foundation.",
			)
		} else {
			needs := "AVX2"
			if f16 {
				needs = "AVX2 and F16C"
			}
			ctx.Doc(
				name+" writes dst[i] = src[i]*s rounded to "+what+" (to nearest, ties",
				"to even; NaN stays NaN, quiet) for i < n (a multiple of 8). It needs",
				needs+".",
			)
		}
		dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
		src := ctx.Load(ctx.Param("src"), ctx.GP64())
		n := ctx.Load(ctx.Param("n"), ctx.GP64())
		sx := ctx.Load(ctx.Param("s"), ctx.XMM())
		sc := isa.vec(ctx)
		ctx.VBROADCASTSS(sx, sc)
		var bias, one, quiet, abs, inf op.Op
		if !f16 && isa == AVX512 {
			bias, one, quiet = broadcastBits(ctx, 0x7fff), broadcastBits(ctx, 1), broadcastBits(ctx, 0x40)
			abs, inf = broadcastBits(ctx, 0x7fffffff), broadcastBits(ctx, 0x7f800000)
		}
		if !f16 && isa == AVX2 {
			slot := func(k int) op.Op {
				x := ctx.YMM()
				ctx.VMOVUPS(c.slot(k), x)
				return x
			}
			bias, one, quiet, abs, inf = slot(kBF16Bias), slot(kIntOne), slot(kBF16Quiet), slot(kAbs), slot(kInf)
		}
		ctx.SHRQ(op.U8(log2(w)), n)
		ctx.TESTQ(n, n)
		ctx.JZ(op.LabelRef("done"))
		ctx.Label("loop")
		x := isa.vec(ctx)
		ctx.VMULPS(op.Mem{Base: src}, sc, x)
		switch {
		case f16:
			ctx.VCVTPS2PH(op.U8(0), x, op.Mem{Base: dst})
		case isa == AVX512:
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
		default:
			t, r, nan := ctx.YMM(), ctx.YMM(), ctx.YMM()
			ctx.VPSRLD(op.U8(16), x, t)
			ctx.VPAND(one, t, r)
			ctx.VPADDD(bias, r, r)
			ctx.VPADDD(x, r, r)
			ctx.VPSRLD(op.U8(16), r, r)
			ctx.VPOR(quiet, t, nan)
			a := ctx.YMM()
			ctx.VPAND(abs, x, a)
			ctx.VPCMPGTD(inf, a, a) // |u| > 0x7f800000: NaN (both below 2^31, so signed works)
			ctx.VBLENDVPS(a, nan, r, r)
			hi, lo := ctx.XMM(), ctx.XMM()
			ctx.VEXTRACTI128(op.U8(1), r, hi)
			ctx.VPACKUSDW(hi, r.AsX(), lo) // lanes 0-3, then 4-7
			ctx.VMOVDQU(lo, op.Mem{Base: dst})
		}
		ctx.ADDQ(op.U8(uint8(4*w)), src)
		ctx.ADDQ(op.U8(uint8(2*w)), dst)
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

// PrefetchName is the prefetch loop of an ISA: prefetchRowsAVX512,
// prefetchRowsAVX2.
func PrefetchName(isa ISA) string { return "prefetchRows" + isa.String() }

// EmitPrefetch adds prefetchRows(p *byte, rows, pitch, n int) of an ISA:
// a PREFETCHT0 of every 64-byte line of the n bytes at p, p + pitch, ...
// (rows rows, pitch bytes apart; n > 0), the lines of a query tile or an
// output tile whose rows lie apart (BSHD) that the driver asks for while
// a kernel still runs, so that copying or writing them later finds them
// in cache. A prefetch never faults and changes no value; the loop
// touches no vector register, and both ISAs get the same loop under their
// own name (each variant's table names only its own functions).
func EmitPrefetch(ctx *build.Context, isa ISA) {
	name := PrefetchName(isa)
	ctx.Function(name)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(p *byte, rows, pitch, n int)")
	ctx.Doc(
		name+" prefetches (PREFETCHT0) the lines of the n bytes at p +",
		"r*pitch for r < rows.",
	)
	p := ctx.Load(ctx.Param("p"), ctx.GP64())
	rows := ctx.Load(ctx.Param("rows"), ctx.GP64())
	pitch := ctx.Load(ctx.Param("pitch"), ctx.GP64())
	n := ctx.Load(ctx.Param("n"), ctx.GP64())
	ctx.TESTQ(rows, rows)
	ctx.JZ(op.LabelRef("done"))
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("row")
	x := ctx.GP64()
	ctx.XORQ(x, x)
	ctx.Label("line")
	ctx.PREFETCHT0(op.Mem{Base: p, Index: x, Scale: 1})
	ctx.ADDQ(op.U8(64), x)
	ctx.CMPQ(x, n)
	ctx.JB(op.LabelRef("line"))
	ctx.PREFETCHT0(op.Mem{Base: p, Index: n, Scale: 1, Disp: -1}) // the last line, when p is not 64-byte aligned
	ctx.ADDQ(pitch, p)
	ctx.DECQ(rows)
	ctx.JNZ(op.LabelRef("row"))
	ctx.Label("done")
	ctx.RET()
}

// emitRowLoop emits name, a func(dst, src *float32, n int, s float32)
// documented by doc, that runs body once per vector of the n floats (a
// multiple of the lanes) with src and dst at that vector and s broadcast
// in sc.
func emitRowLoop(ctx *build.Context, isa ISA, name string, doc []string, body func(src, dst reg.Register, sc reg.VecVirtual)) {
	w := isa.lanes()
	ctx.Function(name)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(dst, src *float32, n int, s float32)")
	ctx.Doc(doc...)
	dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
	src := ctx.Load(ctx.Param("src"), ctx.GP64())
	n := ctx.Load(ctx.Param("n"), ctx.GP64())
	sx := ctx.Load(ctx.Param("s"), ctx.XMM())
	sc := isa.vec(ctx)
	ctx.VBROADCASTSS(sx, sc)
	ctx.SHRQ(op.U8(log2(w)), n)
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("loop")
	body(src, dst, sc)
	ctx.ADDQ(op.U8(uint8(4*w)), src)
	ctx.ADDQ(op.U8(uint8(4*w)), dst)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("loop"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()
}
