package ptx

import (
	"fmt"
	"math"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
)

// maxSeq bounds seq_k; RenderProg's range analysis (ArgMax) relies on it.
const maxSeq = gpu.MaxSeq

// Class values of the tile class program (mask.Class), as s32 immediates.
const (
	cEmpty   = int64(mask.Empty)
	cPartial = int64(mask.Partial)
	cFull    = int64(mask.Full)
)

// Config chooses the target and variants of the forward kernel.
type Config struct {
	// Target is the SM version and element type; the zero value is SM80.
	Target Target
	// SoftLg2 computes log2(l) for the log-sum-exp with integer exponent
	// extraction and an odd atanh series (error below 1e-7) instead of
	// lg2.approx.ftz.f32, for interpreters without lg2.
	SoftLg2 bool
}

// Forward is a generated forward kernel.
type Forward struct {
	Name    string // kernel entry name
	Target  Target
	HeadDim int
	Elem    Type // the target's element type
	// Stride is the residue layout's stride (1 for the identity layout):
	// CTAs with blockIdx.z = batch*Stride + c run residue class c, whose
	// positions c, c+Stride, ... form one segment of the plan's layout
	// (mask.Segments).
	Stride int
	Params []Param
	PTX    string // the module text
	// TileQ is the query rows per CTA and Threads the threads per CTA (64
	// and 128 on sm_80; 128 and 256, two consumer warpgroups, on sm_90a).
	TileQ, Threads int
	// DynShared is the dynamic shared memory the kernel needs, in bytes.
	DynShared int
	// HeadParams are the plan's head parameters, whose values per query
	// head the kernel takes in head_params (gpu.CheckHeadParams checks a
	// call's); nil when it takes none.
	HeadParams []mask.HeadParam
}

// minCTAs is the .minnctapersm of the kernel per head dimension (none
// where absent). At head_dim 64 a CTA takes 46 KB of shared memory, so four
// fit an SM, and ptxas 12.4 for sm_90 then caps the kernel at 128
// registers (four CTAs of 128 threads) and spills (hetero: 48 bytes of
// spill stores, TestPtxas12); asking for three CTAs allows 170 registers,
// and the kernels take 141-159 without spills. At head_dim 128 (87 KB, two
// CTAs) ptxas's own choice (176-181 registers) spills nothing, while
// .minnctapersm 1 or 2 would let it take 243.
var minCTAs = map[int]int{64: 3}

// bigPred is the predicate length (IR instructions) above which a kernel
// asks for at most two CTAs per SM (see Forward): the examples' predicates
// take 4-54 instructions, bigbird's 163.
const bigPred = 96

// rowStride is the shared-memory row pitch of a tile: D bf16 values plus
// 16 bytes of padding, which staggers ldmatrix rows across banks.
func rowStride(d int) int { return 2*d + 16 }

// forwardParams is the parameter layout, in order. Document kernels take
// three more device addresses after lse: per key position (absolute,
// [seq_k], shared by every batch element and head) the s32 document id
// (non-decreasing), the first and the last position of its document.
func forwardParams(docs bool) []Param {
	ps := []Param{
		{Name: "q", T: U64, Doc: "queries [batch][heads_q][seq_q][D], elem"},
		{Name: "k", T: U64, Doc: "keys [batch][heads_kv][seq_k][D], elem"},
		{Name: "v", T: U64, Doc: "values [batch][heads_kv][seq_k][D], elem"},
		{Name: "o", T: U64, Doc: "output [batch][heads_q][seq_q][D], elem"},
		{Name: "lse", T: U64, Doc: "log-sum-exp [batch][heads_q][seq_q], f32 (natural log)"},
	}
	if docs {
		ps = append(ps,
			Param{Name: "doc_id", T: U64, Doc: "document id per position [seq_k], s32, non-decreasing"},
			Param{Name: "doc_start", T: U64, Doc: "first position of the position's document [seq_k], s32"},
			Param{Name: "doc_end", T: U64, Doc: "last position of the position's document [seq_k], s32"})
	}
	return append(ps, []Param{
		{Name: "seq_q", T: U32, Doc: "query rows (<= seq_k); row r is position r + seq_k - seq_q"},
		{Name: "seq_k", T: U32, Doc: "keys"},
		{Name: "heads_q", T: U32, Doc: "query heads"},
		{Name: "heads_kv", T: U32, Doc: "key/value heads; query head h reads h / (heads_q/heads_kv)"},
		{Name: "scale_log2", T: F32, Doc: "softmax scale times log2(e)"},
	}...)
}

// Launch is the geometry and parameter list of one call. DynShared is
// 5*64*(2D+16) bytes (43520 for D = 64, 87040 for D = 128): above 48 KiB
// the driver needs cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES).
type Launch struct {
	Grid, Block [3]int
	DynShared   int
	Params      []Param // order and types, as in the kernel
	// Scalars are the values of the non-pointer parameters, in order
	// (Batch only for a kernel that takes it: the persistent sm_90a one).
	SeqQ, SeqK, HeadsQ, HeadsKV uint32
	ScaleLog2                   float32
	Batch                       uint32
	// Persistent: the kernel loops over its work items (gpu.Kernel.Persistent);
	// Grid is one CTA per item, and any grid of at least one CTA along x is
	// correct: a runner launches Kernel().ResidentGrid(Grid, SMs).
	Persistent bool
}

// Kernel describes the kernel as generated packages embed it.
func (k *Forward) Kernel() gpu.Kernel {
	g := gpu.Kernel{Target: k.Target.Arch(), Elem: k.Target.Elem, Name: k.Name, PTX: k.PTX,
		TileQ: k.TileQ, Threads: k.Threads, DynShared: k.DynShared, Stride: max(k.Stride, 1),
		TensorMaps: k.tensorMapLayouts(), OptIn: k.Target.Accel && !SM90aVerified}
	for _, p := range k.Params {
		g.Params = append(g.Params, [3]string{p.Name, p.T.String(), p.Doc})
	}
	return g
}

// Geometry is the launch of a call with the given shape (the kernel's
// gpu.Kernel geometry, after checking the shape); scale 0 means
// 1/sqrt(D), and a scale must be positive (the kernel takes the row max
// before scaling).
func (k *Forward) Geometry(batch, headsQ, headsKV, seqQ, seqK int, scale float64) (Launch, error) {
	if err := k.strideFits(seqQ, seqK); err != nil {
		return Launch{}, err
	}
	grid, block, dyn, err := k.Kernel().Geometry(batch, headsQ, headsKV, seqQ, seqK)
	if err != nil {
		return Launch{}, fmt.Errorf("ptx: %w", err)
	}
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(k.HeadDim))
	}
	if sl := float32(scale * math.Log2E); !(scale > 0) || math.IsInf(float64(sl), 0) {
		return Launch{}, fmt.Errorf("ptx: softmax scale %v: the kernel needs a positive scale whose product with log2(e) is a finite float32", scale)
	}
	return Launch{
		Grid: grid, Block: block, DynShared: dyn, Params: k.Params,
		SeqQ: uint32(seqQ), SeqK: uint32(seqK), HeadsQ: uint32(headsQ), HeadsKV: uint32(headsKV),
		ScaleLog2: float32(scale * math.Log2E), Batch: uint32(batch), Persistent: k.Kernel().Persistent(),
	}, nil
}

var negInf = Fimm(float32(math.Inf(-1)))

// GenerateForward emits the forward kernel of a plan for cfg.Target. It
// renders the plan's programs (the key hull, the tile class, the
// partial-tile predicate and, for residue layouts, gen.ResidueProg) and
// reads nothing else of the mask; a plan whose tiles, head dimension,
// layout or programs the target cannot render is an error.
func GenerateForward(p *gen.Plan, cfg Config) (*Forward, error) {
	t := cfg.Target
	if t == (Target{}) {
		t = SM80
	}
	g, err := newFwd(p, cfg, t)
	if err != nil {
		return nil, err
	}
	g.f = NewFunc("attn_fwd_" + p.Name)
	if t.Accel {
		k, err := generateHopper(p, cfg, t, g)
		if k != nil {
			k.HeadParams = g.maskHeadParams()
		}
		return k, err
	}
	g.f.Params = forwardParams(g.docs)
	if p.UsesTree() {
		g.f.Params = treeForwardParams()
	}
	g.f.Params = g.withHeadParams(g.f.Params)
	g.f.ReqNTID = Threads
	g.f.MinCTAs = minCTAs[p.HeadDim]
	if g.f.MinCTAs > 2 && len(p.Pred.Insts) > bigPred {
		// a long partial-tile predicate, inlined per element, needs more
		// than the 170 registers three CTAs allow (bigbird: 168 and 128
		// bytes of spills); two CTAs leave ptxas up to 255
		g.f.MinCTAs = 2
	}
	g.f.DynShared = "smem"
	if err := g.kernel(); err != nil {
		return nil, err
	}
	mod := &Module{
		Comments: []string{
			fmt.Sprintf("attngen forward kernel for spec %q, target %s", p.Name, t.Name()),
			fmt.Sprintf("tiles %dx%d, head_dim %d, %s in, f32 accumulate, layout %s", TileQ, TileK, p.HeadDim, g.elem, layoutText(p.Layout)),
			fmt.Sprintf("generated by emit/ptx.GenerateForward(plan, ptx.Config{Target: ptx.Target{SM: %d, Elem: %q}, SoftLg2: %v})", t.SM, t.Elem, cfg.SoftLg2),
		},
		SM:    t.SM,
		Funcs: []*Func{g.f},
	}
	text, err := mod.Text()
	if err != nil {
		return nil, err
	}
	return &Forward{Name: g.f.Name, Target: t, HeadDim: p.HeadDim, Elem: g.elem, Stride: g.st, Params: g.f.Params, PTX: text, DynShared: g.smemBytes(), TileQ: TileQ, Threads: Threads,
		HeadParams: g.maskHeadParams()}, nil
}

// newFwd checks that target t can render plan p (its element type, tile
// sizes, head dimension, layout and programs) and returns the emitter
// state shared by the forward and backward kernels.
func newFwd(p *gen.Plan, cfg Config, t Target) (*fwd, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	elem, _ := t.ElemType()
	if q, k := t.TileSizes(p.HeadDim); p.TileQ != q || p.TileK != k {
		return nil, fmt.Errorf("ptx: plan tiles %dx%d, the %s forward kernel runs %dx%d (compile the plan for a ptx.Target)", p.TileQ, p.TileK, t.Arch(), q, k)
	}
	if err := t.Supports(p.HeadDim); err != nil {
		return nil, err
	}
	if p.Score.Active() {
		return nil, fmt.Errorf("ptx: plan %s: the %s kernels do not render a score stage (%s) yet; generate with -sm none", p.Name, t.Arch(), p.Score)
	}
	st := 1
	switch {
	case p.Layout.Kind == gen.Residue && p.Layout.Stride >= 1:
		st = p.Layout.Stride
	case p.Layout.Kind != gen.Identity:
		return nil, fmt.Errorf("ptx: %s layout cannot be rendered", p.Layout.Kind)
	}
	for _, pr := range []struct {
		name string
		p    *gen.Prog
		args int
		res  int
	}{{"predicate", p.Pred, 2, 1}, {"hull", p.Hull, 3, 2}, {"class", p.Class, 4, 1}} {
		if pr.p == nil {
			return nil, fmt.Errorf("ptx: plan %s: no %s program", p.Name, pr.name)
		}
		if len(pr.p.Args) != pr.args || len(pr.p.Results) != pr.res {
			return nil, fmt.Errorf("ptx: plan %s: the %s program %s takes %d arguments and returns %d values, want %d and %d", p.Name, pr.name, pr.p.Name, len(pr.p.Args), len(pr.p.Results), pr.args, pr.res)
		}
	}
	g := &fwd{p: p, cfg: cfg, elem: elem, D: p.HeadDim, RS: rowStride(p.HeadDim), st: st, tq: TileQ, tk: TileK, threads: Threads}
	g.docs = p.Pred.UsesDocs() || p.Hull.UsesDocs() || p.Class.UsesDocs()
	if g.docs && st > 1 {
		return nil, fmt.Errorf("ptx: document masks with a residue layout are not supported")
	}
	return g, nil
}

func layoutText(l gen.Layout) string {
	if l.Kind == gen.Residue {
		return fmt.Sprintf("%s (stride %d)", l.Kind, l.Stride)
	}
	return l.Kind.String()
}

type fwd struct {
	p       *gen.Plan
	cfg     Config
	elem    Type // BF16 or F16
	f       *Func
	D       int // head dim
	RS      int // shared row stride in bytes
	st      int // residue stride (1: identity layout); global row pitch multiplier
	pitch   int64
	docs    bool
	docRegs *DocRegs // document arrays (document kernels), else nil
	tq      int      // query rows per CTA
	tk      int      // keys per key tile
	threads int      // threads per CTA
	// next, if set, is where a CTA whose query tile lies past its residue
	// class's queries goes (the persistent kernel's next work item);
	// otherwise it returns
	next string
	// barSrc, if set, is the named barrier (id, threads) the kernel's
	// CTA-wide barriers use among its compute threads (the sm_90a kernel's
	// consumer warpgroups, beside a producer warp); nil: bar.sync 0
	barSrc []Operand
	// voters is the warps that vote in voteNonFinite (0: every warp)
	voters int

	// headBase is the b64 address of head_params and heads the current
	// query head's values (headValues), for plans with head parameters
	headBase Operand
	heads    []HeadVal

	// per-thread values
	tid, lane, warp, g4, t4 Operand
	sq, sk                  Operand
	kbase, vbase            Operand // b64 global + ch*16
	smem                    Operand
	copyS                   Operand // rb*RS + ch*16
	rb                      Operand // copy row of this thread
	kthi                    Operand
	scl                     Operand
	i0, i1                  Operand // absolute positions of the thread's two rows
}

func (g *fwd) kvBytes() int   { return TileK * g.RS }
func (g *fwd) qBytes() int    { return TileQ * g.RS }
func (g *fwd) smemBytes() int { return g.qBytes() + 4*g.kvBytes() + g.flagBytes() }

// cpr is the number of 16-byte chunks per row; rowStep the rows 128
// threads cover per copy step.
func (g *fwd) cpr() int     { return g.D / 8 }
func (g *fwd) rowStep() int { return Threads / g.cpr() }

// bar emits the kernel's barrier among its compute threads: bar.sync 0,
// or the named barrier barSrc.
func (g *fwd) bar() {
	if g.barSrc != nil {
		g.f.Emit(Inst{Op: OpBarN, Src: g.barSrc})
		return
	}
	g.f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})
}

func (g *fwd) param(name string, t Type) Operand {
	r := g.f.NewReg(t)
	g.f.Emit(Inst{Op: OpLdParam, T: t, Dst: []Operand{R(r)}, Src: []Operand{AddrSym(name, 0)}})
	return R(r)
}

func (g *fwd) global(name string) Operand {
	a := g.param(name, U64)
	r := g.f.NewReg(U64)
	g.f.Emit(Inst{Op: OpCvtaGlob, Dst: []Operand{R(r)}, Src: []Operand{a}})
	return R(r)
}

// wide returns base + x*c as a b64 address (x u32).
func (g *fwd) wide(base, x Operand, c int64) Operand {
	f := g.f
	off := f.NewReg(U64)
	f.Emit(Inst{Op: OpMulWide, T: U32, Dst: []Operand{R(off)}, Src: []Operand{f.reg(U32, x), I(c)}})
	return f.Op3(OpAdd, U64, base, R(off))
}

// dataRegs loads the addresses of the run-time mask data the kernel
// takes: a tree's arrays, or documents', and head_params (whose values
// headValues loads per head).
func (g *fwd) dataRegs() {
	switch {
	case g.p.UsesTree():
		lo, off, anc, info := g.global("tree_lo"), g.global("tree_off"), g.global("tree_anc"), g.global("tree_info")
		g.docRegs = &DocRegs{Tree: &TreeRegs{Lo: lo.Reg, Off: off.Reg, Anc: anc.Reg, Info: info.Reg}}
	case g.docs:
		id, start, end := g.global("doc_id"), g.global("doc_start"), g.global("doc_end")
		g.docRegs = &DocRegs{ID: id.Reg, Start: start.Reg, End: end.Reg}
	}
	if len(g.p.HeadParams()) > 0 {
		g.headBase = g.global(headParamsName)
	}
}

func (g *fwd) special(n string) Operand { return R(g.f.Mov(U32, Special(n))) }

func (g *fwd) kernel() error {
	f := g.f
	D := g.D
	f.Comment("parameters and thread coordinates")
	q, k, v, o, lse := g.global("q"), g.global("k"), g.global("v"), g.global("o"), g.global("lse")
	g.dataRegs()
	g.sq, g.sk = g.param("seq_q", U32), g.param("seq_k", U32)
	hq, hkv := g.param("heads_q", U32), g.param("heads_kv", U32)
	g.scl = g.param("scale_log2", F32)
	g.tid = g.special("%tid.x")
	qt, h, bz := g.special("%ctaid.x"), g.special("%ctaid.y"), g.special("%ctaid.z")
	g.headValues(h)
	g.warp = f.Op3(OpShr, U32, g.tid, I(5))
	g.lane = f.Op3(OpAnd, B32, g.tid, I(31))
	g.g4 = f.Op3(OpShr, U32, g.lane, I(2))
	g.t4 = f.Op3(OpAnd, B32, g.lane, I(3))
	group := f.Op3(OpDiv, U32, hq, hkv)
	kvh := f.Op3(OpDiv, U32, h, group)
	qrow0 := f.MulC(qt, TileQ)
	sqAll, skAll := g.sq, g.sk
	qRow, kRow := qrow0, I(0) // tensor rows of the tile's first query and of key 0
	if st := int64(g.st); st > 1 {
		c, b, r, err := g.residueQueries(bz, sqAll, skAll, qrow0, st)
		if err != nil {
			return err
		}
		bz, qRow, kRow = b, r, c
	}
	off := f.Sub(g.sk, g.sq)
	pitch := int64(g.st)

	f.Comment("global bases: this tile's query rows, this head's keys and values")
	rowIdx := f.Add(f.Op3(OpMulLo, S32, f.Add(f.Op3(OpMulLo, S32, bz, hq), h), sqAll), qRow)
	qbase := g.wide(q, rowIdx, int64(2*D))
	obase := g.wide(o, rowIdx, int64(2*D))
	lbase := g.wide(lse, rowIdx, 4)
	kvIdx := f.Add(f.Op3(OpMulLo, S32, f.Add(f.Op3(OpMulLo, S32, bz, hkv), kvh), skAll), kRow)
	g.pitch = pitch

	f.Comment(fmt.Sprintf("shared memory: Q %d bytes, then 2 buffers of K and V, %d bytes each (row pitch %d)", g.qBytes(), g.kvBytes(), g.RS))
	g.smem = R(f.Mov(U32, Sym("smem")))
	ch := f.Op3(OpAnd, B32, g.tid, I(int64(g.cpr()-1)))
	g.rb = f.Op3(OpShr, U32, g.tid, I(int64(log2(int64(g.cpr())))))
	ch16 := f.MulC(ch, 16)
	g.copyS = f.Add(f.MulC(g.rb, int64(g.RS)), ch16)
	ch16w := f.NewReg(U64)
	f.Emit(Inst{Op: OpCvtWide, T: U64, T2: U32, Dst: []Operand{R(ch16w)}, Src: []Operand{f.reg(U32, ch16)}})
	g.kbase = f.Op3(OpAdd, U64, g.wide(k, kvIdx, int64(2*D)), R(ch16w))
	g.vbase = f.Op3(OpAdd, U64, g.wide(v, kvIdx, int64(2*D)), R(ch16w))
	qbaseCh := f.Op3(OpAdd, U64, qbase, R(ch16w))

	f.Comment("Q tile: cp.async, rows past seq_q zero-filled")
	lim := f.Sub(f.Sub(g.sq, I(1)), qrow0) // last valid row of the tile
	sQ := f.Add(g.smem, g.copyS)
	for it := 0; it < TileQ/g.rowStep(); it++ {
		r := f.Add(g.rb, I(int64(it*g.rowStep())))
		valid := f.Setp("le", S32, r, lim)
		size := f.Selp(U32, I(16), I(0), valid)
		src := g.wide(qbaseCh, f.Min(r, lim), pitch*int64(2*D))
		f.Emit(Inst{Op: OpCpAsync, Dst: []Operand{Addr(sQ.Reg, int64(it*g.rowStep()*g.RS))}, Src: []Operand{Addr(src.Reg, 0), I(16), size}})
	}
	f.Emit(Inst{Op: OpCpCommit})
	f.Comment("softmax state and output accumulators")
	m := [2]Reg{f.Mov(F32, negInf), f.Mov(F32, negInf)}
	l := [2]Reg{f.Mov(F32, Fimm(0)), f.Mov(F32, Fimm(0))}
	acc := make([][4]Reg, D/8)
	for n := range acc {
		for x := range acc[n] {
			acc[n][x] = f.Mov(F32, Fimm(0))
		}
	}
	g.i0 = f.Add(f.Add(f.Add(qrow0, f.MulC(g.warp, 16)), g.g4), off)
	g.i1 = f.Add(g.i0, I(8))

	q0, q1, ktlo, err := g.keyRange(qrow0, off)
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
	f.Bra(fin, &pend, false)
	buf := f.Mov(U32, I(0))
	g.load(R(cur), R(buf))
	f.Emit(Inst{Op: OpCpCommit})

	f.Comment("the Q group is complete when at most the first K/V group is pending")
	f.Emit(Inst{Op: OpCpWait, Src: []Operand{I(1)}})
	f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})

	f.Comment("Q fragments: ldmatrix.x4 per 16 columns")
	lrow := f.Add(f.Op3(OpAnd, B32, g.lane, I(7)), f.MulC(f.Op3(OpAnd, B32, f.Op3(OpShr, U32, g.lane, I(3)), I(1)), 8))
	lcol2 := f.MulC(f.Op3(OpShr, U32, g.lane, I(4)), 16) // 8 columns * 2 bytes
	aRowCol := f.Add(f.MulC(lrow, int64(g.RS)), lcol2)   // Q and V (trans) lane offset
	aQ := f.Add(f.Add(g.smem, f.MulC(g.warp, int64(16*g.RS))), aRowCol)
	qa := make([][4]Reg, D/16)
	for ks := range qa {
		for x := range qa[ks] {
			qa[ks][x] = f.NewReg(B32)
		}
		f.Emit(Inst{Op: OpLdmatrix, Dst: []Operand{Vec(qa[ks][:]...)}, Src: []Operand{Addr(aQ.Reg, int64(ks*32))}})
	}
	// K lane offset: key (l&7) + 8*(l>>4), column 8*((l>>3)&1)
	aK := f.Add(f.MulC(f.Add(f.Op3(OpAnd, B32, g.lane, I(7)), f.MulC(f.Op3(OpShr, U32, g.lane, I(4)), 8)), int64(g.RS)),
		f.MulC(f.Op3(OpAnd, B32, f.Op3(OpShr, U32, g.lane, I(3)), I(1)), 16))

	err = g.pipeline("tile", cur, ccur, buf, g.kthi,
		func(start Operand) (Reg, Reg, error) { return g.find(start, q0, q1) },
		g.load,
		func() error { return g.compute(R(cur), R(ccur), R(buf), qa, aK, aRowCol, m, l, acc) })
	if err != nil {
		return err
	}
	f.Place(fin)
	f.Emit(Inst{Op: OpCpWait, Src: []Operand{I(0)}}) // no copy outlives the CTA

	g.finish(obase, lbase, qrow0, m, l, acc)
	f.Emit(Inst{Op: OpRet})
	return nil
}

// pipeline emits the double-buffered tile loop the kernels share: tile
// cur (class ccur) is in buffer buf; each step finds the next tile
// (find(cur+1)), starts its copies into the other buffer (load) unless it
// is past last, waits for the current tile's copies, runs body between
// two barriers, and moves on while cur <= last.
func (g *fwd) pipeline(stem string, cur, ccur, buf Reg, last Operand, find func(start Operand) (Reg, Reg, error), load func(t, buf Operand), body func() error) error {
	f := g.f
	loop := f.NewLabel(stem)
	f.Place(loop)
	nxt, cnxt, err := find(f.Add(R(cur), I(1)))
	if err != nil {
		return err
	}
	noload := f.NewLabel("noprefetch")
	pl := f.Setp("gt", S32, R(nxt), last)
	f.Bra(noload, &pl, false)
	load(R(nxt), f.Op3(OpXor, B32, R(buf), I(1)))
	f.Place(noload)
	f.Emit(Inst{Op: OpCpCommit})
	f.Emit(Inst{Op: OpCpWait, Src: []Operand{I(1)}})
	f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})
	if err := body(); err != nil {
		return err
	}
	f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})
	f.Set(U32, cur, R(nxt))
	f.Set(U32, ccur, R(cnxt))
	f.Into(OpXor, B32, buf, R(buf), I(1))
	pc := f.Setp("le", S32, R(cur), last)
	f.Bra(loop, &pc, false)
	return nil
}

// residueClass emits the residue layout's split of ctaid.z (z) into the
// class c = z mod st this CTA runs and the batch z / st, and the class's
// query and key counts (gen.ResidueProg rendered with st).
func (g *fwd) residueClass(z, sqAll, skAll Operand, st int64) (c, b, nq, nk Operand, err error) {
	f := g.f
	f.Comment(fmt.Sprintf("residue layout, stride %d: this CTA runs class c = ctaid.z mod %d on positions c, c+%d, ...", st, st, st))
	c = f.FloorMod(z, st)
	b = f.FloorDiv(z, st)
	res := gen.ResidueProg()
	f.CommentProg(fmt.Sprintf("the class's queries and keys, st = %d", st), res)
	nqk, err := RenderInts(f, res, Env{Args: []Operand{c, sqAll, skAll, I(st)}})
	if err != nil {
		return c, b, nq, nk, err
	}
	return c, b, nqk[0], nqk[1], nil
}

// residueQueries is residueClass for a CTA of query tile rows from qrow0
// of its class: CTAs past the class's queries return, the class's segment
// sizes become g.sq and g.sk, and qRow is the tensor row of the tile's
// first query (the class's queries are its last nq keys).
func (g *fwd) residueQueries(z, sqAll, skAll, qrow0 Operand, st int64) (c, b, qRow Operand, err error) {
	f := g.f
	c, b, nq, nk, err := g.residueClass(z, sqAll, skAll, st)
	if err != nil {
		return c, b, qRow, err
	}
	first := f.Sub(nk, nq)
	offAll := f.Sub(skAll, sqAll)
	run := f.Setp("lt", S32, qrow0, nq)
	if g.next != "" {
		f.Bra(g.next, &run, true)
	} else {
		exit := f.NewLabel("run")
		f.Bra(exit, &run, false)
		f.Emit(Inst{Op: OpRet})
		f.Place(exit)
	}
	g.sq, g.sk = nq, nk
	return c, b, f.Sub(f.Add(c, f.MulC(f.Add(first, qrow0), st)), offAll), nil
}

// keyRange emits the key-tile range of the query tile whose first row is
// qrow0 (positions q0 = qrow0 + off to q1, its last row below seq_q plus
// off): the plan's key hull of those positions, clipped to [0, seq_k-1].
// It sets g.kthi to the last tile and returns q0, q1 and the first tile.
func (g *fwd) keyRange(qrow0, off Operand) (q0, q1, ktlo Operand, err error) {
	f := g.f
	f.Comment("key-tile range: the plan's key hull of this tile's query positions, hull(q0, q1, 0), clipped to [0, seq_k-1]")
	q0 = f.Add(qrow0, off)
	q1 = f.Add(f.Sub(f.Min(f.Add(qrow0, I(TileQ)), g.sq), I(1)), off)
	f.CommentProg("key hull", g.p.Hull)
	hull, err := RenderInts(f, g.p.Hull, g.env(q0, q1, I(0)))
	if err != nil {
		return q0, q1, ktlo, err
	}
	lo := f.Max(hull[0], I(0))
	hi := f.Min(hull[1], f.Sub(g.sk, I(1)))
	// floored: an empty hull gives last < 0
	ktlo = f.FloorDiv(lo, TileK)
	g.kthi = f.reg(S32, f.FloorDiv(hi, TileK))
	return q0, q1, ktlo, nil
}

// find emits a scan from key tile start to the first tile at or past it
// whose class (the plan's class(q0, q1, k0, k1) program) is not empty, or
// past kthi. After an empty tile it jumps to the tile holding the next key
// the plan's hull allows at or past the following tile (hull(q0, q1, x)'s
// next), so that long runs of empty tiles (between the sinks and the
// window of a sink+window mask) cost one step. Full tiles that run past
// seq_k are demoted to partial so the key bound is checked.
func (g *fwd) find(start, q0, q1 Operand) (t, c Reg, err error) {
	f := g.f
	t, c = f.Mov(U32, start), f.Mov(U32, I(cEmpty))
	scan, done := f.NewLabel("scan"), f.NewLabel("found")
	f.Place(scan)
	past := f.Setp("gt", S32, R(t), g.kthi)
	f.Bra(done, &past, false)
	k0 := f.MulC(R(t), int64(g.tk))
	kend := f.Add(k0, I(int64(g.tk)))
	k1 := f.Sub(f.Min(kend, g.sk), I(1))
	f.Comment("tile class: the plan's class program")
	cls, err := RenderInts(f, g.p.Class, g.env(q0, q1, k0, k1))
	if err != nil {
		return t, c, err
	}
	f.Set(U32, c, f.reg(S32, cls[0]))
	over := f.PAnd(f.Setp("gt", S32, kend, g.sk), f.Setp("eq", S32, R(c), I(cFull)))
	f.Emit(Inst{Op: OpMov, T: U32, Guard: &over, Dst: []Operand{R(c)}, Src: []Operand{I(cPartial)}})
	empty := f.Setp("eq", S32, R(c), I(cEmpty))
	f.Bra(done, &empty, true)
	f.Comment("empty tile: jump to the tile of the first key at or past the next tile that the key hull allows")
	f.CommentProg("key hull", g.p.Hull)
	h, err := RenderInts(f, g.p.Hull, g.env(q0, q1, kend))
	if err != nil {
		return t, c, err
	}
	f.Set(U32, t, f.Max(f.Add(R(t), I(1)), f.FloorDiv(h[0], int64(g.tk))))
	f.Bra(scan, nil, false)
	f.Place(done)
	return t, c, nil
}

// load issues the cp.async copies of key tile kt into buffer buf (0 or 1).
func (g *fwd) load(kt, buf Operand) {
	g.copyKV(kt, func() Operand {
		return g.f.Add(g.f.Add(g.smem, I(int64(g.qBytes()))), g.f.MulC(buf, int64(2*g.kvBytes())))
	}, int64(g.kvBytes()))
}

// copyKV issues the cp.async copies of key tile kt into the K tile at
// base() (rendered after the comment) and the V tile vOff bytes after it,
// keys past seq_k zero-filled. A tile wholly below seq_k (every tile but
// the last) takes one address per tensor and immediate offsets per row;
// the last tile checks and clamps each row.
func (g *fwd) copyKV(kt Operand, base func() Operand, vOff int64) {
	f := g.f
	f.Comment("K and V tile copies, keys past seq_k zero-filled")
	sb := base()
	sK := f.Add(sb, g.copyS)
	k0 := f.MulC(kt, TileK)
	key0 := f.Add(k0, g.rb)
	last := f.Sub(g.sk, I(1))
	rowBytes := g.pitch * int64(2*g.D)
	// immediate address offsets are s32: a huge residue stride takes the
	// checked path for every tile
	fast := int64(TileK-g.rowStep())*rowBytes <= math.MaxInt32
	tail, done := f.NewLabel("tailcopy"), f.NewLabel("copied")
	if fast {
		over := f.Setp("gt", S32, f.Add(k0, I(TileK-1)), last)
		f.Bra(tail, &over, false)
		ks := g.wide(g.kbase, key0, rowBytes)
		vs := g.wide(g.vbase, key0, rowBytes)
		for it := 0; it < TileK/g.rowStep(); it++ {
			so, gOff := int64(it*g.rowStep()*g.RS), int64(it*g.rowStep())*rowBytes
			f.Emit(Inst{Op: OpCpAsync, Dst: []Operand{Addr(sK.Reg, so)}, Src: []Operand{Addr(ks.Reg, gOff), I(16), I(16)}})
			f.Emit(Inst{Op: OpCpAsync, Dst: []Operand{Addr(sK.Reg, so+vOff)}, Src: []Operand{Addr(vs.Reg, gOff), I(16), I(16)}})
		}
		f.Bra(done, nil, false)
	}
	f.Place(tail)
	for it := 0; it < TileK/g.rowStep(); it++ {
		key := f.Add(key0, I(int64(it*g.rowStep())))
		valid := f.Setp("le", S32, key, last)
		size := f.Selp(U32, I(16), I(0), valid)
		kc := f.Min(key, last)
		so := int64(it * g.rowStep() * g.RS)
		ks := g.wide(g.kbase, kc, rowBytes)
		vs := g.wide(g.vbase, kc, rowBytes)
		f.Emit(Inst{Op: OpCpAsync, Dst: []Operand{Addr(sK.Reg, so)}, Src: []Operand{Addr(ks.Reg, 0), I(16), size}})
		f.Emit(Inst{Op: OpCpAsync, Dst: []Operand{Addr(sK.Reg, so+vOff)}, Src: []Operand{Addr(vs.Reg, 0), I(16), size}})
	}
	f.Place(done)
}

func (g *fwd) mma(d [4]Reg, a [4]Reg, b0, b1 Reg) {
	g.f.Emit(Inst{Op: OpMma, T: g.elem, Dst: []Operand{Vec(d[:]...)}, Src: []Operand{Vec(a[:]...), Vec(b0, b1), Vec(d[:]...)}})
}

// compute runs one key tile: S = Q K^T, mask, online softmax, O += P V.
func (g *fwd) compute(kt, cls, buf Operand, qa [][4]Reg, aK, aV Operand, m, l [2]Reg, acc [][4]Reg) error {
	f := g.f
	D := g.D
	f.Comment("S = Q K^T")
	sb := f.Add(f.Add(g.smem, I(int64(g.qBytes()))), f.MulC(buf, int64(2*g.kvBytes())))
	sK := f.Add(sb, aK)
	s := make([][4]Reg, TileK/8)
	for n := range s {
		for x := range s[n] {
			s[n][x] = f.Mov(F32, Fimm(0))
		}
	}
	for ks := 0; ks < D/16; ks++ {
		for np := 0; np < TileK/16; np++ {
			var b [4]Reg
			for x := range b {
				b[x] = f.NewReg(B32)
			}
			f.Emit(Inst{Op: OpLdmatrix, Dst: []Operand{Vec(b[:]...)}, Src: []Operand{Addr(sK.Reg, int64(np*16*g.RS+ks*32))}})
			g.mma(s[2*np], qa[ks], b[0], b[1])
			g.mma(s[2*np+1], qa[ks], b[2], b[3])
		}
	}
	if err := g.maskPartial(kt, cls, s); err != nil {
		return err
	}
	fix := g.sanitize(cls, sb)

	g.softmax(s, m, l, acc)

	f.Comment("O += P V: P packed to pairs, V through ldmatrix.trans")
	pt := BF16x2
	if g.elem == F16 {
		pt = F16x2
	}
	pack := func(hi, lo Reg) Reg {
		r := f.NewReg(B32)
		f.Emit(Inst{Op: OpCvtPack, T: pt, Dst: []Operand{R(r)}, Src: []Operand{R(hi), R(lo)}})
		return r
	}
	sV := f.Add(f.Add(sb, I(int64(g.kvBytes()))), aV)
	for kk := 0; kk < TileK/16; kk++ {
		a := [4]Reg{
			pack(s[2*kk][1], s[2*kk][0]), pack(s[2*kk][3], s[2*kk][2]),
			pack(s[2*kk+1][1], s[2*kk+1][0]), pack(s[2*kk+1][3], s[2*kk+1][2]),
		}
		for dp := 0; dp < D/16; dp++ {
			var b [4]Reg
			for x := range b {
				b[x] = f.NewReg(B32)
			}
			f.Emit(Inst{Op: OpLdmatrixT, Dst: []Operand{Vec(b[:]...)}, Src: []Operand{Addr(sV.Reg, int64(kk*16*g.RS+dp*32))}})
			g.mma(acc[2*dp], a, b[0], b[1])
			g.mma(acc[2*dp+1], a, b[2], b[3])
		}
	}
	g.restore(fix, sb, aV, s, acc)
	return nil
}

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
func (g *fwd) useIntervals() bool {
	return g.p.RowInterval && len(g.p.Pred.Insts) > intervalPred
}

// rowIntervals emits, for a plan whose rows keep intervals of keys
// (Plan.RowInterval), the interval of each of the thread's rows once per
// tile: the ends of the row's own key hull, hull(i, i, 0), the last one
// clipped to seq_k-1 (the key bound). keep(r, j) then emits lo_r <= j <=
// hi_r: two comparisons per element instead of the predicate.
func (g *fwd) rowIntervals(rows [2]Operand, lastK Operand) (keep func(r int, j Operand) Reg, err error) {
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
func (g *fwd) maskPartial(kt, cls Operand, s [][4]Reg) error {
	f := g.f
	nomask := f.NewLabel("nomask")
	pp := f.Setp("ne", S32, cls, I(cPartial))
	f.Bra(nomask, &pp, false)
	if g.useIntervals() {
		c0 := f.Add(f.MulC(kt, int64(g.tk)), f.MulC(g.t4, 2))
		keep, err := g.rowIntervals([2]Operand{g.i0, g.i1}, f.Sub(g.sk, I(1)))
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
	c0 := f.Add(f.MulC(kt, int64(g.tk)), f.MulC(g.t4, 2))
	f.CommentProg("partial-tile predicate", g.p.Pred)
	memo := NewMemo()
	rows := [2]Operand{g.i0, g.i1}
	lastK := f.Sub(g.sk, I(1))
	if g.docs {
		rows[0], rows[1] = f.Min(rows[0], lastK), f.Min(rows[1], lastK)
	}
	for n := range s {
		cols := [2]Operand{f.Add(c0, I(int64(n*8))), f.Add(c0, I(int64(n*8+1)))}
		inK := [2]Reg{f.Setp("lt", S32, cols[0], g.sk), f.Setp("lt", S32, cols[1], g.sk)}
		if g.docs {
			// document arrays have seq_k entries: clamp positions past the
			// end (their scores are masked or their rows not stored)
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

// softmax emits the online softmax of one tile's scores s (fragment as in
// maskPartial) into the row state m, l and the accumulators acc (rescaled),
// leaving the unnormalized probabilities in s.
func (g *fwd) softmax(s [][4]Reg, m, l [2]Reg, acc [][4]Reg) {
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

// Element bits of the 16-bit types: exponent, its lowest bit, mantissa, and
// the codes sanitize writes for a non-finite value (+Inf 1, -Inf 128, NaN
// 16384: sums over the 64 keys of a tile stay exact and separable).
type elemBits struct{ exp, expLow, mant, pos, neg, nan int64 }

func (g *fwd) bits() elemBits {
	if g.elem == F16 {
		return elemBits{0x7c00, 0x0400, 0x03ff, 0x3c00, 0x5800, 0x7400}
	}
	return elemBits{0x7f80, 0x0080, 0x007f, 0x3f80, 0x4300, 0x4680}
}

// flagBytes is the shared memory after the key/value buffers: one word per
// warp for sanitize's vote.
func (g *fwd) flagBytes() int { return 4 * g.threads / 32 }

// sanitize emits the masked-value rule for partial tiles: the P V product
// multiplies a masked p = 0 by its value, and 0 times NaN or an infinity is
// NaN, so a non-finite value a row masks would reach that row. Each thread
// checks its share of the value tile (the words it copied); when any value
// of the tile is non-finite (a CTA-wide vote through shared memory), the
// threads replace those values by 0 in place and write, where the tile's
// keys were (no longer read), a code per element: 0 for a finite value, 1
// for +Inf, 128 for -Inf, 16384 for NaN. restore then adds the non-finite
// terms back to the rows that keep them. It returns a register that is 1
// when the tile was rewritten (the same in every thread).
func (g *fwd) sanitize(cls, sb Operand) Reg {
	return g.sanitizeIn(cls, sanLayout{
		base:  func() Operand { return g.f.Add(sb, g.copyS) },
		vOff:  int64(g.kvBytes()),
		words: TileK / g.rowStep() * 4,
		addr:  func(w int) int64 { return int64(w/4*g.rowStep()*g.RS + 4*(w%4)) },
		flags: func() Operand { return g.f.Add(g.smem, I(int64(g.qBytes()+4*g.kvBytes()))) },
	})
}

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

func (g *fwd) sanitizeIn(cls Operand, lay sanLayout) Reg {
	f := g.f
	eb := g.bits()
	done := f.Mov(B32, I(0))
	skip := f.NewLabel("finite")
	f.Comment("masked values: a partial tile's non-finite values are zeroed, and added back where kept")
	np := f.Setp("ne", S32, cls, I(cPartial))
	f.Bra(skip, &np, false)
	sK := lay.base()
	vOff, words, addr := lay.vOff, lay.words, lay.addr
	load := func(off int64) Reg {
		x := f.NewReg(B32)
		f.Emit(Inst{Op: OpLd, T: B32, Space: "shared", Dst: []Operand{R(x)}, Src: []Operand{Addr(sK.Reg, off)}})
		return x
	}
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
		f.Emit(Inst{Op: OpSt, T: B32, Space: "shared", Dst: []Operand{Addr(sK.Reg, vOff+addr(w))}, Src: []Operand{f.reg(B32, xc)}})
		lo := code(f.Op3(OpAnd, B32, R(x), I(0xffff)), f.Op3(OpAnd, B32, nf, I(0x8000)))
		hi := code(f.Op3(OpShr, U32, R(x), I(16)), f.Op3(OpAnd, B32, nf, I(0x80000000)))
		n := f.Op3(OpOr, B32, lo, f.Op3(OpShl, B32, hi, I(16)))
		f.Emit(Inst{Op: OpSt, T: B32, Space: "shared", Dst: []Operand{Addr(sK.Reg, addr(w))}, Src: []Operand{f.reg(B32, n)}})
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
func (g *fwd) share(n int) (words int, addr func(w int) int64) {
	return n / g.rowStep() * 4, func(w int) int64 { return int64(w/4*g.rowStep()*g.RS + 4*(w%4)) }
}

// nonFinite returns x's bit 15 (31) set where its low (high) 16-bit half
// has an all-ones exponent (the carry of exponent + lowest bit), other
// bits clear.
func (g *fwd) nonFinite(x Reg) Operand {
	f, eb := g.f, g.bits()
	t := f.Op3(OpAnd, B32, R(x), I(eb.exp|eb.exp<<16))
	t = f.Op3(OpAdd, U32, t, I(eb.expLow|eb.expLow<<16))
	return f.Op3(OpAnd, B32, t, I(0x80008000))
}

// voteNonFinite checks the thread's words of a tile (load(w), w < words)
// for non-finite elements, votes across the CTA through one word per warp
// at vote() (rendered after the thread's check), and branches to skip
// when no element of the tile is non-finite.
func (g *fwd) voteNonFinite(load func(w int) Reg, words int, vote func() Operand, skip string) {
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
		voters = g.threads / 32
	}
	for w := 0; w < voters; w++ {
		x := f.NewReg(B32)
		f.Emit(Inst{Op: OpLd, T: B32, Space: "shared", Dst: []Operand{R(x)}, Src: []Operand{Addr(f.reg(U32, flags).Reg, int64(4*w))}})
		f.Into(OpOr, B32, all, R(all), R(x))
	}
	clean := f.Setp("eq", U32, R(all), I(0))
	f.Bra(skip, &clean, false)
}

// restore emits the second half of sanitize's rule, after O += P V on the
// zeroed values: C = [p > 0] times the codes (one more product over the
// tile, exact in f32) counts, for each output element, the +Inf, -Inf and
// NaN values its row keeps with a non-zero weight; an element with any gets
// the IEEE sum of those: NaN for a NaN or for both infinities, else the
// infinity. Rows that keep none are left bit for bit as they are.
func (g *fwd) restore(done Reg, sb, aV Operand, s [][4]Reg, acc [][4]Reg) {
	f := g.f
	skip := f.NewLabel("restored")
	none := f.Setp("eq", U32, R(done), I(0))
	f.Bra(skip, &none, false)
	f.Comment("add back the kept non-finite values of a sanitized tile")
	a := g.indicators(s)
	sN := f.Add(sb, aV)
	for dp := 0; dp < g.D/16; dp++ {
		var c [2][4]Reg
		for h := range c {
			for x := range c[h] {
				c[h][x] = f.Mov(F32, Fimm(0))
			}
		}
		for kk := range a {
			var b [4]Reg
			for x := range b {
				b[x] = f.NewReg(B32)
			}
			f.Emit(Inst{Op: OpLdmatrixT, Dst: []Operand{Vec(b[:]...)}, Src: []Operand{Addr(sN.Reg, int64(kk*16*g.RS+dp*32))}})
			g.mma(c[0], a[kk], b[0], b[1])
			g.mma(c[1], a[kk], b[2], b[3])
		}
		for h := range c {
			for x := range c[h] {
				g.addBack(c[h][x], acc[2*dp+h][x])
			}
		}
	}
	f.Place(skip)
}

// indicators packs [p > 0] of the probabilities s as the A fragments of
// the key tile's k-slices of 16 (restore's product with the codes).
func (g *fwd) indicators(s [][4]Reg) [][4]Reg {
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
func (g *fwd) addBack(c, y Reg) {
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

// lg2 emits log2(x) for x >= 1 (x is a row sum of exponentials that
// includes 2^0).
func (g *fwd) lg2(x Operand) Operand {
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
func (g *fwd) finish(obase, lbase, qrow0 Operand, m, l [2]Reg, acc [][4]Reg) {
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

// Args lists the kernel arguments in parameter order: the device
// addresses (q, k, v, o, lse, for document kernels doc_id, doc_start,
// doc_end, for kernels of plans with head parameters head_params), then
// the scalars (uint32 and float32) by name: seq_q, seq_k, heads_q,
// heads_kv, scale_log2 and, for the persistent kernel, batch.
func (l Launch) Args(ptrs ...uint64) ([]any, error) {
	want := 0
	for _, p := range l.Params {
		if p.T == U64 {
			want++
		}
	}
	if len(ptrs) != want {
		return nil, fmt.Errorf("ptx: the kernel takes %d device addresses, got %d", want, len(ptrs))
	}
	var args []any
	for _, p := range ptrs {
		args = append(args, p)
	}
	for _, p := range l.Params {
		var a any
		switch p.Name {
		case "seq_q":
			a = l.SeqQ
		case "seq_k":
			a = l.SeqK
		case "heads_q":
			a = l.HeadsQ
		case "heads_kv":
			a = l.HeadsKV
		case "scale_log2":
			a = l.ScaleLog2
		case gpu.PersistentParam:
			a = l.Batch
		case "scale":
			continue // the backward's last parameter: BackwardLaunch.Args appends it
		default:
			if p.T != U64 {
				return nil, fmt.Errorf("BUG: ptx: Launch.Args has no value for parameter %s", p.Name)
			}
			continue
		}
		args = append(args, a)
	}
	return args, nil
}

// DocArrays returns the doc_start and doc_end arrays of document ids
// (non-decreasing, one per key position) for a document kernel.
func DocArrays(ids []int32) (start, end []int32, err error) {
	start, end = make([]int32, len(ids)), make([]int32, len(ids))
	for i := range ids {
		switch {
		case i > 0 && ids[i] < ids[i-1]:
			return nil, nil, fmt.Errorf("ptx: document ids decrease at position %d", i)
		case i > 0 && ids[i] == ids[i-1]:
			start[i] = start[i-1]
		default:
			start[i] = int32(i)
		}
	}
	for i := len(ids) - 1; i >= 0; i-- {
		if i+1 < len(ids) && ids[i+1] == ids[i] {
			end[i] = end[i+1]
		} else {
			end[i] = int32(i)
		}
	}
	return start, end, nil
}
