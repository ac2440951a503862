package ptx

import (
	"math"
)

// kernelDQ: one CTA per (query tile, query head, batch x class).
func (g *bwdK) kernelDQ() error {
	f := g.f
	D := g.D
	cta := g.prologue(true, false)
	qt, h := cta[0], cta[1]
	g.bz, g.scale = cta[2], g.par["scale"]
	q, k, v, o, dout := g.par["q"], g.par["k"], g.par["v"], g.par["o"], g.par["dout"]
	lse, delta, dq, dsink := g.par["lse"], g.par["delta"], g.par["dq"], g.par[parDSink.Name]
	if err := g.segment(qt); err != nil {
		return err
	}
	g.scoreHead(h)
	g.headValues(h)
	kvh := f.Op3(OpDiv, U32, h, f.Op3(OpDiv, U32, g.hq, g.hkv))
	qrow0 := f.MulC(qt, TileQ)
	row0 := f.Add(g.qR0, f.MulC(qrow0, g.pitch))
	qb := g.rowsBase("q", q, h, row0, 2)
	ob := g.rowsBase("o", o, h, row0, 2)
	db := g.rowsBase("o", dout, h, row0, 2)
	lrow := g.lseRows(lse, h, row0)
	drow := g.lseRows(delta, h, row0)
	var srow Operand
	if g.sinks {
		srow = g.lseRows(dsink, h, row0)
	}
	var dqb Operand
	if !g.lateBases() {
		dqb = g.rowsBase("q", dq, h, row0, 4)
	}
	g.kbase = f.Op3(OpAdd, U64, g.rowsBase("k", k, kvh, g.kR0, 2), g.ch16w)
	g.vbase = f.Op3(OpAdd, U64, g.rowsBase("v", v, kvh, g.kR0, 2), g.ch16w)

	f.Comment("Q and dO tiles: cp.async, rows past seq_q zero-filled")
	lim := f.Sub(f.Sub(g.sq, I(1)), qrow0)
	g.copyRows("q", g.smem, f.Op3(OpAdd, U64, qb, g.ch16w), lim, TileQ)
	sDO := f.Add(g.smem, I(int64(g.tileBytes())))
	g.copyRowsV("o", sDO, f.Op3(OpAdd, U64, db, g.ch16w), lim, TileQ)
	f.Emit(Inst{Op: OpCpCommit})

	f.Comment("delta = rowsum(dout * out): two threads per row, D/2 columns each, f32")
	sDelta := f.Add(g.smem, I(int64(g.dqDelta())))
	{
		r := f.Op3(OpShr, U32, g.tid, I(1))
		half := f.Op3(OpAnd, B32, g.tid, I(1))
		valid := f.Setp("le", S32, r, lim)
		rc := f.Min(r, g.rowsLim(lim))
		Dv := g.Dv
		col := f.MulC(half, int64(Dv)) // bytes: Dv/2 elements of 2 bytes
		oa := g.wide(g.rowAt("o", ob, rc, 2*g.pitch), col, 1)
		da := g.wide(g.rowAt("o", db, rc, 2*g.pitch), col, 1)
		sum := f.Mov(F32, Fimm(0))
		for w := 0; w < Dv/4; w++ {
			ow, dw := f.NewReg(B32), f.NewReg(B32)
			f.Emit(Inst{Op: OpLd, T: B32, Space: "global", Dst: []Operand{R(ow)}, Src: []Operand{Addr(oa.Reg, int64(4*w))}})
			f.Emit(Inst{Op: OpLd, T: B32, Space: "global", Dst: []Operand{R(dw)}, Src: []Operand{Addr(da.Reg, int64(4*w))}})
			o0, o1 := g.widen16(R(ow))
			d0, d1 := g.widen16(R(dw))
			f.Emit(Inst{Op: OpFma, Dst: []Operand{R(sum)}, Src: []Operand{o0, d0, R(sum)}})
			f.Emit(Inst{Op: OpFma, Dst: []Operand{R(sum)}, Src: []Operand{o1, d1, R(sum)}})
		}
		other := f.NewReg(F32)
		f.Emit(Inst{Op: OpShflBfly, Dst: []Operand{R(other)}, Src: []Operand{R(sum), I(1), I(31), I(0xffffffff)}})
		tot := f.F(OpAddF, R(sum), R(other))
		tot = f.Selp(F32, tot, Fimm(0), valid)
		first := f.Setp("eq", U32, half, I(0))
		f.Emit(Inst{Op: OpSt, T: F32, Space: "shared", Guard: &first, Dst: []Operand{Addr(f.reg(U32, f.Add(sDelta, f.MulC(r, 4))).Reg, 0)}, Src: []Operand{tot}})
		w := f.PAnd(first, valid)
		da2 := g.wide(drow, rc, 4*g.pitch)
		f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &w, Dst: []Operand{Addr(da2.Reg, 0)}, Src: []Operand{tot}})
		if g.sinks {
			lx := f.NewReg(F32)
			f.Emit(Inst{Op: OpLd, T: F32, Space: "global", Dst: []Operand{R(lx)}, Src: []Operand{Addr(g.wide(lrow, rc, 4*g.pitch).Reg, 0)}})
			sa := g.wide(srow, rc, 4*g.pitch)
			g.sinkGrad(R(lx), tot, sa, w)
			if g.lens {
				// rows of the tensor past the batch row's queries: a 0 term
				past := f.PAnd(f.PAnd(first, f.PNot(valid)), f.Setp("lt", S32, f.Add(qrow0, r), g.sqT))
				f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &past, Dst: []Operand{Addr(g.wide(srow, r, 4*g.pitch).Reg, 0)}, Src: []Operand{Fimm(0)}})
			}
		}
	}

	f.Comment("this thread's rows: -lse*log2(e) (0 past seq_q)")
	var nl [2]Operand
	rows := [2]Operand{}
	for r := 0; r < 2; r++ {
		rr := f.Add(f.Add(f.MulC(g.warp, 16), g.g4), I(int64(8*r)))
		rows[r] = rr
		valid := f.Setp("le", S32, rr, lim)
		la := g.wide(lrow, f.Min(rr, g.rowsLim(lim)), 4*g.pitch)
		x := f.NewReg(F32)
		f.Emit(Inst{Op: OpLd, T: F32, Space: "global", Dst: []Operand{R(x)}, Src: []Operand{Addr(la.Reg, 0)}})
		nl[r] = f.Selp(F32, f.F(OpMulF, R(x), Fimm(float32(-math.Log2E))), Fimm(0), valid)
	}
	dq_ := zeros(f, D/8)
	g.i0 = f.Add(f.Add(f.Add(qrow0, f.MulC(g.warp, 16)), g.g4), g.off)
	g.i1 = f.Add(g.i0, I(8))

	q0, q1, ktlo, err := g.keyRange(qrow0, g.off)
	if err != nil {
		return err
	}

	fin := f.NewLabel("finish")
	f.CommentProg("tile class", g.p.Class)
	cur, ccur, err := g.find(ktlo, q0, q1)
	if err != nil {
		return err
	}
	pend := f.Setp("gt", S32, R(cur), g.kthi)
	buf := f.Mov(U32, I(0))
	// the delta stores to shared memory must be visible before the first
	// tile; the barrier below (or this one, when no tile is visited) does it
	skip := f.NewLabel("nofirst")
	f.Bra(skip, &pend, false)
	g.loadKV(R(cur), R(buf))
	f.Place(skip)
	f.Emit(Inst{Op: OpCpCommit})
	f.Emit(Inst{Op: OpCpWait, Src: []Operand{I(1)}})
	f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})
	f.Comment("this thread's rows: delta")
	var dl [2]Operand
	for r := 0; r < 2; r++ {
		x := f.NewReg(F32)
		f.Emit(Inst{Op: OpLd, T: F32, Space: "shared", Dst: []Operand{R(x)}, Src: []Operand{Addr(f.reg(U32, f.Add(sDelta, f.MulC(rows[r], 4))).Reg, 0)}})
		dl[r] = R(x)
	}
	f.Bra(fin, &pend, false)

	aQ := f.Add(f.Add(g.smem, f.MulC(g.warp, int64(16*g.RS))), g.aRowCol)
	var qa [][4]Reg
	if g.holdQ {
		f.Comment("Q fragments, held; dO fragments are read per tile")
		qa = make([][4]Reg, D/16)
		for ks := range qa {
			qa[ks] = g.frag(OpLdmatrix, aQ, int64(ks*32))
		}
	}
	aDO := f.Add(aQ, I(int64(g.tileBytes())))

	body := func() error {
		sb := g.bufBase(R(buf))
		f.Comment("S = Q K^T; P = exp2(S scale log2(e) - lse log2(e))")
		s := zeros(f, g.tileK/8)
		g.product16(s, aQ, f.Add(sb, g.aK), qa)
		at := g.rowsAt(R(cur))
		g.scoreStage(s, at)
		for n := range s {
			for x := range s[n] {
				f.Set(F32, s[n][x], g.prob(s[n][x], nl[x/2]))
			}
		}
		partial := f.Setp("eq", S32, R(ccur), I(cPartial))
		nomask := f.NewLabel("nomask")
		f.Bra(nomask, &partial, true)
		f.Comment("partial tile: the fused predicate per element, and the key bound")
		f.CommentProg("partial-tile predicate", g.p.Pred)
		c0 := f.Add(f.MulC(R(cur), int64(g.tileK)), f.MulC(g.t4, 2))
		lastK := g.keyPos(f.Sub(g.sk, I(1))) // the last key's position
		var lastP Operand                    // the documents' last position
		prow := [2]Operand{g.i0, g.i1}
		if g.docs {
			lastP = g.lastPos()
			prow[0], prow[1] = f.Min(prow[0], lastP), f.Min(prow[1], lastP)
		}
		cols := make([][2]Operand, g.tileK/8)
		inK := make([][2]Reg, g.tileK/8)
		for n := range cols {
			for x := 0; x < 2; x++ {
				c := f.Add(c0, I(int64(n*8+x)))
				inK[n][x] = f.Setp("lt", S32, c, g.sk)
				c = g.keyPos(c)
				if g.docs {
					c = f.Min(c, lastP)
				}
				cols[n][x] = c
			}
		}
		if g.useIntervals() {
			keep, err := g.rowIntervals(prow, lastK)
			if err != nil {
				return err
			}
			for n := range s {
				for x := range s[n] {
					k := keep(x/2, cols[n][x&1])
					f.Emit(Inst{Op: OpSelp, T: F32, Dst: []Operand{R(s[n][x])}, Src: []Operand{R(s[n][x]), Fimm(0), R(k)}})
				}
			}
		} else if err := g.maskTile(s, func(n, x int) Operand { return prow[x/2] }, func(n, x int) Operand { return cols[n][x&1] },
			func(n, x int) *Reg { r := inK[n][x&1]; return &r }); err != nil {
			return err
		}
		f.Place(nomask)
		f.Comment("dP = dO V^T; dS = P (dP - delta), in place")
		ds := zeros(f, g.tileK/8)
		g.productOver(g.Dv, ds, aDO, f.Add(f.Add(sb, I(int64(g.bufBytes()))), g.aK), nil)
		for n := range ds {
			for x := range ds[n] {
				f.Set(F32, ds[n][x], f.F(OpMulF, R(s[n][x]), f.F(OpSubF, R(ds[n][x]), dl[x/2])))
			}
		}
		g.scoreGrad(ds, at)
		g.zeroMasked(s, ds, partial)
		f.Comment("masked keys: non-finite K elements of a partial tile zeroed, flagged over V")
		sV := f.Add(sb, I(int64(g.bufBytes())))
		done := g.sanitizePartial(partial, sb, sV, f.Add(g.smem, I(int64(g.dqDelta()+4*TileQ))), g.tileK)
		f.Comment("dQ += dS K (K through ldmatrix.trans)")
		g.accumulate(dq_, g.pack(ds), f.Add(sb, g.aRowCol))
		g.restoreNaN(done, g.pack(s), f.Add(sV, g.aRowCol), dq_)
		return nil
	}
	if err := g.pipeline("tile", cur, ccur, buf, g.kthi,
		func(start Operand) (Reg, Reg, error) { return g.find(start, q0, q1) },
		g.loadKV, body); err != nil {
		return err
	}
	f.Place(fin)
	f.Emit(Inst{Op: OpCpWait, Src: []Operand{I(0)}})

	f.Comment("epilogue: dq = scale * acc, f32, rows past seq_q not stored")
	if g.lateBases() {
		dqb = g.rowsBase("q", g.global("dq"), h, row0, 4)
	}
	for r := 0; r < 2; r++ {
		valid := f.Setp("le", S32, rows[r], lim)
		var inQ *Reg // rows of the tensor past the batch row's queries: 0
		if g.lens {
			in := valid
			inQ = &in
			valid = f.Setp("lt", S32, f.Add(qrow0, rows[r]), g.sqT)
		}
		rb := g.wide(g.rowAt("q", dqb, rows[r], 4*g.pitch), g.t4, 8)
		for n := range dq_ {
			for x := 0; x < 2; x++ {
				val := f.F(OpMulF, R(dq_[n][2*r+x]), g.scale)
				if inQ != nil {
					val = f.Selp(F32, val, Fimm(0), *inQ)
				}
				f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &valid, Dst: []Operand{Addr(rb.Reg, int64(n*32+4*x))}, Src: []Operand{val}})
			}
		}
	}
	f.Emit(Inst{Op: OpRet})
	return nil
}

// loadKV issues the copies of key tile kt into K/V buffer buf (dq kernel).
func (g *bwdK) loadKV(kt, buf Operand) {
	g.copyKV(kt, func() Operand { return g.bufBase(buf) }, int64(g.bufBytes()))
}
