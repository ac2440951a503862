package ptx

import (
	"fmt"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
)

// hopTileK is the sm_90a kernel's key tile at head dimension d. The
// kernel is written for any multiple of 64 up to 256 (wgmma's N, the
// tensor box, restore in chunks of 64 keys), but the planner's keep words
// hold 64 keys and gen.Compile refuses larger key tiles, so it is 64 for
// now.
func hopTileK(d int) int { return TileK }

// The sm_90a forward kernel (Target.Accel): the sm_80 kernel's schedule,
// masking, softmax, masked-value rule and epilogue, with the tile products
// on wgmma and the tiles brought in by bulk tensor copies.
//
// Layout of shared memory (1024-byte aligned, every region a multiple of
// 1024 bytes, as the 128-byte swizzle's pattern requires): Q (128 rows),
// then the stages, each a K tile and a V tile (tk rows), then the
// mbarriers (Q, then one per stage) and the vote words of sanitize. A tile
// is D/64 boxes of its rows by 64 columns (128 bytes per row), each
// written by one cp.async.bulk.tensor with the 128-byte swizzle: box b
// holds columns 64b..64b+63, row r at 128r, its 16-byte units permuted by
// the address (bits 4-6 XOR bits 7-9).

const (
	hopWarpgroups = 2                   // consumer warpgroups per CTA, 64 query rows each
	hopTileQ      = 64 * hopWarpgroups  // query rows per CTA
	hopThreads    = 128 * hopWarpgroups // threads per CTA

	swzBytes = 128                // the swizzle span: one box row
	boxCols  = swzBytes / 2       // 16-bit columns per box row
	descSW   = uint64(1) << 62    // descriptor swizzle field: 128B
	sbo      = 8 * swzBytes       // 8 rows of 128 bytes: the stride between 8-row groups
	hopAlign = 1024               // the swizzle pattern's period
	barBytes = 8                  // one mbarrier
	stages   = 3                  // K/V pipeline stages
	kStep    = 16 * swzBytes / 16 // descriptor start advance per 16 keys (MN-major), in 16-byte units
	colStep  = 2 * 16 / 16        // descriptor start advance per 16 columns (K-major), in 16-byte units
)

// hopperParams is the sm_90a kernel's parameter layout: the sm_80 kernel's
// without q, k and v, which it reads through tensor maps passed by
// address (TensorMaps describes them) after lse and the document (or
// tree) arrays.
func hopperParams(docs, tree bool) []Param {
	var ps []Param
	base := forwardParams(docs)
	if tree {
		base = treeForwardParams()
	}
	for _, p := range base {
		switch p.Name {
		case "q", "k", "v":
			continue
		case "seq_q":
			ps = append(ps,
				Param{Name: "tmap_q", T: U64, Doc: "address of the tensor map of q (TensorMaps) in global memory"},
				Param{Name: "tmap_k", T: U64, Doc: "address of the tensor map of k (TensorMaps)"},
				Param{Name: "tmap_v", T: U64, Doc: "address of the tensor map of v (TensorMaps)"})
		}
		ps = append(ps, p)
	}
	return ps
}

// TensorMap describes one tensor map a sm_90a kernel reads through, as
// cuTensorMapEncodeTiled takes it (gpu.TensorMap): a 16-bit element
// tensor of rank 3, dimensions innermost first, byte strides of
// dimensions 1 and 2, the box copied per cp.async.bulk.tensor, the
// 128-byte swizzle, element strides 1, no interleave, out-of-bound
// elements filled with zeros.
type TensorMap = gpu.TensorMap

// SM90aVerified records whether a GPU run has verified the sm_90a forward
// kernel against the float64 reference (attngen verify -gpu -sm 90a,
// recorded in docs/gpu-results.md by gpu-check.sh run-verify-sm90a's
// results file; TestSM90aVerifiedRecorded refuses the constant without
// that record). Until one has, its gpu.Kernel is OptIn: gpu.Select uses it
// only when asked for by target; after setting it, regenerate the
// packages (go generate ./...).
const SM90aVerified = false

// tensorMapLayouts are the tensor maps of a sm_90a kernel, as generated
// packages describe them: q in boxes of a query tile's rows, k and v in
// boxes of a key tile's, 64 columns (128 bytes) each, 128-byte swizzle.
func (k *Forward) tensorMapLayouts() []gpu.TensorMapLayout {
	if !k.Target.Accel {
		return nil
	}
	mk := func(param, tensor string, rows int) gpu.TensorMapLayout {
		return gpu.TensorMapLayout{Param: param, Tensor: tensor, Cols: k.HeadDim, BoxCols: boxCols, BoxRows: rows, Swizzle: swzBytes}
	}
	return []gpu.TensorMapLayout{
		mk("tmap_q", "q", k.TileQ),
		mk("tmap_k", "k", hopTileK(k.HeadDim)),
		mk("tmap_v", "v", hopTileK(k.HeadDim)),
	}
}

// TensorMaps returns the tensor maps of a sm_90a kernel's call with the
// given shape on tensors at q, k and v (gpu.Kernel.TensorMapsOf). A
// tensor [batch*heads][seq][D] is seen as its rows grouped by the
// layout's stride st: element (col, c, R) is column col of row R*st + c of
// the flattened [batch*heads*seq] rows, so a box (64 columns, 1, rows)
// holds rows c, c+st, ... of one residue class (st = 1: consecutive
// rows); the box of q has a query tile's rows, those of k and v a key
// tile's. Rows of a box past its class's or head's positions are rows of
// other classes or heads, which the kernel masks (keys) or does not store
// (queries); past the tensor's end they read as zeros. The residue layout
// needs seq_q and seq_k to be multiples of the stride (so that every
// head's rows start a group).
func (k *Forward) TensorMaps(batch, headsQ, headsKV, seqQ, seqK int, q, kAddr, v uint64) ([]TensorMap, error) {
	if !k.Target.Accel {
		return nil, fmt.Errorf("ptx: kernel %s (%s) takes no tensor maps", k.Name, k.Target.Arch())
	}
	if batch < 1 || headsQ < 1 || headsKV < 1 || seqQ < 1 || seqK < 1 {
		return nil, fmt.Errorf("ptx: tensor maps of shape batch %d, heads %d/%d, seq %d/%d: every size must be positive", batch, headsQ, headsKV, seqQ, seqK)
	}
	if err := k.strideFits(seqQ, seqK); err != nil {
		return nil, err
	}
	tms, err := k.Kernel().TensorMapsOf(batch, headsQ, headsKV, seqQ, seqK, q, kAddr, v)
	if err != nil {
		return nil, fmt.Errorf("ptx: %w", err)
	}
	return tms, nil
}

// strideFits refuses, for a sm_90a kernel of the residue layout, sequence
// lengths that are not multiples of the stride (TensorMaps).
func (k *Forward) strideFits(seqQ, seqK int) error {
	if st := k.Stride; k.Target.Accel && st > 1 && (seqQ%st != 0 || seqK%st != 0) {
		return fmt.Errorf("ptx: the %s kernel runs the residue layout (stride %d) only when seq_q and seq_k are multiples of the stride, got %d and %d (the sm_80 kernel runs any)", k.Target.Arch(), st, seqQ, seqK)
	}
	return nil
}

// hop is the sm_90a kernel's generator state beyond fwd's.
type hop struct {
	*fwd
	halves    int     // boxes per tile row: D/64
	tileBytes int     // one K or V tile
	qBytes    int     // the Q tile
	boxBytes  int     // one box of a key or value tile: tk rows of 128 bytes
	t0        Reg     // thread 0: the one that initializes mbarriers and issues copies
	tmQ       Operand // tensor map addresses
	tmK, tmV  Operand
	cls       Operand // dimension-1 coordinate: the residue class (0 for the identity layout)
	kvRow0    Operand // dimension-2 coordinate of this CTA's key 0
	phase     Reg     // bit b: the parity of stage b's mbarrier phase to wait for next
}

func (h *hop) qOff() int          { return 0 }
func (h *hop) stageOff(b int) int { return h.qBytes + 2*b*h.tileBytes }
func (h *hop) barOff() int        { return h.stageOff(stages) }
func (h *hop) flagOff() int       { return h.barOff() + (1+stages)*barBytes }
func (h *hop) smemBytes() int     { return h.flagOff() + h.flagBytes() }

// generateHopper is GenerateForward for sm_90a.
func generateHopper(p *gen.Plan, cfg Config, t Target, g *fwd) (*Forward, error) {
	if g.D%boxCols != 0 {
		return nil, fmt.Errorf("ptx: head_dim %d: the %s kernel needs a multiple of %d", g.D, t.Arch(), boxCols)
	}
	g.tq, g.threads = hopTileQ, hopThreads
	g.tk = hopTileK(g.D) // the plan's (GenerateForward checked it)
	h := &hop{fwd: g, halves: g.D / boxCols, tileBytes: g.tk * 2 * g.D, qBytes: hopTileQ * 2 * g.D, boxBytes: g.tk * swzBytes}
	g.f.Params = g.withHeadParams(hopperParams(g.docs, p.UsesTree()))
	g.f.ReqNTID = hopThreads
	g.f.DynShared = "smem"
	g.f.SharedAlign = hopAlign
	if err := h.kernel(); err != nil {
		return nil, err
	}
	mod := &Module{
		Comments: []string{
			fmt.Sprintf("attngen forward kernel for spec %q, target %s", p.Name, t.Name()),
			fmt.Sprintf("tiles %dx%d, head_dim %d, %s in, f32 accumulate, layout %s; %d consumer warpgroups, wgmma, bulk tensor copies (128B swizzle), %d-stage mbarrier pipeline", hopTileQ, g.tk, p.HeadDim, g.elem, layoutText(p.Layout), hopWarpgroups, stages),
			fmt.Sprintf("generated by emit/ptx.GenerateForward(plan, ptx.Config{Target: ptx.Target{SM: %d, Elem: %q, Accel: true}, SoftLg2: %v})", t.SM, t.Elem, cfg.SoftLg2),
		},
		SM:    t.SM,
		Accel: true,
		Funcs: []*Func{g.f},
	}
	text, err := mod.Text()
	if err != nil {
		return nil, err
	}
	return &Forward{Name: g.f.Name, Target: t, HeadDim: p.HeadDim, Elem: g.elem, Stride: g.st, Params: g.f.Params, PTX: text, DynShared: h.smemBytes(), TileQ: hopTileQ, Threads: hopThreads}, nil
}

// desc returns a wgmma matrix descriptor for the 128-byte swizzled operand
// at shared address addr (a u32 register) plus off bytes: start address,
// leading byte offset lbo, stride byte offset sbo, swizzle mode 128B.
func (h *hop) desc(addr Operand, off int64, lbo int) Operand {
	f := h.f
	w := f.NewReg(U64)
	f.Emit(Inst{Op: OpCvtWide, T: U64, T2: U32, Dst: []Operand{R(w)}, Src: []Operand{f.reg(U32, addr)}})
	if off != 0 {
		f.Into(OpAdd, U64, w, R(w), I(off))
	}
	d := f.Op3(OpShr, U64, R(w), I(4))
	return f.Op3(OpOr, B64, d, I(int64(uint64(lbo>>4)<<16|uint64(sbo>>4)<<32|descSW)))
}

// descAt is a descriptor advanced by n 16-byte units (its start address
// field, bits 0-13, does not carry: shared addresses stay below 256 KiB).
func (h *hop) descAt(d Operand, n int64) Operand {
	if n == 0 {
		return d
	}
	return h.f.Op3(OpAdd, U64, d, I(n))
}

// wait emits a spin on mbarrier bar (shared address) until the phase of
// the given parity has completed.
func (h *hop) wait(bar Operand, parity Operand) {
	f := h.f
	loop := f.NewLabel("wait")
	f.Place(loop)
	p := f.NewReg(Pred)
	f.Emit(Inst{Op: OpMbarTryWait, Dst: []Operand{R(p)}, Src: []Operand{Addr(f.reg(U32, bar).Reg, 0), parity}})
	f.Bra(loop, &p, true)
}

// copyTile has thread 0 copy the boxes of a tile of rows rows from tensor
// map tm at (column 64b, class, row group) to dst, box b at
// dst+b*rows*128, completing on bar.
func (h *hop) copyTile(dst Operand, tm Operand, row Operand, rows int, bar Operand) {
	f := h.f
	bar = f.reg(U32, bar)
	row, c := f.reg(S32, row), f.reg(S32, h.cls)
	for b := 0; b < h.halves; b++ {
		col := f.Mov(S32, I(int64(b*boxCols)))
		f.Emit(Inst{Op: OpBulkTensor3, Guard: &h.t0, Dst: []Operand{Addr(f.reg(U32, dst).Reg, int64(b*rows*swzBytes))},
			Src: []Operand{TensorCoord(tm.Reg, col, c.Reg, row.Reg), Addr(bar.Reg, 0)}})
	}
}

// expect has thread 0 arrive on bar announcing n bytes of copies.
func (h *hop) expect(bar Operand, n int) {
	f := h.f
	st := f.NewReg(B64)
	f.Emit(Inst{Op: OpMbarArriveTx, Guard: &h.t0, Dst: []Operand{R(st)}, Src: []Operand{Addr(f.reg(U32, bar).Reg, 0), I(int64(n))}})
}

// stageAddr is the shared address of stage buf (a register).
func (h *hop) stageAddr(buf Operand) Operand {
	f := h.f
	return f.Add(f.Add(h.smem, I(int64(h.stageOff(0)))), f.MulC(buf, int64(2*h.tileBytes)))
}

// stageBar is the shared address of stage buf's mbarrier.
func (h *hop) stageBar(buf Operand) Operand {
	f := h.f
	return f.Add(f.Add(h.smem, I(int64(h.barOff()+barBytes))), f.MulC(buf, barBytes))
}

// nextStage is (buf + 1) mod stages.
func (h *hop) nextStage(buf Operand) Operand {
	f := h.f
	n := f.Add(buf, I(1))
	wrap := f.Setp("ge", U32, n, I(stages))
	return f.Selp(U32, I(0), n, wrap)
}

// waitStage waits for stage buf's copies: the phase whose parity is the
// stage's bit of h.phase, which it then flips.
func (h *hop) waitStage(buf Operand) {
	f := h.f
	parity := f.Op3(OpAnd, B32, f.Op3(OpShr, U32, R(h.phase), buf), I(1))
	h.wait(h.stageBar(buf), parity)
	f.Into(OpXor, B32, h.phase, R(h.phase), f.Op3(OpShl, B32, I(1), buf))
}

// load issues the copies of key tile kt into stage buf (a register): its K
// and V tiles, both on the stage's mbarrier.
func (h *hop) load(kt, buf Operand) {
	f := h.f
	f.Comment("K and V tiles by bulk tensor copies (thread 0), keys past seq_k zero-filled")
	stage := h.stageAddr(buf)
	bar := h.stageBar(buf)
	h.expect(bar, 2*h.tileBytes)
	row := f.Add(h.kvRow0, f.MulC(kt, int64(h.tk)))
	h.copyTile(stage, h.tmK, row, h.tk, bar)
	h.copyTile(f.Add(stage, I(int64(h.tileBytes))), h.tmV, row, h.tk, bar)
}

func (h *hop) kernel() error {
	f := h.f
	D := h.D
	f.Comment("parameters and thread coordinates")
	o, lse := h.global("o"), h.global("lse")
	h.dataRegs()
	h.tmQ, h.tmK, h.tmV = h.param("tmap_q", U64), h.param("tmap_k", U64), h.param("tmap_v", U64)
	h.sq, h.sk = h.param("seq_q", U32), h.param("seq_k", U32)
	hq, hkv := h.param("heads_q", U32), h.param("heads_kv", U32)
	h.scl = h.param("scale_log2", F32)
	h.tid = h.special("%tid.x")
	qt, hd, bz := h.special("%ctaid.x"), h.special("%ctaid.y"), h.special("%ctaid.z")
	h.headValues(hd)
	h.warp = f.Op3(OpShr, U32, h.tid, I(5))
	h.lane = f.Op3(OpAnd, B32, h.tid, I(31))
	h.g4 = f.Op3(OpShr, U32, h.lane, I(2))
	h.t4 = f.Op3(OpAnd, B32, h.lane, I(3))
	h.t0 = f.Setp("eq", U32, h.tid, I(0))
	group := f.Op3(OpDiv, U32, hq, hkv)
	kvh := f.Op3(OpDiv, U32, hd, group)
	qrow0 := f.MulC(qt, hopTileQ)
	sqAll, skAll := h.sq, h.sk
	qRow := qrow0 // tensor row of the tile's first query
	h.cls = I(0)
	st := int64(h.st)
	if st > 1 {
		c, b, r, err := h.residueQueries(bz, sqAll, skAll, qrow0, st)
		if err != nil {
			return err
		}
		bz, qRow, h.cls = b, r, c
	}
	off := f.Sub(h.sk, h.sq)
	h.pitch = st

	f.Comment("global bases of the output and the log-sum-exp; tensor-map coordinates")
	bhQ := f.Add(f.Op3(OpMulLo, S32, bz, hq), hd)
	rowIdx := f.Add(f.Op3(OpMulLo, S32, bhQ, sqAll), qRow)
	obase := h.wide(o, rowIdx, int64(2*D))
	lbase := h.wide(lse, rowIdx, 4)
	// row groups of st rows (TensorMaps): the tile's first query row lies in
	// group (rowIdx - c) / st, key 0 of this head's class in group
	// (bh_kv * seq_k) / st (seq_q and seq_k are multiples of st)
	qGroup := f.FloorDiv(f.Sub(rowIdx, h.cls), st)
	h.kvRow0 = f.FloorDiv(f.Op3(OpMulLo, S32, f.Add(f.Op3(OpMulLo, S32, bz, hkv), kvh), skAll), st)
	h.smem = R(f.Mov(U32, Sym("smem")))

	f.Comment("softmax state and output accumulators")
	m := [2]Reg{f.Mov(F32, negInf), f.Mov(F32, negInf)}
	l := [2]Reg{f.Mov(F32, Fimm(0)), f.Mov(F32, Fimm(0))}
	acc := make([][4]Reg, D/8)
	for n := range acc {
		for x := range acc[n] {
			acc[n][x] = f.Mov(F32, Fimm(0))
		}
	}
	h.i0 = f.Add(f.Add(f.Add(qrow0, f.MulC(h.warp, 16)), h.g4), off)
	h.i1 = f.Add(h.i0, I(8))

	f.Comment("key-tile range: the plan's key hull of this tile's query positions, hull(q0, q1, 0), clipped to [0, seq_k-1]")
	q0 := f.Add(qrow0, off)
	q1 := f.Add(f.Sub(f.Min(f.Add(qrow0, I(hopTileQ)), h.sq), I(1)), off)
	f.CommentProg("key hull", h.p.Hull)
	hull, err := RenderInts(f, h.p.Hull, h.env(q0, q1, I(0)))
	if err != nil {
		return err
	}
	lo := f.Max(hull[0], I(0))
	hi := f.Min(hull[1], f.Sub(h.sk, I(1)))
	ktlo := f.FloorDiv(lo, int64(h.tk))
	h.kthi = f.reg(S32, f.FloorDiv(hi, int64(h.tk)))

	fin := f.NewLabel("finish")
	f.CommentProg("tile class", h.p.Class)
	cur, ccur, err := h.find(ktlo, q0, q1)
	if err != nil {
		return err
	}
	pend := f.Setp("gt", S32, R(cur), h.kthi)
	f.Bra(fin, &pend, false)

	f.Comment(fmt.Sprintf("shared memory: Q %d bytes, %d stages of K and V (%d bytes each), mbarriers at %d, vote words at %d", h.qBytes, stages, h.tileBytes, h.barOff(), h.flagOff()))
	f.Comment("thread 0 initializes the mbarriers (Q, then one per stage: one arrival each, plus the copies' bytes)")
	barQ := f.Add(h.smem, I(int64(h.barOff())))
	for b := 0; b <= stages; b++ {
		f.Emit(Inst{Op: OpMbarInit, Guard: &h.t0, Dst: []Operand{Addr(f.reg(U32, barQ).Reg, int64(b*barBytes))}, Src: []Operand{I(1)}})
	}
	f.Emit(Inst{Op: OpFenceMbarInit})
	f.Comment("the tensor maps came from the host by a copy into global memory: thread 0, which issues every copy, acquires them for the tensor copies")
	for _, tm := range []Operand{h.tmQ, h.tmK, h.tmV} {
		f.Emit(Inst{Op: OpFenceTmap, Guard: &h.t0, Src: []Operand{Addr(f.reg(U64, tm).Reg, 0), I(128)}})
	}
	f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})
	f.Comment("Q tile by bulk tensor copies, rows past seq_q zero-filled")
	h.expect(barQ, h.qBytes)
	h.copyTile(f.Add(h.smem, I(int64(h.qOff()))), h.tmQ, qGroup, hopTileQ, barQ)
	h.phase = f.Mov(B32, I(0))
	buf := f.Mov(U32, I(0))
	h.load(R(cur), R(buf))
	f.Comment("the second visited tile, into stage 1")
	nxt, cnxt, err := h.find(f.Add(R(cur), I(1)), q0, q1)
	if err != nil {
		return err
	}
	skip1 := f.NewLabel("one")
	p1 := f.Setp("gt", S32, R(nxt), h.kthi)
	f.Bra(skip1, &p1, false)
	h.load(R(nxt), I(1))
	f.Place(skip1)

	f.Comment("Q descriptors: K-major, 128B swizzle, 16 columns per step; warpgroup w reads rows 64w..64w+63")
	wg := f.Op3(OpShr, U32, h.warp, I(2))
	descQ := h.desc(f.Add(h.smem, f.MulC(wg, 64*swzBytes)), int64(h.qOff()), 16)
	h.wait(barQ, I(0))
	f.Comment("S of the first tile")
	s, sNext := h.scoreRegs(), h.scoreRegs()
	h.waitStage(R(buf))
	h.scores(s, R(buf), descQ)
	f.Emit(Inst{Op: OpWgCommit})
	f.Emit(Inst{Op: OpWgWait, Src: []Operand{I(0)}})

	loop := f.NewLabel("tile")
	f.Place(loop)
	f.Comment(fmt.Sprintf("the tile after next: its copies into the stage %d ahead (freed by the last tile's barrier)", stages-1))
	nbuf := h.nextStage(R(buf))
	nxt2, cnxt2, err := h.find(f.Add(R(nxt), I(1)), q0, q1)
	if err != nil {
		return err
	}
	noload := f.NewLabel("noprefetch")
	pl := f.Setp("gt", S32, R(nxt2), h.kthi)
	f.Bra(noload, &pl, false)
	h.load(R(nxt2), h.nextStage(nbuf))
	f.Place(noload)
	f.Comment("S of the next tile, in flight while this tile's softmax runs")
	hasNext := f.Setp("le", S32, R(nxt), h.kthi)
	noNext := f.NewLabel("nonext")
	f.Bra(noNext, &hasNext, true)
	h.waitStage(nbuf)
	h.scores(sNext, nbuf, descQ)
	f.Emit(Inst{Op: OpWgCommit})
	f.Place(noNext)
	if err := h.finishTile(R(cur), R(ccur), R(buf), s, m, l, acc); err != nil {
		return err
	}
	f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})
	moved := f.NewLabel("moved")
	f.Bra(moved, &hasNext, true)
	for n := range s {
		for x := range s[n] {
			f.Set(F32, s[n][x], R(sNext[n][x]))
		}
	}
	f.Place(moved)
	f.Set(U32, cur, R(nxt))
	f.Set(U32, ccur, R(cnxt))
	f.Set(U32, nxt, R(nxt2))
	f.Set(U32, cnxt, R(cnxt2))
	f.Set(U32, buf, nbuf)
	pc := f.Setp("le", S32, R(cur), h.kthi)
	f.Bra(loop, &pc, false)
	f.Place(fin)

	h.finish(obase, lbase, qrow0, m, l, acc)
	f.Emit(Inst{Op: OpRet})
	return nil
}

// flat lists fragment registers in wgmma accumulator order: register 4n+x
// of a thread is element x of 8-column block n.
func flat(frag [][4]Reg) []Reg {
	var rs []Reg
	for n := range frag {
		rs = append(rs, frag[n][:]...)
	}
	return rs
}

func (h *hop) wgmmaSS(d []Reg, a, b Operand, accumulate bool, transB bool) {
	sc, tb := int64(0), int64(0)
	if accumulate {
		sc = 1
	}
	if transB {
		tb = 1
	}
	h.f.Emit(Inst{Op: OpWgmmaSS, T: h.elem, Dst: []Operand{Vec(d...)}, Src: []Operand{a, b, I(sc), I(1), I(1), I(0), I(tb)}})
}

func (h *hop) wgmmaRS(d []Reg, a [4]Reg, b Operand, accumulate bool) {
	sc := int64(0)
	if accumulate {
		sc = 1
	}
	h.f.Emit(Inst{Op: OpWgmmaRS, T: h.elem, Dst: []Operand{Vec(d...)}, Src: []Operand{Vec(a[:]...), b, I(sc), I(1), I(1), I(1)}})
}

// scoreRegs allocates a tile's score registers (the accumulator fragment
// of wgmma m64n<tk>k16).
func (h *hop) scoreRegs() [][4]Reg {
	s := make([][4]Reg, h.tk/8)
	for n := range s {
		for x := range s[n] {
			s[n][x] = h.f.NewReg(F32)
		}
	}
	return s
}

// scores issues S = Q K^T of the tile in stage buf into s: D/16 wgmma
// m64n<tk>k16, Q and K from shared memory (K-major, 128B swizzle); the
// caller commits and waits.
func (h *hop) scores(s [][4]Reg, buf, descQ Operand) {
	f := h.f
	f.Comment("S = Q K^T: wgmma, Q and K from shared memory (K-major, 128B swizzle)")
	descK := h.desc(h.stageAddr(buf), 0, 16)
	f.Emit(Inst{Op: OpWgFence})
	for ks := 0; ks < h.D/16; ks++ {
		// 16 columns: box ks/4, 32 bytes further per step inside its rows
		uq := int64(ks/4*hopTileQ*swzBytes/16 + ks%4*colStep)
		u := int64(ks/4*h.boxBytes/16 + ks%4*colStep)
		h.wgmmaSS(flat(s), h.descAt(descQ, uq), h.descAt(descK, u), ks > 0, false)
	}
}

// finishTile runs the rest of one key tile in stage buf, whose scores s
// are complete: mask, online softmax, O += P V on wgmma with P from
// registers (waiting for every wgmma in flight, the next tile's scores
// too), and restore.
func (h *hop) finishTile(kt, cls, buf Operand, s [][4]Reg, m, l [2]Reg, acc [][4]Reg) error {
	f := h.f
	stage := h.stageAddr(buf)
	if err := h.maskPartial(kt, cls, s); err != nil {
		return err
	}
	fix := h.sanitizeIn(cls, sanLayout{
		base:  func() Operand { return f.Add(stage, f.MulC(h.tid, 4)) },
		vOff:  int64(h.tileBytes),
		words: h.tileBytes / (4 * hopThreads),
		addr:  func(w int) int64 { return int64(w * 4 * hopThreads) },
		flags: func() Operand { return f.Add(h.smem, I(int64(h.flagOff()))) },
		fence: true,
	})
	h.softmax(s, m, l, acc)

	f.Comment("O += P V: wgmma m64nDk16, P from registers, V from shared memory (MN-major, 128B swizzle)")
	a := h.pack(s[:h.tk/8])
	// V: 64 columns per box (LBO: the next box), 8 keys per 1024 bytes (SBO)
	descV := h.desc(stage, int64(h.tileBytes), h.boxBytes)
	f.Emit(Inst{Op: OpWgFence})
	for kk := range a {
		h.wgmmaRS(flat(acc), a[kk], h.descAt(descV, int64(kk*kStep)), true)
	}
	f.Emit(Inst{Op: OpWgCommit})
	f.Emit(Inst{Op: OpWgWait, Src: []Operand{I(0)}})
	h.restoreHopper(fix, stage, s, acc)
	return nil
}

// restoreHopper is restore on wgmma: the codes sanitize wrote over the key
// tile have the value tile's layout, so the product [p > 0] x codes reads
// them with the value descriptor moved to the key tile, one box (64
// output columns) at a time, and 64 keys at a time: the codes' counts are
// exact and separable over 64 keys (bits), so each 64-key chunk's
// non-finite sums are added on their own (+Inf then -Inf gives NaN, as the
// IEEE sum over the whole tile would).
func (h *hop) restoreHopper(done Reg, stage Operand, s [][4]Reg, acc [][4]Reg) {
	f := h.f
	skip := f.NewLabel("restored")
	none := f.Setp("eq", U32, R(done), I(0))
	f.Bra(skip, &none, false)
	f.Comment("add back the kept non-finite values of a sanitized tile")
	a := h.indicators(s)
	const chunk = 64 / 16 // k-slices of 16 keys per 64 keys
	for b := 0; b < h.halves; b++ {
		for k0 := 0; k0 < len(a); k0 += chunk {
			c := make([]Reg, boxCols/2)
			for x := range c {
				c[x] = f.NewReg(F32)
			}
			d := h.desc(stage, int64(b*h.boxBytes), h.boxBytes)
			f.Emit(Inst{Op: OpWgFence})
			for kk := k0; kk < k0+chunk; kk++ {
				h.wgmmaRS(c, a[kk], h.descAt(d, int64(kk*kStep)), kk > k0)
			}
			f.Emit(Inst{Op: OpWgCommit})
			f.Emit(Inst{Op: OpWgWait, Src: []Operand{I(0)}})
			for x := range c {
				h.addBack(c[x], acc[b*boxCols/8+x/4][x%4])
			}
		}
	}
	f.Place(skip)
}
