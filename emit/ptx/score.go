package ptx

import (
	"math"
)

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
				e := f.F(OpEx2, f.F(OpFma, R(s[n][x]), g.scl, nm))
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
