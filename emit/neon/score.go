package neon

import (
	"fmt"
	"math"
)

// The score stage (runtime/cpu/score.go): soft-capping and ALiBi rewrite
// the scores, in log2 units, between S = Q K^T and the softmax. The
// kernels read its parameters from a scoreTile of package runtime/cpu,
// addressed by these offsets (runtime/cpu's tests compare them with the
// struct, and the tanh constants below with tanh32's).
const (
	ScoreCapOff    = 0                          // float32 cap
	ScoreInvCapOff = 4                          // float32 1/cap
	ScoreFlagsOff  = 8                          // uint32 flags
	ScoreSlopeOff  = 16                         // [TQ]float32 slope of each row
	ScoreRowsOff   = ScoreSlopeOff + 4*TQ       // [TQ]int32 position of each row
	ScoreColsOff   = ScoreRowsOff + 4*TQ        // [TK]int32 position of each key column
	ScoreSize      = ScoreColsOff + 4*TK + 4*16 // 16 int32 of padding after cols
)

// Bits of the flags.
const (
	ScoreCap   = 1 << 0 // s = cap * tanh(s * invCap)
	ScoreAlibi = 1 << 1 // s = s + slope[r]*(cols[c] - rows[r])
	ScoreAbs   = 1 << 2 // with ScoreAlibi: s = s - slope[r]*|cols[c] - rows[r]|
)

// The tanh of the score stage, tanh32's algorithm: for |x| < TanhSmall the
// odd Taylor polynomial |x| + |x| z P(z), z = x^2, P(z) = TanhPoly[0] +
// TanhPoly[1] z + ... + TanhPoly[7] z^7; above, (1 - e)/(1 + e) with e =
// 2^(TanhM2L2E |x|); the sign of x put back.
const (
	TanhSmall = 0.55
	TanhM2L2E = -2 * math.Log2E
)

// TanhPoly are the Taylor coefficients of tanh x / x - 1 in x^2: those of
// x^3, x^5, ..., x^17.
var TanhPoly = [8]float64{
	-1.0 / 3,
	2.0 / 15,
	-17.0 / 315,
	62.0 / 2835,
	-1382.0 / 155925,
	21844.0 / 6081075,
	-929569.0 / 638512875,
	6404582.0 / 10854718875,
}

// Names of the score-stage kernels.
func TileScoreName(d Dims) string { return "tileScoreNEON" + d.suffix() }
func DecodeScoreName(e Elem, d Dims, r int) string {
	return fmt.Sprintf("decodeScoreNEON%s%sR%d", e, d.suffix(), r)
}

const (
	TanhName     = "tanhNEON"
	ScoreBwdName = "scoreBwdNEON"
)

// scoreParam is the argument every score kernel takes after its plain
// kernel's: runtime/cpu's *scoreTile.
var scoreParam = Param{"sc", "*scoreTile"}

// Registers of the score stage (scoreVec), besides exp2's constants in
// V16-V23 (loadExp2Consts): the tanh polynomial packed four lanes a
// register (FMLA and DUP take them by element), the per-call scalars in
// the lanes of vK, full-vector constants for the compare and the sign,
// each row's slope and position, and a zero.
const (
	vTanhLo V = 24 // T3, T5, T7, T9 in lanes 0-3 (TanhPoly[0:4])
	vTanhHi V = 25 // T11, T13, T15, T17 (TanhPoly[4:8])
	vK      V = 26 // lanes kCap, kInvCap, kM2L2E, kC
	vThr    V = 27 // TanhSmall
	vSign   V = 28 // 0x80000000: the sign bit
	vSlope  V = 29 // the row's slope (ALiBi)
	vRows   V = 30 // the row's position, int32 (ALiBi)
	vZero   V = 31 // +0 (scoreBwd)
)

// Lanes of vK.
const (
	kCap    = 0 // cap (log2 units)
	kInvCap = 1 // 1/cap
	kM2L2E  = 2 // TanhM2L2E
	kC      = 3 // scoreBwd's c
)

// tanhCoef returns the register and lane of TanhPoly[i].
func tanhCoef(i int) (V, int) { return vTanhLo + V(i/4), i % 4 }

// scoreSet is the registers of one score vector in flight: the scores x
// and six scratch vectors. Two sets alternate, so that consecutive vectors
// share no register.
type scoreSet struct {
	x V
	s [6]V
}

var scoreSets = [2]scoreSet{
	{0, [6]V{1, 2, 3, 4, 5, 6}},
	{8, [6]V{9, 10, 11, 12, 13, 14}},
}

// loadTanhConsts fills V16-V23 (exp2's constants), vTanhLo, vTanhHi,
// vThr, vSign and lane kM2L2E of vK (tmp: a free general register number).
func (f *Func) loadTanhConsts(tmp int) {
	f.Comment("tanh: V16-V23 exp2's constants, V24-V25 the polynomial, V26[2] = -2 log2(e), V27 = 0.55, V28 = the sign bit.")
	f.loadExp2Consts(tmp)
	for i, c := range TanhPoly {
		r, l := tanhCoef(i)
		f.I("MOVW $0x%08x, R%d", f32bits(c), tmp)
		f.I("VMOV R%d, V%d.S[%d]", tmp, r, l)
	}
	f.I("MOVW $0x%08x, R%d", f32bits(TanhM2L2E), tmp)
	f.I("VMOV R%d, V%d.S[%d]", tmp, vK, kM2L2E)
	f.dupConst(vThr, f32bits(TanhSmall), tmp)
	f.dupConst(vSign, 0x80000000, tmp)
}

// tanh computes tanh of every lane of x (kept) into a scratch register of
// s, which it returns: tanh32's function (runtime/cpu/score.go),
// branch-free. With a = |x|, the small half a + a (z P(z)) (z = a^2, P by
// Horner with FMLA, its coefficients by element) and the large half (1 -
// e)/(1 + e), e = 2^(TanhM2L2E a) by exp2Clamped (at least 2^-125, which
// leaves 1 - e and 1 + e at 1, so +-Inf gives +-1), divided by FDIV, are
// both computed and selected by a < TanhSmall (BIT); BIT then inserts the
// sign bit of x. NaN stays NaN (FMAX, FRINTN and the arithmetic keep it;
// the compare is false for NaN, which selects the large half). Needs
// loadTanhConsts' registers.
func (f *Func) tanh(x V, s [6]V) V {
	a, z, p, q, t2, t3 := s[0], s[1], s[2], s[3], s[4], s[5]
	f.fabs(a, x)
	f.fmul(z, a, a)
	r, l := tanhCoef(6)
	f.dupE(p, r, l)
	r, l = tanhCoef(7)
	f.fmlaE(p, z, r, l) // T15 + T17 z
	for i := 5; i >= 0; i-- {
		r, l := tanhCoef(i)
		f.dupE(q, r, l)
		f.fmla(q, p, z)
		p, q = q, p
	}
	f.fmul(z, z, p) // z P(z)
	y, m := q, p
	f.fmulE(y, a, vK, kM2L2E)
	f.fcmgt(m, vThr, a) // a < TanhSmall
	f.fmla(a, a, z)     // the small half
	e := f.exp2Clamped(y, z, t2, t3)
	f.fsub(z, vOne, e)
	f.fadd(e, vOne, e)
	f.fdiv(z, z, e)    // the large half
	f.bit(z, a, m)     // the small one where a < TanhSmall
	f.bit(z, x, vSign) // the sign of x
	return z
}

// scoreKind is one combination of the score stage's flags.
type scoreKind struct{ cap, alibi, abs bool }

func (k scoreKind) String() string {
	if k == (scoreKind{}) {
		return "none"
	}
	s := ""
	if k.cap {
		s += "cap"
	}
	if k.alibi {
		s += "alibi"
	}
	if k.abs {
		s += "abs"
	}
	return s
}

// scoreVec applies the stage k to the scores in st.x: with k.cap x =
// cap*tanh(x*invCap) (vK), then with k.alibi x += slope*float32(cols -
// rows) (x -= slope*|cols - rows| with k.abs; vSlope and vRows, the
// distance exact in int32, one FMLA or FMLS), where loadCols loads the
// lanes' key positions into the register it is given. With k.cap and
// deriv, the soft-cap's factor max(1 - t^2, +0) (0 for NaN: FMAXNM) is
// handed to deriv in a register.
func (f *Func) scoreVec(k scoreKind, st scoreSet, loadCols func(V), deriv func(V)) {
	x, s := st.x, st.s
	if k.cap {
		f.fmulE(x, x, vK, kInvCap)
		t := f.tanh(x, s)
		if deriv != nil {
			d := s[0]
			f.mov(d, vOne)
			f.fmls(d, t, t)
			f.fmaxnm(d, d, vZero)
			deriv(d)
		}
		f.fmulE(x, t, vK, kCap)
	}
	if !k.alibi {
		return
	}
	c := s[0]
	loadCols(c)
	f.subi(c, c, vRows) // cols - rows, exact
	if k.abs {
		f.abs(c, c)
	}
	f.scvtf(c, c)
	if k.abs {
		f.fmls(x, c, vSlope)
	} else {
		f.fmla(x, c, vSlope)
	}
}

// scoreRow emits the stage k over one row of TK scores at R(sp), four
// vectors an iteration (the two scoreSets in turn), TK/16 iterations
// counted by R(cnt): each vector loaded, times c first (mulC: vK's lane
// kC), rewritten and stored back; the key positions read from R(cp)
// (k.alibi) and, with k.cap and dp >= 0, the soft-cap's factor stored to
// R(dp). R(sp), R(cp) and R(dp) advance by a row.
func (f *Func) scoreRow(k scoreKind, label string, sp, cp, dp, cnt int, mulC bool) {
	deriv := dp >= 0 && k.cap
	f.I("MOVD $%d, R%d", TK/16, cnt)
	f.Label(label)
	for v := 0; v < 4; v++ {
		st := scoreSets[v%2]
		f.I("FMOVQ %d(R%d), F%d", 16*v, sp, st.x)
		if mulC {
			f.fmulE(st.x, st.x, vK, kC)
		}
		loadCols := func(c V) { f.I("FMOVQ %d(R%d), F%d", 16*v, cp, c) }
		var store func(V)
		if deriv {
			store = func(d V) { f.I("FMOVQ F%d, %d(R%d)", d, 16*v, dp) }
		}
		f.scoreVec(k, st, loadCols, store)
		f.I("FMOVQ F%d, %d(R%d)", st.x, 16*v, sp)
	}
	f.I("ADD $64, R%d", sp)
	if k.alibi {
		f.I("ADD $64, R%d", cp)
	}
	if deriv {
		f.I("ADD $64, R%d", dp)
	}
	f.I("SUBS $1, R%d", cnt)
	f.I("BNE %s", label)
}

// rowParams emits the loads of a row's slope and position (at R(rp) plus
// their offsets) into every lane of vSlope and vRows.
func (f *Func) rowParams(rp int) {
	f.I("FMOVS %d(R%d), F%d", ScoreSlopeOff, rp, vSlope)
	f.dupE(vSlope, vSlope, 0)
	f.I("FMOVS %d(R%d), F%d", ScoreRowsOff, rp, vRows)
	f.dupE(vRows, vRows, 0)
}

// scoreDispatch emits the one branch on the flags in R(flags): body(kind,
// label) for each kind of pass, the bodies one after the other, each
// followed by a branch to pfx_done (flags without ScoreCap or ScoreAlibi
// go there at once; ScoreAbs counts only with ScoreAlibi; other bits are
// ignored). With none, flags that ask for no stage run body(scoreKind{})
// instead.
func (f *Func) scoreDispatch(flags int, pfx string, none bool, body func(k scoreKind, label string)) {
	done := pfx + "_done"
	ref := func(k scoreKind) string { return pfx + "_" + k.String() }
	skip := done
	if none {
		skip = ref(scoreKind{})
	}
	run := func(k scoreKind, last bool) {
		f.Label(ref(k))
		body(k, ref(k))
		if !last {
			f.I("B %s", done)
		}
	}
	f.I("TBNZ $1, R%d, %s_alibiany", flags, pfx)
	f.I("TBZ $0, R%d, %s", flags, skip)
	run(scoreKind{cap: true}, false)
	if none {
		run(scoreKind{}, false)
	}
	f.Label(pfx + "_alibiany")
	f.I("TBNZ $0, R%d, %s_capalibiany", flags, pfx)
	f.I("TBNZ $2, R%d, %s", flags, ref(scoreKind{alibi: true, abs: true}))
	run(scoreKind{alibi: true}, false)
	run(scoreKind{alibi: true, abs: true}, false)
	f.Label(pfx + "_capalibiany")
	f.I("TBNZ $2, R%d, %s", flags, ref(scoreKind{cap: true, alibi: true, abs: true}))
	run(scoreKind{cap: true, alibi: true}, false)
	run(scoreKind{cap: true, alibi: true, abs: true}, true)
	f.Label(done)
}

// tileScorePass emits the score stage of a tile kernel over the TQ x TK
// scores at s (R3), between phases 1 and 2, after one branch on the
// flags: row by row (the row's slope and position broadcast once), in the
// masked copy only the rows whose mask word (R7) is not zero. Masked
// scores of a kept row go through it too (their values do not matter:
// phase 2 sets them to -Inf). Registers: R8 the row of s, R9 the rows
// left, R10 the mask words, R11 sc, R12 sc plus 4 times the row, R13 the
// key positions, R14 the row's word, R15 the flags, R16 the vector count,
// R17 scratch; V0-V14 the score vectors, V16-V31 the stage's.
func (f *Func) tileScorePass(masked bool) {
	p := pfx(masked) + "sc"
	f.I("MOVD %s, R11", f.Arg(scoreParam.Name))
	f.I("MOVWU %d(R11), R15", ScoreFlagsOff)
	f.scoreDispatch(15, p, false, func(k scoreKind, l string) {
		if k.cap {
			f.I("FMOVD %d(R11), F%d", ScoreCapOff, vK) // cap, invCap
			f.loadTanhConsts(17)
		}
		f.I("MOVD R3, R8")
		f.I("MOVD R11, R12")
		if masked {
			f.I("MOVD R7, R10")
		}
		f.I("MOVD $%d, R9", TQ)
		f.Label(l + "_row")
		if masked {
			f.I("MOVD.P 8(R10), R14")
			f.I("CBZ R14, %s_skip", l)
		}
		if k.alibi {
			f.rowParams(12)
			f.I("ADD $%d, R11, R13", ScoreColsOff)
		}
		f.scoreRow(k, l+"_v", 8, 13, -1, 16, false)
		f.Label(l + "_next")
		if k.alibi {
			f.I("ADD $4, R12")
		}
		f.I("SUBS $1, R9")
		f.I("BNE %s_row", l)
		if masked {
			f.I("B %s_end", l)
			f.Label(l + "_skip")
			f.I("ADD $%d, R8", 4*TK)
			f.I("B %s_next", l)
			f.Label(l + "_end")
		}
	})
}

// decodeScorePass emits the score stage of one row of a decode kernel
// over its TK scores in the frame buffer, after one branch on the flags
// (R7 sc, R20 sc plus 4 times the row). Registers as tileScorePass: R12
// the buffer, R13 the key positions, R14 the count, R15 the flags, R16
// scratch.
func (f *Func) decodeScorePass() {
	f.I("MOVWU %d(R7), R15", ScoreFlagsOff)
	f.scoreDispatch(15, "ds", false, func(k scoreKind, l string) {
		if k.cap {
			f.I("FMOVD %d(R7), F%d", ScoreCapOff, vK)
			f.loadTanhConsts(16)
		}
		if k.alibi {
			f.rowParams(20)
			f.I("ADD $%d, R7, R13", ScoreColsOff)
		}
		f.I("MOVD $buf-%d(SP), R12", 4*TK)
		f.scoreRow(k, l+"_v", 12, 13, -1, 14, false)
	})
}

var tanhParams = []Param{{"dst", "*float32"}, {"src", "*float32"}, {"n", "int"}}

// EmitTanh returns tanhNEON(dst, src *float32, n int): dst[i] =
// tanh(src[i]) for i < n (a multiple of 4), the score stage's vector tanh
// on its own, for the tests that measure its error. R0 dst, R1 src, R2
// the vector count.
func EmitTanh() *Func {
	f := NewFunc(TanhName, tanhParams, nil,
		TanhName+" writes dst[i] = tanh(src[i]) for i < n (a multiple of 4), the score",
		"stage's tanh (tests measure its error), written for NEON.")
	for i, p := range tanhParams {
		f.I("MOVD %s, R%d", f.Arg(p.Name), i)
	}
	f.I("LSR $2, R2, R2")
	f.I("CBZ R2, done")
	f.loadTanhConsts(16)
	f.Label("loop")
	st := scoreSets[0]
	f.I("FMOVQ.P 16(R1), F%d", st.x)
	t := f.tanh(st.x, st.s)
	f.I("FMOVQ.P F%d, 16(R0)", t)
	f.I("SUBS $1, R2")
	f.I("BNE loop")
	f.Label("done")
	f.I("RET")
	return f
}

var scoreBwdParams = []Param{{"s", "*float32"}, {"dt", "*float32"}, {"rows", "int"}, {"c", "float32"}, scoreParam}

// EmitScoreBwd returns the tiled backward's score kernel,
// scoreBwdNEON(s, dt, rows, c, sc), emit/avo.EmitScoreBwd's function: the
// first rows rows of TK scores at s (S = Q K^T in natural units, rows TK
// floats apart) become, in place, the score stage of c*S (log2 units), and
// with ScoreCap dt (laid out like s) gets the factor 1 - tanh^2 of each
// (in [0, 1], 0 for NaN); without ScoreCap dt is not written. Flags that
// ask for no stage still scale by c. Row r reads slope[r] and rows[r],
// column j cols[j].
//
// Registers: R0 s and R1 dt (advancing), R2 rows, R4 sc, R9 the rows
// left, R12 sc plus 4 times the row, R13 the key positions, R14 the
// vector count, R15 the flags, R16 scratch; c in lane kC of vK.
func EmitScoreBwd() *Func {
	f := NewFunc(ScoreBwdName, scoreBwdParams, nil,
		ScoreBwdName+" applies the score stage of sc to c times the first rows rows of",
		"TK scores at s, in place, and with the cap writes 1 - tanh^2 of each to dt",
		"(see emit/neon.EmitScoreBwd).")
	f.I("MOVD %s, R0", f.Arg("s"))
	f.I("MOVD %s, R1", f.Arg("dt"))
	f.I("MOVD %s, R2", f.Arg("rows"))
	f.I("MOVD %s, R4", f.Arg("sc"))
	f.I("FMOVD %d(R4), F%d", ScoreCapOff, vK) // cap, invCap
	f.I("MOVWU %s, R16", f.Arg("c"))
	f.I("VMOV R16, V%d.S[%d]", vK, kC)
	f.I("CBZ R2, sb_done")
	f.I("MOVWU %d(R4), R15", ScoreFlagsOff)
	f.scoreDispatch(15, "sb", true, func(k scoreKind, l string) {
		if k.cap {
			f.loadTanhConsts(16)
			f.zero(vZero)
		}
		f.I("MOVD R4, R12")
		f.I("MOVD R2, R9")
		f.Label(l + "_row")
		if k.alibi {
			f.rowParams(12)
			f.I("ADD $%d, R4, R13", ScoreColsOff)
		}
		f.scoreRow(k, l+"_v", 0, 13, 1, 14, true)
		if k.alibi {
			f.I("ADD $4, R12")
		}
		f.I("SUBS $1, R9")
		f.I("BNE %s_row", l)
	})
	f.I("RET")
	return f
}
