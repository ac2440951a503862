package ptx

import (
	"fmt"
	"math"
	"strings"

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

var negInf = Fimm(float32(math.Inf(-1)))

// geom is a kernel's geometry: everything the toolkit's pieces need to
// know about the kernel they are emitted into, stated by each kernel
// (never read from the package's tile constants).
type geom struct {
	tileQ    int  // query rows per CTA (per work item; the dk/dv kernel: per query-tile step)
	tileK    int  // keys per key tile
	threads  int  // compute threads per CTA: those that scan, vote, and write results
	D        int  // head dimension of q and k (qk)
	Dv       int  // head dimension of v and the output (D unless the plan's head_dim is {qk, v})
	RS       int  // shared-memory row pitch of a padded tile, bytes (rowStride; 0: no padded tiles)
	elem     Type // BF16 or F16
	st       int  // residue stride (1: identity layout); global row pitch multiplier
	docs     bool // the kernel's programs read document arrays
	tree     bool // the plan reads a tree (the tree arrays replace the document arrays)
	hasHeads bool // the plan has head parameters (head_params)
	sinks    bool // the kernel reads the learned sinks (the forwards' epilogue, the dq kernel's gradient)
	lens     bool // the kernel takes per-row lengths (lensParams): every kernel but the residue layout's above stageDim
	pos      bool // the kernel takes per-row positions (posParams): every kernel with lens
	// stage: the kernel keeps the row's lengths and positions in shared
	// memory rather than registers (stageRow): those with lens at head_dim
	// above 128 (stageDim) or with hull and class programs above bigScan;
	// the sm_90a kernel's without a producer (generateHopper)
	stage bool
}

// warps is the compute warps per CTA.
func (g geom) warps() int { return g.threads / 32 }

// rowStride is the shared-memory row pitch of a tile: D bf16 values plus
// 16 bytes of padding, which staggers ldmatrix rows across banks.
func rowStride(d int) int { return 2*d + 16 }

// planGeom checks that target t can render plan p (its element type,
// tile sizes, head dimension, layout and programs) and returns the plan's
// part of a kernel's geometry: head dimension, element type, layout
// stride and run-time data; the kernel states its tiles, threads and row
// pitch.
func planGeom(p *gen.Plan, t Target) (geom, error) {
	if err := t.Check(); err != nil {
		return geom{}, err
	}
	elem, _ := t.ElemType()
	if q, k := t.TileSizes(p.HeadDim); p.TileQ != q || p.TileK != k {
		return geom{}, fmt.Errorf("ptx: plan tiles %dx%d, the %s forward kernel runs %dx%d (compile the plan for a ptx.Target)", p.TileQ, p.TileK, t.Arch(), q, k)
	}
	if err := t.Supports(p.HeadDim, p.HeadDimV); err != nil {
		return geom{}, err
	}
	if sc := p.Score; sc.SoftCap && (sc.Cap < 0 || math.IsNaN(sc.Cap) || math.IsInf(sc.Cap, 0) || float32(sc.Cap*math.Log2E) > math.MaxFloat32/2) {
		return geom{}, fmt.Errorf("ptx: plan %s: soft-cap %v is not a positive finite float32", p.Name, sc.Cap)
	}
	st := 1
	switch {
	case p.Layout.Kind == gen.Residue && p.Layout.Stride >= 1:
		st = p.Layout.Stride
	case p.Layout.Kind != gen.Identity:
		return geom{}, fmt.Errorf("ptx: %s layout cannot be rendered", p.Layout.Kind)
	}
	for _, pr := range []struct {
		name string
		p    *gen.Prog
		args int
		res  int
	}{{"predicate", p.Pred, 2, 1}, {"hull", p.Hull, 3, 2}, {"class", p.Class, 4, 1}} {
		if pr.p == nil {
			return geom{}, fmt.Errorf("ptx: plan %s: no %s program", p.Name, pr.name)
		}
		if len(pr.p.Args) != pr.args || len(pr.p.Results) != pr.res {
			return geom{}, fmt.Errorf("ptx: plan %s: the %s program %s takes %d arguments and returns %d values, want %d and %d", p.Name, pr.name, pr.p.Name, len(pr.p.Args), len(pr.p.Results), pr.args, pr.res)
		}
	}
	dv := p.HeadDimV
	if dv == 0 {
		dv = p.HeadDim
	}
	g := geom{D: p.HeadDim, Dv: dv, elem: elem, st: st, tree: p.UsesTree(), hasHeads: len(p.HeadParams()) > 0, lens: st == 1 || p.HeadDim <= stageDim}
	g.docs = p.Pred.UsesDocs() || p.Hull.UsesDocs() || p.Class.UsesDocs()
	g.pos = g.lens
	// Residue kernels compute their class split in registers (residueSplit)
	// and do not stage, so above stageDim they take no lengths.
	g.stage = g.lens && st == 1 && (p.HeadDim > stageDim || len(p.Hull.Insts)+len(p.Class.Insts) > bigScan)
	if g.docs && st > 1 {
		return geom{}, fmt.Errorf("ptx: document masks with a residue layout are not supported")
	}
	return g, nil
}

// stageDim is the largest head dimension (qk) whose kernels keep the
// batch row's lengths and positions in registers (geom.stage): above it,
// and for hull and class programs above bigScan, ptxas 11.8 and 12.4
// spilled with them in registers across the tile loop, so those kernels
// stage them in shared memory (stageRow).
const stageDim = 128

// newKit is the toolkit for a kernel named name of plan p with geometry g.
func newKit(p *gen.Plan, cfg Config, g geom, name string) *kit {
	return &kit{p: p, cfg: cfg, geom: g, f: NewFunc(name)}
}

func layoutText(l gen.Layout) string {
	if l.Kind == gen.Residue {
		return fmt.Sprintf("%s (stride %d)", l.Kind, l.Stride)
	}
	return l.Kind.String()
}

// kit is the kernel toolkit: the pieces every kernel of the package is
// made of, emitted into the kernel's function f for its geometry (the
// embedded geom). The kernels (fwd80, bwdK, hop) embed it and add their
// own pieces; none of them redefines one of the toolkit's
// (TestKitNotShadowed).
type kit struct {
	geom
	p       *gen.Plan
	cfg     Config
	f       *Func
	pitch   int64
	docRegs *DocRegs // document arrays (document kernels), else nil
	// par is the kernel's parameters by name as readParams read them:
	// device addresses (generic to global), tensor-map addresses, scalars
	par map[string]Operand
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
	// qhead is the query head being computed (the score stage's)
	qhead Operand
	// the score stage's values (score.go): capX takes a raw score q.k to
	// x = s/c of the soft-cap's tanh (scale*log2(e)/cap2), cap2 is the cap
	// in log2 units; slope is the current head's ALiBi factor in log2
	// units (negated for |i - j|), sink2 and sinkN its learned sink logit
	// in log2 and natural units; tanhT holds the tile's tanh values from
	// scoreStage to scoreGrad
	capX, cap2   Operand
	slope        Operand
	sink2, sinkN Operand
	tanhT        [][4]Reg

	// per-thread values
	tid, lane, warp, g4, t4 Operand
	sq, sk                  Operand // the (class's) queries and keys of this CTA's batch row
	sqT, skT                Operand // the (class's) query and key rows of the tensors: bounds of the stores
	qp0, kp                 Operand // absolute positions of this batch row's first query and first key (rowPos; kp I(0) without positions)
	hq, hkv                 Operand // heads_q, heads_kv
	ch16w                   Operand // b64 chunk offset of this thread's copies (copyLanes)
	kbase, vbase            Operand // b64 global + ch*16
	smem                    Operand
	act                     *Reg    // this thread's copy lane holds a chunk of the row (nil: every lane does)
	vact                    *Reg    // the same for rows of v (Dv elements; a V tile has the K tile's pitch)
	copyS                   Operand // rb*RS + ch*16
	rb                      Operand // copy row of this thread
	kthi                    Operand
	scl                     Operand
	i0, i1                  Operand // absolute positions of the thread's two rows
}

// cpr is the number of 16-byte chunks per row; lanes the copy lanes per
// row, cpr rounded up to a power of two (D = 96 and 192 leave the lanes
// from cpr on idle: act); rowStep the rows the compute threads cover per
// copy step.
func (g *kit) cpr() int { return g.D / 8 }

func (g *kit) lanes() int {
	n := 1
	for n < g.cpr() {
		n *= 2
	}
	return n
}

func (g *kit) rowStep() int { return g.threads / g.lanes() }

// cpAsync emits one 16-byte cp.async of src to dst (size bytes read, the
// rest zero-filled), guarded by the copy lane's act.
func (g *kit) cpAsync(dst, src, size Operand) { g.cpAsyncG(g.act, dst, src, size) }

// cpAsyncG is cpAsync guarded by act (nil: none).
func (g *kit) cpAsyncG(act *Reg, dst, src, size Operand) {
	g.f.Emit(Inst{Op: OpCpAsync, Guard: act, Dst: []Operand{dst}, Src: []Operand{src, I(16), size}})
}

// ldShared loads the b32 word at a of a thread's share of a tile: 0 in an
// idle copy lane (act false), which owns none.
func (g *kit) ldShared(a Operand) Reg { return g.ldSharedG(g.act, a) }

// ldSharedG is ldShared for the lanes of act (vact: a value tile's).
func (g *kit) ldSharedG(act *Reg, a Operand) Reg {
	f := g.f
	x := f.NewReg(B32)
	if act != nil {
		f.Set(B32, x, I(0))
	}
	f.Emit(Inst{Op: OpLd, T: B32, Space: "shared", Guard: act, Dst: []Operand{R(x)}, Src: []Operand{a}})
	return x
}

// stShared stores v to the word at a of a thread's share of a tile (not
// in an idle copy lane).
func (g *kit) stShared(a, v Operand) { g.stSharedG(g.act, a, v) }

// stSharedG is stShared for the lanes of act.
func (g *kit) stSharedG(act *Reg, a, v Operand) {
	g.f.Emit(Inst{Op: OpSt, T: B32, Space: "shared", Guard: act, Dst: []Operand{a}, Src: []Operand{v}})
}

// bar emits the kernel's barrier among its compute threads: bar.sync 0,
// or the named barrier barSrc.
func (g *kit) bar() {
	if g.barSrc != nil {
		g.f.Emit(Inst{Op: OpBarN, Src: g.barSrc})
		return
	}
	g.f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})
}

func (g *kit) param(name string, t Type) Operand {
	r := g.f.NewReg(t)
	g.f.Emit(Inst{Op: OpLdParam, T: t, Dst: []Operand{R(r)}, Src: []Operand{AddrSym(name, 0)}})
	return R(r)
}

func (g *kit) global(name string) Operand {
	a := g.param(name, U64)
	r := g.f.NewReg(U64)
	g.f.Emit(Inst{Op: OpCvtaGlob, Dst: []Operand{R(r)}, Src: []Operand{a}})
	return R(r)
}

// wide returns base + x*c as a b64 address (x u32).
func (g *kit) wide(base, x Operand, c int64) Operand {
	f := g.f
	off := f.NewReg(U64)
	f.Emit(Inst{Op: OpMulWide, T: U32, Dst: []Operand{R(off)}, Src: []Operand{f.reg(U32, x), I(c)}})
	return f.Op3(OpAdd, U64, base, R(off))
}

// strideOf loads tensor t's element stride along axis (strideParams) at
// its use: ptxas reads a parameter from the constant bank, so no register
// holds a stride across the tile loop.
func (g *kit) strideOf(t, axis string) Operand { return g.param(strideName(t, axis), U32) }

// headAt returns base + esize*(b*batch + h*head) at tensor t's strides,
// b64 (the products in 64 bits: mul.wide.u32).
func (g *kit) headAt(t string, base, b, h Operand, esize int64) Operand {
	f := g.f
	ob, oh := f.NewReg(U64), f.NewReg(U64)
	f.Emit(Inst{Op: OpMulWide, T: U32, Dst: []Operand{R(ob)}, Src: []Operand{f.reg(U32, b), g.strideOf(t, "batch")}})
	f.Emit(Inst{Op: OpMulWide, T: U32, Dst: []Operand{R(oh)}, Src: []Operand{f.reg(U32, h), g.strideOf(t, "head")}})
	sum := f.Op3(OpShl, B64, f.Op3(OpAdd, U64, R(ob), R(oh)), I(int64(log2(esize))))
	return f.Op3(OpAdd, U64, base, sum)
}

// rowAt returns base + (row*mul)*pos, b64, pos being tensor t's pos
// stride: row is a tensor row of the head (u32) and mul the element size
// times the rows' pitch (the residue stride, or 1); row*mul stays below
// 2^31 (positions are below gpu.MaxSeq) and the product with pos is wide.
func (g *kit) rowAt(t string, base, row Operand, mul int64) Operand {
	f := g.f
	off := f.NewReg(U64)
	f.Emit(Inst{Op: OpMulWide, T: U32, Dst: []Operand{R(off)}, Src: []Operand{f.reg(U32, f.MulC(row, mul)), g.strideOf(t, "pos")}})
	return f.Op3(OpAdd, U64, base, R(off))
}

// readParams emits the loads of the kernel's parameters, in the order of
// its list (kernelParams): device addresses converted to global ones,
// but tensor maps (tmap_*), whose addresses the bulk tensor copies take
// as they are, and the scalars. It sets the mask's run-time data (a
// tree's arrays, or documents', and head_params, whose values headValues
// loads per head) and the shape.
func (g *kit) readParams() {
	g.par = map[string]Operand{}
	for _, p := range g.f.Params {
		switch {
		case strings.HasPrefix(p.Name, "stride_"):
			continue // loaded where used (strideOf)
		case isLensParam(p.Name) || isPosParam(p.Name):
			g.par[p.Name] = g.param(p.Name, U64) // 0 or a generic address (rowLens, rowPos)
		case p.T == U64 && strings.HasPrefix(p.Name, "tmap_"):
			g.par[p.Name] = g.param(p.Name, U64)
		case p.T == U64:
			g.par[p.Name] = g.global(p.Name)
		default:
			g.par[p.Name] = g.param(p.Name, p.T)
		}
	}
	reg := func(name string) Reg { return g.par[name].Reg }
	switch {
	case g.tree:
		g.docRegs = &DocRegs{Tree: &TreeRegs{Lo: reg("tree_lo"), Off: reg("tree_off"), Anc: reg("tree_anc"), Info: reg("tree_info")}}
	case g.docs:
		g.docRegs = &DocRegs{ID: reg("doc_id"), Start: reg("doc_start"), End: reg("doc_end")}
	}
	if g.hasHeads {
		g.headBase = g.par[headParamsName]
	}
	g.sq, g.sk, g.hq, g.hkv, g.scl = g.par["seq_q"], g.par["seq_k"], g.par["heads_q"], g.par["heads_kv"], g.par["scale_log2"]
	g.sqT, g.skT = g.sq, g.sk
	g.kp = I(0)
	g.scoreConsts()
}

// rowLens sets g.sq and g.sk to batch row b's lengths when the kernel
// takes them (geom.lens) and the call gives them (a non-zero address):
// seq_lens_q[b] clamped to 0..seq_q and seq_lens_k[b] to 0..seq_k, so
// that a wrong length never reads or writes past the tensors' rows.
// g.sqT and g.skT keep the tensors' rows (the stores' bounds).
func (g *kit) rowLens(b Operand) {
	if !g.lens {
		return
	}
	f := g.f
	f.Comment("this batch row's queries and keys: seq_lens_q[b] and seq_lens_k[b] when given (clamped to the tensors' rows), else seq_q and seq_k")
	load := func(name string, all Operand) Operand {
		return f.Min(f.Max(R(g.rowParam(name, b, all)), I(0)), all)
	}
	g.sq = load(gpu.SeqLensQParam, g.sqT)
	g.sk = load(gpu.SeqLensKParam, g.skT)
}

// rowParam loads entry b of the [batch]s32 array at parameter name's
// address, or gives def when the address is 0.
func (g *kit) rowParam(name string, b, def Operand) Reg {
	f := g.f
	a := g.par[name]
	has := f.Setp("ne", S64, a, I(0))
	x := f.Mov(S32, def)
	ga := f.NewReg(U64)
	f.Emit(Inst{Op: OpCvtaGlob, Dst: []Operand{R(ga)}, Src: []Operand{a}})
	off := f.NewReg(U64)
	f.Emit(Inst{Op: OpMulWide, T: U32, Dst: []Operand{R(off)}, Src: []Operand{f.reg(U32, b), I(4)}})
	addr := f.Op3(OpAdd, U64, R(ga), R(off))
	f.Emit(Inst{Op: OpLd, T: S32, Space: "global", Guard: &has, Dst: []Operand{R(x)}, Src: []Operand{Addr(addr.Reg, 0)}})
	return x
}

// rowPos returns the absolute position of batch row b's first query (the
// query row r is at r plus it) and sets g.kp to that of its first key
// (key index j is at j + g.kp): with positions (geom.pos) and a non-zero
// address, k_pos[b] and q_pos[b] (negative entries read as 0), else the
// default alignment, kp 0 and the first query at kp + sk - sq (the row's
// lengths, after rowLens). Without geom.pos kp stays I(0), so the mask
// programs' key arguments are the key indices unchanged.
func (g *kit) rowPos(b Operand) Operand {
	f := g.f
	if !g.pos {
		g.qp0 = f.Sub(g.sk, g.sq)
		return g.qp0
	}
	f.Comment("this batch row's absolute positions: k_pos[b] (else 0) and q_pos[b] (else k_pos + keys - queries)")
	g.kp = f.Max(R(g.rowParam(gpu.KPosParam, b, I(0))), I(0))
	g.qp0 = f.Max(R(g.rowParam(gpu.QPosParam, b, f.Add(g.kp, f.Sub(g.sk, g.sq)))), I(0))
	return g.qp0
}

// rowBytes is the shared memory stageRow takes: stageWords words in a
// kernel that stages (geom.stage), none otherwise.
func (g *kit) rowBytes() int {
	if !g.stage {
		return 0
	}
	return 4 * stageWords
}

// stageWords is the most words stageRow stages: the row's four values and
// up to four more of the CTA's (its query tile's positions and last key
// tile).
const stageWords = 8

// stageRow keeps the batch row's values that rowLens and rowPos loaded
// (g.sq, g.sk, g.kp, g.qp0) out of registers from here on: thread 0
// stores them into shared memory at byte offset off of the dynamic
// shared array (rowBytes), a CTA barrier (bar) follows, and each becomes a
// staged operand (Staged) that every instruction reading it reloads with
// ld.volatile.shared, which ptxas neither hoists out of the tile loop nor
// merges. Kernels that do not stage (geom.stage) keep them in registers;
// without per-row lengths they are kernel parameters (which ptxas reads
// from the constant bank at their uses) and immediates. Every thread of
// the barrier must reach the call, and the values must be the same in
// every one of them. With again (the sm_90a kernel's work items, one
// batch row each) a barrier comes first, so that every thread's reads of
// the last item's words precede their rewrite; without it the words are
// written once (one batch row per CTA).
//
// With the row's lengths and positions held in registers across the tile
// loop ptxas 11.8 and 12.4 spilled at head_dim 192 and 256 (bigbird's,
// causal's and neighbourhood's forwards, the dk/dv kernels of causal,
// document and neighbourhood at 256) and with the key position in a
// register at 128 (neighbourhood, bigbird).
func (g *kit) stageRow(off int64, again bool, more ...*Operand) {
	if !g.stage {
		return
	}
	f := g.f
	if again {
		g.bar()
	}
	f.Comment("this batch row's lengths and positions into shared memory (thread 0), reloaded where used (ld.volatile.shared): no register holds them across the tile loop")
	t0 := f.Setp("eq", U32, g.tid, I(0))
	vals := append([]*Operand{&g.sq, &g.sk, &g.kp, &g.qp0}, more...)
	if len(vals) > stageWords {
		panic("BUG: stageRow: more than stageWords values")
	}
	for k, v := range vals {
		if v.Kind != KReg {
			continue // an immediate (kp without positions) or staged already
		}
		a := AddrSym(g.f.DynShared, off+int64(4*k))
		f.Emit(Inst{Op: OpSt, T: S32, Space: "shared", Guard: &t0, Dst: []Operand{a}, Src: []Operand{*v}})
		*v = Staged(g.f.DynShared, off+int64(4*k))
	}
	g.bar()
}

// keyPos is the absolute position of key index j (j + g.kp).
func (g *kit) keyPos(j Operand) Operand { return g.f.Add(j, g.kp) }

// keyIdx is the key index of absolute key position x (x - g.kp).
func (g *kit) keyIdx(x Operand) Operand { return g.f.Sub(x, g.kp) }

// lastPos is the last position the document arrays must cover for this
// batch row: its last key, or its last query when that lies past it
// (positions); seq_k - 1 (the arrays' seq_k entries) without positions.
func (g *kit) lastPos() Operand {
	f := g.f
	if !g.pos {
		return f.Sub(g.sk, I(1))
	}
	return f.Sub(f.Max(f.Add(g.qp0, g.sq), f.Add(g.kp, g.sk)), I(1))
}

// rowsLim is lim, the last valid row of a tile (possibly below 0 for a
// tile past its batch row's lengths, geom.lens), clamped at 0 for the
// clamped row addresses of loads and copies that lim also guards.
func (g *kit) rowsLim(lim Operand) Operand {
	if !g.lens {
		return lim // every tile holds a row
	}
	return g.f.Max(lim, I(0))
}

// prologue emits what every kernel starts with: its parameters
// (readParams), the thread index and, for a grid of tiles (grid), the
// CTA's coordinates cta (%ctaid.x, .y, .z; the persistent sm_90a kernel
// decodes work items instead), the values of the query head %ctaid.y when
// headAtCTA (kernels whose CTA computes one query head and reads its
// values first), then the lane coordinates: warp, lane, and the mma
// fragment's row group g4 and column pair t4.
func (g *kit) prologue(grid, headAtCTA bool) (cta [3]Operand) {
	f := g.f
	f.Comment("parameters and thread coordinates")
	g.readParams()
	g.tid = g.special("%tid.x")
	if grid {
		cta = [3]Operand{g.special("%ctaid.x"), g.special("%ctaid.y"), g.special("%ctaid.z")}
	}
	if headAtCTA {
		g.headValues(cta[1])
	}
	g.warp = f.Op3(OpShr, U32, g.tid, I(5))
	g.lane = f.Op3(OpAnd, B32, g.tid, I(31))
	g.g4 = f.Op3(OpShr, U32, g.lane, I(2))
	g.t4 = f.Op3(OpAnd, B32, g.lane, I(3))
	return cta
}

// copyLanes emits the shared memory's base (smem) and this thread's part
// of the cp.async copies of padded tiles: its 16-byte chunk of a row, the
// first row it copies (rb; then every rowStep rows), its shared offset
// copyS = rb*RS + chunk*16 and the chunk's byte offset ch16w (b64) in
// global rows.
func (g *kit) copyLanes() {
	f := g.f
	g.smem = R(f.Mov(U32, Sym("smem")))
	ch := f.Op3(OpAnd, B32, g.tid, I(int64(g.lanes()-1)))
	g.rb = f.Op3(OpShr, U32, g.tid, I(int64(log2(int64(g.lanes())))))
	if g.lanes() != g.cpr() {
		act := f.Setp("lt", U32, ch, I(int64(g.cpr())))
		g.act = &act
	}
	g.vact = g.act
	if g.Dv != g.D {
		vact := f.Setp("lt", U32, ch, I(int64(g.Dv/8)))
		g.vact = &vact
	}
	ch16 := f.MulC(ch, 16)
	g.copyS = f.Add(f.MulC(g.rb, int64(g.RS)), ch16)
	w := f.NewReg(U64)
	f.Emit(Inst{Op: OpCvtWide, T: U64, T2: U32, Dst: []Operand{R(w)}, Src: []Operand{f.reg(U32, ch16)}})
	g.ch16w = R(w)
}

// ldmRowCol is this lane's ldmatrix.x4 offset in a padded tile for an A
// operand (16 rows by 16 columns: row (l&7) + 8((l>>3)&1), column
// 8(l>>4)) and, the same, for a B operand read with .trans.
func (g *kit) ldmRowCol() Operand {
	f := g.f
	lrow := f.Add(f.Op3(OpAnd, B32, g.lane, I(7)), f.MulC(f.Op3(OpAnd, B32, f.Op3(OpShr, U32, g.lane, I(3)), I(1)), 8))
	lcol2 := f.MulC(f.Op3(OpShr, U32, g.lane, I(4)), 16) // 8 columns * 2 bytes
	return f.Add(f.MulC(lrow, int64(g.RS)), lcol2)
}

// ldmKey is this lane's ldmatrix.x4 offset in a padded tile for a B
// operand read without .trans (keys by columns): key (l&7) + 8(l>>4),
// column 8((l>>3)&1).
func (g *kit) ldmKey() Operand {
	f := g.f
	return f.Add(f.MulC(f.Add(f.Op3(OpAnd, B32, g.lane, I(7)), f.MulC(f.Op3(OpShr, U32, g.lane, I(4)), 8)), int64(g.RS)),
		f.MulC(f.Op3(OpAnd, B32, f.Op3(OpShr, U32, g.lane, I(3)), I(1)), 16))
}

// lateBases reports whether a kernel computes its output rows' global
// bases after the tile loop (reloading the parameters) rather than in its
// prologue: at D >= 192 a base kept across the loop was the value ptxas
// spilled (8 bytes, bigbird at D = 256, gemma2's dq at D = 192: stored
// in the prologue, loaded in the epilogue).
func (g *kit) lateBases() bool { return g.D >= 192 }

func (g *kit) special(n string) Operand { return R(g.f.Mov(U32, Special(n))) }

func (g *kit) mma(d [4]Reg, a [4]Reg, b0, b1 Reg) {
	g.f.Emit(Inst{Op: OpMma, T: g.elem, Dst: []Operand{Vec(d[:]...)}, Src: []Operand{Vec(a[:]...), Vec(b0, b1), Vec(d[:]...)}})
}

// frag loads the ldmatrix.x4 (or .trans) fragment at addr+off.
func (g *kit) frag(op Op, addr Operand, off int64) [4]Reg {
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
func (g *kit) product16(c [][4]Reg, aA, bB Operand, aRegs [][4]Reg) {
	g.productOver(g.D, c, aA, bB, aRegs)
}

// productOver is product16 over the first d columns (Dv for the products
// of value-shaped tiles).
func (g *kit) productOver(d int, c [][4]Reg, aA, bB Operand, aRegs [][4]Reg) {
	for ks := 0; ks < d/16; ks++ {
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

// accumulate adds A (k-steps of 16 over the rows of a tile) times the
// tile at bT (read with ldmatrix.trans, aRowCol lane offset
// included) into acc (len(acc) blocks of 8 columns from bT's: D/8, or
// fewer for a kernel whose warps split the columns).
func (g *kit) accumulate(acc [][4]Reg, a [][4]Reg, bT Operand) {
	for kk := range a {
		for dp := 0; dp < len(acc)/2; dp++ {
			b := g.frag(OpLdmatrixT, bT, int64(kk*16*g.RS+dp*32))
			g.mma(acc[2*dp], a[kk], b[0], b[1])
			g.mma(acc[2*dp+1], a[kk], b[2], b[3])
		}
	}
}

// pack converts a 16 x n f32 fragment set (the C layout of n/8 blocks)
// into the A fragments of its n/16 k-steps.
func (g *kit) pack(s [][4]Reg) [][4]Reg {
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

// pipeline emits the double-buffered tile loop the kernels share: tile
// cur (class ccur) is in buffer buf; each step finds the next tile
// (find(cur+1)), starts its copies into the other buffer (load) unless it
// is past last, waits for the current tile's copies, runs body between
// two barriers, and moves on while cur <= last.
func (g *kit) pipeline(stem string, cur, ccur, buf Reg, last Operand, find func(start Operand) (Reg, Reg, error), load func(t, buf Operand), body func() error) error {
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

// residueSplit splits ctaid.z (z) of a residue-layout kernel into the
// class c = z mod st this CTA runs and its batch row z / st.
func (g *kit) residueSplit(z Operand, st int64) (c, b Operand) {
	f := g.f
	f.Comment(fmt.Sprintf("residue layout, stride %d: this CTA runs class c = ctaid.z mod %d (absolute positions c, c+%d, ...) of batch row ctaid.z / %d", st, st, st, st))
	return f.FloorMod(z, st), f.FloorDiv(z, st)
}

// residueSegment reduces this CTA's batch row to residue class c, after
// rowLens and rowPos: the row's queries sit at absolute positions qp0..
// and its keys at kp.. (query row r at r + qp0, key j at j + kp), and
// the class holds the positions p = c (mod st), p at segment position
// (p - c) / st, as runtime/cpu's segments (and, at the default
// positions, gen.ResidueProg) have it. The class's first query is the
// tensor row qR0 = (c - qp0) mod st (then every st-th row) at segment
// position qx0 = ceil((qp0 - c) / st), its first key likewise kR0 and
// kx0. It sets g.sq and g.sk to the class's queries and keys among the
// row's lengths, g.sqT and g.skT to its rows of the tensors (the stores'
// bounds: the rows past the row's lengths of every class together are
// the tensors' rows past them), g.qp0 to qx0 and, with positions, g.kp to
// kx0, so that the programs see segment positions; it returns qR0 and
// kR0. Without positions kp is 0, so kR0 = c and kx0 = 0.
func (g *kit) residueSegment(c Operand, st int64) (qR0, kR0 Operand) {
	f := g.f
	f.Comment("the class's segment of this batch row: its first query and key (tensor rows qR0, kR0 below st; segment positions qx0, kx0), its queries and keys among the row's lengths and among the tensors' rows")
	ceil := func(x Operand) Operand { return f.Add(f.FloorDiv(f.Sub(x, I(1)), st), I(1)) } // ceil(x / st), no overflow
	count := func(n, r0 Operand) Operand { return f.Max(ceil(f.Sub(n, r0)), I(0)) }        // rows r0, r0+st, ... below n
	first := func(pos Operand) (x0, r0 Operand) {
		x0 = ceil(f.Sub(pos, c))
		return x0, f.Sub(f.Add(c, f.MulC(x0, st)), pos)
	}
	qx0, qR0 := first(f.Max(g.qp0, I(0)))
	kx0, kR0 := Operand(I(0)), c
	if !isImm(g.kp) || g.kp.Imm != 0 {
		kx0, kR0 = first(g.kp)
	}
	g.sqT, g.skT = count(g.sqT, qR0), count(g.skT, kR0)
	if g.lens {
		g.sq, g.sk = count(g.sq, qR0), count(g.sk, kR0)
	} else {
		g.sq, g.sk = g.sqT, g.skT
	}
	g.qp0 = qx0
	if g.pos {
		g.kp = kx0
	}
	return qR0, kR0
}

// residueExit sends a CTA (or work item) whose tile, from segment row
// row0 on, lies past its class's rows of the tensors (g.sqT; dk/dv: keys,
// g.skT) to g.next, or returns.
func (g *kit) residueExit(row0, rows Operand) {
	f := g.f
	run := f.Setp("lt", S32, row0, rows)
	if g.next != "" {
		f.Bra(g.next, &run, true)
		return
	}
	exit := f.NewLabel("run")
	f.Bra(exit, &run, false)
	f.Emit(Inst{Op: OpRet})
	f.Place(exit)
}

// keyRange emits the key-tile range of the query tile whose first row is
// qrow0 (positions q0 = qrow0 + off to q1, its last row below seq_q plus
// off): the plan's key hull of those positions, clipped to [0, seq_k-1].
// It sets g.kthi to the last tile and returns q0, q1 and the first tile.
func (g *kit) keyRange(qrow0, off Operand) (q0, q1, ktlo Operand, err error) {
	f := g.f
	f.Comment("key-tile range: the plan's key hull of this tile's query positions, hull(q0, q1, 0), as key indices clipped to [0, seq_k-1]")
	q0 = f.Add(qrow0, off)
	q1 = f.Add(f.Sub(f.Min(f.Add(qrow0, I(int64(g.tileQ))), g.sq), I(1)), off)
	f.CommentProg("key hull", g.p.Hull)
	// x = 0 (folded into the program) rather than kp: the hull's next
	// from 0, raised to kp below, is a sound start at fewer registers
	hull, err := RenderInts(f, g.p.Hull, g.env(q0, q1, I(0)))
	if err != nil {
		return q0, q1, ktlo, err
	}
	lo := f.Max(hull[0], I(0))
	hi := f.Min(hull[1], f.Sub(g.sk, I(1)))
	if g.pos {
		// clamped to [kp-1, kp+seq_k-1] before kp is taken off, so that
		// the hull's -Inf and Inf do not wrap
		lo = g.keyIdx(f.Max(hull[0], g.kp))
		hi = g.keyIdx(f.Max(f.Min(hull[1], g.keyPos(f.Sub(g.sk, I(1)))), f.Sub(g.kp, I(1))))
	}
	// floored: an empty hull gives last < 0
	ktlo = f.FloorDiv(lo, int64(g.tileK))
	g.kthi = f.reg(S32, f.FloorDiv(hi, int64(g.tileK)))
	if g.lens {
		// a tile wholly past its row's queries visits no key tile
		past := f.Setp("ge", S32, qrow0, g.sq)
		f.Emit(Inst{Op: OpMov, T: S32, Guard: &past, Dst: []Operand{g.kthi}, Src: []Operand{I(-1)}})
	}
	return q0, q1, ktlo, nil
}

// find emits a scan from key tile start to the first tile at or past it
// whose class (the plan's class(q0, q1, k0, k1) program) is not empty, or
// past kthi. After an empty tile it jumps to the tile holding the next key
// the plan's hull allows at or past the following tile (hull(q0, q1, x)'s
// next), so that long runs of empty tiles (between the sinks and the
// window of a sink+window mask) cost one step. Full tiles that run past
// seq_k are demoted to partial so the key bound is checked.
func (g *kit) find(start, q0, q1 Operand) (t, c Reg, err error) {
	f := g.f
	for _, q := range []*Operand{&q0, &q1} {
		if q.Kind == KStaged {
			*q = f.reg(S32, *q) // staged (stageRow): loaded once for the scan
		}
	}
	t, c = f.Mov(U32, start), f.Mov(U32, I(cEmpty))
	scan, done := f.NewLabel("scan"), f.NewLabel("found")
	f.Place(scan)
	past := f.Setp("gt", S32, R(t), g.kthi)
	f.Bra(done, &past, false)
	k0 := f.MulC(R(t), int64(g.tileK))
	kend := f.Add(k0, I(int64(g.tileK)))
	k1 := f.Sub(f.Min(kend, g.sk), I(1))
	f.Comment("tile class: the plan's class program (at the keys' positions)")
	cls, err := RenderInts(f, g.p.Class, g.env(q0, q1, g.keyPos(k0), g.keyPos(k1)))
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
	h, err := RenderInts(f, g.p.Hull, g.env(q0, q1, g.keyPos(kend)))
	if err != nil {
		return t, c, err
	}
	next := h[0]
	if g.pos {
		next = g.keyIdx(f.Max(next, g.kp)) // Inf - kp does not wrap
	}
	f.Set(U32, t, f.Max(f.Add(R(t), I(1)), f.FloorDiv(next, int64(g.tileK))))
	f.Bra(scan, nil, false)
	f.Place(done)
	return t, c, nil
}

// copyKV issues the cp.async copies of key tile kt into the K tile at
// base() (rendered after the comment) and the V tile vOff bytes after it,
// keys past seq_k zero-filled. A tile wholly below seq_k (every tile but
// the last) takes one address per tensor and immediate offsets per row;
// the last tile checks and clamps each row. Rows are at the pos strides of
// k and v (rowAt) times the pitch.
func (g *kit) copyKV(kt Operand, base func() Operand, vOff int64) {
	f := g.f
	f.Comment("K and V tile copies, keys past seq_k zero-filled")
	sb := base()
	sK := f.Add(sb, g.copyS)
	k0 := f.MulC(kt, int64(g.tileK))
	key0 := f.Add(k0, g.rb)
	last := f.Sub(g.sk, I(1))
	tail, done := f.NewLabel("tailcopy"), f.NewLabel("copied")
	over := f.Setp("gt", S32, f.Add(k0, I(int64(g.tileK-1))), last)
	f.Bra(tail, &over, false)
	for it := 0; it < g.tileK/g.rowStep(); it++ {
		key := f.Add(key0, I(int64(it*g.rowStep())))
		so := int64(it * g.rowStep() * g.RS)
		g.cpAsync(Addr(sK.Reg, so), Addr(g.rowAt("k", g.kbase, key, 2*g.pitch).Reg, 0), I(16))
		g.cpAsyncG(g.vact, Addr(sK.Reg, so+vOff), Addr(g.rowAt("v", g.vbase, key, 2*g.pitch).Reg, 0), I(16))
	}
	f.Bra(done, nil, false)
	f.Place(tail)
	for it := 0; it < g.tileK/g.rowStep(); it++ {
		key := f.Add(key0, I(int64(it*g.rowStep())))
		valid := f.Setp("le", S32, key, last)
		size := f.Selp(U32, I(16), I(0), valid)
		kc := f.Min(key, last)
		so := int64(it * g.rowStep() * g.RS)
		g.cpAsync(Addr(sK.Reg, so), Addr(g.rowAt("k", g.kbase, kc, 2*g.pitch).Reg, 0), size)
		g.cpAsyncG(g.vact, Addr(sK.Reg, so+vOff), Addr(g.rowAt("v", g.vbase, kc, 2*g.pitch).Reg, 0), size)
	}
	f.Place(done)
}
