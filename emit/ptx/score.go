package ptx

import (
	"math"
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
// key kt*tileK + 8n + 2t4 + x%2.
func (g *kit) rowsAt(kt Operand) scoreAt {
	return scoreAt{
		query: func(n, x int) Operand {
			if x >= 2 {
				return g.i1
			}
			return g.i0
		},
		key: func(n, x int) Operand {
			return g.f.Add(g.f.Add(g.f.MulC(kt, int64(g.tileK)), g.f.MulC(g.t4, 2)), I(int64(n*8+x%2)))
		},
	}
}

// scoreStage is the score stage of a complete, unmasked tile of scores s
// (see above); without score modifications it emits nothing.
func (g *kit) scoreStage(s [][4]Reg, at scoreAt) {}

// scoreGrad is the score stage's derivative applied to a tile's dS (see
// above); without score modifications it emits nothing.
func (g *kit) scoreGrad(ds [][4]Reg, at scoreAt) {}

// prob is the probability of score x: 2^(x scale log2(e) + bias).
func (g *kit) prob(x Reg, bias Operand) Operand {
	f := g.f
	return f.F(OpEx2, f.F(OpFma, R(x), g.scl, bias))
}

// rowTotal is a row's denominator: its sum of exponentials l relative to
// its maximum m (log2-scaled, as softmax keeps it); without a learned
// sink it is l.
func (g *kit) rowTotal(m, l Operand) Operand { return l }

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
		// scores are scaled here, in the exponent (scale > 0 keeps the max)
		mnew := f.F(OpMaxF, R(m[r]), f.F(OpMulF, mx, g.scl))
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
		lt = g.rowTotal(R(m[r]), lt)
		zero := f.Setp("eq", F32, lt, Fimm(0))
		one := f.Selp(F32, Fimm(1), lt, zero)
		inv := f.Selp(F32, Fimm(0), f.F(OpDivF, Fimm(1), one), zero)
		lse := f.F(OpMulF, f.F(OpAddF, R(m[r]), g.lg2(one)), Fimm(float32(math.Ln2)))
		lse = f.Selp(F32, negInf, lse, zero)
		row := f.Add(f.Add(f.MulC(g.warp, 16), g.g4), I(int64(8*r))) // row within the tile
		valid := f.Setp("lt", S32, f.Add(qrow0, row), g.sq)
		ob := g.wide(g.wide(obase, row, g.pitch*int64(2*g.D)), g.t4, 4)
		for n := range acc {
			x0 := f.F(OpMulF, R(acc[n][2*r]), inv)
			x1 := f.F(OpMulF, R(acc[n][2*r+1]), inv)
			pr := f.NewReg(B32)
			f.Emit(Inst{Op: OpCvtPack, T: pt, Dst: []Operand{R(pr)}, Src: []Operand{x1, x0}})
			f.Emit(Inst{Op: OpSt, T: B32, Space: "global", Guard: &valid, Dst: []Operand{Addr(ob.Reg, int64(n*16))}, Src: []Operand{R(pr)}})
		}
		lb := g.wide(lbase, row, 4*g.pitch)
		w := f.PAnd(valid, first)
		f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &w, Dst: []Operand{Addr(lb.Reg, 0)}, Src: []Operand{lse}})
	}
}
