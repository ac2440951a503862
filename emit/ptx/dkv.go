package ptx

import (
	"fmt"
	"math"
)

// kernelDKV: one CTA per (key tile, key/value head, batch x class).
func (g *bwdK) kernelDKV() error {
	f := g.f
	D := g.D
	cta := g.prologue(true, false)
	kt, kvh := cta[0], cta[1]
	g.bz, g.scale = cta[2], g.par["scale"]
	q, k, v, dout := g.par["q"], g.par["k"], g.par["v"], g.par["dout"]
	lse, delta, dk, dv := g.par["lse"], g.par["delta"], g.par["dk"], g.par["dv"]
	if err := g.segment(kt); err != nil {
		return err
	}
	group := f.Op3(OpDiv, U32, g.hq, g.hkv)
	// with the columns split (cols > 1), warp w owns keys 16(w mod 4) ..
	// and columns Dc(w / 4) .. of dk and dv (Dc = D/cols)
	g.kwarp = g.warp
	Dc := D / g.cols
	var colS, colG Operand // this warp's first column: shared (elem) and global (f32) byte offsets
	if g.cols > 1 {
		g.kwarp = f.Op3(OpAnd, B32, g.warp, I(3))
		half := f.Op3(OpShr, U32, g.warp, I(2))
		colS, colG = f.MulC(half, int64(2*Dc)), f.MulC(half, int64(4*Dc))
	}
	Dvc := g.Dv / g.cols
	colSV, colGV := colS, colG // the same for dv's columns
	if g.cols > 1 && g.Dv != D {
		half := f.Op3(OpShr, U32, g.warp, I(2))
		colSV, colGV = f.MulC(half, int64(2*Dvc)), f.MulC(half, int64(4*Dvc))
	}
	cols := func(a Operand) Operand {
		if g.cols > 1 {
			return f.Add(a, colS)
		}
		return a
	}
	colsV := func(a Operand) Operand {
		if g.cols > 1 {
			return f.Add(a, colSV)
		}
		return a
	}
	krow0 := f.MulC(kt, TileK)
	kRow := f.Add(g.kR0, f.MulC(krow0, g.pitch)) // the tile's first key: a tensor row of the head
	kb := g.rowsBase("k", k, kvh, kRow, 2)
	vb := g.rowsBase("v", v, kvh, kRow, 2)
	// the gradients' bases: here, or for the identity layout after the
	// loop from the CTA's coordinates (no register holds them across it)
	gradBases := func() (Operand, Operand) {
		return g.rowsBase("k", dk, kvh, kRow, 4), g.rowsBase("v", dv, kvh, kRow, 4)
	}
	var dkb, dvb Operand
	var kTlim Operand // residue layout: the tile's keys among the class's rows of the tensors (the stores' bound)
	if g.st > 1 {
		dkb, dvb = gradBases()
		kTlim = f.Sub(g.skT, krow0)
	}

	f.Comment("K and V tiles: cp.async, keys past seq_k zero-filled")
	klim := f.Sub(f.Sub(g.sk, I(1)), krow0)
	g.copyRows("k", g.smem, f.Op3(OpAdd, U64, kb, g.ch16w), klim, TileK)
	g.copyRowsV("v", f.Add(g.smem, I(int64(g.tileBytes()))), f.Op3(OpAdd, U64, vb, g.ch16w), klim, TileK)
	f.Emit(Inst{Op: OpCpCommit})

	dkA, dvA := zeros(f, Dc/8), zeros(f, Dvc/8)
	// the tile's first and last key positions (kp: the row's first key's)
	k0 := g.keyPos(f.Add(krow0, I(0)))
	k1 := g.keyPos(f.Sub(f.Min(f.Add(krow0, I(TileK)), g.sk), I(1)))
	// this thread's keys (positions) in the C layout: rows g4 and g4+8 of the warp's 16
	kpos := [2]Operand{g.keyPos(f.Add(f.Add(krow0, f.MulC(g.kwarp, 16)), g.g4))}
	kpos[1] = f.Add(kpos[0], I(8))

	// The query-tile range and the first tile to visit come from the
	// plan's query hull and class programs: the same for every head of the
	// group, unless the programs read head parameters, whose values are
	// then loaded and the schedule evaluated per head inside the loop.
	perHead := len(g.p.HeadParams()) > 0
	bq := int64(g.tileQ)
	schedule := func() (first, cfirst Reg, err error) {
		f.Comment("query-tile range of this key tile")
		nqt := f.FloorDiv(f.Add(g.sq, I(bq-1)), bq)
		qtlo, qthi := Operand(I(0)), f.Sub(nqt, I(1))
		if g.p.QHull != nil {
			f.CommentProg("query hull", g.p.QHull)
			qh, err := RenderInts(f, g.p.QHull, g.env(k0, k1, I(0)))
			if err != nil {
				return first, cfirst, err
			}
			lo := f.Max(f.Sub(qh[0], g.off), I(0))
			hi := f.Min(f.Sub(qh[1], g.off), f.Sub(g.sq, I(1)))
			qtlo, qthi = f.FloorDiv(lo, bq), f.FloorDiv(hi, bq)
		}
		g.qthi = f.reg(S32, qthi)
		if g.lens {
			// a key tile wholly past its batch row's keys visits no query tile
			past := f.Setp("ge", S32, krow0, g.sk)
			f.Emit(Inst{Op: OpMov, T: S32, Guard: &past, Dst: []Operand{g.qthi}, Src: []Operand{I(-1)}})
		}
		qtlo = f.reg(S32, qtlo)
		if !perHead {
			g.fragAddrs()
			f.Comment("the first query tile to visit (the same for every head: the mask does not depend on it)")
		} else {
			f.Comment("the first query tile to visit at this head")
		}
		return g.findQ(qtlo, k0, k1)
	}
	var first, cfirst Reg
	var err error
	if perHead {
		g.fragAddrs()
	} else if first, cfirst, err = schedule(); err != nil {
		return err
	}
	aKw, aVw := g.aKw, g.aVw
	f.Comment("over the query heads of the group")
	gi := f.Mov(U32, I(0))
	heads := f.NewLabel("head")
	done := f.NewLabel("heads_done")
	f.Place(heads)
	h := f.Add(f.Op3(OpMulLo, S32, kvh, group), R(gi))
	g.scoreHead(h)
	if perHead {
		g.headValues(h)
		if first, cfirst, err = schedule(); err != nil {
			return err
		}
	}
	qb := f.Op3(OpAdd, U64, g.rowsBase("q", q, h, g.qR0, 2), g.ch16w)
	db := f.Op3(OpAdd, U64, g.rowsBase("o", dout, h, g.qR0, 2), g.ch16w)
	lb := g.lseRows(lse, h, g.qR0)
	deb := g.lseRows(delta, h, g.qR0)
	ld := &qLoader{g: g, qb: qb, db: db, lb: lb, deb: deb}

	cur, ccur := f.Mov(U32, R(first)), f.Mov(U32, R(cfirst))
	buf := f.Mov(U32, I(0))
	next := f.NewLabel("next_head")
	pend := f.Setp("gt", S32, R(cur), g.qthi)
	f.Bra(next, &pend, false)
	ld.load(R(cur), R(buf))
	f.Emit(Inst{Op: OpCpCommit})

	body := func() error {
		sb := g.bufBase(R(buf))
		sDO := f.Add(sb, I(int64(g.bufBytes())))
		f.Comment("S^T = K Q^T (this warp's 16 keys by the tile's 64 queries); P^T")
		s := zeros(f, g.tileQ/8)
		g.product16(s, aKw, f.Add(sb, g.aK), nil)
		f.Comment("per query column: -lse*log2(e) and delta from shared memory")
		rb := g.rowBase(R(buf))
		qr0 := f.MulC(R(cur), bq)
		colAddr := f.reg(U32, f.Add(rb, f.MulC(g.t4, 8))) // column 2*t4 of block 0
		// S^T: the thread's keys kpos are its rows, its queries columns
		at := scoreAt{
			query: func(n, x int) Operand { return f.Add(f.Add(f.Add(qr0, f.MulC(g.t4, 2)), g.off), I(int64(n*8+x%2))) },
			key:   func(n, x int) Operand { return kpos[x/2] },
		}
		g.scoreStage(s, at)
		for n := range s {
			for c := 0; c < 2; c++ {
				nlv := f.NewReg(F32)
				f.Emit(Inst{Op: OpLd, T: F32, Space: "shared", Dst: []Operand{R(nlv)}, Src: []Operand{Addr(colAddr.Reg, int64(4*(8*n+c)))}})
				for _, x := range []int{c, c + 2} {
					f.Set(F32, s[n][x], g.prob(s[n][x], R(nlv)))
				}
			}
		}
		partial := f.Setp("eq", S32, R(ccur), I(cPartial))
		nomask := f.NewLabel("nomask")
		f.Bra(nomask, &partial, true)
		f.Comment("partial tile: the fused predicate per element (rows past seq_q have P = 0 already)")
		f.CommentProg("partial-tile predicate", g.p.Pred)
		lastK := g.lastPos() // the documents' last position
		kp := kpos
		if g.docs {
			kp[0], kp[1] = f.Min(kp[0], lastK), f.Min(kp[1], lastK)
		}
		qc0 := f.Add(f.Add(qr0, f.MulC(g.t4, 2)), g.off)
		qcols := make([][2]Operand, g.tileQ/8)
		for n := range qcols {
			for x := 0; x < 2; x++ {
				c := f.Add(qc0, I(int64(n*8+x)))
				if g.docs {
					c = f.Min(c, lastK)
				}
				qcols[n][x] = c
			}
		}
		if err := g.maskTile(s, func(n, x int) Operand { return qcols[n][x&1] }, func(n, x int) Operand { return kp[x/2] },
			func(n, x int) *Reg { return nil }); err != nil {
			return err
		}
		f.Place(nomask)
		f.Comment("dP^T = V dO^T; dS^T = P^T (dP^T - delta), in place")
		ds := zeros(f, g.tileQ/8)
		g.productOver(g.Dv, ds, aVw, f.Add(sDO, g.aK), nil)
		for n := range ds {
			for c := 0; c < 2; c++ {
				dlv := f.NewReg(F32)
				f.Emit(Inst{Op: OpLd, T: F32, Space: "shared", Dst: []Operand{R(dlv)}, Src: []Operand{Addr(colAddr.Reg, int64(4*(8*n+c))+4*bq)}})
				for _, x := range []int{c, c + 2} {
					f.Set(F32, ds[n][x], f.F(OpMulF, R(s[n][x]), f.F(OpSubF, R(ds[n][x]), R(dlv))))
				}
			}
		}
		g.scoreGrad(ds, at)
		g.zeroMasked(s, ds, partial)
		flags := f.Add(g.smem, I(int64(g.dkvFlags())))
		vote := f.Add(flags, I(int64(g.bufBytes())))
		f.Comment("masked rows: non-finite dO elements of a partial tile zeroed and flagged; dV += P^T dO (dO through ldmatrix.trans)")
		fixed := g.sanitizePartialOf(g.vact, partial, sDO, flags, vote, g.tileQ)
		pa := g.pack(s)
		g.accumulate(dvA, pa, colsV(f.Add(sDO, g.aRowCol)))
		g.restoreNaN(fixed, pa, colsV(f.Add(flags, g.aRowCol)), dvA)
		f.Comment("the same for Q; dK += dS^T Q")
		fixed = g.sanitizePartial(partial, sb, flags, f.Add(vote, I(int64(g.voteBytes()))), g.tileQ)
		g.accumulate(dkA, g.pack(ds), cols(f.Add(sb, g.aRowCol)))
		g.restoreNaN(fixed, pa, cols(f.Add(flags, g.aRowCol)), dkA)
		return nil
	}
	if err := g.pipeline("qtile", cur, ccur, buf, g.qthi,
		func(start Operand) (Reg, Reg, error) { return g.findQ(start, k0, k1) },
		ld.load, body); err != nil {
		return err
	}
	f.Place(next)
	f.Emit(Inst{Op: OpCpWait, Src: []Operand{I(0)}})
	f.Into(OpAdd, U32, gi, R(gi), I(1))
	more := f.Setp("lt", U32, R(gi), group)
	f.Bra(heads, &more, false)
	f.Place(done)

	f.Comment("epilogue: dk = scale * acc, dv = acc, f32, keys past seq_k not stored")
	if g.st == 1 {
		dk, dv = g.global("dk"), g.global("dv")
		kvh, kRow = g.special("%ctaid.y"), f.MulC(g.special("%ctaid.x"), TileK)
		g.bz = g.special("%ctaid.z")
		dkb, dvb = gradBases()
	}
	for r := 0; r < 2; r++ {
		kr := f.Add(f.Add(f.MulC(g.kwarp, 16), g.g4), I(int64(8*r)))
		valid := f.Setp("le", S32, kr, klim)
		var inK *Reg // keys of the tensor past the batch row's keys: 0
		if g.lens {
			in := valid
			inK = &in
			if g.st > 1 {
				valid = f.Setp("lt", S32, kr, kTlim)
			} else {
				valid = f.Setp("lt", S32, f.Add(kRow, kr), g.skT)
			}
		}
		ka := g.wide(g.rowAt("k", dkb, kr, 4*g.pitch), g.t4, 8)
		va := g.wide(g.rowAt("v", dvb, kr, 4*g.pitch), g.t4, 8)
		if g.cols > 1 {
			ka, va = g.wide(ka, colG, 1), g.wide(va, colGV, 1)
		}
		for n := 0; n < max(Dc, Dvc)/8; n++ {
			for x := 0; x < 2; x++ {
				if n < Dc/8 {
					kv := f.F(OpMulF, R(dkA[n][2*r+x]), g.scale)
					if inK != nil {
						kv = f.Selp(F32, kv, Fimm(0), *inK)
					}
					f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &valid, Dst: []Operand{Addr(ka.Reg, int64(n*32+4*x))}, Src: []Operand{kv}})
				}
				if n < Dvc/8 {
					vv := Operand(R(dvA[n][2*r+x]))
					if inK != nil {
						vv = f.Selp(F32, vv, Fimm(0), *inK)
					}
					f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &valid, Dst: []Operand{Addr(va.Reg, int64(n*32+4*x))}, Src: []Operand{vv}})
				}
			}
		}
	}
	f.Emit(Inst{Op: OpRet})
	return nil
}

// fragAddrs sets the dk/dv kernel's K and V fragment addresses: this
// warp's 16 keys in the K and V tiles.
func (g *bwdK) fragAddrs() {
	f := g.f
	f.Comment("K and V fragment addresses: this warp's 16 keys")
	g.aKw = f.Add(f.Add(g.smem, f.MulC(g.kwarp, int64(16*g.RS))), g.aRowCol)
	g.aVw = f.Add(g.aKw, I(int64(g.tileBytes())))
}

// qLoader loads the query-side tiles of the dkv kernel for one query head.
type qLoader struct {
	g       *bwdK
	qb, db  Operand // b64: row 0 of q and dout of the head (segment row 0), plus the thread's chunk
	lb, deb Operand // b64: row 0 of lse and delta of the head
}

// load issues the copies of query tile qt into buffer buf: Q and dO rows
// by cp.async (rows past seq_q zero-filled), and the rows' -lse*log2(e)
// and delta by plain loads and shared stores (-Inf and 0 past seq_q, so
// those rows have P = 0 and dS = 0).
func (l *qLoader) load(qt, buf Operand) {
	g, f := l.g, l.g.f
	bq := int64(g.tileQ)
	f.Comment("Q and dO tile copies, rows past seq_q zero-filled")
	r0 := f.MulC(qt, bq)
	lim := f.Sub(f.Sub(g.sq, I(1)), r0)
	sb := g.bufBase(buf)
	g.copyRows("q", sb, g.rowAt("q", l.qb, r0, 2*g.pitch), lim, g.tileQ)
	g.copyRowsV("o", f.Add(sb, I(int64(g.bufBytes()))), g.rowAt("o", l.db, r0, 2*g.pitch), lim, g.tileQ)
	f.Comment(fmt.Sprintf("the rows' -lse*log2(e) (threads 0-%d) and delta (%d-%d)", bq-1, bq, 2*bq-1))
	r := f.Op3(OpAnd, B32, g.tid, I(bq-1))
	isDelta := f.Setp("ge", U32, g.tid, I(bq))
	some := f.Setp("lt", U32, g.tid, I(2*bq))
	valid := f.Setp("le", S32, r, lim)
	rc := f.Add(r0, f.Min(r, f.Max(lim, I(0))))
	base := f.NewReg(B64)
	f.Emit(Inst{Op: OpSelp, T: S64, Dst: []Operand{R(base)}, Src: []Operand{l.deb, l.lb, R(isDelta)}})
	a := g.wide(R(base), rc, 4*g.pitch)
	x := f.Mov(F32, Fimm(0))
	f.Emit(Inst{Op: OpLd, T: F32, Space: "global", Guard: &some, Dst: []Operand{R(x)}, Src: []Operand{Addr(a.Reg, 0)}})
	nl := f.Selp(F32, f.F(OpMulF, R(x), Fimm(float32(-math.Log2E))), negInf, valid)
	dl := f.Selp(F32, R(x), Fimm(0), valid)
	val := f.Selp(F32, dl, nl, isDelta)
	sa := f.reg(U32, f.Add(g.rowBase(buf), f.MulC(f.Op3(OpAnd, B32, g.tid, I(2*bq-1)), 4)))
	f.Emit(Inst{Op: OpSt, T: F32, Space: "shared", Guard: &some, Dst: []Operand{Addr(sa.Reg, 0)}, Src: []Operand{val}})
}

// findQ emits a scan from query tile start to the first tile at or past it
// whose class against key positions [k0, k1] (the plan's class program)
// is not empty, or past qthi. With a query hull, an empty tile jumps to
// the tile of the first query at or past the next tile that the hull
// allows.
func (g *bwdK) findQ(start, k0, k1 Operand) (t, c Reg, err error) {
	f := g.f
	t, c = f.Mov(U32, start), f.Mov(U32, I(cEmpty))
	scan, done := f.NewLabel("qscan"), f.NewLabel("qfound")
	f.Place(scan)
	past := f.Setp("gt", S32, R(t), g.qthi)
	f.Bra(done, &past, false)
	r0 := f.MulC(R(t), int64(g.tileQ))
	rend := f.Add(r0, I(int64(g.tileQ)))
	q0 := f.Add(r0, g.off)
	q1 := f.Add(f.Sub(f.Min(rend, g.sq), I(1)), g.off)
	f.Comment("tile class: the plan's class program")
	cls, err := RenderInts(f, g.p.Class, g.env(q0, q1, k0, k1))
	if err != nil {
		return t, c, err
	}
	f.Set(U32, c, f.reg(S32, cls[0]))
	empty := f.Setp("eq", S32, R(c), I(cEmpty))
	f.Bra(done, &empty, true)
	if g.p.QHull != nil {
		f.Comment("empty tile: jump to the tile of the first query at or past the next tile that the query hull allows")
		qh, err := RenderInts(f, g.p.QHull, g.env(k0, k1, f.Add(rend, g.off)))
		if err != nil {
			return t, c, err
		}
		f.Set(U32, t, f.Max(f.Add(R(t), I(1)), f.FloorDiv(f.Sub(qh[0], g.off), int64(g.tileQ))))
	} else {
		f.Into(OpAdd, U32, t, R(t), I(1))
	}
	f.Bra(scan, nil, false)
	f.Place(done)
	return t, c, nil
}
