package ptx

import (
	"fmt"
	"math"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
)

// Backward is a generated backward pass: one module with two kernels,
// launched in order on the same stream.
//
//   - DQ runs per query tile (the forward's grid): delta = rowsum(dout *
//     out) for its rows (written to the delta buffer), then over the key
//     tiles its rows visit (the forward's schedule) P = exp(S - lse),
//     dP = dout V^T, dS = P (dP - delta) and dq += dS K * scale.
//   - DKV runs per key tile of a key/value head: over the query heads of
//     its group and the query tiles that keep some key of the tile (the
//     plan's query hull and class programs), P^T, dP^T and dS^T, dv +=
//     P^T dout and dk += dS^T q * scale, summed in registers.
//
// Every gradient element is written by one thread in a fixed order, so
// results are deterministic (no atomics), and every row is written: rows
// and keys that keep nothing get exactly 0.
type Backward struct {
	DQ, DKV      string // entry names
	Target       Target
	HeadDim      int // of q, k, dq and dk
	HeadDimV     int // of v, the output, dout and dv (HeadDim unless the plan's head_dim is {qk, v})
	Elem         Type
	Stride       int // residue stride (1: identity layout)
	DQParams     []Param
	DKVParams    []Param
	PTX          string // the module text
	DQShared     int    // dynamic shared memory of DQ, bytes
	DKVShared    int    // dynamic shared memory of DKV, bytes
	HasQueryHull bool   // the DKV kernel jumps over query tiles with the plan's query hull
	// HeadParams are the plan's head parameters, whose values both
	// kernels take in head_params (as Forward's); nil when they take none.
	HeadParams []mask.HeadParam
	// Score is the plan's score stage, whose values the kernels take as
	// Forward's do; with learned sinks the dq kernel also writes each
	// row's term of the sink gradient (dsink_rows, summed by gpu.DSink).
	Score mask.Score
}

// GenerateBackward emits the backward kernels of a plan for cfg.Target.
// Like GenerateForward it renders the plan's programs (key hull, class,
// predicate, query hull, residue) and reads nothing else of the mask.
func GenerateBackward(p *gen.Plan, cfg Config) (*Backward, error) {
	t := cfg.Target
	if t == (Target{}) {
		t = SM80
	}
	if t.Accel {
		return nil, fmt.Errorf("ptx: target %s: the backward kernels use mma.sync; generate them for sm_%d (which sm_90a GPUs run)", t.Name(), t.SM)
	}
	// the forward's checks: target, tiles, head dim, layout, programs
	gm, err := planGeom(p, t)
	if err != nil {
		return nil, err
	}
	if p.QHull != nil && (len(p.QHull.Args) != 3 || len(p.QHull.Results) != 2) {
		return nil, fmt.Errorf("ptx: plan %s: the query hull program %s takes %d arguments and returns %d values, want 3 and 2", p.Name, p.QHull.Name, len(p.QHull.Args), len(p.QHull.Results))
	}
	// the query hull may read documents too
	gm.docs = gm.docs || (p.QHull != nil && p.QHull.UsesDocs())
	// padded rows; dq: 64 query rows per CTA (4 warps) and the table's
	// key tile; dk/dv: 64 keys per CTA (4 warps of 16, times the table's
	// column split) and the table's query rows per step
	tl := tilesOf(gm.D)
	gm.RS = rowStride(gm.D)
	b := &Backward{Target: t, HeadDim: p.HeadDim, HeadDimV: gm.Dv}
	var funcs []*Func
	var shared [2]int
	for n, dkv := range []bool{false, true} {
		name := "attn_bwd_dq_" + p.Name
		gm.tileQ, gm.tileK, gm.threads = TileQ, tl.dqK, Threads
		if dkv {
			name = "attn_bwd_dkv_" + p.Name
			gm.tileQ, gm.tileK, gm.threads = tl.dkvQ, TileK, Threads*tl.dkvCols
			if len(p.Pred.Insts) > bigPred {
				// a long partial-tile predicate (NATTEN's: ptxas 11.8
				// spilled at 64 queries) needs the registers of 32
				gm.tileQ = min(gm.tileQ, 32)
			}
			if p.Score.SoftCap && len(p.Pred.Insts) > capPred {
				// the soft-cap's tanh per score, and its t kept for dS,
				// leave a long predicate the registers of 32 queries
				// (NATTEN, 55 instructions, at 64: 76-80 bytes of spills
				// with ptxas 11.8 and 12.4)
				gm.tileQ = min(gm.tileQ, 32)
			}
		} else if gm.D >= 192 && len(p.Pred.Insts) > bigPred || gm.D >= 256 && p.Score.SoftCap {
			// dq at D >= 192: a long predicate next to 96 or 128
			// accumulators and the score tiles spilled (bigbird: 8 bytes,
			// ptxas 11.8 and 12.4, with 32 keys at D = 256); so did the
			// soft-cap's tanh and its t kept for dS at D = 256 (gemma2:
			// 4 bytes at 255 registers, ptxas 12.4 for sm_90); half the
			// table's keys halve the score tiles
			gm.tileK = tl.dqK / 2
		}
		// the dq kernel reads the learned sinks for their gradient
		gm.sinks = !dkv && p.Score.LearnedSinks
		g := newKit(p, cfg, gm, name)
		bk := &bwdK{kit: g, dkv: dkv, cols: 1, holdQ: tl.dqHoldQ}
		if dkv {
			bk.cols = tl.dkvCols
		}
		if dkv {
			g.f.Params = g.kernelParams([]Param{parQ, parK, parV, parDO, parFLSE, parDlt}, []Param{parDK, parDV}, []Param{parScl}, stridesFwd)
		} else {
			after := []Param{parDQ}
			if gm.sinks {
				after = append(after, parDSink)
			}
			g.f.Params = g.kernelParams([]Param{parQ, parK, parV, parFwdO, parDO, parFLSE, parDlt}, after, []Param{parScl}, stridesFwd)
		}
		g.f.ReqNTID = g.threads
		// one CTA per SM is all the register budget must allow: ptxas
		// otherwise caps some kernels near 168 registers and spills
		g.f.MinCTAs = 1
		g.f.DynShared = "smem"
		if err := bk.kernel(); err != nil {
			return nil, err
		}
		funcs = append(funcs, g.f)
		shared[n] = bk.smemBytes()
		b.Elem, b.Stride = g.elem, g.st
	}
	mod := &Module{
		Comments: []string{
			fmt.Sprintf("attngen backward kernels for spec %q, target %s", p.Name, t.Name()),
			fmt.Sprintf("tiles %dx%d, head_dim %d, %s in, f32 gradients, layout %s", TileQ, TileK, p.HeadDim, b.Elem, layoutText(p.Layout)),
			fmt.Sprintf("generated by emit/ptx.GenerateBackward(plan, ptx.Config{Target: ptx.Target{SM: %d, Elem: %q}, SoftLg2: %v})", t.SM, t.Elem, cfg.SoftLg2),
		},
		SM:    t.SM,
		Funcs: funcs,
	}
	text, err := mod.Text()
	if err != nil {
		return nil, err
	}
	b.DQ, b.DKV = funcs[0].Name, funcs[1].Name
	b.DQParams, b.DKVParams = funcs[0].Params, funcs[1].Params
	b.PTX, b.DQShared, b.DKVShared = text, shared[0], shared[1]
	b.HasQueryHull = p.QHull != nil
	b.HeadParams = maskHeadParams(p)
	b.Score = p.Score.Runtime()
	return b, nil
}

// Kernels describes the two kernels as generated packages embed them
// (both share the module text).
func (b *Backward) Kernels() [2]gpu.Kernel {
	tl := tilesOf(b.HeadDim)
	mk := func(kind, name string, params []Param, dyn, tileK, threads int) gpu.Kernel {
		k := gpu.Kernel{Target: b.Target.Arch(), Elem: b.Target.Elem, Kind: kind, Name: name, PTX: b.PTX,
			HeadDim: b.HeadDim, HeadDimV: orDim(b.HeadDimV, b.HeadDim),
			TileQ: TileQ, TileK: tileK, Threads: threads, DynShared: dyn, Stride: max(b.Stride, 1)}
		for _, p := range params {
			k.Params = append(k.Params, [3]string{p.Name, p.T.String(), p.Doc})
		}
		return k
	}
	return [2]gpu.Kernel{mk(gpu.KindBwdDQ, b.DQ, b.DQParams, b.DQShared, tl.dqK, Threads), mk(gpu.KindBwdDKV, b.DKV, b.DKVParams, b.DKVShared, TileK, Threads*tl.dkvCols)}
}

// BackwardLaunch is the launch of both kernels for one call.
type BackwardLaunch struct {
	DQ, DKV Launch
	Scale   float32
}

// Geometry is the launch of a call with the given shape; scale 0 means
// 1/sqrt(D). seq_q > seq_k needs positions, as Forward.Geometry says.
func (b *Backward) Geometry(batch, headsQ, headsKV, seqQ, seqK int, scale float64) (BackwardLaunch, error) {
	ks := b.Kernels()
	var l BackwardLaunch
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(b.HeadDim))
	}
	if sl := float32(scale * math.Log2E); !(scale > 0) || math.IsInf(float64(sl), 0) || float32(scale) == 0 {
		return l, fmt.Errorf("ptx: softmax scale %v: the kernel needs a positive scale whose product with log2(e) is a finite float32", scale)
	}
	if err := wideFits(b.DQParams, seqQ, seqK); err != nil {
		return l, err
	}
	for n, k := range ks {
		grid, block, dyn, err := k.GeometryAt(batch, headsQ, headsKV, seqQ, seqK, seqQ > seqK)
		if err != nil {
			return l, fmt.Errorf("ptx: %w", err)
		}
		params := b.DQParams
		if n == 1 {
			params = b.DKVParams
		}
		x := Launch{Grid: grid, Block: block, DynShared: dyn, Params: params,
			SeqQ: uint32(seqQ), SeqK: uint32(seqK), HeadsQ: uint32(headsQ), HeadsKV: uint32(headsKV),
			ScaleLog2: float32(scale * math.Log2E), HeadDim: b.HeadDim, HeadDimV: orDim(b.HeadDimV, b.HeadDim), Stride: max(k.Stride, 1)}
		if n == 0 {
			l.DQ = x
		} else {
			l.DKV = x
		}
	}
	l.Scale = float32(scale)
	return l, nil
}

// BackwardArgs lists a backward kernel's arguments in parameter order: the
// device addresses as the kernel's parameters name them (q, k, v, [o],
// dout, lse, delta, [doc_id, doc_start, doc_end], dq or dk and dv), then
// the scalars.
func (l BackwardLaunch) Args(x Launch, ptrs ...uint64) ([]any, error) {
	args, err := x.Args(ptrs...)
	if err != nil {
		return nil, err
	}
	return append(args, l.Scale), nil
}

// The dk/dv kernel's query rows per step are tilesOf(D).dkvQ: at D = 128
// its 128 registers of dk and dv accumulators leave little room for score
// fragments (ptxas 11.8 spilled at 64 queries, and for sm_90 at 32), so
// it takes 16; so do D = 192 and 256, whose warps hold half the columns
// (96 and 128 registers).

// capPred is the predicate length (IR instructions) above which the dk/dv
// kernel of a soft-capped plan takes at most 32 query rows per step.
const capPred = 48

// The dq kernel holds Q's fragments in registers where tilesOf(D).dqHoldQ
// (D <= 64); above (D = 128: 32 more registers next to 64 of dq
// accumulators) ptxas 11.8 spilled, so they are read per tile.

// bwdK emits one of the two backward kernels.
type bwdK struct {
	*kit
	dkv   bool
	cols  int  // dk/dv: warps per 16 keys, splitting dk's and dv's columns (1: none)
	holdQ bool // dq: Q's fragments live in registers

	scale        Operand // f32 softmax scale
	bz, c        Operand // batch and residue class
	sqAll, skAll Operand
	qR0, kR0     Operand // tensor rows (within a head) of the segment's query 0 and key 0
	off          Operand // position of query row r is r + off
	qthi         Operand // last query tile (dkv)
	kwarp        Operand // dkv: the warp's group of 16 keys (warp mod 4)
	aKw, aVw     Operand // this warp's K and V fragment addresses (dkv)
	aRowCol, aK  Operand // ldmatrix lane offsets: A operands and trans B; non-trans B
}

// Shared memory. dq: Q, dO, then 2 buffers of K and V; then delta of the
// tile's rows. dkv: K, V, then 2 buffers of Q and dO, then 2 buffers of
// the rows' -lse*log2(e) and delta.
func (g *bwdK) tileBytes() int { return TileQ * g.RS }

// bufBytes is one tile of the double-buffered pair: tileK keys (dq) or
// tileQ query rows (dkv).
func (g *bwdK) bufBytes() int {
	if g.dkv {
		return g.tileQ * g.RS
	}
	return g.tileK * g.RS
}

func (g *bwdK) smemBytes() int { return g.rowOff() + g.rowBytes() }

// rowOff is where stageRow keeps the batch row's values: after the vote
// words.
func (g *bwdK) rowOff() int {
	if g.dkv {
		return g.dkvFlags() + g.bufBytes() + 2*g.voteBytes()
	}
	return g.dqDelta() + 4*TileQ + g.voteBytes()
}

// dqDelta is the dq kernel's delta array, after Q, dO and the K/V buffers.
func (g *bwdK) dqDelta() int { return 2*g.tileBytes() + 4*g.bufBytes() }

// voteBytes is one word per warp for sanitize's vote.
func (g *bwdK) voteBytes() int { return 4 * g.warps() }

// dkvFlags is the dk/dv kernel's flag tile (sanitize), after the rows'
// -lse*log2(e) and delta; its two vote areas follow it.
func (g *bwdK) dkvFlags() int { return 2*g.tileBytes() + 4*g.bufBytes() + 2*2*4*g.tileQ }

// buffer b of the double-buffered pair of tiles (dq: K, V; dkv: Q, dO).
func (g *bwdK) bufBase(buf Operand) Operand {
	return g.f.Add(g.f.Add(g.smem, I(int64(2*g.tileBytes()))), g.f.MulC(buf, int64(2*g.bufBytes())))
}

// dkv: the 64 (-lse*log2(e), delta) pairs of buffer buf, as two arrays.
func (g *bwdK) rowBase(buf Operand) Operand {
	return g.f.Add(g.f.Add(g.smem, I(int64(2*g.tileBytes()+4*g.bufBytes()))), g.f.MulC(buf, int64(2*4*g.tileQ)))
}

// segment sets up the CTA's segment after the prologue: the residue
// class for residue layouts (CTAs whose tile lies past the class's
// queries, or keys for the dk/dv kernel, return), the position offset,
// the copy lanes and the ldmatrix lane offsets; tile is the CTA's tile
// index along x (a query tile for dq, a key tile for dkv).
func (g *bwdK) segment(tile Operand) error {
	f := g.f
	g.sqAll, g.skAll = g.sq, g.sk
	g.c, g.qR0, g.kR0 = I(0), I(0), I(0)
	st := int64(g.st)
	if st > 1 {
		g.c, g.bz = g.residueSplit(g.bz, st)
	}
	g.rowLens(g.bz)
	g.rowPos(g.bz)
	g.stageRow(int64(g.rowOff()), false)
	g.off = g.qp0
	g.pitch = int64(g.st)
	if st > 1 {
		g.qR0, g.kR0 = g.residueSegment(g.c, st)
		if g.dkv {
			g.residueExit(f.MulC(tile, TileK), g.skT)
		} else {
			g.residueExit(f.MulC(tile, TileQ), g.sqT)
		}
		g.off = g.qp0
	}
	g.copyLanes()
	g.aRowCol = g.ldmRowCol()
	g.aK = g.ldmKey()
	return nil
}

// rowsBase is the b64 address of tensor row row0 of head h of the CTA's
// batch element in a tensor at base whose strides are tensor t's
// (strideParams: q for q and dq, o for the output and dout, k for k and
// dk, v for v and dv), elements of esize bytes.
func (g *bwdK) rowsBase(t string, base, h, row0 Operand, esize int64) Operand {
	return g.rowAt(t, g.headAt(t, base, g.bz, h, esize), row0, esize)
}

// copyRows issues cp.async copies of rows [0, n) of a tile into shared
// memory at dst (row pitch RS) from src (the tile's row 0 plus this
// thread's chunk; rows pitch times tensor t's pos stride apart),
// zero-filling rows past lim (lim >= 0 is the last valid row).
func (g *bwdK) copyRows(t string, dst, src, lim Operand, n int) {
	g.copyRowsOf(t, g.act, dst, src, lim, n)
}

// copyRowsV is copyRows for value-shaped rows (Dv elements: v, dout).
func (g *bwdK) copyRowsV(t string, dst, src, lim Operand, n int) {
	g.copyRowsOf(t, g.vact, dst, src, lim, n)
}

func (g *bwdK) copyRowsOf(t string, act *Reg, dst, src, lim Operand, n int) {
	f := g.f
	sd := f.Add(dst, g.copyS)
	for it := 0; it < n/g.rowStep(); it++ {
		r := f.Add(g.rb, I(int64(it*g.rowStep())))
		valid := f.Setp("le", S32, r, lim)
		size := f.Selp(U32, I(16), I(0), valid)
		a := g.rowAt(t, src, f.Min(r, g.rowsLim(lim)), 2*g.pitch)
		g.cpAsyncG(act, Addr(sd.Reg, int64(it*g.rowStep()*g.RS)), Addr(a.Reg, 0), size)
	}
}

// widen16 returns the two elements of a b32 word (low, high) as f32.
func (g *bwdK) widen16(x Operand) (lo, hi Operand) {
	f := g.f
	if g.elem == F16 {
		cv := func(w Operand) Operand {
			h := f.NewReg(B16)
			f.Emit(Inst{Op: OpCvtU16, Dst: []Operand{R(h)}, Src: []Operand{w}})
			return f.F(OpCvtF16, R(h))
		}
		return cv(x), cv(f.Op3(OpShr, U32, x, I(16)))
	}
	bits := func(w Operand) Operand {
		r := f.NewReg(F32)
		f.Emit(Inst{Op: OpBitcast, Dst: []Operand{R(r)}, Src: []Operand{w}})
		return R(r)
	}
	return bits(f.Op3(OpShl, B32, x, I(16))), bits(f.Op3(OpAnd, B32, x, I(0xffff0000)))
}

// maskTile applies the partial-tile predicate to P in place: element x
// of block n of the thread's fragment is the pair (rowPos(n, x),
// colPos(n, x)) as (query position, key position), and extra (when not
// nil) is one more condition; masked pairs get P = 0 (selected, not
// multiplied, so the non-finite scores of masked pairs vanish). Each
// predicate is rendered next to its use, so few are live at once.
func (g *bwdK) maskTile(p [][4]Reg, rowPos, colPos func(n, x int) Operand, extra func(n, x int) *Reg) error {
	f := g.f
	memo := NewMemo()
	for n := range p {
		for x := range p[n] {
			k, err := RenderPred(f, g.p.Pred, g.env(rowPos(n, x), colPos(n, x)), memo)
			if err != nil {
				return err
			}
			if e := extra(n, x); e != nil {
				k = f.PAnd(k, *e)
			}
			f.Emit(Inst{Op: OpSelp, T: F32, Dst: []Operand{R(p[n][x])}, Src: []Operand{R(p[n][x]), Fimm(0), R(k)}})
		}
	}
	return nil
}

// zeroMasked sets dS to 0 where P is 0 in a partial tile (partial holds):
// a masked pair's dP may be non-finite (its value or dout is), and 0 times
// that is NaN. Kept pairs whose P underflowed to 0 get 0 as well, which
// differs from IEEE only when their dP is not finite; a NaN P (a kept
// non-finite score) keeps its NaN dS.
func (g *bwdK) zeroMasked(p, ds [][4]Reg, partial Reg) {
	f := g.f
	skip := f.NewLabel("kept")
	f.Bra(skip, &partial, true)
	for n := range p {
		for x := range p[n] {
			zero := f.Setp("eq", F32, R(p[n][x]), Fimm(0))
			f.Emit(Inst{Op: OpSelp, T: F32, Dst: []Operand{R(ds[n][x])}, Src: []Operand{Fimm(0), R(ds[n][x]), R(zero)}})
		}
	}
	f.Place(skip)
}

// sanitize emits the masked-input rule of a partial tile (the caller
// branches on the class) for an n-row tile at base, as the forward's
// sanitize does for values: a product over the tile's rows multiplies a
// masked pair's 0 by that row's data, and 0 times NaN or an infinity is
// NaN. Each thread checks the words it copied; when any element of the
// tile is non-finite (a CTA-wide vote through the four words at vote),
// the threads replace those elements by 0 in place and write, in the same
// layout at flags, 1 (in the element type) where an element was
// non-finite and 0 elsewhere, and set done to 1 (the same in every
// thread); restoreNaN then makes the gradients of pairs that keep a
// rewritten element NaN.
func (g *bwdK) sanitize(done Reg, base, flags, vote Operand, n int, act *Reg) {
	f := g.f
	sT := f.reg(U32, f.Add(base, g.copyS))
	sF := f.reg(U32, f.Add(flags, g.copyS))
	words, addr := g.share(n)
	load := func(w int) Reg { return g.ldSharedG(act, Addr(sT.Reg, addr(w))) }
	skip := f.NewLabel("finite")
	g.voteNonFinite(load, words, func() Operand { return vote }, skip)
	f.Comment("a non-finite element in the tile: zero it, and flag it")
	one := g.bits().pos
	for w := 0; w < words; w++ {
		x := load(w)
		nf := g.nonFinite(x)
		lo := f.Op3(OpShr, U32, f.Op3(OpAnd, B32, nf, I(0x8000)), I(15))
		hi := f.Op3(OpShr, U32, nf, I(31))
		m := f.Op3(OpOr, B32, f.Op3(OpMulLo, U32, lo, I(0xffff)), f.Op3(OpMulLo, U32, hi, I(0xffff0000)))
		xc := f.Op3(OpAnd, B32, R(x), f.Op3(OpXor, B32, m, I(0xffffffff)))
		g.stSharedG(act, Addr(sT.Reg, addr(w)), f.reg(B32, xc))
		fl := f.Op3(OpOr, B32, f.Op3(OpMulLo, U32, lo, I(one)), f.Op3(OpMulLo, U32, hi, I(one<<16)))
		g.stSharedG(act, Addr(sF.Reg, addr(w)), f.reg(B32, fl))
	}
	f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})
	f.Set(B32, done, I(1))
	f.Place(skip)
}

// sanitizePartial is sanitize in partial tiles only: it returns the
// register restoreNaN tests (0 on every other tile).
func (g *bwdK) sanitizePartial(partial Reg, base, flags, vote Operand, n int) Reg {
	return g.sanitizePartialOf(g.act, partial, base, flags, vote, n)
}

// sanitizePartialOf is sanitizePartial for the copy lanes of act (vact: a
// value-shaped tile, dout's).
func (g *bwdK) sanitizePartialOf(act *Reg, partial Reg, base, flags, vote Operand, n int) Reg {
	f := g.f
	done := f.Mov(B32, I(0))
	skip := f.NewLabel("unmasked")
	f.Bra(skip, &partial, true)
	g.sanitize(done, base, flags, vote, n, act)
	f.Place(skip)
	return done
}

// restoreNaN emits the second half of sanitize's rule after acc += A T
// on the zeroed tile T: C = P times the flags (one more product over the
// tile, with the A fragments pa of P in the element type: P >= 0, so C is
// non-zero exactly where a pair with P > 0, or a NaN P, meets a rewritten
// element) marks the elements of acc that a kept pair reaches from a
// rewritten element, and those become NaN (IEEE gives NaN or an infinity
// there; a gradient that meets an infinite input is not usable either
// way). flags is read with ldmatrix.trans (the aRowCol lane offset
// included).
func (g *bwdK) restoreNaN(done Reg, pa [][4]Reg, flags Operand, acc [][4]Reg) {
	f := g.f
	skip := f.NewLabel("restored")
	none := f.Setp("eq", U32, R(done), I(0))
	f.Bra(skip, &none, false)
	f.Comment("gradients that a kept pair reaches from a rewritten element are NaN")
	nan := Fimm(float32(math.NaN()))
	for dp := 0; dp < len(acc)/2; dp++ {
		c := zeros(f, 2)
		for kk := range pa {
			b := g.frag(OpLdmatrixT, flags, int64(kk*16*g.RS+dp*32))
			g.mma(c[0], pa[kk], b[0], b[1])
			g.mma(c[1], pa[kk], b[2], b[3])
		}
		for h := range c {
			for x := range c[h] {
				some := f.Setp("ne", F32, R(c[h][x]), Fimm(0))
				y := acc[2*dp+h][x]
				f.Emit(Inst{Op: OpSelp, T: F32, Dst: []Operand{R(y)}, Src: []Operand{nan, R(y), R(some)}})
			}
		}
	}
	f.Place(skip)
}

func (g *bwdK) kernel() error {
	if g.dkv {
		return g.kernelDKV()
	}
	return g.kernelDQ()
}

// lseRows is the b64 address of an f32 [batch][heads_q][seq_q] row array
// at head h, tensor row row0.
func (g *bwdK) lseRows(base, h, row0 Operand) Operand {
	f := g.f
	idx := f.Add(f.Op3(OpMulLo, S32, f.Add(f.Op3(OpMulLo, S32, g.bz, g.hq), h), g.sqAll), row0)
	return g.wide(base, idx, 4)
}
