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
	HeadDim      int
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
}

// backwardParams is the parameter layout of the two kernels, in order.
// Gradients and delta are f32; the inputs are the forward's (elem) and
// its natural-log lse (f32).
func backwardParams(dkv, docs, tree bool) []Param {
	ps := []Param{
		{Name: "q", T: U64, Doc: "queries [batch][heads_q][seq_q][D], elem"},
		{Name: "k", T: U64, Doc: "keys [batch][heads_kv][seq_k][D], elem"},
		{Name: "v", T: U64, Doc: "values [batch][heads_kv][seq_k][D], elem"},
	}
	if !dkv {
		ps = append(ps, Param{Name: "o", T: U64, Doc: "forward output [batch][heads_q][seq_q][D], elem"})
	}
	ps = append(ps,
		Param{Name: "dout", T: U64, Doc: "gradient of the output [batch][heads_q][seq_q][D], elem"},
		Param{Name: "lse", T: U64, Doc: "forward log-sum-exp [batch][heads_q][seq_q], f32 (natural log)"},
		Param{Name: "delta", T: U64, Doc: "rowsum(dout * out) [batch][heads_q][seq_q], f32 (written by the dq kernel, read by the dk/dv kernel)"})
	if tree {
		ps = append(ps, treeForwardParams()[5:9]...)
	} else if docs {
		ps = append(ps,
			Param{Name: "doc_id", T: U64, Doc: "document id per position [seq_k], s32, non-decreasing"},
			Param{Name: "doc_start", T: U64, Doc: "first position of the position's document [seq_k], s32"},
			Param{Name: "doc_end", T: U64, Doc: "last position of the position's document [seq_k], s32"})
	}
	if dkv {
		ps = append(ps,
			Param{Name: "dk", T: U64, Doc: "key gradient [batch][heads_kv][seq_k][D], f32"},
			Param{Name: "dv", T: U64, Doc: "value gradient [batch][heads_kv][seq_k][D], f32"})
	} else {
		ps = append(ps, Param{Name: "dq", T: U64, Doc: "query gradient [batch][heads_q][seq_q][D], f32"})
	}
	return append(ps, []Param{
		{Name: "seq_q", T: U32, Doc: "query rows (<= seq_k); row r is position r + seq_k - seq_q"},
		{Name: "seq_k", T: U32, Doc: "keys"},
		{Name: "heads_q", T: U32, Doc: "query heads"},
		{Name: "heads_kv", T: U32, Doc: "key/value heads; query head h reads h / (heads_q/heads_kv)"},
		{Name: "scale_log2", T: F32, Doc: "softmax scale times log2(e)"},
		{Name: "scale", T: F32, Doc: "softmax scale"},
	}...)
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
	if _, err := newFwd(p, cfg, t); err != nil {
		return nil, err
	}
	if p.QHull != nil && (len(p.QHull.Args) != 3 || len(p.QHull.Results) != 2) {
		return nil, fmt.Errorf("ptx: plan %s: the query hull program %s takes %d arguments and returns %d values, want 3 and 2", p.Name, p.QHull.Name, len(p.QHull.Args), len(p.QHull.Results))
	}
	b := &Backward{Target: t, HeadDim: p.HeadDim}
	var funcs []*Func
	var shared [2]int
	for n, dkv := range []bool{false, true} {
		g, err := newFwd(p, cfg, t)
		if err != nil {
			return nil, err
		}
		g.docs = g.docs || (p.QHull != nil && p.QHull.UsesDocs())
		bk := &bwdK{fwd: g, dkv: dkv, bq: TileQ}
		if dkv {
			bk.bq = bwdQ[p.HeadDim]
			if len(p.Pred.Insts) > bigPred {
				// a long partial-tile predicate (NATTEN's: ptxas 11.8
				// spilled at 64 queries) needs the registers of 32
				bk.bq = min(bk.bq, 32)
			}
		}
		name := "attn_bwd_dq_" + p.Name
		if dkv {
			name = "attn_bwd_dkv_" + p.Name
		}
		g.f = NewFunc(name)
		g.f.Params = g.withHeadParams(backwardParams(dkv, g.docs, p.UsesTree()))
		g.f.ReqNTID = Threads
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
	b.HeadParams = (&fwd{p: p}).maskHeadParams()
	return b, nil
}

// Kernels describes the two kernels as generated packages embed them
// (both share the module text).
func (b *Backward) Kernels() [2]gpu.Kernel {
	mk := func(kind, name string, params []Param, dyn int) gpu.Kernel {
		k := gpu.Kernel{Target: b.Target.Arch(), Elem: b.Target.Elem, Kind: kind, Name: name, PTX: b.PTX,
			TileQ: TileQ, TileK: TileK, Threads: Threads, DynShared: dyn, Stride: max(b.Stride, 1)}
		for _, p := range params {
			k.Params = append(k.Params, [3]string{p.Name, p.T.String(), p.Doc})
		}
		return k
	}
	return [2]gpu.Kernel{mk(gpu.KindBwdDQ, b.DQ, b.DQParams, b.DQShared), mk(gpu.KindBwdDKV, b.DKV, b.DKVParams, b.DKVShared)}
}

// BackwardLaunch is the launch of both kernels for one call.
type BackwardLaunch struct {
	DQ, DKV Launch
	Scale   float32
}

// Geometry is the launch of a call with the given shape; scale 0 means
// 1/sqrt(D).
func (b *Backward) Geometry(batch, headsQ, headsKV, seqQ, seqK int, scale float64) (BackwardLaunch, error) {
	ks := b.Kernels()
	var l BackwardLaunch
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(b.HeadDim))
	}
	if sl := float32(scale * math.Log2E); !(scale > 0) || math.IsInf(float64(sl), 0) || float32(scale) == 0 {
		return l, fmt.Errorf("ptx: softmax scale %v: the kernel needs a positive scale whose product with log2(e) is a finite float32", scale)
	}
	for n, k := range ks {
		grid, block, dyn, err := k.Geometry(batch, headsQ, headsKV, seqQ, seqK)
		if err != nil {
			return l, fmt.Errorf("ptx: %w", err)
		}
		params := b.DQParams
		if n == 1 {
			params = b.DKVParams
		}
		x := Launch{Grid: grid, Block: block, DynShared: dyn, Params: params,
			SeqQ: uint32(seqQ), SeqK: uint32(seqK), HeadsQ: uint32(headsQ), HeadsKV: uint32(headsKV),
			ScaleLog2: float32(scale * math.Log2E)}
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

// bwdQ is the query rows per step of the dk/dv kernel per head dimension:
// at D = 128 its 128 registers of dk and dv accumulators leave little room
// for score fragments (ptxas 11.8 spilled at 64 queries, and for sm_90 at
// 32), so it takes 16.
var bwdQ = map[int]int{64: 64, 128: 16}

// heldQ is the largest head dimension whose Q fragments the dq kernel
// holds in registers; above it (D = 128: 32 more registers next to 64 of
// dq accumulators) ptxas 11.8 spilled, so they are read per tile.
const heldQ = 64

// bwdK emits one of the two backward kernels.
type bwdK struct {
	*fwd
	dkv bool

	hq, hkv      Operand
	scale        Operand // f32 softmax scale
	bz, c        Operand // batch and residue class
	sqAll, skAll Operand
	qR0          Operand // tensor row (within a head) of the segment's query 0
	off          Operand // position of query row r is r + off
	qthi         Operand // last query tile (dkv)
	aKw, aVw     Operand // this warp's K and V fragment addresses (dkv)
	aRowCol, aK  Operand // ldmatrix lane offsets: A operands and trans B; non-trans B
	ch16w        Operand // b64 chunk offset of this thread's copies
	bq           int     // query rows per step: the dq tile (64), or the dkv kernel's query tiles (bwdQ)
}

// Shared memory. dq: Q, dO, then 2 buffers of K and V; then delta of the
// tile's rows. dkv: K, V, then 2 buffers of Q and dO, then 2 buffers of
// the rows' -lse*log2(e) and delta.
func (g *bwdK) tileBytes() int { return TileQ * g.RS }

// bufBytes is one tile of the double-buffered pair: bq rows.
func (g *bwdK) bufBytes() int { return g.bq * g.RS }
func (g *bwdK) smemBytes() int {
	if g.dkv {
		return g.dkvFlags() + g.bufBytes() + 2*voteBytes
	}
	return 6*g.tileBytes() + 4*TileQ + voteBytes
}

// voteBytes is one word per warp for sanitize's vote.
const voteBytes = 4 * Threads / 32

// dkvFlags is the dk/dv kernel's flag tile (sanitize), after the rows'
// -lse*log2(e) and delta; its two vote areas follow it.
func (g *bwdK) dkvFlags() int { return 2*g.tileBytes() + 4*g.bufBytes() + 2*2*4*g.bq }

// buffer b of the double-buffered pair of tiles (dq: K, V; dkv: Q, dO).
func (g *bwdK) bufBase(buf Operand) Operand {
	return g.f.Add(g.f.Add(g.smem, I(int64(2*g.tileBytes()))), g.f.MulC(buf, int64(2*g.bufBytes())))
}

// dkv: the 64 (-lse*log2(e), delta) pairs of buffer buf, as two arrays.
func (g *bwdK) rowBase(buf Operand) Operand {
	return g.f.Add(g.f.Add(g.smem, I(int64(2*g.tileBytes()+4*g.bufBytes()))), g.f.MulC(buf, int64(2*4*g.bq)))
}

// prologue reads the parameters and thread coordinates and sets up the
// segment of the CTA (the residue class for residue layouts); tile is the
// CTA's tile index along x (a query tile for dq, a key tile for dkv).
func (g *bwdK) prologue() (tile, h Operand, err error) {
	f := g.f
	g.sq, g.sk = g.param("seq_q", U32), g.param("seq_k", U32)
	g.hq, g.hkv = g.param("heads_q", U32), g.param("heads_kv", U32)
	g.scl = g.param("scale_log2", F32)
	g.scale = g.param("scale", F32)
	g.tid = g.special("%tid.x")
	tile, h, g.bz = g.special("%ctaid.x"), g.special("%ctaid.y"), g.special("%ctaid.z")
	g.warp = f.Op3(OpShr, U32, g.tid, I(5))
	g.lane = f.Op3(OpAnd, B32, g.tid, I(31))
	g.g4 = f.Op3(OpShr, U32, g.lane, I(2))
	g.t4 = f.Op3(OpAnd, B32, g.lane, I(3))
	g.sqAll, g.skAll = g.sq, g.sk
	g.c, g.qR0 = I(0), I(0)
	if st := int64(g.st); st > 1 {
		c, b, nq, nk, err := g.residueClass(g.bz, g.sqAll, g.skAll, st)
		if err != nil {
			return tile, h, err
		}
		g.c, g.bz = c, b
		run := f.NewLabel("run")
		n := nq
		if g.dkv {
			n = nk
		}
		ok := f.Setp("lt", S32, f.MulC(tile, TileQ), n)
		f.Bra(run, &ok, false)
		f.Emit(Inst{Op: OpRet})
		f.Place(run)
		// the class's queries are its last nq keys
		g.qR0 = f.Sub(f.Add(g.c, f.MulC(f.Sub(nk, nq), st)), f.Sub(g.skAll, g.sqAll))
		g.sq, g.sk = nq, nk
	}
	g.off = f.Sub(g.sk, g.sq)
	g.pitch = int64(g.st)
	g.smem = R(f.Mov(U32, Sym("smem")))
	ch := f.Op3(OpAnd, B32, g.tid, I(int64(g.cpr()-1)))
	g.rb = f.Op3(OpShr, U32, g.tid, I(int64(log2(int64(g.cpr())))))
	ch16 := f.MulC(ch, 16)
	g.copyS = f.Add(f.MulC(g.rb, int64(g.RS)), ch16)
	w := f.NewReg(U64)
	f.Emit(Inst{Op: OpCvtWide, T: U64, T2: U32, Dst: []Operand{R(w)}, Src: []Operand{f.reg(U32, ch16)}})
	g.ch16w = R(w)
	lrow := f.Add(f.Op3(OpAnd, B32, g.lane, I(7)), f.MulC(f.Op3(OpAnd, B32, f.Op3(OpShr, U32, g.lane, I(3)), I(1)), 8))
	lcol2 := f.MulC(f.Op3(OpShr, U32, g.lane, I(4)), 16)
	g.aRowCol = f.Add(f.MulC(lrow, int64(g.RS)), lcol2)
	g.aK = f.Add(f.MulC(f.Add(f.Op3(OpAnd, B32, g.lane, I(7)), f.MulC(f.Op3(OpShr, U32, g.lane, I(4)), 8)), int64(g.RS)),
		f.MulC(f.Op3(OpAnd, B32, f.Op3(OpShr, U32, g.lane, I(3)), I(1)), 16))
	return tile, h, nil
}

// rowsBase is the b64 address of row 0 of a [batch][heads][seqAll][D]
// elem tensor's head h at tensor row row0, plus this thread's chunk.
func (g *bwdK) rowsBase(base, heads, h, seqAll, row0 Operand, esize int64) Operand {
	f := g.f
	idx := f.Add(f.Op3(OpMulLo, S32, f.Add(f.Op3(OpMulLo, S32, g.bz, heads), h), seqAll), row0)
	return g.wide(base, idx, esize*int64(g.D))
}

// copyRows issues cp.async copies of rows [0, n) of a tile into shared
// memory at dst (row pitch RS) from src (the tile's row 0 plus this
// thread's chunk; rows pitch*2D bytes apart), zero-filling rows past lim
// (lim >= 0 is the last valid row).
func (g *bwdK) copyRows(dst, src, lim Operand, n int) {
	f := g.f
	sd := f.Add(dst, g.copyS)
	for it := 0; it < n/g.rowStep(); it++ {
		r := f.Add(g.rb, I(int64(it*g.rowStep())))
		valid := f.Setp("le", S32, r, lim)
		size := f.Selp(U32, I(16), I(0), valid)
		a := g.wide(src, f.Min(r, lim), g.pitch*int64(2*g.D))
		f.Emit(Inst{Op: OpCpAsync, Dst: []Operand{Addr(sd.Reg, int64(it*g.rowStep()*g.RS))}, Src: []Operand{Addr(a.Reg, 0), I(16), size}})
	}
}

// frag loads the ldmatrix.x4 (or .trans) fragment at addr+off.
func (g *bwdK) frag(op Op, addr Operand, off int64) [4]Reg {
	var r [4]Reg
	for x := range r {
		r[x] = g.f.NewReg(B32)
	}
	g.f.Emit(Inst{Op: op, Dst: []Operand{Vec(r[:]...)}, Src: []Operand{Addr(addr.Reg, off)}})
	return r
}

func zeros(f *Func, n int) [][4]Reg {
	a := make([][4]Reg, n)
	for i := range a {
		for x := range a[i] {
			a[i][x] = f.Mov(F32, Fimm(0))
		}
	}
	return a
}

// product16 accumulates a 16 x n product into c (n/8 blocks of 8
// columns, n = 8 len(c)): A rows from a [16][D] tile at aA (this warp's
// rows, ldmatrix lane offset included; or the fragments aRegs) times the
// transpose of an [n][D] tile at bB (the aK lane offset included), over D.
func (g *bwdK) product16(c [][4]Reg, aA, bB Operand, aRegs [][4]Reg) {
	for ks := 0; ks < g.D/16; ks++ {
		a := [4]Reg{}
		if aRegs != nil {
			a = aRegs[ks]
		} else {
			a = g.frag(OpLdmatrix, aA, int64(ks*32))
		}
		for np := 0; np < len(c)/2; np++ {
			b := g.frag(OpLdmatrix, bB, int64(np*16*g.RS+ks*32))
			g.mma(c[2*np], a, b[0], b[1])
			g.mma(c[2*np+1], a, b[2], b[3])
		}
	}
}

// pack converts a 16 x n f32 fragment set (the C layout of n/8 blocks)
// into the A fragments of its n/16 k-steps.
func (g *fwd) pack(s [][4]Reg) [][4]Reg {
	f := g.f
	pt := BF16x2
	if g.elem == F16 {
		pt = F16x2
	}
	pk := func(hi, lo Reg) Reg {
		r := f.NewReg(B32)
		f.Emit(Inst{Op: OpCvtPack, T: pt, Dst: []Operand{R(r)}, Src: []Operand{R(hi), R(lo)}})
		return r
	}
	a := make([][4]Reg, len(s)/2)
	for kk := range a {
		a[kk] = [4]Reg{pk(s[2*kk][1], s[2*kk][0]), pk(s[2*kk][3], s[2*kk][2]), pk(s[2*kk+1][1], s[2*kk+1][0]), pk(s[2*kk+1][3], s[2*kk+1][2])}
	}
	return a
}

// accumulate adds A (k-steps of 16 over the rows of a tile) times the
// tile at bT (read with ldmatrix.trans, aRowCol lane offset
// included) into acc (D/8 blocks).
func (g *bwdK) accumulate(acc [][4]Reg, a [][4]Reg, bT Operand) {
	for kk := range a {
		for dp := 0; dp < g.D/16; dp++ {
			b := g.frag(OpLdmatrixT, bT, int64(kk*16*g.RS+dp*32))
			g.mma(acc[2*dp], a[kk], b[0], b[1])
			g.mma(acc[2*dp+1], a[kk], b[2], b[3])
		}
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
func (g *bwdK) sanitize(done Reg, base, flags, vote Operand, n int) {
	f := g.f
	sT := f.reg(U32, f.Add(base, g.copyS))
	sF := f.reg(U32, f.Add(flags, g.copyS))
	words, addr := g.share(n)
	load := func(w int) Reg {
		x := f.NewReg(B32)
		f.Emit(Inst{Op: OpLd, T: B32, Space: "shared", Dst: []Operand{R(x)}, Src: []Operand{Addr(sT.Reg, addr(w))}})
		return x
	}
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
		f.Emit(Inst{Op: OpSt, T: B32, Space: "shared", Dst: []Operand{Addr(sT.Reg, addr(w))}, Src: []Operand{f.reg(B32, xc)}})
		fl := f.Op3(OpOr, B32, f.Op3(OpMulLo, U32, lo, I(one)), f.Op3(OpMulLo, U32, hi, I(one<<16)))
		f.Emit(Inst{Op: OpSt, T: B32, Space: "shared", Dst: []Operand{Addr(sF.Reg, addr(w))}, Src: []Operand{f.reg(B32, fl)}})
	}
	f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})
	f.Set(B32, done, I(1))
	f.Place(skip)
}

// sanitizePartial is sanitize in partial tiles only: it returns the
// register restoreNaN tests (0 on every other tile).
func (g *bwdK) sanitizePartial(partial Reg, base, flags, vote Operand, n int) Reg {
	f := g.f
	done := f.Mov(B32, I(0))
	skip := f.NewLabel("unmasked")
	f.Bra(skip, &partial, true)
	g.sanitize(done, base, flags, vote, n)
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
	for dp := 0; dp < g.D/16; dp++ {
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

// kernelDQ: one CTA per (query tile, query head, batch x class).
func (g *bwdK) kernelDQ() error {
	f := g.f
	D := g.D
	f.Comment("parameters and thread coordinates")
	q, k, v, o, dout := g.global("q"), g.global("k"), g.global("v"), g.global("o"), g.global("dout")
	lse, delta := g.global("lse"), g.global("delta")
	g.dataRegs()
	dq := g.global("dq")
	qt, h, err := g.prologue()
	if err != nil {
		return err
	}
	g.headValues(h)
	kvh := f.Op3(OpDiv, U32, h, f.Op3(OpDiv, U32, g.hq, g.hkv))
	qrow0 := f.MulC(qt, TileQ)
	row0 := f.Add(g.qR0, f.MulC(qrow0, g.pitch))
	qb := g.rowsBase(q, g.hq, h, g.sqAll, row0, 2)
	ob := g.rowsBase(o, g.hq, h, g.sqAll, row0, 2)
	db := g.rowsBase(dout, g.hq, h, g.sqAll, row0, 2)
	lrow := g.lseRows(lse, h, row0)
	drow := g.lseRows(delta, h, row0)
	dqb := g.rowsBase(dq, g.hq, h, g.sqAll, row0, 4)
	kvIdx := f.Add(f.Op3(OpMulLo, S32, f.Add(f.Op3(OpMulLo, S32, g.bz, g.hkv), kvh), g.skAll), g.c)
	g.kbase = f.Op3(OpAdd, U64, g.wide(k, kvIdx, int64(2*D)), g.ch16w)
	g.vbase = f.Op3(OpAdd, U64, g.wide(v, kvIdx, int64(2*D)), g.ch16w)

	f.Comment("Q and dO tiles: cp.async, rows past seq_q zero-filled")
	lim := f.Sub(f.Sub(g.sq, I(1)), qrow0)
	g.copyRows(g.smem, f.Op3(OpAdd, U64, qb, g.ch16w), lim, TileQ)
	sDO := f.Add(g.smem, I(int64(g.tileBytes())))
	g.copyRows(sDO, f.Op3(OpAdd, U64, db, g.ch16w), lim, TileQ)
	f.Emit(Inst{Op: OpCpCommit})

	f.Comment("delta = rowsum(dout * out): two threads per row, D/2 columns each, f32")
	sDelta := f.Add(g.smem, I(int64(6*g.tileBytes())))
	{
		r := f.Op3(OpShr, U32, g.tid, I(1))
		half := f.Op3(OpAnd, B32, g.tid, I(1))
		valid := f.Setp("le", S32, r, lim)
		rc := f.Min(r, lim)
		col := f.MulC(half, int64(D)) // bytes: D/2 elements of 2 bytes
		oa := g.wide(g.wide(ob, rc, g.pitch*int64(2*D)), col, 1)
		da := g.wide(g.wide(db, rc, g.pitch*int64(2*D)), col, 1)
		sum := f.Mov(F32, Fimm(0))
		for w := 0; w < D/4; w++ {
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
	}

	f.Comment("this thread's rows: -lse*log2(e) (0 past seq_q)")
	var nl [2]Operand
	rows := [2]Operand{}
	for r := 0; r < 2; r++ {
		rr := f.Add(f.Add(f.MulC(g.warp, 16), g.g4), I(int64(8*r)))
		rows[r] = rr
		valid := f.Setp("le", S32, rr, lim)
		la := g.wide(lrow, f.Min(rr, lim), 4*g.pitch)
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
	if D <= heldQ {
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
		s := zeros(f, TileK/8)
		g.product16(s, aQ, f.Add(sb, g.aK), qa)
		for n := range s {
			for x := range s[n] {
				f.Set(F32, s[n][x], f.F(OpEx2, f.F(OpFma, R(s[n][x]), g.scl, nl[x/2])))
			}
		}
		partial := f.Setp("eq", S32, R(ccur), I(cPartial))
		nomask := f.NewLabel("nomask")
		f.Bra(nomask, &partial, true)
		f.Comment("partial tile: the fused predicate per element, and the key bound")
		f.CommentProg("partial-tile predicate", g.p.Pred)
		c0 := f.Add(f.MulC(R(cur), TileK), f.MulC(g.t4, 2))
		lastK := f.Sub(g.sk, I(1))
		prow := [2]Operand{g.i0, g.i1}
		if g.docs {
			prow[0], prow[1] = f.Min(prow[0], lastK), f.Min(prow[1], lastK)
		}
		cols := make([][2]Operand, TileK/8)
		inK := make([][2]Reg, TileK/8)
		for n := range cols {
			for x := 0; x < 2; x++ {
				c := f.Add(c0, I(int64(n*8+x)))
				inK[n][x] = f.Setp("lt", S32, c, g.sk)
				if g.docs {
					c = f.Min(c, lastK)
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
		ds := zeros(f, TileK/8)
		g.product16(ds, aDO, f.Add(f.Add(sb, I(int64(g.bufBytes()))), g.aK), nil)
		for n := range ds {
			for x := range ds[n] {
				f.Set(F32, ds[n][x], f.F(OpMulF, R(s[n][x]), f.F(OpSubF, R(ds[n][x]), dl[x/2])))
			}
		}
		g.zeroMasked(s, ds, partial)
		f.Comment("masked keys: non-finite K elements of a partial tile zeroed, flagged over V")
		sV := f.Add(sb, I(int64(g.bufBytes())))
		done := g.sanitizePartial(partial, sb, sV, f.Add(g.smem, I(int64(6*g.tileBytes()+4*TileQ))), TileK)
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
	for r := 0; r < 2; r++ {
		valid := f.Setp("le", S32, rows[r], lim)
		rb := g.wide(g.wide(dqb, rows[r], g.pitch*int64(4*D)), g.t4, 8)
		for n := range dq_ {
			for x := 0; x < 2; x++ {
				val := f.F(OpMulF, R(dq_[n][2*r+x]), g.scale)
				f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &valid, Dst: []Operand{Addr(rb.Reg, int64(n*32+4*x))}, Src: []Operand{val}})
			}
		}
	}
	f.Emit(Inst{Op: OpRet})
	return nil
}

// lseRows is the b64 address of an f32 [batch][heads_q][seq_q] row array
// at head h, tensor row row0.
func (g *bwdK) lseRows(base, h, row0 Operand) Operand {
	f := g.f
	idx := f.Add(f.Op3(OpMulLo, S32, f.Add(f.Op3(OpMulLo, S32, g.bz, g.hq), h), g.sqAll), row0)
	return g.wide(base, idx, 4)
}

// loadKV issues the copies of key tile kt into K/V buffer buf (dq kernel).
func (g *bwdK) loadKV(kt, buf Operand) {
	g.copyKV(kt, func() Operand { return g.bufBase(buf) }, int64(g.bufBytes()))
}

// kernelDKV: one CTA per (key tile, key/value head, batch x class).
func (g *bwdK) kernelDKV() error {
	f := g.f
	D := g.D
	f.Comment("parameters and thread coordinates")
	q, k, v, dout := g.global("q"), g.global("k"), g.global("v"), g.global("dout")
	lse, delta := g.global("lse"), g.global("delta")
	g.dataRegs()
	dk, dv := g.global("dk"), g.global("dv")
	kt, kvh, err := g.prologue()
	if err != nil {
		return err
	}
	group := f.Op3(OpDiv, U32, g.hq, g.hkv)
	krow0 := f.MulC(kt, TileK)
	kIdx := f.Add(f.Op3(OpMulLo, S32, f.Add(f.Op3(OpMulLo, S32, g.bz, g.hkv), kvh), g.skAll), f.Add(g.c, f.MulC(krow0, g.pitch)))
	kb := g.wide(k, kIdx, int64(2*D))
	vb := g.wide(v, kIdx, int64(2*D))
	dkb := g.wide(dk, kIdx, int64(4*D))
	dvb := g.wide(dv, kIdx, int64(4*D))

	f.Comment("K and V tiles: cp.async, keys past seq_k zero-filled")
	klim := f.Sub(f.Sub(g.sk, I(1)), krow0)
	g.copyRows(g.smem, f.Op3(OpAdd, U64, kb, g.ch16w), klim, TileK)
	g.copyRows(f.Add(g.smem, I(int64(g.tileBytes()))), f.Op3(OpAdd, U64, vb, g.ch16w), klim, TileK)
	f.Emit(Inst{Op: OpCpCommit})

	dkA, dvA := zeros(f, D/8), zeros(f, D/8)
	k0 := f.Add(krow0, I(0))
	k1 := f.Sub(f.Min(f.Add(krow0, I(TileK)), g.sk), I(1))
	// this thread's keys (positions) in the C layout: rows g4 and g4+8 of the warp's 16
	kpos := [2]Operand{f.Add(f.Add(krow0, f.MulC(g.warp, 16)), g.g4)}
	kpos[1] = f.Add(kpos[0], I(8))

	// The query-tile range and the first tile to visit come from the
	// plan's query hull and class programs: the same for every head of the
	// group, unless the programs read head parameters, whose values are
	// then loaded and the schedule evaluated per head inside the loop.
	perHead := len(g.p.HeadParams()) > 0
	bq := int64(g.bq)
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
	if perHead {
		g.headValues(h)
		if first, cfirst, err = schedule(); err != nil {
			return err
		}
	}
	qb := f.Op3(OpAdd, U64, g.rowsBase(q, g.hq, h, g.sqAll, g.qR0, 2), g.ch16w)
	db := f.Op3(OpAdd, U64, g.rowsBase(dout, g.hq, h, g.sqAll, g.qR0, 2), g.ch16w)
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
		s := zeros(f, g.bq/8)
		g.product16(s, aKw, f.Add(sb, g.aK), nil)
		f.Comment("per query column: -lse*log2(e) and delta from shared memory")
		rb := g.rowBase(R(buf))
		qr0 := f.MulC(R(cur), bq)
		colAddr := f.reg(U32, f.Add(rb, f.MulC(g.t4, 8))) // column 2*t4 of block 0
		for n := range s {
			for c := 0; c < 2; c++ {
				nlv := f.NewReg(F32)
				f.Emit(Inst{Op: OpLd, T: F32, Space: "shared", Dst: []Operand{R(nlv)}, Src: []Operand{Addr(colAddr.Reg, int64(4*(8*n+c)))}})
				for _, x := range []int{c, c + 2} {
					f.Set(F32, s[n][x], f.F(OpEx2, f.F(OpFma, R(s[n][x]), g.scl, R(nlv))))
				}
			}
		}
		partial := f.Setp("eq", S32, R(ccur), I(cPartial))
		nomask := f.NewLabel("nomask")
		f.Bra(nomask, &partial, true)
		f.Comment("partial tile: the fused predicate per element (rows past seq_q have P = 0 already)")
		f.CommentProg("partial-tile predicate", g.p.Pred)
		lastK := f.Sub(g.sk, I(1))
		kp := kpos
		if g.docs {
			kp[0], kp[1] = f.Min(kp[0], lastK), f.Min(kp[1], lastK)
		}
		qc0 := f.Add(f.Add(qr0, f.MulC(g.t4, 2)), g.off)
		qcols := make([][2]Operand, g.bq/8)
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
		ds := zeros(f, g.bq/8)
		g.product16(ds, aVw, f.Add(sDO, g.aK), nil)
		for n := range ds {
			for c := 0; c < 2; c++ {
				dlv := f.NewReg(F32)
				f.Emit(Inst{Op: OpLd, T: F32, Space: "shared", Dst: []Operand{R(dlv)}, Src: []Operand{Addr(colAddr.Reg, int64(4*(8*n+c))+4*bq)}})
				for _, x := range []int{c, c + 2} {
					f.Set(F32, ds[n][x], f.F(OpMulF, R(s[n][x]), f.F(OpSubF, R(ds[n][x]), R(dlv))))
				}
			}
		}
		g.zeroMasked(s, ds, partial)
		flags := f.Add(g.smem, I(int64(g.dkvFlags())))
		vote := f.Add(flags, I(int64(g.bufBytes())))
		f.Comment("masked rows: non-finite dO elements of a partial tile zeroed and flagged; dV += P^T dO (dO through ldmatrix.trans)")
		fixed := g.sanitizePartial(partial, sDO, flags, vote, g.bq)
		pa := g.pack(s)
		g.accumulate(dvA, pa, f.Add(sDO, g.aRowCol))
		g.restoreNaN(fixed, pa, f.Add(flags, g.aRowCol), dvA)
		f.Comment("the same for Q; dK += dS^T Q")
		fixed = g.sanitizePartial(partial, sb, flags, f.Add(vote, I(voteBytes)), g.bq)
		g.accumulate(dkA, g.pack(ds), f.Add(sb, g.aRowCol))
		g.restoreNaN(fixed, pa, f.Add(flags, g.aRowCol), dkA)
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
	for r := 0; r < 2; r++ {
		kr := f.Add(f.Add(f.MulC(g.warp, 16), g.g4), I(int64(8*r)))
		valid := f.Setp("le", S32, kr, klim)
		ka := g.wide(g.wide(dkb, kr, g.pitch*int64(4*D)), g.t4, 8)
		va := g.wide(g.wide(dvb, kr, g.pitch*int64(4*D)), g.t4, 8)
		for n := 0; n < D/8; n++ {
			for x := 0; x < 2; x++ {
				kv := f.F(OpMulF, R(dkA[n][2*r+x]), g.scale)
				f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &valid, Dst: []Operand{Addr(ka.Reg, int64(n*32+4*x))}, Src: []Operand{kv}})
				f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Guard: &valid, Dst: []Operand{Addr(va.Reg, int64(n*32+4*x))}, Src: []Operand{R(dvA[n][2*r+x])}})
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
	g.aKw = f.Add(f.Add(g.smem, f.MulC(g.warp, int64(16*g.RS))), g.aRowCol)
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
	bq := int64(g.bq)
	f.Comment("Q and dO tile copies, rows past seq_q zero-filled")
	r0 := f.MulC(qt, bq)
	lim := f.Sub(f.Sub(g.sq, I(1)), r0)
	sb := g.bufBase(buf)
	src := func(base Operand) Operand { return g.wide(base, r0, g.pitch*int64(2*g.D)) }
	g.copyRows(sb, src(l.qb), lim, g.bq)
	g.copyRows(f.Add(sb, I(int64(g.bufBytes()))), src(l.db), lim, g.bq)
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
	r0 := f.MulC(R(t), int64(g.bq))
	rend := f.Add(r0, I(int64(g.bq)))
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
		f.Set(U32, t, f.Max(f.Add(R(t), I(1)), f.FloorDiv(f.Sub(qh[0], g.off), int64(g.bq))))
	} else {
		f.Into(OpAdd, U32, t, R(t), I(1))
	}
	f.Bra(scan, nil, false)
	f.Place(done)
	return t, c, nil
}
