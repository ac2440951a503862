package avo

import (
	"fmt"
	"go/token"
	"go/types"
	"math"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/gotypes"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The score stage (runtime/cpu/score.go): soft-capping and ALiBi rewrite
// the scores, in log2 units, between S = Q K^T and the softmax. The
// kernels read its parameters from a scoreTile of package runtime/cpu,
// whose layout is these offsets (runtime/cpu's tests compare them with
// the struct, and the tanh constants below with tanh32's).
const (
	ScoreCapOff    = 0                          // float32 cap
	ScoreInvCapOff = 4                          // float32 1/cap
	ScoreFlagsOff  = 8                          // uint32 flags
	ScoreSlopeOff  = 16                         // [TQ]float32 slope of each row
	ScoreRowsOff   = ScoreSlopeOff + 4*TQ       // [TQ]int32 position of each row
	ScoreColsOff   = ScoreRowsOff + 4*TQ        // [TK]int32 position of each key column
	ScoreSize      = ScoreColsOff + 4*TK + 4*16 // 16 int32 of padding: any cols[c] starts a whole vector
)

// Bits of the flags.
const (
	ScoreCap   = 1 << 0 // s = cap * tanh(s * invCap)
	ScoreAlibi = 1 << 1 // s = s + slope[r]*(cols[c] - rows[r])
	ScoreAbs   = 1 << 2 // with ScoreAlibi: s = s - slope[r]*|cols[c] - rows[r]|
)

// The tanh of the score stage, tanh32's algorithm (runtime/cpu/score.go):
// for |x| < TanhSmall the odd Taylor polynomial |x| + |x| z P(z), z = x^2,
// P(z) = TanhPoly[0] + TanhPoly[1] z + ... + TanhPoly[7] z^7; above, (1 -
// e)/(1 + e) with e = 2^(TanhM2L2E |x|); the sign of x ORed in.
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

// laneDivs are the row counts r > 1 of the decode kernels, whose lane
// index vectors lane/r the constant table holds (slot kLaneDiv).
var laneDivs = [3]int{2, 4, 8}

// laneDiv is the constant slot of the lane/r index vector (two slots, 16
// int32 lanes; AVX2 reads the first).
func (c ConstTable) laneDiv(r int) op.Mem {
	for i, x := range laneDivs {
		if x == r {
			return c.slot(kLaneDiv + 2*i)
		}
	}
	panic(fmt.Sprintf("BUG: no lane index vector for %d rows", r))
}

// tanhT is the constant slot of the coefficient of x^i (i = 3, 5, ..., 17).
func (c ConstTable) tanhT(i int) op.Mem { return c.slot(kTanhT + (i-3)/2) }

// Names of the score-stage kernels.
func TileScoreName(isa ISA, d Dims) string { return fmt.Sprintf("tileScore%s%s", isa, d) }
func DecodeScoreName(isa ISA, e Elem, d Dims, r int) string {
	return fmt.Sprintf("decodeScore%s%s%sR%d", isa, e, d, r)
}
func TanhName(isa ISA) string { return "tanh" + isa.String() }

// Go signatures of the score kernels: the tile and decode ABIs plus the
// scoreTile.
const (
	TileScoreSignature   = "func(q, kt, v, s, o, m, l *float32, mask *uint64, sc *scoreTile)"
	DecodeScoreSignature = "func(q *float32, k, v *byte, off *int, o, m, l *float32, sc *scoreTile)"
)

// cpuPkg is a stand-in for package runtime/cpu holding the one type the
// score kernels' signatures name (opaque here: the kernels address its
// fields by the offsets above).
var cpuPkg = func() *types.Package {
	pkg := types.NewPackage("github.com/attngen/attngen/runtime/cpu", "cpu")
	obj := types.NewTypeName(token.NoPos, pkg, "scoreTile", nil)
	types.NewNamed(obj, types.NewStruct(nil, nil), nil)
	pkg.Scope().Insert(obj)
	return pkg
}()

// scoreSignature sets the active function's signature to expr, which may
// name scoreTile.
func scoreSignature(ctx *build.Context, expr string) {
	s, err := gotypes.ParseSignatureInPackage(cpuPkg, expr)
	if err != nil {
		panic(fmt.Sprintf("BUG: signature %s: %v", expr, err))
	}
	ctx.Signature(s)
}

// EmitScoreKernels adds the score stage's kernels of every ISA to ctx: the
// tanh test kernels (EmitTanh), the tile kernels with the score stage
// (tileScoreAVX512D64, ...) and the decode kernels with it
// (decodeScoreAVX2BF16D128R4, ...), each the plain kernel with the score
// pass between the scores and the softmax, and the tiled backward's
// score kernels (EmitScoreBwd).
func EmitScoreKernels(ctx *build.Context, c ConstTable) {
	for _, isa := range ISAs {
		EmitTanh(ctx, c, isa)
	}
	for _, isa := range ISAs {
		qk, pv := isa.blocks()
		for _, d := range KernelDims {
			emitTile(ctx, c, isa, d, TileScoreName(isa, d), qk, pv, true)
		}
	}
	for _, isa := range ISAs {
		for _, e := range Elems {
			for _, d := range KernelDims {
				for _, r := range DecodeRows {
					emitDecode(ctx, c, isa, e, d, r, true)
				}
			}
		}
	}
	for _, isa := range ISAs {
		EmitScoreBwd(ctx, c, isa)
	}
}

// EmitTanh adds tanh<ISA>(dst, src *float32, n int): dst[i] = tanh(src[i])
// for i < n (a multiple of the vector width), the score stage's vector
// tanh on its own, for the tests that measure its error.
func EmitTanh(ctx *build.Context, c ConstTable, isa ISA) {
	g := &tileGen{ctx: ctx, isa: isa, w: isa.lanes(), c: c}
	name := TanhName(isa)
	ctx.Function(name)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(dst, src *float32, n int)")
	ctx.Doc(
		fmt.Sprintf("%s writes dst[i] = tanh(src[i]) for i < n (a multiple of %d), the score", name, g.w),
		fmt.Sprintf("stage's tanh (tests measure its error). It needs %s.", isa.requires()),
	)
	dst, src, n := g.param("dst"), g.param("src"), g.param("n")
	ctx.SHRQ(op.U8(log2(g.w)), n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("loop")
	x := g.vec()
	ctx.VMOVUPS(mem(src, 0), x)
	g.tanh(x)
	ctx.VMOVUPS(x, mem(dst, 0))
	ctx.ADDQ(op.U8(uint8(4*g.w)), src)
	ctx.ADDQ(op.U8(uint8(4*g.w)), dst)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("loop"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()
}

// tanh replaces every lane x of v by tanh(x), tanh32's function
// (runtime/cpu/score.go), branch-free: with a = |x|, the small half a + a
// (z P(z)) (z = a^2, Horner with FMA) and the large half (1 - e)/(1 + e),
// e = 2^(-2 log2(e) a), are both computed and blended by a < TanhSmall,
// and the sign of x is ORed in (as the bits x XOR a). e is the tile
// kernels' exp2 with its argument clamped to at least -125 (e is then at
// least 2^-125, which leaves 1 - e and 1 + e at 1, so no flush is needed);
// NaN stays NaN through both halves (VMAXPS returns its second source for
// a NaN) and +-Inf gives +-1. Both halves of the large arguments stay
// normal on the way; only |x| below 2^-62 (other than 0) makes z P(z)
// subnormal.
func (g *tileGen) tanh(x reg.VecVirtual) {
	ctx, c := g.ctx, g.c
	avx512 := g.isa == AVX512
	a, z, p := g.vec(), g.vec(), g.vec()
	if avx512 {
		ctx.VPANDD_BCST(c.slot(kAbs), x, a)
	} else {
		ctx.VANDPS(c.slot(kAbs), x, a)
	}
	ctx.VMULPS(a, a, z)
	// Small half: p = P(z), then a + a*(z*p).
	g.bcast(c.tanhT(17), p)
	for i := 15; i >= 3; i -= 2 {
		g.fma213(c.tanhT(i), z, p)
	}
	ctx.VMULPS(z, p, p)
	ctx.VFMADD213PS(a, a, p)

	// Which lanes take the small half (a < TanhSmall, false for NaN).
	// When every lane does (the usual case: attention scores are far
	// below the cap), the large half is skipped: the blend would take
	// none of it, so the result is the same bits either way.
	g.labels++
	small := fmt.Sprintf("tanh_small%d", g.labels)
	var k reg.Register
	var m reg.VecVirtual
	if avx512 {
		k = ctx.K()
		ctx.VCMPPS_BCST(op.U8(0x11), c.slot(kTanhSmall), a, k) // a < TanhSmall (LT_OQ)
		ctx.KORTESTW(k, k)
		ctx.JCS(op.LabelRef(small)) // every lane small
	} else {
		m = g.vec()
		ctx.VCMPPS(op.U8(0x11), c.slot(kTanhSmall), a, m) // a < TanhSmall (LT_OQ)
		bitsSmall := ctx.GP32()
		ctx.VMOVMSKPS(m, bitsSmall)
		ctx.CMPL(bitsSmall, op.U8(0xff))
		ctx.JE(op.LabelRef(small)) // every lane small
	}

	// Large half: e = 2^y, y = max(-125, TanhM2L2E a) = n + f.
	y, lo, n := g.vec(), g.vec(), g.vec()
	if avx512 {
		ctx.VMULPS_BCST(c.slot(kTanhM2L2E), a, y)
	} else {
		ctx.VMULPS(c.slot(kTanhM2L2E), a, y)
	}
	g.bcast(c.slot(kFlush), lo)
	ctx.VMAXPS(y, lo, y) // NaN stays NaN
	e := g.vec()
	if avx512 {
		ctx.VRNDSCALEPS(op.U8(0), y, n)
		ctx.VSUBPS(n, y, y)
	} else {
		f := g.vec()
		ctx.VCVTPS2DQ(y, n)
		ctx.VCVTDQ2PS(n, f)
		ctx.VSUBPS(f, y, y)
	}
	g.bcast(c.coeff(6), e)
	for i := 5; i >= 1; i-- {
		g.fma213(c.coeff(i), y, e)
	}
	g.fma213(c.slot(kOne), y, e)
	if avx512 {
		ctx.VSCALEFPS(n, e, e)
	} else {
		ctx.VPSLLD(op.U8(23), n, n)
		ctx.VPADDD(n, e, e)
	}
	one, num := g.vec(), g.vec()
	g.bcast(c.slot(kOne), one)
	ctx.VSUBPS(e, one, num) // 1 - e
	ctx.VADDPS(one, e, e)   // 1 + e
	// VRCP14PS and one correction step (q0 = num r, q0 + r (num - q0 den))
	// measured no faster than VDIVPS here (AMD EPYC, AVX-512), and AVX2's
	// VRCPPS (12 bits) left 2.63 ulp.
	ctx.VDIVPS(e, num, num)

	// Blend and sign.
	if avx512 {
		ctx.VBLENDMPS(p, num, k, p) // p = k ? small : large
	} else {
		ctx.VBLENDVPS(m, p, num, p) // p = m ? small : large
	}
	ctx.Label(small)
	if avx512 {
		ctx.VPTERNLOGD(op.U8(0xde), a, p, x) // x = p | (x ^ a)
		return
	}
	ctx.VXORPS(a, x, x) // the sign bit of x
	ctx.VORPS(p, x, x)
}

// bcast loads the constant slot k into every lane of x.
func (g *tileGen) bcast(k op.Mem, x reg.VecVirtual) {
	if g.isa == AVX512 {
		g.ctx.VBROADCASTSS(k, x)
	} else {
		g.ctx.VMOVUPS(k, x)
	}
}

// fma213 sets x = x*y + k, k a constant slot.
func (g *tileGen) fma213(k op.Mem, y, x reg.VecVirtual) {
	if g.isa == AVX512 {
		g.ctx.VFMADD213PS_BCST(k, y, x)
	} else {
		g.ctx.VFMADD213PS(k, y, x)
	}
}

// scoreKind is one combination of the score stage's flags.
type scoreKind struct{ cap, alibi, abs bool }

func (k scoreKind) String() string {
	s := ""
	if k == (scoreKind{}) {
		return "none"
	}
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

// scoreRegs are the vectors the score stage reads besides the scores.
type scoreRegs struct {
	cap, invCap reg.VecVirtual // cap and 1/cap in every lane (kind.cap)
	slope, rows reg.VecVirtual // each lane's row slope and position (kind.alibi)
}

// scoreVec applies the stages of k to the scores x; cols holds each lane's
// key position (kind.alibi; overwritten).
func (g *tileGen) scoreVec(k scoreKind, x reg.VecVirtual, r scoreRegs, cols reg.VecVirtual) {
	g.scoreVecDeriv(k, x, r, cols, nil)
}

// scoreVecDeriv is scoreVec that also stores, with k.cap, the soft-cap's
// derivative factor 1 - tanh^2 (at least 0: NaN gives 0) to *deriv.
func (g *tileGen) scoreVecDeriv(k scoreKind, x reg.VecVirtual, r scoreRegs, cols reg.VecVirtual, deriv *op.Mem) {
	ctx := g.ctx
	if k.cap {
		ctx.VMULPS(r.invCap, x, x)
		g.tanh(x)
		if deriv != nil {
			t2, z := g.vec(), g.vec()
			g.bcast(g.c.slot(kOne), t2)
			ctx.VFNMADD231PS(x, x, t2) // 1 - t^2
			g.zero(z)
			ctx.VMAXPS(z, t2, t2) // max(1 - t^2, 0), 0 for NaN
			ctx.VMOVUPS(t2, *deriv)
		}
		ctx.VMULPS(r.cap, x, x)
	}
	if !k.alibi {
		return
	}
	ctx.VPSUBD(r.rows, cols, cols) // cols - rows, exact (int32)
	if k.abs {
		ctx.VPABSD(cols, cols)
	}
	ctx.VCVTDQ2PS(cols, cols)
	if k.abs {
		ctx.VFNMADD231PS(cols, r.slope, x) // x -= slope*|d|
	} else {
		ctx.VFMADD231PS(cols, r.slope, x) // x += slope*d
	}
}

// scoreDispatch emits the one branch on the flags of the scoreTile at sc:
// body(kind, label) for each kind of pass, the bodies one after the other,
// each followed by a jump to pfx_done (flags without ScoreCap or
// ScoreAlibi go there at once; ScoreAbs counts only with ScoreAlibi).
func (g *tileGen) scoreDispatch(sc reg.Register, pfx string, body func(k scoreKind, label string)) {
	g.scoreDispatchNone(sc, pfx, false, body)
}

// scoreDispatchNone is scoreDispatch; with none, flags that ask for no
// stage run body(scoreKind{}, ...) instead of going to pfx_done.
func (g *tileGen) scoreDispatchNone(sc reg.Register, pfx string, none bool, body func(k scoreKind, label string)) {
	ctx := g.ctx
	f := ctx.GP32()
	ctx.MOVL(mem(sc, ScoreFlagsOff), f)
	done := op.LabelRef(pfx + "_done")
	skip := done
	if none {
		skip = op.LabelRef(pfx + "_none")
	}
	run := func(k scoreKind, last bool) {
		l := pfx + "_" + k.String()
		ctx.Label(l)
		body(k, l+"_loop")
		if !last {
			ctx.JMP(done)
		}
	}
	ref := func(k scoreKind) op.LabelRef { return op.LabelRef(pfx + "_" + k.String()) }
	ctx.TESTL(op.U32(ScoreAlibi), f)
	ctx.JNZ(op.LabelRef(pfx + "_alibiany"))
	ctx.TESTL(op.U32(ScoreCap), f)
	ctx.JZ(skip)
	run(scoreKind{cap: true}, false)
	if none {
		run(scoreKind{}, false)
	}
	ctx.Label(pfx + "_alibiany")
	ctx.TESTL(op.U32(ScoreCap), f)
	ctx.JNZ(op.LabelRef(pfx + "_capalibiany"))
	ctx.TESTL(op.U32(ScoreAbs), f)
	ctx.JNZ(ref(scoreKind{alibi: true, abs: true}))
	run(scoreKind{alibi: true}, false)
	run(scoreKind{alibi: true, abs: true}, false)
	ctx.Label(pfx + "_capalibiany")
	ctx.TESTL(op.U32(ScoreAbs), f)
	ctx.JNZ(ref(scoreKind{cap: true, alibi: true, abs: true}))
	run(scoreKind{cap: true, alibi: true}, false)
	run(scoreKind{cap: true, alibi: true, abs: true}, true)
	ctx.Label(pfx + "_done")
}

// loadCap broadcasts the scoreTile's cap and 1/cap.
func (g *tileGen) loadCap(sc reg.Register, r *scoreRegs) {
	r.cap, r.invCap = g.vec(), g.vec()
	g.ctx.VBROADCASTSS(mem(sc, ScoreCapOff), r.cap)
	g.ctx.VBROADCASTSS(mem(sc, ScoreInvCapOff), r.invCap)
}

// loadInts loads a vector of int32 from m.
func (g *tileGen) loadInts(m op.Mem, x reg.VecVirtual) {
	if g.isa == AVX512 {
		g.ctx.VMOVDQU32(m, x)
	} else {
		g.ctx.VMOVDQU(m, x)
	}
}

// scorePass emits the score stage of a tile kernel over the TQ x TK
// scores in s, row by row (rows[r] and slope[r] broadcast once a row),
// after one branch on the flags. mask is the masked copy's mask (nil: the
// full copy); there rows that keep nothing are skipped, and on AVX-512
// the masked lanes are loaded as 0 (zeroing masking), so that whatever s
// held there (the scores skipped in phase 1 keep what the last call left)
// goes through no arithmetic; on AVX2 it does, which is harmless (masked
// scores are never read unmasked) unless it is tiny enough to make a
// subnormal (a microcode assist on Intel cores, no wrong result).
func (g *tileGen) scorePass(mask reg.Register, pfx string) {
	sc := g.param("sc")
	g.scoreDispatch(sc, pfx, func(k scoreKind, label string) {
		ctx := g.ctx
		nv, vb := TK/g.w, 4*g.w
		var r scoreRegs
		if k.cap {
			g.loadCap(sc, &r)
		}
		sp, n := ctx.GP64(), ctx.GP64()
		ctx.MOVQ(g.param("s"), sp)
		ctx.MOVQ(op.U32(TQ), n)
		var rp reg.Register // the row's slope and position, less their offsets
		if k.alibi {
			rp = ctx.GP64()
			ctx.MOVQ(sc, rp)
		}
		var mp reg.Register
		if mask != nil {
			mp = ctx.GP64()
			ctx.MOVQ(mask, mp)
		}
		ctx.Label(label)
		if mask != nil {
			ctx.CMPQ(mem(mp, 0), op.U8(0))
			ctx.JE(op.LabelRef(label + "_next"))
		}
		if k.alibi {
			r.slope, r.rows = g.vec(), g.vec()
			ctx.VBROADCASTSS(mem(rp, ScoreSlopeOff), r.slope)
			ctx.VPBROADCASTD(mem(rp, ScoreRowsOff), r.rows)
		}
		for j := 0; j < nv; j++ {
			x := g.vec()
			if mask != nil && g.isa == AVX512 {
				km := ctx.K()
				ctx.KMOVW(mem(mp, 2*j), km)
				ctx.VMOVUPS_Z(mem(sp, vb*j), km, x)
			} else {
				ctx.VMOVUPS(mem(sp, vb*j), x)
			}
			var cols reg.VecVirtual
			if k.alibi {
				cols = g.vec()
				g.loadInts(mem(sc, ScoreColsOff+vb*j), cols)
			}
			g.scoreVec(k, x, r, cols)
			ctx.VMOVUPS(x, mem(sp, vb*j))
		}
		if mask != nil {
			ctx.Label(label + "_next")
			ctx.ADDQ(op.U8(8), mp)
		}
		ctx.ADDQ(op.U32(4*TK), sp)
		if k.alibi {
			ctx.ADDQ(op.U8(4), rp)
		}
		ctx.DECQ(n)
		ctx.JNZ(op.LabelRef(label))
	})
}

// decodeScorePass emits the score stage of a decode kernel of r rows over
// its nv score vectors in sbuf (lane j*r + i of vector v: key v*w/r + j,
// row i): rows[i] and slope[i] are spread to the lanes of row i once
// (rowVecAt), and each vector's key positions are w consecutive cols from
// its first key, spread to the lanes by VPERMD with the index vector
// lane/r (r > 1; the last vector reads up to 16 int32 past TK, the
// scoreTile's padding).
func (g *tileGen) decodeScorePass(sbuf op.Mem, r, nv int) {
	sc := g.param("sc")
	keys := g.w / r
	g.scoreDispatch(sc, "score", func(k scoreKind, label string) {
		ctx := g.ctx
		var sr scoreRegs
		var idx reg.VecVirtual
		if k.cap {
			g.loadCap(sc, &sr)
		}
		if k.alibi {
			sr.slope = g.rowVecAt(mem(sc, ScoreSlopeOff), r)
			sr.rows = g.rowVecAt(mem(sc, ScoreRowsOff), r)
			if r > 1 {
				idx = g.vec()
				g.loadInts(g.c.laneDiv(r), idx)
			}
		}
		sp, n := ctx.GP64(), ctx.GP64()
		ctx.LEAQ(sbuf, sp)
		ctx.MOVQ(op.U32(uint32(nv)), n)
		var cp reg.Register // the vector's first key position
		if k.alibi {
			cp = ctx.GP64()
			ctx.LEAQ(mem(sc, ScoreColsOff), cp)
		}
		ctx.Label(label)
		x := g.vec()
		ctx.VMOVUPS(mem(sp, 0), x)
		var cols reg.VecVirtual
		if k.alibi {
			cols = g.vec()
			if r == 1 {
				g.loadInts(mem(cp, 0), cols)
			} else {
				ctx.VPERMD(mem(cp, 0), idx, cols) // cols[lane/r]
			}
		}
		g.scoreVec(k, x, sr, cols)
		ctx.VMOVUPS(x, mem(sp, 0))
		ctx.ADDQ(op.U8(uint8(4*g.w)), sp)
		if k.alibi {
			ctx.ADDQ(op.U8(uint8(4*keys)), cp)
		}
		ctx.DECQ(n)
		ctx.JNZ(op.LabelRef(label))
	})
}

// ScoreBwdName is the backward's score kernel of an ISA: scoreBwdAVX512,
// scoreBwdAVX2.
func ScoreBwdName(isa ISA) string { return "scoreBwd" + isa.String() }

// ScoreBwdSignature is the Go signature of the backward's score kernels.
const ScoreBwdSignature = "func(s, dt *float32, rows int, c float32, sc *scoreTile)"

// EmitScoreBwd adds the tiled backward's score kernel of an ISA:
// scoreBwd(s, dt, rows, c, sc) rewrites the first rows rows of TK scores
// at s (S = Q K^T in natural units, rows TK floats apart) in place into
// the score stage of c*S (c = scale*log2(e): log2 units, so that bwdProb
// then runs with c = 1), and with ScoreCap writes to dt (laid out like s)
// the factor 1 - tanh^2 of each score (in [0, 1], 0 for NaN), by which
// dS is multiplied on the way back through the cap (d(cap tanh(x/cap))/dx
// = 1 - tanh^2; ALiBi adds a constant). Without ScoreCap dt is not
// written. (The parameter is not named g: that is the goroutine register
// to the Go assembler.) Row r reads slope[r] and rows[r], column c cols[c]; masked
// pairs get whatever their S gives (bwdProb zeroes them).
func EmitScoreBwd(ctx *build.Context, c ConstTable, isa ISA) {
	g := &tileGen{ctx: ctx, isa: isa, w: isa.lanes(), c: c}
	name := ScoreBwdName(isa)
	ctx.Function(name)
	ctx.Pragma("noescape")
	scoreSignature(ctx, ScoreBwdSignature)
	ctx.Doc(
		name+" applies the score stage of sc to c times the first rows rows of",
		"TK scores at s, in place, and with the cap writes 1 - tanh^2 of each to dt",
		fmt.Sprintf("(see emit/avo.EmitScoreBwd). It needs %s.", isa.requires()),
	)
	sc := g.param("sc")
	cx := ctx.Load(ctx.Param("c"), ctx.XMM())
	nv, vb := TK/g.w, 4*g.w
	g.scoreDispatchNone(sc, "sb", true, func(k scoreKind, label string) {
		var r scoreRegs
		if k.cap {
			g.loadCap(sc, &r)
		}
		cv := g.vec()
		ctx.VBROADCASTSS(cx, cv)
		sp, n := g.param("s"), g.param("rows")
		var gp, rp reg.Register
		if k.cap {
			gp = g.param("dt")
		}
		if k.alibi {
			rp = ctx.GP64()
			ctx.MOVQ(sc, rp)
		}
		ctx.TESTQ(n, n)
		ctx.JZ(op.LabelRef("sb_done"))
		ctx.Label(label)
		if k.alibi {
			r.slope, r.rows = g.vec(), g.vec()
			ctx.VBROADCASTSS(mem(rp, ScoreSlopeOff), r.slope)
			ctx.VPBROADCASTD(mem(rp, ScoreRowsOff), r.rows)
		}
		for j := 0; j < nv; j++ {
			x := g.vec()
			ctx.VMULPS(mem(sp, vb*j), cv, x)
			var cols reg.VecVirtual
			if k.alibi {
				cols = g.vec()
				g.loadInts(mem(sc, ScoreColsOff+vb*j), cols)
			}
			var deriv *op.Mem
			if k.cap {
				m := mem(gp, vb*j)
				deriv = &m
			}
			g.scoreVecDeriv(k, x, r, cols, deriv)
			ctx.VMOVUPS(x, mem(sp, vb*j))
		}
		ctx.ADDQ(op.U32(4*TK), sp)
		if k.cap {
			ctx.ADDQ(op.U32(4*TK), gp)
		}
		if k.alibi {
			ctx.ADDQ(op.U8(4), rp)
		}
		ctx.DECQ(n)
		ctx.JNZ(op.LabelRef(label))
	})
	ctx.VZEROUPPER()
	ctx.RET()
}
