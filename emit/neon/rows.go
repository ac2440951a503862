package neon

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
