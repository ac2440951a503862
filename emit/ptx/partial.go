package ptx

import (
	"math"
)

// intervalPred is the predicate length (IR instructions) above which a
// plan whose rows keep intervals of keys tests them instead of the
// predicate: causal's predicate (4 instructions) costs less per element
// than the interval's two comparisons once the hull is paid; window's
// (11), block's (8) and chunked's (15) cost more (under the interpreter,
// S = 1000, D = 128, forward: warp instructions -2.1%, -1.5% and -7.4%
// with intervals, causal +0.6%).
const intervalPred = 6

// useIntervals reports whether partial tiles test each row's interval of
// keys (Plan.RowInterval) rather than the predicate.
func (g *kit) useIntervals() bool {
	return g.p.RowInterval && len(g.p.Pred.Insts) > intervalPred
}

// rowIntervals emits, for a plan whose rows keep intervals of keys
// (Plan.RowInterval), the interval of each of the thread's rows once per
// tile: the ends of the row's own key hull, hull(i, i, 0) (at positions:
// exact from 0, so exact from kp for the key positions j), the last one
// clipped to lastK, the position of the last key (the key bound). keep(r,
// j) then emits lo_r <= j <= hi_r for key position j: two comparisons per
// element instead of the predicate.
func (g *kit) rowIntervals(rows [2]Operand, lastK Operand) (keep func(r int, j Operand) Reg, err error) {
	f := g.f
	f.Comment("partial tile: each row keeps the keys between the ends of its own key hull (Plan.RowInterval), within seq_k")
	f.CommentProg("key hull", g.p.Hull)
	var lo, hi [2]Operand
	for r, i := range rows {
		h, err := RenderInts(f, g.p.Hull, g.env(i, i, I(0)))
		if err != nil {
			return nil, err
		}
		lo[r], hi[r] = f.reg(S32, h[0]), f.reg(S32, f.Min(h[1], lastK))
	}
	return func(r int, j Operand) Reg {
		return f.PAnd(f.Setp("ge", S32, j, lo[r]), f.Setp("le", S32, j, hi[r]))
	}, nil
}

// maskPartial emits, for a partial tile (cls), the plan's predicate per
// score element and the key bound: s[n][x] is the score of the thread's
// row g4 + 8*(x/2) and key kt*tk + 8n + 2*t4 + x%2 (the mma.sync and
// wgmma accumulator fragment); masked scores become -Inf.
func (g *kit) maskPartial(kt, cls Operand, s [][4]Reg) error {
	f := g.f
	nomask := f.NewLabel("nomask")
	pp := f.Setp("ne", S32, cls, I(cPartial))
	f.Bra(nomask, &pp, false)
	if g.useIntervals() {
		c0 := g.keyPos(f.Add(f.MulC(kt, int64(g.tileK)), f.MulC(g.t4, 2)))
		keep, err := g.rowIntervals([2]Operand{g.i0, g.i1}, g.keyPos(f.Sub(g.sk, I(1))))
		if err != nil {
			return err
		}
		for n := range s {
			for x := range s[n] {
				k := keep(x/2, f.Add(c0, I(int64(n*8+x%2))))
				f.Emit(Inst{Op: OpSelp, T: F32, Dst: []Operand{R(s[n][x])}, Src: []Operand{R(s[n][x]), negInf, R(k)}})
			}
		}
		f.Place(nomask)
		return nil
	}
	f.Comment("partial tile: the fused predicate per element, and the key bound")
	c0 := f.Add(f.MulC(kt, int64(g.tileK)), f.MulC(g.t4, 2))
	f.CommentProg("partial-tile predicate", g.p.Pred)
	memo := NewMemo()
	rows := [2]Operand{g.i0, g.i1}
	var lastK Operand
	if g.docs {
		lastK = g.lastPos()
		rows[0], rows[1] = f.Min(rows[0], lastK), f.Min(rows[1], lastK)
	}
	for n := range s {
		cols := [2]Operand{f.Add(c0, I(int64(n*8))), f.Add(c0, I(int64(n*8+1)))}
		inK := [2]Reg{f.Setp("lt", S32, cols[0], g.sk), f.Setp("lt", S32, cols[1], g.sk)}
		cols[0], cols[1] = g.keyPos(cols[0]), g.keyPos(cols[1])
		if g.docs {
			// document arrays cover the row's positions (seq_k entries
			// without positions): clamp positions past the end (their
			// scores are masked or their rows not stored)
			cols[0], cols[1] = f.Min(cols[0], lastK), f.Min(cols[1], lastK)
		}
		for x := range s[n] {
			row := rows[0]
			if x >= 2 {
				row = rows[1]
			}
			keep, err := RenderPred(f, g.p.Pred, g.env(row, cols[x&1]), memo)
			if err != nil {
				return err
			}
			keep = f.PAnd(keep, inK[x&1])
			f.Emit(Inst{Op: OpSelp, T: F32, Dst: []Operand{R(s[n][x])}, Src: []Operand{R(s[n][x]), negInf, R(keep)}})
		}
	}
	f.Place(nomask)
	return nil
}

// earlyMask reports whether a kernel evaluates the partial-tile predicate
// into keep bits (keepBits) before the tile's scores are live, rather
// than on the scores (maskPartial): at D >= 192, whose accumulators
// leave few registers, a long predicate (above bigPred) evaluated next to
// the scores spilled (bigbird: 8 bytes with ptxas 12.4 at D = 192, with
// 11.8 at D = 256).
func (g *kit) earlyMask() bool {
	return g.D >= 192 && len(g.p.Pred.Insts) > bigPred && !g.useIntervals()
}

// keepBits emits, for a partial tile (cls), the predicate and the key
// bound of each score element the thread holds (maskPartial's), as bit
// 4n+x of a word (at most 32 elements); 0 on other tiles.
func (g *kit) keepBits(kt, cls Operand) (Reg, error) {
	f := g.f
	bits := f.Mov(B32, I(0))
	nomask := f.NewLabel("nobits")
	pp := f.Setp("ne", S32, cls, I(cPartial))
	f.Bra(nomask, &pp, false)
	f.Comment("partial tile: the fused predicate per element, and the key bound, as keep bits (before the scores are live)")
	c0 := f.Add(f.MulC(kt, int64(g.tileK)), f.MulC(g.t4, 2))
	f.CommentProg("partial-tile predicate", g.p.Pred)
	memo := NewMemo()
	rows := [2]Operand{g.i0, g.i1}
	var lastK Operand
	if g.docs {
		lastK = g.lastPos()
		rows[0], rows[1] = f.Min(rows[0], lastK), f.Min(rows[1], lastK)
	}
	for n := 0; n < g.tileK/8; n++ {
		cols := [2]Operand{f.Add(c0, I(int64(n*8))), f.Add(c0, I(int64(n*8+1)))}
		inK := [2]Reg{f.Setp("lt", S32, cols[0], g.sk), f.Setp("lt", S32, cols[1], g.sk)}
		cols[0], cols[1] = g.keyPos(cols[0]), g.keyPos(cols[1])
		if g.docs {
			cols[0], cols[1] = f.Min(cols[0], lastK), f.Min(cols[1], lastK)
		}
		for x := 0; x < 4; x++ {
			keep, err := RenderPred(f, g.p.Pred, g.env(rows[x/2], cols[x&1]), memo)
			if err != nil {
				return bits, err
			}
			keep = f.PAnd(keep, inK[x&1])
			f.Into(OpOr, B32, bits, R(bits), f.Selp(U32, I(int64(1)<<(4*n+x)), I(0), keep))
		}
	}
	f.Place(nomask)
	return bits, nil
}

// applyBits masks the scores s of a partial tile (cls) by keepBits' word:
// elements whose bit is clear become -Inf.
func (g *kit) applyBits(cls Operand, bits Reg, s [][4]Reg) {
	f := g.f
	nomask := f.NewLabel("nomask")
	pp := f.Setp("ne", S32, cls, I(cPartial))
	f.Bra(nomask, &pp, false)
	for n := range s {
		for x := range s[n] {
			keep := f.Setp("ne", U32, f.Op3(OpAnd, B32, R(bits), I(int64(1)<<(4*n+x))), I(0))
			f.Emit(Inst{Op: OpSelp, T: F32, Dst: []Operand{R(s[n][x])}, Src: []Operand{R(s[n][x]), negInf, R(keep)}})
		}
	}
	f.Place(nomask)
}

// Element bits of the 16-bit types: exponent, its lowest bit, mantissa, and
// the codes sanitize writes for a non-finite value (+Inf 1, -Inf 128, NaN
// 16384: sums over the 64 keys of a tile stay exact and separable).
type elemBits struct{ exp, expLow, mant, pos, neg, nan int64 }

func (g *kit) bits() elemBits {
	if g.elem == F16 {
		return elemBits{0x7c00, 0x0400, 0x03ff, 0x3c00, 0x5800, 0x7400}
	}
	return elemBits{0x7f80, 0x0080, 0x007f, 0x3f80, 0x4300, 0x4680}
}

// flagBytes is the shared memory after the key/value buffers: one word per
// warp for sanitize's vote.
func (g *kit) flagBytes() int { return 4 * g.warps() }

// sanLayout is where sanitizeIn finds a thread's share of a key/value
// stage: base (emitted where it is needed) is the thread's address in the
// key tile, the value tile lies vOff bytes further, and the thread owns the
// words at base+addr(w) of the value tile, w < words; the key tile has the
// same layout, so a value's code goes vOff bytes before it. flags is the
// address of the per-warp vote words; fence asks for fence.proxy.async
// after the generic-proxy writes (wgmma and tensor copies read and write
// shared memory through the async proxy).
type sanLayout struct {
	base  func() Operand
	vOff  int64
	words int
	addr  func(w int) int64
	flags func() Operand
	fence bool
}

func (g *kit) sanitizeIn(cls Operand, lay sanLayout) Reg {
	f := g.f
	eb := g.bits()
	done := f.Mov(B32, I(0))
	skip := f.NewLabel("finite")
	f.Comment("masked values: a partial tile's non-finite values are zeroed, and added back where kept")
	np := f.Setp("ne", S32, cls, I(cPartial))
	f.Bra(skip, &np, false)
	sK := lay.base()
	vOff, words, addr := lay.vOff, lay.words, lay.addr
	// the thread's share of the value tile (rows of Dv elements)
	load := func(off int64) Reg { return g.ldSharedG(g.vact, Addr(sK.Reg, off)) }
	g.voteNonFinite(func(w int) Reg { return load(vOff + addr(w)) }, words, lay.flags, skip)
	f.Comment("a non-finite value in the tile: zero it, and write its code over the keys")
	code := func(h Operand, nf Operand) Operand {
		isNF := f.Setp("ne", U32, nf, I(0))
		isNaN := f.Setp("ne", U32, f.Op3(OpAnd, B32, h, I(eb.mant)), I(0))
		isNeg := f.Setp("ne", U32, f.Op3(OpAnd, B32, h, I(0x8000)), I(0))
		c := f.Selp(U32, I(eb.neg), I(eb.pos), isNeg)
		c = f.Selp(U32, I(eb.nan), c, isNaN)
		return f.Selp(U32, c, I(0), isNF)
	}
	for w := 0; w < words; w++ {
		x := load(vOff + addr(w))
		nf := g.nonFinite(x)
		m := f.Op3(OpMulLo, U32, f.Op3(OpShr, U32, nf, I(15)), I(0xffff))
		xc := f.Op3(OpAnd, B32, R(x), f.Op3(OpXor, B32, m, I(0xffffffff)))
		g.stSharedG(g.vact, Addr(sK.Reg, vOff+addr(w)), f.reg(B32, xc))
		lo := code(f.Op3(OpAnd, B32, R(x), I(0xffff)), f.Op3(OpAnd, B32, nf, I(0x8000)))
		hi := code(f.Op3(OpShr, U32, R(x), I(16)), f.Op3(OpAnd, B32, nf, I(0x80000000)))
		n := f.Op3(OpOr, B32, lo, f.Op3(OpShl, B32, hi, I(16)))
		g.stSharedG(g.vact, Addr(sK.Reg, addr(w)), f.reg(B32, n))
	}
	if lay.fence {
		f.Emit(Inst{Op: OpFenceProxy})
	}
	g.bar()
	f.Set(B32, done, I(1))
	f.Place(skip)
	return done
}

// share is the part of an n-row tile a thread copied (its 16-byte chunk
// of rows rb, rb+rowStep, ...): words 32-bit words, word w at byte
// addr(w) from the thread's copy offset (copyS).
func (g *kit) share(n int) (words int, addr func(w int) int64) {
	return n / g.rowStep() * 4, func(w int) int64 { return int64(w/4*g.rowStep()*g.RS + 4*(w%4)) }
}

// nonFinite returns x's bit 15 (31) set where its low (high) 16-bit half
// has an all-ones exponent (the carry of exponent + lowest bit), other
// bits clear.
func (g *kit) nonFinite(x Reg) Operand {
	f, eb := g.f, g.bits()
	t := f.Op3(OpAnd, B32, R(x), I(eb.exp|eb.exp<<16))
	t = f.Op3(OpAdd, U32, t, I(eb.expLow|eb.expLow<<16))
	return f.Op3(OpAnd, B32, t, I(0x80008000))
}

// voteNonFinite checks the thread's words of a tile (load(w), w < words)
// for non-finite elements, votes across the CTA through one word per warp
// at vote() (rendered after the thread's check), and branches to skip
// when no element of the tile is non-finite.
func (g *kit) voteNonFinite(load func(w int) Reg, words int, vote func() Operand, skip string) {
	f := g.f
	any := f.Mov(B32, I(0))
	for w := 0; w < words; w++ {
		f.Into(OpOr, B32, any, R(any), g.nonFinite(load(w)))
	}
	for _, lane := range []int64{1, 2, 4, 8, 16} {
		o := f.NewReg(B32)
		f.Emit(Inst{Op: OpShflBfly, Dst: []Operand{R(o)}, Src: []Operand{R(any), I(lane), I(31), I(0xffffffff)}})
		f.Into(OpOr, B32, any, R(any), R(o))
	}
	flags := vote()
	lane0 := f.Setp("eq", U32, g.lane, I(0))
	f.Emit(Inst{Op: OpSt, T: B32, Space: "shared", Guard: &lane0, Dst: []Operand{Addr(f.reg(U32, f.Add(flags, f.MulC(g.warp, 4))).Reg, 0)}, Src: []Operand{R(any)}})
	g.bar()
	all := f.Mov(B32, I(0))
	voters := g.voters
	if voters == 0 {
		voters = g.warps()
	}
	for w := 0; w < voters; w++ {
		x := f.NewReg(B32)
		f.Emit(Inst{Op: OpLd, T: B32, Space: "shared", Dst: []Operand{R(x)}, Src: []Operand{Addr(f.reg(U32, flags).Reg, int64(4*w))}})
		f.Into(OpOr, B32, all, R(all), R(x))
	}
	clean := f.Setp("eq", U32, R(all), I(0))
	f.Bra(skip, &clean, false)
}

// indicators packs [p > 0] of the probabilities s as the A fragments of
// the key tile's k-slices of 16 (restore's product with the codes).
func (g *kit) indicators(s [][4]Reg) [][4]Reg {
	f := g.f
	pt := BF16x2
	if g.elem == F16 {
		pt = F16x2
	}
	ind := func(x Reg) Operand {
		return f.Selp(F32, Fimm(1), Fimm(0), f.Setp("gt", F32, R(x), Fimm(0)))
	}
	pack := func(hi, lo Reg) Reg {
		r := f.NewReg(B32)
		f.Emit(Inst{Op: OpCvtPack, T: pt, Dst: []Operand{R(r)}, Src: []Operand{ind(hi), ind(lo)}})
		return r
	}
	a := make([][4]Reg, len(s)/2)
	for kk := range a {
		a[kk] = [4]Reg{
			pack(s[2*kk][1], s[2*kk][0]), pack(s[2*kk][3], s[2*kk][2]),
			pack(s[2*kk+1][1], s[2*kk+1][0]), pack(s[2*kk+1][3], s[2*kk+1][2]),
		}
	}
	return a
}

// addBack adds to the accumulator y the IEEE sum of the non-finite values
// whose codes' count c holds (restore).
func (g *kit) addBack(c, y Reg) {
	f := g.f
	nan, inf := Fimm(float32(math.NaN())), float32(math.Inf(1))
	// the count is an integer below 2^23: adding 2^23 puts it in the low
	// mantissa bits
	bitsR := f.NewReg(B32)
	f.Emit(Inst{Op: OpBitcast, Dst: []Operand{R(bitsR)}, Src: []Operand{f.F(OpAddF, R(c), Fimm(0x1p23))}})
	n := f.Op3(OpAnd, B32, R(bitsR), I(0x7fffff))
	pos := f.Setp("ne", U32, f.Op3(OpAnd, B32, n, I(127)), I(0))
	neg := f.Setp("ne", U32, f.Op3(OpAnd, B32, f.Op3(OpShr, U32, n, I(7)), I(127)), I(0))
	isNaN := f.POr(f.Setp("ne", U32, f.Op3(OpShr, U32, n, I(14)), I(0)), f.PAnd(pos, neg))
	v := f.Selp(F32, Fimm(inf), Fimm(-inf), pos)
	v = f.Selp(F32, nan, v, isNaN)
	some := f.Setp("ne", U32, n, I(0))
	f.Set(F32, y, f.Selp(F32, f.F(OpAddF, R(y), v), R(y), some))
}
