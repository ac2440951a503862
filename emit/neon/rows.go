package neon

import "math"

// Names of the row helpers of the driver (runtime/cpu's kernels table;
// every length is a whole number of 4-float vectors).
const (
	ScaleRowName  = "scaleRowNEON"
	NonFiniteName = "nonFiniteRowsNEON"
	TransposeName = "transposeTileNEON"
)

// WidenName is the widening loop of a 16-bit element type.
func WidenName(e Elem) string { return "widen" + e.String() + "NEON" }

// EmitScaleRow returns scaleRowNEON(dst, src *float32, n int, s float32):
// dst[i] = src[i]*s for n a multiple of 4, 16 floats an iteration and
// then 4 (FMUL: the IEEE product, bit for bit).
func EmitScaleRow() *Func {
	f := NewFunc(ScaleRowName, []Param{{"dst", "*float32"}, {"src", "*float32"}, {"n", "int"}, {"s", "float32"}}, nil,
		"scaleRowNEON writes dst[i] = src[i]*s for i < n (a multiple of 4).")
	f.I("MOVD %s, R0", f.Arg("dst"))
	f.I("MOVD %s, R1", f.Arg("src"))
	f.I("MOVD %s, R2", f.Arg("n"))
	f.I("FMOVS %s, F31", f.Arg("s"))
	f.dupE(31, 31, 0)
	f.Label("loop16")
	f.I("CMP $16, R2")
	f.I("BLT tail")
	f.I("VLD1.P 64(R1), %s", vlist(0, 4))
	for x := V(0); x < 4; x++ {
		f.fmul(x, x, 31)
	}
	f.I("VST1.P %s, 64(R0)", vlist(0, 4))
	f.I("SUB $16, R2")
	f.I("B loop16")
	f.Label("tail")
	f.I("CMP $4, R2")
	f.I("BLT done")
	f.I("FMOVQ.P 16(R1), F0")
	f.fmul(0, 0, 31)
	f.I("FMOVQ.P F0, 16(R0)")
	f.I("SUB $4, R2")
	f.I("B tail")
	f.Label("done")
	f.I("RET")
	return f
}

// EmitWiden returns widen<e>NEON(dst *float32, src *uint16, n int): the
// exact float32 values of n (a multiple of 4) bfloat16 (ZIP1/ZIP2 with
// zero: x << 16) or half-precision (FCVTL, FCVTL2) elements, 8 an
// iteration and then 4.
func EmitWiden(e Elem) *Func {
	what := map[Elem]string{BF16: "bfloat16", F16: "half-precision"}[e]
	f := NewFunc(WidenName(e), []Param{{"dst", "*float32"}, {"src", "*uint16"}, {"n", "int"}}, nil,
		WidenName(e)+" writes the float32 values of the n "+what+" elements at src to dst",
		"(n a multiple of 4).")
	f.I("MOVD %s, R0", f.Arg("dst"))
	f.I("MOVD %s, R1", f.Arg("src"))
	f.I("MOVD %s, R2", f.Arg("n"))
	f.zero(31)
	f.Label("loop8")
	f.I("CMP $8, R2")
	f.I("BLT tail")
	f.I("FMOVQ.P 16(R1), F0")
	f.widen(e, 1, 2, 0, 31)
	f.I("VST1.P %s, 32(R0)", vlist(1, 2))
	f.I("SUB $8, R2")
	f.I("B loop8")
	f.Label("tail")
	f.I("CMP $4, R2")
	f.I("BLT done")
	f.I("FMOVD (R1), F0")
	f.widen(e, 1, 2, 0, 31)
	f.I("FMOVQ F1, (R0)")
	f.Label("done")
	f.I("RET")
	return f
}

// widen sets lo and hi to the float32 values of the low and high four
// 16-bit elements of raw (zero: +0, for bfloat16).
func (f *Func) widen(e Elem, lo, hi, raw, zero V) {
	if e == BF16 {
		f.zip1h(lo, zero, raw)
		f.zip2h(hi, zero, raw)
		return
	}
	f.fcvtl(lo, raw, false)
	f.fcvtl(hi, raw, true)
}

// EmitNonFinite returns nonFiniteRowsNEON(v *float32, d int) uint64: bit
// r set when row r of the TK rows of d floats at v (d a multiple of 4)
// holds an element whose exponent bits are all ones (NaN or an infinity).
func EmitNonFinite() *Func {
	f := NewFunc(NonFiniteName, []Param{{"v", "*float32"}, {"d", "int"}}, &Param{"ret", "uint64"},
		"nonFiniteRowsNEON returns the rows of the TK rows of d floats at v (d a",
		"multiple of 4) that hold a NaN or an infinity, as bits.")
	f.I("MOVD %s, R0", f.Arg("v"))
	f.I("MOVD %s, R1", f.Arg("d"))
	f.dupConst(31, 0x7f800000, 2)
	f.I("MOVD $0, R3")
	f.I("MOVD $1, R4")
	f.I("MOVD $%d, R5", TK)
	f.Label("row")
	f.zero(0)
	f.I("MOVD R1, R6")
	f.Label("vec")
	f.I("FMOVQ.P 16(R0), F1")
	f.and(1, 1, 31)
	f.cmeq(1, 1, 31)
	f.orr(0, 0, 1)
	f.I("SUBS $4, R6")
	f.I("BGT vec")
	f.I("VMOV V0.D[0], R7")
	f.I("VMOV V0.D[1], R8")
	f.I("ORR R8, R7")
	f.I("CBZ R7, next")
	f.I("ORR R4, R3")
	f.Label("next")
	f.I("LSL $1, R4")
	f.I("SUBS $1, R5")
	f.I("BNE row")
	f.I("MOVD R3, %s", f.Ret())
	f.I("RET")
	return f
}

// EmitTranspose returns transposeTileNEON(kt, k *float32, pitch, d int,
// scale float32): kt[i*TK+c] = scale*k[c*pitch+i] for c < TK and i < d (a
// multiple of 4), in 4x4 blocks: four rows' four floats loaded, transposed
// by TRN1/TRN2 on 32-bit then 64-bit lanes, multiplied, stored as four
// columns' four keys.
func EmitTranspose() *Func {
	f := NewFunc(TransposeName, []Param{{"kt", "*float32"}, {"k", "*float32"}, {"pitch", "int"}, {"d", "int"}, {"scale", "float32"}}, nil,
		"transposeTileNEON writes kt[i*64+c] = scale*k[c*pitch+i] for i < d (a",
		"multiple of 4) and c < 64: the transposed, scaled key tile of the tile",
		"kernels.")
	f.I("MOVD %s, R0", f.Arg("kt"))
	f.I("MOVD %s, R1", f.Arg("k"))
	f.I("MOVD %s, R2", f.Arg("pitch"))
	f.I("MOVD %s, R3", f.Arg("d"))
	f.I("FMOVS %s, F31", f.Arg("scale"))
	f.dupE(31, 31, 0)
	f.I("LSL $2, R2")
	f.I("MOVD $%d, R4", TK/4)
	f.I("MOVD R1, R5")
	f.I("MOVD R0, R6")
	f.Label("cblk")
	f.I("MOVD R5, R7")
	f.I("ADD R2, R7, R8")
	f.I("ADD R2, R8, R9")
	f.I("ADD R2, R9, R10")
	f.I("MOVD R6, R11")
	f.I("LSR $2, R3, R12")
	f.Label("iblk")
	for r := 0; r < 4; r++ {
		f.I("FMOVQ.P 16(R%d), F%d", 7+r, r)
	}
	f.trn1s(4, 0, 1)
	f.trn2s(5, 0, 1)
	f.trn1s(6, 2, 3)
	f.trn2s(7, 2, 3)
	f.trn1d(0, 4, 6)
	f.trn1d(1, 5, 7)
	f.trn2d(2, 4, 6)
	f.trn2d(3, 5, 7)
	for x := V(0); x < 4; x++ {
		f.fmul(x, x, 31)
		f.I("FMOVQ F%d, %d(R11)", x, 4*TK*int(x))
	}
	f.I("ADD $%d, R11", 4*4*TK)
	f.I("SUBS $1, R12")
	f.I("BNE iblk")
	for r := 0; r < 4; r++ {
		f.I("ADD R2, R5")
	}
	f.I("ADD $16, R6")
	f.I("SUBS $1, R4")
	f.I("BNE cblk")
	f.I("RET")
	return f
}

// LSEName is the loop that finishes the log-sum-exp of output rows.
const LSEName = "lseNEON"

// NarrowName is the narrowing loop of a 16-bit output type.
func NarrowName(e Elem) string { return "narrow" + e.String() + "NEON" }

// log2Series are emit/avo's: 2/ln2 * 1/(2i+1), i = 0..5, the atanh series
// of log2 on [1, 2) in s = (x-1)/(x+1).
var log2Series = [6]float64{1, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9, 1.0 / 11}

// EmitLSE returns lseNEON(dst, m, l *float32, n int): dst[i] = (m[i] +
// log2(l[i])) * ln2 for n a multiple of 4, as emit/avo's lseAVX512: log2(l)
// is the exponent field (unbiased, SCVTF) plus log2 of the mantissa in [1,
// 2) by the atanh series (FDIV for s, Horner with FMLA in s^2); l = +Inf
// or NaN (exponent all ones) takes l itself as its exponent, so the result
// is +Inf or NaN; a subnormal l is scaled by 2^64 first (64 off its
// exponent), and l = 0 gives m + -Inf.
func EmitLSE() *Func {
	f := NewFunc(LSEName, []Param{{"dst", "*float32"}, {"m", "*float32"}, {"l", "*float32"}, {"n", "int"}}, nil,
		"lseNEON writes dst[i] = (m[i] + log2(l[i])) * ln2 for i < n (a multiple of",
		"4).")
	for i, p := range []string{"dst", "m", "l", "n"} {
		f.I("MOVD %s, R%d", f.Arg(p), i)
	}
	f.dupConst(31, f32bits(1), 4)
	f.dupConst(30, f32bits(math.Ln2), 4)
	for i, c := range log2Series {
		f.dupConst(V(24+i), f32bits(2/math.Ln2*c), 4)
	}
	f.dupConst(23, 0x007fffff, 4)
	f.dupConst(21, 0x7f800000, 4)
	f.dupConst(20, 127, 4)
	f.dupConst(19, f32bits(0x1p64), 4)
	f.dupConst(18, f32bits(64), 4)
	f.dupConst(17, 0xff800000, 4) // -Inf
	f.zero(12)
	f.Label("loop")
	f.I("CMP $4, R3")
	f.I("BLT done")
	f.I("FMOVQ.P 16(R2), F0") // l
	// l = 0 or subnormal (exponent field 0): scaled by 2^64 first, 64
	// taken off its exponent below; l = 0 itself ends as m + -Inf.
	f.fcmeq(15, 0, 12) // l == 0
	f.and(11, 0, 21)
	f.cmeq(11, 11, 12) // exponent field 0
	f.fmul(13, 0, 19)
	f.bit(0, 13, 11) // l*2^64 there
	f.ushr(1, 0, 23)
	f.subi(1, 1, 20)
	f.scvtf(1, 1) // the exponent
	f.and(14, 11, 18)
	f.fsub(1, 1, 14) // less 64 where scaled
	f.and(2, 0, 21)
	f.cmeq(2, 2, 21)
	f.bit(1, 0, 2) // l itself where +Inf or NaN
	f.and(3, 0, 23)
	f.orr(3, 3, 31) // the mantissa in [1, 2)
	f.fsub(4, 3, 31)
	f.fadd(5, 3, 31)
	f.fdiv(6, 4, 5) // s
	f.fmul(7, 6, 6) // s^2
	a, b := V(8), V(9)
	f.mov(a, 24+5)
	for i := 4; i >= 0; i-- {
		f.mov(b, V(24+i))
		f.fmla(b, a, 7)
		a, b = b, a
	}
	f.fmul(a, 6, a) // log2 of the mantissa
	f.I("FMOVQ.P 16(R1), F10")
	f.fadd(1, 1, 10)
	f.fadd(1, 1, a)
	f.fadd(16, 10, 17) // m + -Inf: where l = 0
	f.bit(1, 16, 15)
	f.fmul(1, 1, 30)
	f.I("FMOVQ.P F1, 16(R0)")
	f.I("SUB $4, R3")
	f.I("B loop")
	f.Label("done")
	f.I("RET")
	return f
}

// EmitNarrow returns narrow<e>NEON(dst *uint16, src *float32, n int, s
// float32): dst[i] = src[i]*s rounded to e for n a multiple of 4, bit for
// bit runtime/cpu's f32toF16 and f32toBF16. Half precision by FCVTN and
// FCVTN2 (the default FPCR: to nearest, ties to even, through the
// subnormals, infinities past the largest half; a NaN keeps its sign and
// high payload bits and comes out quiet). bfloat16 in integer lanes: (u +
// 0x7fff + bit 16 of u) >> 16, NaN lanes (FCMEQ x, x false) taking u >> 16
// with the quiet bit 0x40 set; UZP1 packs the low halves.
func EmitNarrow(e Elem) *Func {
	what := map[Elem]string{BF16: "bfloat16", F16: "half-precision"}[e]
	f := NewFunc(NarrowName(e), []Param{{"dst", "*uint16"}, {"src", "*float32"}, {"n", "int"}, {"s", "float32"}}, nil,
		NarrowName(e)+" writes dst[i] = src[i]*s rounded to "+what+" (to nearest, ties",
		"to even; NaN stays NaN, quiet) for i < n (a multiple of 4).")
	f.I("MOVD %s, R0", f.Arg("dst"))
	f.I("MOVD %s, R1", f.Arg("src"))
	f.I("MOVD %s, R2", f.Arg("n"))
	f.I("FMOVS %s, F31", f.Arg("s"))
	f.dupE(31, 31, 0)
	if e == BF16 {
		f.dupConst(30, 0x7fff, 3)
		f.dupConst(29, 1, 3)
		f.dupConst(28, 0x40, 3)
	}
	// bf16 leaves the 16-bit result of x in the low half of each lane of h.
	bf16 := func(x, h V) {
		f.fcmeq(20, x, x)
		f.ushr(h, x, 16)
		f.and(21, h, 29)
		f.addi(22, x, 30)
		f.addi(22, 22, 21)
		f.ushr(22, 22, 16)
		f.orr(h, h, 28)
		f.bit(h, 22, 20)
	}
	f.Label("loop8")
	f.I("CMP $8, R2")
	f.I("BLT tail")
	f.I("VLD1.P 32(R1), %s", vlist(0, 2))
	f.fmul(0, 0, 31)
	f.fmul(1, 1, 31)
	if e == F16 {
		f.fcvtn(2, 0, false)
		f.fcvtn(2, 1, true)
	} else {
		bf16(0, 3)
		bf16(1, 4)
		f.uzp1h(2, 3, 4)
	}
	f.I("FMOVQ.P F2, 16(R0)")
	f.I("SUB $8, R2")
	f.I("B loop8")
	f.Label("tail")
	f.I("CMP $4, R2")
	f.I("BLT done")
	f.I("FMOVQ (R1), F0")
	f.fmul(0, 0, 31)
	if e == F16 {
		f.fcvtn(2, 0, false)
	} else {
		bf16(0, 3)
		f.uzp1h(2, 3, 3)
	}
	f.I("FMOVD F2, (R0)")
	f.Label("done")
	f.I("RET")
	return f
}
