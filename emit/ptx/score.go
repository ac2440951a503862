package ptx

import (
	"math"

	"github.com/attngen/attngen/runtime/mask"
)

// The score stage: where every kernel turns the products q.k of a tile
// into probabilities, written once here for the sm_80 forward, the
// backward's dq and dk/dv kernels and the sm_90a forward. Each concept has
// one method, called by every kernel at the same point of its tile:
//
//   - scoreStage: the tile's scores are complete (the mma.sync or wgmma
//     accumulator fragment, s[n][x] the pair at scoreAt's positions)
//     and not yet masked, and hold the raw products q.k; the kernels
//     apply the softmax scale in the exponent (prob). A modification of
//     the score goes here, before the mask (so that masked scores stay
//     -Inf, or P 0): logit soft-capping (s <- c tanh(s/c) on the scaled
//     score) and ALiBi (s <- s - slope[h] (i - j), at.head's slope).
//   - scoreGrad: the backward's dS = P (dP - delta) of the tile is
//     formed, before masked pairs are zeroed; the derivative of the
//     score stage multiplies it here (soft-capping's 1 - tanh^2 of the
//     capped score; ALiBi's bias has none).
//   - prob: the one exponentiation of a score, P = 2^(s scale log2(e) +
//     bias), with bias -m (the forward's online softmax) or -lse log2(e)
//     (the backward's).
//   - rowTotal: a row's final sum of exponentials l is used with its
//     maximum m (the forwards' epilogue, finish: O/l and lse); a learned
//     sink logit per query head joins the denominator here (l +
//     2^(sink log2(e) - m), m log2-scaled as softmax keeps it), so the
//     lse the backward reads has it. Its gradient, dsink[h] = -sum_i
//     p_sink(i) delta_i, belongs in the dq kernel next to delta
//     (kernelDQ), where each row's delta and lse meet.
//
// The query head they work for is the toolkit's qhead.
//
// Plans without score modifications emit nothing at scoreStage,
// scoreGrad and rowTotal, so their kernels are byte for byte what they
// were before the stage had a place (TestKernelsGolden).

// scoreAt tells the score stage where the scores of a tile fragment lie:
// the query and key positions of element x of block n, emitted on demand
// (a stage that needs none costs nothing).
type scoreAt struct {
	query, key func(n, x int) Operand
}

// rowsAt is scoreAt for the row-major fragments of the forwards and the
// dq kernel: the thread's rows i0 (x < 2) and i1, and the key tile kt's
// key kt*tileK + 8n + 2t4 + x%2 at its position (plus kp).
func (g *kit) rowsAt(kt Operand) scoreAt {
	return scoreAt{
		query: func(n, x int) Operand {
			if x >= 2 {
				return g.i1
			}
			return g.i0
		},
		key: func(n, x int) Operand {
			return g.keyPos(g.f.Add(g.f.Add(g.f.MulC(kt, int64(g.tileK)), g.f.MulC(g.t4, 2)), I(int64(n*8+x%2))))
		},
	}
}

// Mutants of the score stage (Config.scoreMutant), for tests that must
// see them fail (mutNone in every kernel attngen writes): ALiBi with j - i, the soft-cap applied
// after masking (to -Inf scores as well), a sink counted twice in the
// denominator, and the sink gradient with the wrong sign.
const (
	mutNone = iota
	mutAlibiJI
	mutCapAfterMask
	mutSinkTwice
	mutDSinkSign
)

// scoreConsts emits the soft-cap's constants once per kernel, after the
// parameters: cap2 = cap log2(e) (an immediate when the plan fixes the
// cap, else from soft_cap) and capX = scale log2(e) / cap2, which takes a
// raw product q.k to x = s/cap of the scaled score s (a correctly rounded
// division, once).
func (g *kit) scoreConsts() {
	sc := g.p.Score
	if !sc.SoftCap {
		return
	}
	f := g.f
	f.Comment("soft-cap: cap2 = cap log2(e), capX = scale log2(e) / cap2")
	if sc.Cap != 0 {
		g.cap2 = Fimm(float32(sc.Cap * math.Log2E))
	} else {
		g.cap2 = f.F(OpMulF, g.par[parCap.Name], Fimm(float32(math.Log2E)))
	}
	g.capX = f.F(OpDivF, g.scl, g.cap2)
}

// scoreHead sets the query head h the score stage works for (kit.qhead)
// and loads its values: the ALiBi slope (in log2 units, negated for the
// symmetric distance, so that the bias is one fma) and, in kernels that
// read them, the learned sink logit (natural and log2 units). A kernel
// that computes several heads calls it once per head.
func (g *kit) scoreHead(h Operand) {
	g.qhead = h
	sc := g.p.Score
	f := g.f
	load := func(name string) Operand {
		a := g.wide(g.par[name], h, 4)
		v := f.NewReg(F32)
		f.Emit(Inst{Op: OpLd, T: F32, Space: "global", Dst: []Operand{R(v)}, Src: []Operand{Addr(a.Reg, 0)}})
		return R(v)
	}
	if sc.Alibi != mask.AlibiOff {
		f.Comment("ALiBi: this query head's slope, log2 units")
		k := float32(math.Log2E)
		if sc.Alibi == mask.AlibiSymmetric {
			k = -k
		}
		g.slope = f.F(OpMulF, load(parSlopes.Name), Fimm(k))
	}
	if sc.LearnedSinks && g.sinks {
		f.Comment("learned sink: this query head's logit, natural and log2 units")
		g.sinkN = load(parSinks.Name)
		g.sink2 = f.F(OpMulF, g.sinkN, Fimm(float32(math.Log2E)))
	}
}

// scaled reports whether scoreStage leaves the scores scaled (in log2
// units, scale log2(e) q.k as modified): then prob and softmax take them
// as they are; otherwise they hold q.k, and the scale is applied in the
// exponent.
func (g *kit) scaled() bool { return g.p.Score.Modifies() }

// scoreStage is the score stage of a complete, unmasked tile of scores s
// (see above): s holds q.k and leaves, with soft-capping or ALiBi, the
// modified scores in log2 units (cap2 tanh(q.k capX), then plus the slope
// times the distance j - i, an exact s32 difference of the positions
// scaled by the layout's stride, converted once). Without them it emits
// nothing.
func (g *kit) scoreStage(s [][4]Reg, at scoreAt) {
	sc := g.p.Score
	if !sc.Modifies() {
		return
	}
	f := g.f
	f.Comment("score stage: " + sc.String())
	if sc.SoftCap {
		g.tanhT = make([][4]Reg, len(s))
	}
	for n := range s {
		for x := range s[n] {
			v := R(s[n][x])
			if sc.SoftCap && g.cfg.scoreMutant != mutCapAfterMask {
				t := g.tanh(f.F(OpMulF, v, g.capX))
				g.tanhT[n][x] = t.Reg
				v = f.F(OpMulF, t, g.cap2)
			} else {
				v = f.F(OpMulF, v, g.scl)
			}
			if sc.Alibi != mask.AlibiOff {
				d := f.Sub(at.key(n, x), at.query(n, x))
				if g.cfg.scoreMutant == mutAlibiJI {
					d = f.Sub(at.query(n, x), at.key(n, x))
				}
				d = f.MulC(d, int64(g.st))
				if sc.Alibi == mask.AlibiSymmetric {
					d = f.Max(d, f.Sub(I(0), d))
				}
				df := f.NewReg(F32)
				f.Emit(Inst{Op: OpCvtF32I, T: S32, Dst: []Operand{R(df)}, Src: []Operand{f.reg(S32, d)}})
				v = f.F(OpFma, R(df), g.slope, v)
			}
			f.Set(F32, s[n][x], v)
		}
	}
}

// scoreMasked is the mutant that soft-caps the scores after the mask
// (tests only): masked -Inf scores become -cap.
func (g *kit) scoreMasked(s [][4]Reg) {
	if g.cfg.scoreMutant != mutCapAfterMask || !g.p.Score.SoftCap {
		return
	}
	f := g.f
	for n := range s {
		for x := range s[n] {
			// s holds scale log2(e) q.k here: x = s / cap2
			t := g.tanh(f.F(OpDivF, R(s[n][x]), g.cap2))
			g.tanhT[n][x] = t.Reg
			f.Set(F32, s[n][x], f.F(OpMulF, t, g.cap2))
		}
	}
}

// tanh emits tanh(x) in f32 with runtime/cpu's tanh32 algorithm: below
// |x| = 0.55 the odd Taylor polynomial to x^17, above (1 - e)/(1 + e)
// with e = 2^(-2 log2(e) |x|) (ex2.approx; the quotient from
// rcp.approx and one Newton step, not tanh.approx's 2^-11), the sign of
// x copied; NaN stays NaN (the comparison sends it to the second form),
// +-Inf gives +-1.
func (g *kit) tanh(x Operand) Operand {
	f := g.f
	bits := f.NewReg(B32)
	f.Emit(Inst{Op: OpBitcast, Dst: []Operand{R(bits)}, Src: []Operand{x}})
	a := f.NewReg(F32)
	f.Emit(Inst{Op: OpBitcast, Dst: []Operand{R(a)}, Src: []Operand{f.Op3(OpAnd, B32, R(bits), I(0x7fffffff))}})
	z := f.F(OpMulF, R(a), R(a))
	p := Fimm(float32(6404582.0 / 10854718875))
	for _, c := range []float64{-929569.0 / 638512875, 21844.0 / 6081075, -1382.0 / 155925, 62.0 / 2835, -17.0 / 315, 2.0 / 15, -1.0 / 3} {
		p = f.F(OpFma, p, z, Fimm(float32(c)))
	}
	small := f.F(OpFma, f.F(OpMulF, R(a), z), p, R(a))
	e := f.F(OpEx2, f.F(OpMulF, R(a), Fimm(float32(-2*math.Log2E))))
	num := f.F(OpSubF, Fimm(1), e)
	den := f.F(OpAddF, Fimm(1), e)
	r := f.F(OpRcp, den)
	q := f.F(OpMulF, num, r)
	// one Newton step on the quotient: q + r (num - den q)
	big := f.F(OpFma, f.F(OpFma, f.F(OpMulF, den, Fimm(-1)), q, num), r, q)
	lt := f.Setp("lt", F32, R(a), Fimm(0.55))
	t := f.Selp(F32, small, big, lt)
	tb := f.NewReg(B32)
	f.Emit(Inst{Op: OpBitcast, Dst: []Operand{R(tb)}, Src: []Operand{t}})
	sb := f.Op3(OpOr, B32, R(tb), f.Op3(OpAnd, B32, R(bits), I(-0x80000000)))
	out := f.NewReg(F32)
	f.Emit(Inst{Op: OpBitcast, Dst: []Operand{R(out)}, Src: []Operand{sb}})
	return R(out)
}

// scoreGrad is the score stage's derivative applied to a tile's dS (see
// above): with soft-capping dS times 1 - t^2, t the tanh scoreStage left
// in tanhT; ALiBi's bias has none. Without soft-capping it emits nothing.
func (g *kit) scoreGrad(ds [][4]Reg, at scoreAt) {
	if !g.p.Score.SoftCap || g.cfg.scoreMutant == mutCapAfterMask {
		// (the mutant is a forward's: its backward has no tanh)
		return
	}
	f := g.f
	f.Comment("soft-cap's derivative: dS (1 - t^2)")
	for n := range ds {
		for x := range ds[n] {
			t := R(g.tanhT[n][x])
			d := f.F(OpFma, f.F(OpMulF, t, Fimm(-1)), t, Fimm(1))
			f.Set(F32, ds[n][x], f.F(OpMulF, R(ds[n][x]), d))
		}
	}
}

// prob is the probability of score x: 2^(x scale log2(e) + bias), or
// 2^(x + bias) for scores scoreStage scaled.
func (g *kit) prob(x Reg, bias Operand) Operand {
	f := g.f
	if g.scaled() {
		return f.F(OpEx2, f.F(OpAddF, R(x), bias))
	}
	return f.F(OpEx2, f.F(OpFma, R(x), g.scl, bias))
}

// total is a row's denominator as finish uses it: out = O w / l, lse =
// (m + log2 l) ln 2, and, for a row whose sum of exponentials is 0 (it
// kept nothing), out 0 and lse empty.
type total struct {
	m, l, w, empty Operand
}

// rowTotal is a row's denominator from its sum of exponentials l relative
// to its maximum m (log2-scaled, as softmax keeps it): l itself, or with
// a learned sink logit s (log2 units) the sum with the sink's term taken
// relative to M = max(m, s), so that neither overflows: l 2^(m-M) +
// 2^(s-M), the output weighted by w = 2^(m-M), and a row that kept nothing
// gets lse = the sink logit (natural). The lse the backward reads then
// includes the sink.
func (g *kit) rowTotal(m, l Operand) total {
	if !g.p.Score.LearnedSinks {
		return total{m: m, l: l, w: Fimm(1), empty: negInf}
	}
	f := g.f
	f.Comment("learned sink: the denominator gains 2^(sink - m), relative to M = max(m, sink)")
	mm := f.F(OpMaxF, m, g.sink2)
	w := f.F(OpEx2, f.F(OpSubF, m, mm))
	e := f.F(OpEx2, f.F(OpSubF, g.sink2, mm))
	if g.cfg.scoreMutant == mutSinkTwice {
		e = f.F(OpAddF, e, e)
	}
	return total{m: mm, l: f.F(OpFma, l, w, e), w: w, empty: g.sinkN}
}

// sinkGrad emits the dq kernel's term of the sink gradient of a query
// row: -p_sink delta, p_sink = exp(sink - lse) = 2^(sink2 - lse log2(e)),
// 0 at a head without a sink (-Inf, whose rows may have lse -Inf too), and
// stores it at addr under guard w. Nothing without learned sinks.
func (g *kit) sinkGrad(lse, delta, addr Operand, w Reg) {
	if !g.p.Score.LearnedSinks {
		return
	}
	f := g.f
	f.Comment("sink gradient term of this row: -exp(sink - lse) delta")
	p := f.F(OpEx2, f.F(OpFma, lse, Fimm(float32(-math.Log2E)), g.sink2))
	none := f.Setp("eq", F32, g.sink2, negInf)
	p = f.Selp(F32, Fimm(0), p, none)
	k := float32(-1)
	if g.cfg.scoreMutant == mutDSinkSign {
		k = 1
	}
	term := f.F(OpMulF, f.F(OpMulF, p, delta), Fimm(k))
	f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &w, Dst: []Operand{Addr(addr.Reg, 0)}, Src: []Operand{term}})
}

// softmax emits the online softmax of one tile's scores s (fragment as in
// maskPartial) into the row state m, l and the accumulators acc (rescaled),
// leaving the unnormalized probabilities in s.
func (g *kit) softmax(s [][4]Reg, m, l [2]Reg, acc [][4]Reg) {
	f := g.f
	f.Comment("online softmax: row max over the quad, rescale, exponentiate")
	var alpha [2]Operand
	for r := 0; r < 2; r++ {
		mx := R(s[0][2*r])
		for n := range s {
			for x := 2 * r; x < 2*r+2; x++ {
				if n == 0 && x == 2*r {
					continue
				}
				mx = f.F(OpMaxF, mx, R(s[n][x]))
			}
		}
		for _, lane := range []int64{1, 2} {
			o := f.NewReg(F32)
			f.Emit(Inst{Op: OpShflBfly, Dst: []Operand{R(o)}, Src: []Operand{mx, I(lane), I(31), I(0xffffffff)}})
			mx = f.F(OpMaxF, mx, R(o))
		}
		// scores are scaled here, in the exponent (scale > 0 keeps the max),
		// unless the score stage scaled them
		if !g.scaled() {
			mx = f.F(OpMulF, mx, g.scl)
		}
		mnew := f.F(OpMaxF, R(m[r]), mx)
		isInf := f.Setp("eq", F32, mnew, negInf)
		muse := f.Selp(F32, Fimm(0), mnew, isInf)
		alpha[r] = f.F(OpEx2, f.F(OpSubF, R(m[r]), muse))
		f.Set(F32, m[r], mnew)
		nm := f.F(OpMulF, muse, Fimm(-1))
		sum := Operand{}
		for n := range s {
			for x := 2 * r; x < 2*r+2; x++ {
				e := g.prob(s[n][x], nm)
				f.Set(F32, s[n][x], e)
				if sum.Kind == 0 {
					sum = e
				} else {
					sum = f.F(OpAddF, sum, e)
				}
			}
		}
		f.Emit(Inst{Op: OpFma, Dst: []Operand{R(l[r])}, Src: []Operand{R(l[r]), alpha[r], sum}})
		for n := range acc {
			for x := 2 * r; x < 2*r+2; x++ {
				f.Emit(Inst{Op: OpMulF, Dst: []Operand{R(acc[n][x])}, Src: []Operand{R(acc[n][x]), alpha[r]}})
			}
		}
	}
}

// lg2 emits log2(x) for x >= 1 (x is a row sum of exponentials that
// includes 2^0).
func (g *kit) lg2(x Operand) Operand {
	f := g.f
	if !g.cfg.SoftLg2 {
		return f.F(OpLg2, x)
	}
	bits := f.NewReg(B32)
	f.Emit(Inst{Op: OpBitcast, Dst: []Operand{R(bits)}, Src: []Operand{x}})
	e := f.Sub(f.Op3(OpShr, U32, R(bits), I(23)), I(127))
	mb := f.Op3(OpOr, B32, f.Op3(OpAnd, B32, R(bits), I(0x7fffff)), I(0x3f800000))
	mant := f.NewReg(F32)
	f.Emit(Inst{Op: OpBitcast, Dst: []Operand{R(mant)}, Src: []Operand{mb}})
	big := f.Setp("gt", F32, R(mant), Fimm(float32(math.Sqrt2)))
	mh := f.F(OpMulF, R(mant), Fimm(0.5))
	mm := f.Selp(F32, mh, R(mant), big)
	e2 := f.Selp(S32, f.reg(S32, f.Add(e, I(1))), f.reg(S32, e), big)
	z := f.F(OpDivF, f.F(OpSubF, mm, Fimm(1)), f.F(OpAddF, mm, Fimm(1)))
	z2 := f.F(OpMulF, z, z)
	poly := Fimm(2.0 / 9)
	for _, c := range []float64{2.0 / 7, 2.0 / 5, 2.0 / 3, 2} {
		poly = f.F(OpFma, poly, z2, Fimm(float32(c)))
	}
	ln := f.F(OpMulF, poly, z)
	ef := f.NewReg(F32)
	f.Emit(Inst{Op: OpCvtF32I, T: S32, Dst: []Operand{R(ef)}, Src: []Operand{e2}})
	// (x - x) * 0 is 0, or NaN when l is NaN (a kept NaN score), which the
	// bit arithmetic above would turn into a finite value
	return f.F(OpAddF, f.F(OpFma, ln, Fimm(float32(1/math.Ln2)), R(ef)), f.F(OpMulF, f.F(OpSubF, x, x), Fimm(0)))
}

// finish normalizes O, stores it and the log-sum-exp, guarded by seq_q.
func (g *kit) finish(obase, lbase, qrow0 Operand, m, l [2]Reg, acc [][4]Reg) {
	f := g.f
	f.Comment("epilogue: O / l, lse = (m + log2 l) ln 2; empty rows give 0 and -inf")
	pt := BF16x2
	if g.elem == F16 {
		pt = F16x2
	}
	first := f.Setp("eq", U32, g.t4, I(0))
	for r := 0; r < 2; r++ {
		lt := R(l[r])
		for _, lane := range []int64{1, 2} {
			o := f.NewReg(F32)
			f.Emit(Inst{Op: OpShflBfly, Dst: []Operand{R(o)}, Src: []Operand{lt, I(lane), I(31), I(0xffffffff)}})
			lt = f.F(OpAddF, lt, R(o))
		}
		tot := g.rowTotal(R(m[r]), lt)
		zero := f.Setp("eq", F32, lt, Fimm(0))
		one := f.Selp(F32, Fimm(1), tot.l, zero)
		inv := f.Selp(F32, Fimm(0), f.F(OpDivF, tot.w, one), zero)
		lse := f.F(OpMulF, f.F(OpAddF, tot.m, g.lg2(one)), Fimm(float32(math.Ln2)))
		lse = f.Selp(F32, tot.empty, lse, zero)
		row := f.Add(f.Add(f.MulC(g.warp, 16), g.g4), I(int64(8*r))) // row within the tile
		valid := f.Setp("lt", S32, f.Add(qrow0, row), g.sqT)
		var inQ *Reg // rows of the tensor past the batch row's queries: 0 and -Inf
		if g.lens {
			p := f.Setp("lt", S32, f.Add(qrow0, row), g.sq)
			inQ = &p
			lse = f.Selp(F32, lse, negInf, p)
		}
		ob := g.wide(g.rowAt("o", obase, row, 2*g.pitch), g.t4, 4)
		for n := range acc {
			x0 := f.F(OpMulF, R(acc[n][2*r]), inv)
			x1 := f.F(OpMulF, R(acc[n][2*r+1]), inv)
			pr := f.NewReg(B32)
			f.Emit(Inst{Op: OpCvtPack, T: pt, Dst: []Operand{R(pr)}, Src: []Operand{x1, x0}})
			val := Operand(R(pr))
			if inQ != nil {
				val = f.Selp(B32, val, I(0), *inQ)
			}
			f.Emit(Inst{Op: OpSt, T: B32, Space: "global", Guard: &valid, Dst: []Operand{Addr(ob.Reg, int64(n*16))}, Src: []Operand{val}})
		}
		lb := g.wide(lbase, row, 4*g.pitch)
		w := f.PAnd(valid, first)
		f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &w, Dst: []Operand{Addr(lb.Reg, 0)}, Src: []Operand{lse}})
	}
}
