package neon

import (
	"fmt"
	"math"
)

// Tile sizes of runtime/cpu's microkernel ABI.
const (
	TQ = 48
	TK = 64
)

// The exp2 polynomial of runtime/cpu (exp2.go): 2^f = 1 + c1 f + ... +
// c6 f^6 on [-0.5, 0.5], the same decimal values rounded to float32.
var exp2Coeffs = [6]float64{
	6.931472028550421e-1,
	2.402264791363012e-1,
	5.550332471162809e-2,
	9.618437357674640e-3,
	1.339887440266574e-3,
	1.535336188319500e-4,
}

func f32bits(x float64) uint32 { return math.Float32bits(float32(x)) }

// Registers of the softmax and of every exp2: constants loaded once per
// phase by loadConsts.
const (
	vLo     V = 16 // -125: exp2 of anything below is flushed to +0
	vC1     V = 17 // c1..c6 in V17..V22
	vOne    V = 23 // 1.0
	vNegInf V = 24 // -Inf
	vPat    V = 25 // int32 lanes 1, 2, 4, 8: the mask bits of one vector
)

// loadConsts fills V16-V25 (tmp: a free general register number).
func (f *Func) loadConsts(tmp int) {
	f.Comment("V16 = -125, V17-V22 = c1..c6, V23 = 1, V24 = -Inf, V25 = [1 2 4 8].")
	f.loadExp2Consts(tmp)
	f.dupConst(vNegInf, 0xff800000, tmp)
	for i := 0; i < 4; i++ {
		f.I("MOVW $%d, R%d", 1<<i, tmp)
		f.I("VMOV R%d, V%d.S[%d]", tmp, vPat, i)
	}
}

// loadExp2Consts fills V16-V23, the constants of exp2 (tmp: a free general
// register number).
func (f *Func) loadExp2Consts(tmp int) {
	f.dupConst(vLo, f32bits(-125), tmp)
	for i, c := range exp2Coeffs {
		f.dupConst(vC1+V(i), f32bits(c), tmp)
	}
	f.dupConst(vOne, f32bits(1), tmp)
}

// exp2 replaces every lane x of v (x <= 0, -Inf or NaN) by 2^x, as
// runtime/cpu's exp2Core: n = round(x) (to nearest even), f = x - n, the
// polynomial by Horner with fused multiply-adds, times 2^n added into the
// exponent field. Lanes below -125 (-Inf included) give exactly +0 and
// nothing computes a subnormal; NaN stays NaN (the flush test is false for
// NaN and FMAX returns NaN). t0..t3 are scratch; V16-V23 the constants.
func (f *Func) exp2(x, t0, t1, t2, t3 V) {
	f.fcmgt(t0, vLo, x) // flushed: -125 > x
	b := f.exp2Clamped(x, t1, t2, t3)
	f.bic(x, b, t0)
}

// exp2Clamped is exp2 without the flush: 2^max(x, -125) (at least 2^-125,
// a normal number), NaN for NaN, into t2 or t3, which it returns; x is
// left holding the fraction f, t1 is scratch.
func (f *Func) exp2Clamped(x, t1, t2, t3 V) V {
	f.fmax(x, x, vLo)
	f.frintn(t1, x)
	f.fsub(x, x, t1) // f in [-0.5, 0.5]
	f.fcvtzs(t1, t1)
	f.mov(t2, vC1+4)
	f.fmla(t2, vC1+5, x)
	a, b := t2, t3
	for i := 3; i >= 0; i-- {
		f.mov(b, vC1+V(i))
		f.fmla(b, a, x)
		a, b = b, a
	}
	f.mov(b, vOne)
	f.fmla(b, a, x)
	f.shl(t1, t1, 23)
	f.addi(b, b, t1)
	return b
}

// TileSignature is the Go parameter list of every tile kernel.
var tileParams = []Param{{"q", "*float32"}, {"kt", "*float32"}, {"v", "*float32"}, {"s", "*float32"},
	{"o", "*float32"}, {"m", "*float32"}, {"l", "*float32"}, {"mask", "*uint64"}}

// TileName is the NEON tile kernel of head dimensions d: tileNEOND64 for
// qk = v = 64, tileNEOND192V128 for qk = 192 and v = 128.
func TileName(d Dims) string { return "tileNEON" + d.suffix() }

// Register blocking of both products: 6 rows x 4 vectors (16 columns) of
// accumulators, V0-V23 (row r, vector j in V(4r+j)); the six rows' next
// four A values (four reduction steps) in V24-V29, used lane by lane by
// FMLA (by element); the B vectors streamed through V30 and V31. Per four
// reduction steps: 6 A loads and 16 B loads for 96 FMAs, all 32 registers
// in use and 24 independent accumulation chains (4-cycle FMLA latency on
// up to 4 pipes needs 16).
const (
	blkRows = 6
	blkVecs = 4
	vA      = 24
	vB      = 30
)

// kloop emits acc[r][j] += sum_k A[r][k] B[k][4j:4j+4] for k < klen (a
// multiple of 4) and j < nvec: A row r at Ra + r*aRow (floats at 4-byte
// steps), B step k at Rb + k*bRow (nvec vectors; the accumulators of row
// r are V(4r) onwards whatever nvec). It advances Ra and Rb and counts Rn
// down.
func (f *Func) kloop(label string, ra, rb, rn, aRow, bRow, klen, nvec int) {
	f.I("MOVD $%d, R%d", klen/4, rn)
	f.Label(label)
	for r := 0; r < blkRows; r++ {
		f.I("FMOVQ %d(R%d), F%d", r*aRow, ra, vA+r)
	}
	for kk := 0; kk < 4; kk++ {
		for j := 0; j < nvec; j++ {
			b := V(vB + (kk*nvec+j)%2)
			f.I("FMOVQ %d(R%d), F%d", kk*bRow+16*j, rb, b)
			for r := 0; r < blkRows; r++ {
				f.fmlaE(V(4*r+j), b, V(vA+r), kk)
			}
		}
	}
	f.I("ADD $16, R%d", ra)
	f.I("ADD $%d, R%d", 4*bRow, rb)
	f.I("SUBS $1, R%d", rn)
	f.I("BNE %s", label)
}

// accMem emits a load (store) of nvec vectors of accumulators a row from
// (to) rows at Rp + r*row.
func (f *Func) accMem(store bool, rp, row, nvec int) {
	for r := 0; r < blkRows; r++ {
		for j := 0; j < nvec; j++ {
			if store {
				f.I("FMOVQ F%d, %d(R%d)", 4*r+j, r*row+16*j, rp)
			} else {
				f.I("FMOVQ %d(R%d), F%d", r*row+16*j, rp, 4*r+j)
			}
		}
	}
}

// blockSkip emits, for a masked tile, the OR of the block's six mask words
// (at R10) and a branch to skip when it is zero.
func (f *Func) blockSkip(skip string) {
	f.I("MOVD (R10), R12")
	for r := 1; r < blkRows; r++ {
		f.I("MOVD %d(R10), R13", 8*r)
		f.I("ORR R13, R12")
	}
	f.I("CBZ R12, %s", skip)
}

// EmitTile returns the tile kernel for head dimensions d (each a multiple
// of 4 up to 256): the function of runtime/cpu's tileGo and the tile ABI
// of its package doc (q [TQ][qk], kt [qk][TK], v [TK][v], o [TQ][v]).
//
// Arguments stay in R0 (q), R1 (kt), R2 (v), R3 (s), R4 (o), R5 (m), R6
// (l), R7 (mask). A nil mask selects the full-tile copy of the kernel; the
// masked copy differs in three places: both products skip row blocks of 6
// rows whose mask words are all zero, and the softmax sets the masked
// scores of a row to -Inf before its maximum (so exp2 makes their p +0) and
// gives a row that keeps nothing p = 0 and no state change. Phases:
//
//  1. S = Q K^T into s: row blocks, then column chunks of 16 keys, then
//     the reduction over qk, 4 steps an iteration (kloop);
//  2. online softmax, one row at a time, all 16 vectors of a row in
//     V0-V15: maximum (FMAXNM, which ignores NaN as tileGo's comparison
//     does), alpha (scalar, exp2 in lane 0), p = exp2(s - ms) written back
//     to s, l, and o scaled by alpha where alpha is not 1;
//  3. O += P V: row blocks, chunks of 16 output columns (and one of the
//     v%16 columns left, with fewer accumulators), the reduction over the
//     64 keys.
func EmitTile(d Dims) *Func { return emitTile(d, false) }

// EmitTileScore returns the tile kernel with the score stage for head
// dimension d (TileScoreName: emit/avo's TileScoreSignature, the tile ABI
// plus runtime/cpu's *scoreTile): EmitTile's kernel with the score pass
// (tileScorePass) between phases 1 and 2 of both copies.
func EmitTileScore(d Dims) *Func { return emitTile(d, true) }

func emitTile(d Dims, score bool) *Func {
	d.check()
	var f *Func
	if score {
		f = NewFunc(TileScoreName(d), append(tileParams[:len(tileParams):len(tileParams)], scoreParam), nil,
			fmt.Sprintf("%s is the tile microkernel with the score stage of sc (see", TileScoreName(d)),
			fmt.Sprintf("scoreTile) for %s, written for NEON (Advanced SIMD). A nil mask means", d.text()),
			"a full tile.")
	} else {
		f = NewFunc(TileName(d), tileParams, nil,
			fmt.Sprintf("%s is the tile microkernel (see the package doc for the ABI) for", TileName(d)),
			fmt.Sprintf("%s, written for NEON (Advanced SIMD). A nil mask means a full tile.", d.text()))
	}
	for i, p := range tileParams {
		f.I("MOVD %s, R%d", f.Arg(p.Name), i)
	}
	f.I("CBNZ R7, masked")
	f.Comment("Full tile. Phase 1: S = Q K^T into s.")
	f.tileQK(d.QK, false)
	if score {
		f.Comment("The score stage.")
		f.tileScorePass(false)
	}
	f.Comment("Phase 2: online softmax row by row.")
	f.tileSoftmax(d.V, false)
	f.Comment("Phase 3: O += P V.")
	f.tilePV(d.V, false)
	f.I("RET")
	f.Label("masked")
	f.Comment("Masked tile. Phase 1: S = Q K^T, row blocks that keep something.")
	f.tileQK(d.QK, true)
	if score {
		f.Comment("The score stage, rows that keep a key only.")
		f.tileScorePass(true)
	}
	f.Comment("Phase 2: online softmax row by row, masked.")
	f.tileSoftmax(d.V, true)
	f.Comment("Phase 3: O += P V, row blocks that keep something.")
	f.tilePV(d.V, true)
	f.I("RET")
	return f
}

func pfx(masked bool) string { return pick(masked, "m_", "f_") }

// tileQK emits phase 1 for q rows of qk floats.
func (f *Func) tileQK(qk int, masked bool) {
	p := pfx(masked)
	f.I("MOVD R0, R8")  // q of the row block
	f.I("MOVD R3, R9")  // s of the row block
	f.I("MOVD R7, R10") // mask words of the row block
	f.I("MOVD $%d, R11", TQ/blkRows)
	f.Label(p + "qk_rb")
	if masked {
		f.blockSkip(p + "qk_next")
	}
	f.I("MOVD R1, R13") // kt of the column chunk
	f.I("MOVD R9, R14") // s of the chunk
	f.I("MOVD $%d, R15", TK/(4*blkVecs))
	f.Label(p + "qk_ch")
	for a := V(0); a < blkRows*blkVecs; a++ {
		f.zero(a)
	}
	f.I("MOVD R8, R16")
	f.I("MOVD R13, R17")
	f.kloop(p+"qk_k", 16, 17, 19, 4*qk, 4*TK, qk, blkVecs)
	f.accMem(true, 14, 4*TK, blkVecs)
	f.I("ADD $64, R13")
	f.I("ADD $64, R14")
	f.I("SUBS $1, R15")
	f.I("BNE %s", p+"qk_ch")
	f.Label(p + "qk_next")
	f.I("ADD $%d, R8", blkRows*4*qk)
	f.I("ADD $%d, R9", blkRows*4*TK)
	f.I("ADD $%d, R10", blkRows*8)
	f.I("SUBS $1, R11")
	f.I("BNE %s", p+"qk_rb")
}

// tilePV emits phase 3 for o and value rows of d floats: d/16 chunks of
// 16 columns in a loop, then a chunk of the d%16 columns left.
func (f *Func) tilePV(d int, masked bool) {
	p := pfx(masked)
	f.I("MOVD R3, R8")  // p of the row block
	f.I("MOVD R4, R9")  // o of the row block
	f.I("MOVD R7, R10") // mask words of the row block
	f.I("MOVD $%d, R11", TQ/blkRows)
	f.Label(p + "pv_rb")
	if masked {
		f.blockSkip(p + "pv_next")
	}
	f.I("MOVD R2, R13") // v of the column chunk
	f.I("MOVD R9, R14") // o of the chunk
	chunk := func(label string, nvec int) {
		f.accMem(false, 14, 4*d, nvec)
		f.I("MOVD R8, R16")
		f.I("MOVD R13, R17")
		f.kloop(label, 16, 17, 19, 4*TK, 4*d, TK, nvec)
		f.accMem(true, 14, 4*d, nvec)
	}
	if n := d / (4 * blkVecs); n > 0 {
		f.I("MOVD $%d, R15", n)
		f.Label(p + "pv_ch")
		chunk(p+"pv_k", blkVecs)
		f.I("ADD $64, R13")
		f.I("ADD $64, R14")
		f.I("SUBS $1, R15")
		f.I("BNE %s", p+"pv_ch")
	}
	if rem := d % (4 * blkVecs) / 4; rem > 0 {
		f.Comment(fmt.Sprintf("The last %d columns.", 4*rem))
		chunk(p+"pv_kr", rem)
	}
	f.Label(p + "pv_next")
	f.I("ADD $%d, R8", blkRows*4*TK)
	f.I("ADD $%d, R9", blkRows*4*d)
	f.I("ADD $%d, R10", blkRows*8)
	f.I("SUBS $1, R11")
	f.I("BNE %s", p+"pv_rb")
}

// maxTree reduces V0-V15 lane-wise with FMAXNM into V28 (scratch V29-V31),
// then across lanes into S28.
func (f *Func) maxTree() {
	f.fmaxnm(28, 0, 1)
	f.fmaxnm(29, 2, 3)
	f.fmaxnm(30, 4, 5)
	f.fmaxnm(31, 6, 7)
	f.fmaxnm(28, 28, 29)
	f.fmaxnm(30, 30, 31)
	f.fmaxnm(28, 28, 30)
	f.fmaxnm(29, 8, 9)
	f.fmaxnm(30, 10, 11)
	f.fmaxnm(29, 29, 30)
	f.fmaxnm(30, 12, 13)
	f.fmaxnm(31, 14, 15)
	f.fmaxnm(30, 30, 31)
	f.fmaxnm(29, 29, 30)
	f.fmaxnm(28, 28, 29)
	f.fmaxnmv(28, 28)
}

// tileSoftmax emits phase 2 (o rows of d floats). Registers: R8 the row
// of s, R9 m, R10 l,
// R11 the row of o, R12 the row count, R13 the mask words, R14 the row's
// word, R17 alpha's bits; V0-V15 the row, V16-V25 constants, V26 ms, V27
// the sums, V28-V31 scratch.
func (f *Func) tileSoftmax(d int, masked bool) {
	p := pfx(masked)
	f.loadConsts(16)
	f.I("MOVD R3, R8")
	f.I("MOVD R5, R9")
	f.I("MOVD R6, R10")
	f.I("MOVD R4, R11")
	f.I("MOVD R7, R13")
	f.I("MOVD $%d, R12", TQ)
	f.Label(p + "sm_row")
	if masked {
		f.I("MOVD.P 8(R13), R14")
		f.I("CBZ R14, %s", p+"sm_zero")
	}
	f.I("MOVD R8, R15")
	for k := 0; k < 4; k++ {
		f.I("VLD1.P 64(R15), %s", vlist(V(4*k), 4))
	}
	if masked {
		f.Comment("Masked scores become -Inf: lane c of vector j keeps bit 4j+c.")
		for j := 0; j < 16; j++ {
			r := 14
			if j > 0 {
				f.I("LSR $%d, R14, R16", 4*j)
				r = 16
			}
			f.dupR(28, r)
			f.cmtst(28, 28, vPat)
			f.bif(V(j), vNegInf, 28)
		}
	}
	f.softmaxRow(d, p)
	f.I("MOVD R8, R15")
	for k := 0; k < 4; k++ {
		f.I("VST1.P %s, 64(R15)", vlist(V(4*k), 4))
	}
	f.Label(p + "sm_next")
	f.I("ADD $%d, R8", 4*TK)
	f.I("ADD $4, R9")
	f.I("ADD $4, R10")
	f.I("ADD $%d, R11", 4*d)
	f.I("SUBS $1, R12")
	f.I("BNE %s", p+"sm_row")
	if !masked {
		return
	}
	f.I("B %s", p+"sm_done")
	f.Label(p + "sm_zero")
	f.Comment("A row that keeps nothing: p = 0, m, l and o stay.")
	for k := V(0); k < 4; k++ {
		f.zero(k)
	}
	f.I("MOVD R8, R15")
	for k := 0; k < 4; k++ {
		f.I("VST1.P %s, 64(R15)", vlist(0, 4))
	}
	f.I("B %s", p+"sm_next")
	f.Label(p + "sm_done")
}

// softmaxRow emits the online-softmax step of one row whose 64 scores
// (masked ones -Inf) are in V0-V15: m (at R9), l (at R10) and the o row (d
// floats at R11, a multiple of 4) are updated and V0-V15 left holding p. Constants in
// V16-V25 (loadConsts); scratch R15-R17, V26-V31; labels start with p.
func (f *Func) softmaxRow(d int, p string) {
	f.maxTree()
	f.I("FMOVS (R9), F29") // m_r
	f.I("FMAXNMS F28, F29, F28")
	f.I("FMOVS F28, (R9)") // m = mnew
	f.I("MOVW $0x3f800000, R17")
	f.I("FCMPS F24, F28")
	f.I("BEQ %s", p+"sm_dead") // mnew = -Inf: ms = 0, alpha = 1
	f.I("FCMPS F29, F28")
	f.I("BEQ %s", p+"sm_ms") // m unchanged: alpha = 1
	f.I("FSUBS F28, F29, F30")
	f.exp2(30, 31, 26, 27, 29) // alpha = 2^(m_r - mnew), 0 for m_r = -Inf
	f.I("FMOVS F30, R17")
	f.Label(p + "sm_ms")
	f.dupE(26, 28, 0)
	f.I("B %s", p+"sm_exp")
	f.Label(p + "sm_dead")
	f.zero(26)
	f.Label(p + "sm_exp")
	f.zero(27)
	for j := V(0); j < 16; j++ {
		f.fsub(j, j, 26)
		f.exp2(j, 28, 29, 30, 31)
		f.fadd(27, 27, j)
	}
	f.faddp(27, 27, 27)
	f.faddp2s(27, 27)
	f.I("FMOVS (R10), F28")
	f.I("MOVW $0x3f800000, R16")
	f.I("CMPW R16, R17")
	f.I("BNE %s", p+"sm_scale")
	f.I("FADDS F27, F28, F28")
	f.I("FMOVS F28, (R10)")
	f.I("B %s", p+"sm_rowdone")
	f.Label(p + "sm_scale")
	f.I("FMOVS R17, F26") // alpha
	f.I("FMULS F26, F28, F28")
	f.I("FADDS F27, F28, F28")
	f.I("FMOVS F28, (R10)")
	f.I("MOVD R11, R15")
	f.I("MOVD R11, R16")
	for i := 0; i < d; i += 16 {
		n := min(4, (d-i)/4)
		f.I("VLD1.P %d(R15), %s", 16*n, vlist(28, n))
		for k := V(28); k < V(28+n); k++ {
			f.fmulE(k, k, 26, 0)
		}
		f.I("VST1.P %s, %d(R16)", vlist(28, n), 16*n)
	}
	f.Label(p + "sm_rowdone")
}
