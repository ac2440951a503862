package ptx

import (
	"fmt"
	"math"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
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
	gm, err := planGeom(p, t)
	if err != nil {
		return nil, err
	}
	if t.Accel {
		return generateHopper(p, cfg, t, gm)
	}
	// 64x64 tiles, 4 warps of 16 query rows, padded rows
	gm.tileQ, gm.tileK, gm.threads, gm.RS = TileQ, TileK, Threads, rowStride(gm.D)
	g := newKit(p, cfg, gm, "attn_fwd_"+p.Name)
	g.f.Params = g.kernelParams([]Param{parQ, parK, parV, parO, parLSE}, nil, nil)
	g.f.ReqNTID = g.threads
	g.f.MinCTAs = minCTAs[p.HeadDim]
	if g.f.MinCTAs > 2 && len(p.Pred.Insts) > bigPred {
		// a long partial-tile predicate, inlined per element, needs more
		// than the 170 registers three CTAs allow (bigbird: 168 and 128
		// bytes of spills); two CTAs leave ptxas up to 255
		g.f.MinCTAs = 2
	}
	g.f.DynShared = "smem"
	k := &fwd80{kit: g}
	if err := k.kernel(); err != nil {
		return nil, err
	}
	mod := &Module{
		Comments: []string{
			fmt.Sprintf("attngen forward kernel for spec %q, target %s", p.Name, t.Name()),
			fmt.Sprintf("tiles %dx%d, head_dim %d, %s in, f32 accumulate, layout %s", g.tileQ, g.tileK, p.HeadDim, g.elem, layoutText(p.Layout)),
			fmt.Sprintf("generated by emit/ptx.GenerateForward(plan, ptx.Config{Target: ptx.Target{SM: %d, Elem: %q}, SoftLg2: %v})", t.SM, t.Elem, cfg.SoftLg2),
		},
		SM:    t.SM,
		Funcs: []*Func{g.f},
	}
	text, err := mod.Text()
	if err != nil {
		return nil, err
	}
	return &Forward{Name: g.f.Name, Target: t, HeadDim: p.HeadDim, Elem: g.elem, Stride: g.st, Params: g.f.Params, PTX: text, DynShared: k.smemBytes(), TileQ: g.tileQ, Threads: g.threads,
		HeadParams: maskHeadParams(p)}, nil
}

// fwd80 is the sm_80 forward kernel.
type fwd80 struct {
	*kit
}

func (g *fwd80) kvBytes() int { return g.tileK * g.RS }

func (g *fwd80) qBytes() int { return g.tileQ * g.RS }

func (g *fwd80) smemBytes() int { return g.qBytes() + 4*g.kvBytes() + g.flagBytes() }

func (g *fwd80) kernel() error {
	f := g.f
	D := g.D
	cta := g.prologue(true, true)
	qt, h, bz := cta[0], cta[1], cta[2]
	g.qhead = h
	q, k, v, o, lse := g.par["q"], g.par["k"], g.par["v"], g.par["o"], g.par["lse"]
	hq, hkv := g.hq, g.hkv
	group := f.Op3(OpDiv, U32, hq, hkv)
	kvh := f.Op3(OpDiv, U32, h, group)
	qrow0 := f.MulC(qt, int64(g.tileQ))
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
	g.copyLanes()
	g.kbase = f.Op3(OpAdd, U64, g.wide(k, kvIdx, int64(2*D)), g.ch16w)
	g.vbase = f.Op3(OpAdd, U64, g.wide(v, kvIdx, int64(2*D)), g.ch16w)
	qbaseCh := f.Op3(OpAdd, U64, qbase, g.ch16w)

	f.Comment("Q tile: cp.async, rows past seq_q zero-filled")
	lim := f.Sub(f.Sub(g.sq, I(1)), qrow0) // last valid row of the tile
	sQ := f.Add(g.smem, g.copyS)
	for it := 0; it < g.tileQ/g.rowStep(); it++ {
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
	aRowCol := g.ldmRowCol() // Q and V (trans) lane offset
	aQ := f.Add(f.Add(g.smem, f.MulC(g.warp, int64(16*g.RS))), aRowCol)
	qa := make([][4]Reg, D/16)
	for ks := range qa {
		for x := range qa[ks] {
			qa[ks][x] = f.NewReg(B32)
		}
		f.Emit(Inst{Op: OpLdmatrix, Dst: []Operand{Vec(qa[ks][:]...)}, Src: []Operand{Addr(aQ.Reg, int64(ks*32))}})
	}
	aK := g.ldmKey()

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

// load issues the cp.async copies of key tile kt into buffer buf (0 or 1).
func (g *fwd80) load(kt, buf Operand) {
	g.copyKV(kt, func() Operand {
		return g.f.Add(g.f.Add(g.smem, I(int64(g.qBytes()))), g.f.MulC(buf, int64(2*g.kvBytes())))
	}, int64(g.kvBytes()))
}

// compute runs one key tile: S = Q K^T, mask, online softmax, O += P V.
func (g *fwd80) compute(kt, cls, buf Operand, qa [][4]Reg, aK, aV Operand, m, l [2]Reg, acc [][4]Reg) error {
	f := g.f
	D := g.D
	f.Comment("S = Q K^T")
	sb := f.Add(f.Add(g.smem, I(int64(g.qBytes()))), f.MulC(buf, int64(2*g.kvBytes())))
	sK := f.Add(sb, aK)
	s := make([][4]Reg, g.tileK/8)
	for n := range s {
		for x := range s[n] {
			s[n][x] = f.Mov(F32, Fimm(0))
		}
	}
	for ks := 0; ks < D/16; ks++ {
		for np := 0; np < g.tileK/16; np++ {
			var b [4]Reg
			for x := range b {
				b[x] = f.NewReg(B32)
			}
			f.Emit(Inst{Op: OpLdmatrix, Dst: []Operand{Vec(b[:]...)}, Src: []Operand{Addr(sK.Reg, int64(np*16*g.RS+ks*32))}})
			g.mma(s[2*np], qa[ks], b[0], b[1])
			g.mma(s[2*np+1], qa[ks], b[2], b[3])
		}
	}
	g.scoreStage(s, g.rowsAt(kt))
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
	for kk := 0; kk < g.tileK/16; kk++ {
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
func (g *fwd80) sanitize(cls, sb Operand) Reg {
	return g.sanitizeIn(cls, sanLayout{
		base:  func() Operand { return g.f.Add(sb, g.copyS) },
		vOff:  int64(g.kvBytes()),
		words: g.tileK / g.rowStep() * 4,
		addr:  func(w int) int64 { return int64(w/4*g.rowStep()*g.RS + 4*(w%4)) },
		flags: func() Operand { return g.f.Add(g.smem, I(int64(g.qBytes()+4*g.kvBytes()))) },
	})
}

// restore emits the second half of sanitize's rule, after O += P V on the
// zeroed values: C = [p > 0] times the codes (one more product over the
// tile, exact in f32) counts, for each output element, the +Inf, -Inf and
// NaN values its row keeps with a non-zero weight; an element with any gets
// the IEEE sum of those: NaN for a NaN or for both infinities, else the
// infinity. Rows that keep none are left bit for bit as they are.
func (g *fwd80) restore(done Reg, sb, aV Operand, s [][4]Reg, acc [][4]Reg) {
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
