package ptx

import (
	"fmt"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
)

// hopTileK is the sm_90a kernel's key tile at head dimension d
// (tilesOf(d).hopK). The kernel is written for any multiple of 16 up to
// 256 that is a multiple of 64 or divides it (wgmma's N, the tensor box,
// restore in chunks of 64 keys), but the planner's keep words hold 64
// keys and gen.Compile refuses larger key tiles: 64, and 32 at D = 256,
// whose three 64-key stages would not fit shared memory.
func hopTileK(d int) int {
	if k := tilesOf(d).hopK; k > 0 {
		return k
	}
	return TileK
}

// hopSwizzle is the sm_90a kernel's swizzle span in bytes at head
// dimension d: 128 (boxes of 64 columns) where d is a multiple of 64,
// else 64 (boxes of 32 columns: D = 32 and 96).
func hopSwizzle(d int) int {
	if d%64 == 0 {
		return 128
	}
	return 64
}

// The sm_90a forward kernel (Target.Accel): the sm_80 kernel's schedule,
// masking, softmax, masked-value rule and epilogue, with the tile products
// on wgmma and the tiles brought in by bulk tensor copies, on a persistent
// grid: each CTA loops over work items (query tile, head, batch x class),
// heaviest query tiles first (heaviestFirst), CTA b taking items b, b+G,
// ... of a grid of G (see the package doc). Two consumer warpgroups
// compute; where hopProducer says so a third, producer warpgroup issues
// the copies (produce) and the consumers release Q and the stages to it
// through named barriers, otherwise thread 0 of the consumers issues them.
//
// Layout of shared memory (1024-byte aligned, every region a multiple of
// 1024 bytes, as the 128-byte swizzle's pattern requires): Q (128 rows),
// then the stages, each a K tile and a V tile (tk rows), then the
// mbarriers (Q, then one per stage) and the vote words of sanitize. A tile
// is D/64 boxes of its rows by 64 columns (128 bytes per row), each
// written by one cp.async.bulk.tensor with the 128-byte swizzle: box b
// holds columns 64b..64b+63, row r at 128r, its 16-byte units permuted by
// the address (bits 4-6 XOR bits 7-9). Head dimensions that are not a
// multiple of 64 (32, 96) take boxes of 32 columns (64 bytes a row) with
// the 64-byte swizzle (bits 4-5 XOR bits 7-8) instead (hopSwizzle).

// hopProducer reports whether the sm_90a kernel of plan p runs the
// producer design: a third warpgroup whose first warp issues the copies,
// the consumers raising their register budget (setmaxnreg.inc) and the
// producer lowering its (setmaxnreg.dec) to hopRegs. At head_dim 64 it
// always does. At head_dim 128 the consumers need 224 registers, which
// leaves the producer 64, too few for the scan of long hull and class
// programs: with ptxas 12.4 bigbird (hull and class 631 IR instructions)
// spills 80 bytes at 224/64, 52 at 232/48 and 124 at 216/80, and the
// neighbourhood example (1028) 64, 172 and 0 (but at 216 the consumers
// of every head_dim 128 example spill); so at head_dim 128 a plan whose
// hull and class programs are longer than bigScan keeps the design
// without a producer, where thread 0 of the consumers issues the copies
// (bigbird 252 registers, neighbourhood 238, no spills).
func hopProducer(p *gen.Plan, d int) bool {
	n := len(p.Hull.Insts) + len(p.Class.Insts)
	return n <= bigScan || d <= 64 && n <= bigScan64
}

// bigScan64 is bigScan at head_dim 64: with per-row lengths (two more
// registers per item) bigbird's producer (631 instructions) spilled 4
// bytes at its 80 registers (ptxas 12.4), so it has none either.
const bigScan64 = 512

// bigScan is the hull and class program length (IR instructions) above
// which a head_dim 128 sm_90a kernel has no producer warpgroup
// (hopProducer): the examples' are 7-107 but bigbird's 631 and the
// neighbourhood's 1028.
const bigScan = 128

// hopRegs is the consumers' and the producer's register budget at head
// dimension d; a CTA's pool of 65536 registers bounds them:
// 2*128*consumers + 128*producer <= 65536. Measured with ptxas 12.4 on the
// examples (bf16 and f16): at head_dim 128 the consumers need 224 (at 216
// every head_dim 128 example spills 16 bytes and ptxas serializes its
// wgmma), which leaves the producer 64; at head_dim 64 the consumers need
// at most 213 and the producer's scan of the neighbourhood example's
// class program spills 68 bytes at 64 registers and none at 80, so 216
// and 80.
func hopRegs(d int) (consumers, producer int) {
	switch {
	case d >= 192:
		return 240, 32
	case d > 64:
		return 224, 64
	}
	return 216, 80
}

const (
	hopWarpgroups = 2                   // consumer warpgroups per CTA, 64 query rows each
	hopTileQ      = 64 * hopWarpgroups  // query rows per CTA
	hopThreads    = 128 * hopWarpgroups // threads per CTA

	hopAlign = 1024        // the 128-byte swizzle pattern's period
	barBytes = 8           // one mbarrier
	stages   = 3           // K/V pipeline stages
	colStep  = 2 * 16 / 16 // descriptor start advance per 16 columns (K-major), in 16-byte units
)

// The swizzle's quantities, for span h.swz (hopSwizzle): boxCols 16-bit
// columns per box row, the descriptor's swizzle field (128B: 1, 64B: 2),
// sbo the stride between 8-row groups (8 rows of a box), kStep the
// descriptor start advance per 16 keys (MN-major) in 16-byte units, and
// colSteps the 16-column steps per box row.
func (h *hop) boxCols() int  { return h.swz / 2 }
func (h *hop) sbo() int      { return 8 * h.swz }
func (h *hop) kStep() int    { return 16 * h.swz / 16 }
func (h *hop) colSteps() int { return h.swz / 32 }
func (h *hop) descSW() uint64 {
	if h.swz == 64 {
		return uint64(2) << 62
	}
	return uint64(1) << 62
}

// heavyRef is the query tiles of the reference call heaviestFirst weighs
// (seq_q = seq_k = heavyRef*128 per residue class: 8192, the benchmarks'
// length).
const heavyRef = 64

// heaviestFirst reports whether the persistent kernel takes its query
// tiles last first (true) or first first. A query tile's weight is the
// number of key tiles the kernel's scan visits (the plan's hull and class
// programs, mask.Visit) at the reference length heavyRef*TileQ; the
// direction chosen puts more weight earlier: the smaller sum over the
// order of position x weight (ties: last first). Causal-like masks, whose
// hull grows with the query, get last first; masks whose first queries
// are global (bigbird, longformer) get first first. Masks that read
// run-time data (documents, trees) have no weight in closed form and get
// last first: inside each document the hull grows with the query. Head
// parameters are weighed at their maxima.
func heaviestFirst(p *gen.Plan) bool {
	if p.Pred.UsesDocs() || p.UsesTree() {
		return true
	}
	n := heavyRef * p.TileQ
	m := p.Mask()
	// head parameters are weighed at their maxima (the values of a call
	// are not known here)
	d := p.AtMax(nil)
	var tiles []mask.Tile
	var asc, desc int64
	for t := 0; t < heavyRef; t++ {
		tiles = mask.Visit(m, tiles[:0], t*p.TileQ, (t+1)*p.TileQ-1, n, p.TileK, d)
		w := int64(len(tiles))
		asc += int64(t) * w
		desc += int64(heavyRef-1-t) * w
	}
	return desc <= asc
}

// TensorMap describes one tensor map a sm_90a kernel reads through, as
// cuTensorMapEncodeTiled takes it (gpu.TensorMap): a 16-bit element
// tensor of rank 4 (rank 5 in the residue layout), dimensions innermost
// first, the byte strides of dimensions 1.., the box copied per
// cp.async.bulk.tensor, the kernel's swizzle, element strides 1, no
// interleave, out-of-bound elements filled with zeros.
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
		sw := hopSwizzle(k.HeadDim)
		cols := k.HeadDim
		if tensor == "v" && k.HeadDimV != 0 {
			cols = k.HeadDimV
		}
		return gpu.TensorMapLayout{Param: param, Tensor: tensor, Cols: cols, BoxCols: sw / 2, BoxRows: rows, Swizzle: sw}
	}
	return []gpu.TensorMapLayout{
		mk("tmap_q", "q", k.TileQ),
		mk("tmap_k", "k", hopTileK(k.HeadDim)),
		mk("tmap_v", "v", hopTileK(k.HeadDim)),
	}
}

// TensorMaps returns the tensor maps of a sm_90a kernel's call with the
// given shape on tensors at q, k and v (gpu.Kernel.TensorMapsOf), in the
// default layout. A tensor is seen as (col, position, head, batch), each
// axis at its own stride, and with the layout's residue stride st > 1 as
// (col, class, group, head, batch), position group*st + class, so that a
// box (64 columns, rows, 1, 1) holds consecutive positions of one head
// and a box (64 columns, 1, rows, 1, 1) positions c, c+st, ... of one
// class; the box of q has a query tile's rows, those of k and v a key
// tile's. Positions of a box past its head's read as zeros, which the
// kernel masks (keys) or does not store (queries). The residue layout
// needs seq_q and seq_k to be multiples of the stride.
func (k *Forward) TensorMaps(batch, headsQ, headsKV, seqQ, seqK int, q, kAddr, v uint64) ([]TensorMap, error) {
	return k.TensorMapsWith(batch, headsQ, headsKV, seqQ, seqK, q, kAddr, v, gpu.Layout{})
}

// TensorMapsWith is TensorMaps for q, k and v at the strides of l
// (gpu.Kernel.TensorMapsWith: BHSD, BSHD, packed QKV or any strides a
// tensor map holds, multiples of 16 bytes).
func (k *Forward) TensorMapsWith(batch, headsQ, headsKV, seqQ, seqK int, q, kAddr, v uint64, l gpu.Layout) ([]TensorMap, error) {
	if !k.Target.Accel {
		return nil, fmt.Errorf("ptx: kernel %s (%s) takes no tensor maps", k.Name, k.Target.Arch())
	}
	if batch < 1 || headsQ < 1 || headsKV < 1 || seqQ < 1 || seqK < 1 {
		return nil, fmt.Errorf("ptx: tensor maps of shape batch %d, heads %d/%d, seq %d/%d: every size must be positive", batch, headsQ, headsKV, seqQ, seqK)
	}
	if err := k.strideFits(seqQ, seqK); err != nil {
		return nil, err
	}
	tms, err := k.Kernel().TensorMapsWith(batch, headsQ, headsKV, seqQ, seqK, q, kAddr, v, l)
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
	*kit
	swz       int     // the swizzle span, bytes (hopSwizzle)
	halves    int     // boxes per tile row: D/boxCols
	vHalves   int     // boxes per V tile row: Dv/boxCols
	vBytes    int     // one V tile
	tileBytes int     // one K or V tile
	qBytes    int     // the Q tile
	boxBytes  int     // one box of a key or value tile: tk rows of 128 bytes
	t0        Reg     // the issuer: the thread that initializes the mbarriers and issues the copies
	tmQ       Operand // tensor map addresses
	tmK, tmV  Operand
	kcls      Operand // dimension-1 coordinate of this item's keys in a rank-5 map: the tensor row of the class's first key (0 for the identity layout)
	kvHead    Operand // this item's key/value head: the head coordinate of k's and v's maps
	bat       Operand // this item's batch row: the batch coordinate of every map
	phase     Reg     // bit b: the parity of stage b's mbarrier phase to wait for next
	vote      Reg     // with a producer: the set of vote words the next vote uses
	lastFirst bool    // work items take query tiles last first (heaviestFirst)
	producer  bool    // a producer warpgroup issues the copies (hopProducer)
}

func (h *hop) qOff() int { return 0 }

func (h *hop) stageOff(b int) int { return h.qBytes + b*h.stageBytes() }

// stageBytes is one stage: a K tile and a V tile.
func (h *hop) stageBytes() int { return h.tileBytes + h.vBytes }

func (h *hop) barOff() int { return h.stageOff(stages) }

func (h *hop) flagOff() int { return h.barOff() + (1+stages)*barBytes }

func (h *hop) smemBytes() int { return h.rowOff() + h.rowBytes() }

// rowOff is where stageRow keeps the work item's batch row values: after
// the vote words.
func (h *hop) rowOff() int { return h.flagOff() + h.voteSets()*h.flagBytes() }

// voteSets is the number of sets of vote words: two with a producer
// warpgroup, whose consumers pass no barrier between tiles, so that
// consecutive votes use different words (a vote's barrier separates the
// reads of the vote before it from the writes of the vote after it).
func (h *hop) voteSets() int {
	if h.producer {
		return 2
	}
	return 1
}

// generateHopper is GenerateForward for sm_90a.
func generateHopper(p *gen.Plan, cfg Config, t Target, gm geom) (*Forward, error) {
	sw := hopSwizzle(gm.D)
	if gm.D%(sw/2) != 0 {
		return nil, fmt.Errorf("ptx: head_dim %d: the %s kernel needs a multiple of %d", gm.D, t.Arch(), sw/2)
	}
	// two consumer warpgroups of 64 query rows; key tiles of the plan's
	// (GenerateForward checked them); swizzled boxes, no padded rows
	gm.tileQ, gm.tileK, gm.threads, gm.RS = hopTileQ, hopTileK(gm.D), hopThreads, 0
	gm.sinks = p.Score.LearnedSinks
	g := newKit(p, cfg, gm, "attn_fwd_"+p.Name)
	if hopSwizzle(gm.Dv) != sw {
		return nil, fmt.Errorf("ptx: head_dim {qk: %d, v: %d}: the %s kernel needs one swizzle for both", gm.D, gm.Dv, t.Arch())
	}
	h := &hop{kit: g, swz: sw, halves: g.D / (sw / 2), vHalves: g.Dv / (sw / 2), tileBytes: g.tileK * 2 * g.D, vBytes: g.tileK * 2 * g.Dv, qBytes: hopTileQ * 2 * g.D, boxBytes: g.tileK * sw, lastFirst: heaviestFirst(p)}
	// q, k and v through tensor maps passed by address (TensorMaps), and
	// the batch size of the persistent grid
	g.f.Params = g.kernelParams([]Param{parO, parLSE}, []Param{parTmQ, parTmK, parTmV}, []Param{parBat}, stridesHop)
	g.f.ReqNTID = hopThreads
	h.producer = hopProducer(p, g.D)
	// the design with a producer kept the row's values in registers
	// without spills at every head_dim; the one without (long hull and
	// class programs) spilled with them (bigbird at 128: 52 bytes)
	h.stage = g.lens && !h.producer
	if h.producer {
		// ptxas 12.4 honours setmaxnreg only with .minnctapersm (or
		// .maxnreg) given: without it, it dropped the setmaxnreg of the
		// head_dim 64 kernels, capped them at 168 registers and spilled
		g.f.ReqNTID, g.f.MinCTAs = hopThreads+128, 1
	}
	g.f.DynShared = "smem"
	g.f.SharedAlign = hopAlign
	if err := h.kernel(); err != nil {
		return nil, err
	}
	mod := &Module{
		Comments: []string{
			fmt.Sprintf("attngen forward kernel for spec %q, target %s", p.Name, t.Name()),
			fmt.Sprintf("tiles %dx%d, head_dim %d, %s in, f32 accumulate, layout %s; %d consumer warpgroups%s, wgmma, bulk tensor copies (%dB swizzle), %d-stage mbarrier pipeline, persistent grid", hopTileQ, g.tileK, p.HeadDim, g.elem, layoutText(p.Layout), hopWarpgroups, producerText(h.producer, g.D), sw, stages),
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
	return &Forward{Name: g.f.Name, Target: t, HeadDim: p.HeadDim, HeadDimV: g.Dv, Elem: g.elem, Stride: g.st, Params: g.f.Params, PTX: text, DynShared: h.smemBytes(), TileQ: hopTileQ, Threads: g.f.ReqNTID, HeadParams: maskHeadParams(p), Score: p.Score.Runtime()}, nil
}

// producerText describes the producer warpgroup in the module's header.
func producerText(producer bool, d int) string {
	if !producer {
		return ""
	}
	c, p := hopRegs(d)
	return fmt.Sprintf(" (setmaxnreg %d) and a producer warpgroup (setmaxnreg %d)", c, p)
}

// desc returns a wgmma matrix descriptor for the 128-byte swizzled operand
// at shared address addr (a u32 register) plus off bytes: start address,
// leading byte offset lbo, stride byte offset sbo, the kernel's swizzle
// mode.
func (h *hop) desc(addr Operand, off int64, lbo int) Operand {
	f := h.f
	w := f.NewReg(U64)
	f.Emit(Inst{Op: OpCvtWide, T: U64, T2: U32, Dst: []Operand{R(w)}, Src: []Operand{f.reg(U32, addr)}})
	if off != 0 {
		f.Into(OpAdd, U64, w, R(w), I(off))
	}
	d := f.Op3(OpShr, U64, R(w), I(4))
	return f.Op3(OpOr, B64, d, I(int64(uint64(lbo>>4)<<16|uint64(h.sbo()>>4)<<32|h.descSW())))
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
// map tm to dst, box b at dst+b*rows*swz, completing on bar: the rows of
// positions row, row+1, ... of head head of the item's batch row, at
// coordinates (column b*boxCols, row, head, batch) of a rank-4 map, or, in
// the residue layout, positions (row+i)*st + cls, at (column, cls, row,
// head, batch) of a rank-5 map (TensorMaps); cls is the rows' residue
// (the tensor row of their class's first row; unused by rank-4 maps).
func (h *hop) copyTile(dst Operand, tm Operand, cls, row, head Operand, rows int, bar Operand) {
	h.copyBoxes(h.halves, dst, tm, cls, row, head, rows, bar)
}

// copyBoxes is copyTile for a tile of boxes boxes a row (vHalves: a V tile).
func (h *hop) copyBoxes(boxes int, dst Operand, tm Operand, cls, row, head Operand, rows int, bar Operand) {
	f := h.f
	bar = f.reg(U32, bar)
	row, hd, bz := f.reg(S32, row), f.reg(S32, head), f.reg(S32, h.bat)
	for b := 0; b < boxes; b++ {
		col := f.Mov(S32, I(int64(b*h.boxCols())))
		op, crd := OpBulkTensor4, []Reg{col, row.Reg, hd.Reg, bz.Reg}
		if h.st > 1 {
			op, crd = OpBulkTensor5, []Reg{col, f.reg(S32, cls).Reg, row.Reg, hd.Reg, bz.Reg}
		}
		f.Emit(Inst{Op: op, Guard: &h.t0, Dst: []Operand{Addr(f.reg(U32, dst).Reg, int64(b*rows*h.swz))},
			Src: []Operand{TensorCoord(tm.Reg, crd...), Addr(bar.Reg, 0)}})
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
	return f.Add(f.Add(h.smem, I(int64(h.stageOff(0)))), f.MulC(buf, int64(h.stageBytes())))
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
	h.expect(bar, h.stageBytes())
	row := f.MulC(kt, int64(h.tileK))
	h.copyTile(stage, h.tmK, h.kcls, row, h.kvHead, h.tileK, bar)
	h.copyBoxes(h.vHalves, f.Add(stage, I(int64(h.tileBytes))), h.tmV, h.kcls, row, h.kvHead, h.tileK, bar)
}

// items opens a loop over the CTA's work items, from first in steps of
// the grid (labels prefixed by prefix: each role has its own loop), with
// the first item decoded; the function it returns closes the loop (the
// next item, h.next, where an item past its class's queries also goes).
func (h *hop) items(w *workList, first Operand, prefix string) (func(), *item, error) {
	f := h.f
	it := f.Mov(U32, first)
	work := f.NewLabel(prefix + "item")
	next := f.NewLabel(prefix + "next")
	h.next = next
	f.Place(work)
	x, err := h.item(w, R(it))
	return func() {
		f.Place(next)
		f.Comment("the next work item of this CTA")
		f.Into(OpAdd, U32, it, R(it), w.ctas)
		more := f.Setp("lt", U32, R(it), w.items)
		f.Bra(work, &more, false)
	}, x, err
}

// item is one work item's coordinates, as item() derives them.
type item struct {
	qrow0, q0, q1 Operand // first query row (class-local); its positions' range
	ktlo          Operand // the first key tile of the hull
	qGroup        Operand // tensor-map position (identity) or row group (residue) of the first query row
	qHead         Operand // the query head
	qcls          Operand // the first query row's dimension-1 coordinate in a rank-5 map (the residue of its tensor row; 0 for the identity layout)
	obase, lbase  Operand // global bases of the output and the lse
	off           Operand // seq_k - seq_q (class-local)
}

// workList is the persistent grid's work: the item counts and the CTA's
// first item.
type workList struct {
	sqAll, skAll, hq, hkv, group Operand
	perTile, ntiles, items, ctas Operand
	o, lse                       Operand
}

// item emits the decoding of work item it (a register) of w: its query
// tile (heaviest first), head and batch x class, and the key-tile range of
// the tile, and sets the generator's per-item state (sq, sk, cls, kvHead, bat,
// kthi, pitch). A residue class's tile past its queries goes to h.next.
func (h *hop) item(w *workList, it Operand) (*item, error) {
	f := h.f
	st := int64(h.st)
	f.Comment("this item's query tile, head and batch x class")
	rank := f.Op3(OpDiv, U32, it, w.perTile)
	j := f.Sub(it, f.Op3(OpMulLo, U32, rank, w.perTile))
	bz := f.Op3(OpDiv, U32, j, w.hq)
	hd := f.Sub(j, f.Op3(OpMulLo, U32, bz, w.hq))
	qt := rank
	if h.lastFirst {
		qt = f.Sub(f.Sub(w.ntiles, I(1)), rank)
	}
	h.scoreHead(hd)
	h.headValues(hd) // this item's query head's values (head parameters)
	kvh := f.Op3(OpDiv, U32, hd, w.group)
	qrow0 := f.MulC(qt, hopTileQ)
	h.sq, h.sk = w.sqAll, w.skAll
	h.sqT, h.skT = w.sqAll, w.skAll
	qRow := qrow0 // tensor row of the tile's first query
	h.kcls = I(0)
	var c, qR0 Operand = I(0), I(0)
	if st > 1 {
		c, bz = h.residueSplit(bz, st)
	}
	h.rowLens(bz)
	off := h.rowPos(bz)
	// every item rewrites the staged words, after a barrier that orders the
	// last item's reads of them before (the design without a producer,
	// whose consumers are all the CTA's threads)
	h.stageRow(int64(h.rowOff()), true)
	h.pitch = st
	if st > 1 {
		qR0, h.kcls = h.residueSegment(c, st)
		h.residueExit(qrow0, h.sqT)
		off, qRow = h.qp0, f.Add(qR0, f.MulC(qrow0, st))
	}

	f.Comment("global bases of the output and the log-sum-exp; tensor-map coordinates")
	bhQ := f.Add(f.Op3(OpMulLo, S32, bz, w.hq), hd)
	rowIdx := f.Add(f.Op3(OpMulLo, S32, bhQ, w.sqAll), qRow)
	x := &item{qrow0: qrow0, off: off, qcls: qR0}
	x.obase = h.rowAt("o", h.headAt("o", w.o, bz, hd, 2), qRow, 2) // o at its strides
	x.lbase = h.wide(w.lse, rowIdx, 4)
	// tensor-map coordinates (TensorMaps): the batch row and the heads; the
	// tile's first query row is position qRow of its head, in the residue
	// layout row group qrow0 = (qRow - qR0) / st at class coordinate qR0
	// (seq_q and seq_k are multiples of st), and key tile kt starts at
	// row (group) kt*tk at class coordinate kR0
	x.qGroup, x.qHead = qRow, hd
	if st > 1 {
		x.qGroup = qrow0
	}
	h.kvHead, h.bat = kvh, bz

	var err error
	if x.q0, x.q1, x.ktlo, err = h.keyRange(qrow0, off); err != nil {
		return nil, err
	}
	return x, nil
}

// Named barriers of the producer design (hopProducer): 0 is the CTA-wide
// barrier after the mbarriers' initialization, barCons the consumers'
// barrier among themselves, barQFree the consumers' release of Q to the
// producer warp, barFree+s their release of stage s.
const (
	barCons  = 1
	barQFree = 2
	barFree  = 3
)

func (h *hop) kernel() error {
	f := h.f
	D := h.D
	h.prologue(false, false) // work items, not a grid of tiles
	w := &workList{o: h.par["o"], lse: h.par["lse"], sqAll: h.sq, skAll: h.sk, hq: h.hq, hkv: h.hkv}
	h.tmQ, h.tmK, h.tmV = h.par["tmap_q"], h.par["tmap_k"], h.par["tmap_v"]
	batch := h.par[gpu.PersistentParam]
	issuer := int64(0)
	if h.producer {
		issuer = hopThreads
	}
	h.t0 = f.Setp("eq", U32, h.tid, I(issuer))
	w.group = f.Op3(OpDiv, U32, w.hq, w.hkv)
	st := int64(h.st)

	f.Comment(fmt.Sprintf("persistent grid: work items (query tile, head, batch x class), %s query tile first, heads of one batch (and class) consecutive; CTA b runs items b, b+G, b+2G, ... (G = %%nctaid.x)", map[bool]string{true: "the last", false: "the first"}[h.lastFirst]))
	w.perTile = f.Op3(OpMulLo, U32, w.hq, f.MulC(batch, st)) // items per query tile
	// every class holds seq_q/st queries (TensorMaps needs multiples of st)
	w.ntiles = f.Op3(OpShr, U32, f.Add(f.FloorDiv(w.sqAll, st), I(hopTileQ-1)), I(7))
	w.items = f.Op3(OpMulLo, U32, w.ntiles, w.perTile)
	first := h.special("%ctaid.x")
	w.ctas = h.special("%nctaid.x")
	none := f.Setp("ge", U32, first, w.items)
	done := f.NewLabel("done")
	f.Bra(done, &none, false)

	h.smem = R(f.Mov(U32, Sym("smem")))
	f.Comment(fmt.Sprintf("shared memory: Q %d bytes, %d stages of K and V (%d bytes each), mbarriers at %d, vote words at %d", h.qBytes, stages, h.tileBytes, h.barOff(), h.flagOff()))
	f.Comment(fmt.Sprintf("thread %d (the one that issues every copy) initializes the mbarriers once (Q, then one per stage: one arrival each, plus the copies' bytes); their phases carry over from item to item", issuer))
	barQ := f.Add(h.smem, I(int64(h.barOff())))
	for b := 0; b <= stages; b++ {
		f.Emit(Inst{Op: OpMbarInit, Guard: &h.t0, Dst: []Operand{Addr(f.reg(U32, barQ).Reg, int64(b*barBytes))}, Src: []Operand{I(1)}})
	}
	f.Emit(Inst{Op: OpFenceMbarInit})
	f.Comment("the tensor maps came from the host by a copy into global memory: the issuing thread acquires them for the tensor copies")
	for _, tm := range []Operand{h.tmQ, h.tmK, h.tmV} {
		f.Emit(Inst{Op: OpFenceTmap, Guard: &h.t0, Src: []Operand{Addr(f.reg(U64, tm).Reg, 0), I(128)}})
	}
	f.Emit(Inst{Op: OpBar, Src: []Operand{I(0)}})
	prod := f.NewLabel("producer")
	if h.producer {
		cr, pr := hopRegs(D)
		f.Comment(fmt.Sprintf("roles: warpgroups 0 and 1 consume (products, softmax, epilogue) with up to %d registers, warpgroup 2 produces (its first warp issues the copies) with %d", cr, pr))
		isProd := f.Setp("ge", U32, h.tid, I(hopThreads))
		f.Bra(prod, &isProd, false)
		f.Emit(Inst{Op: OpSetmaxnregInc, Src: []Operand{I(int64(cr))}})
		h.barSrc = []Operand{I(barCons), I(hopThreads)}
		h.voters = hopThreads / 32
	}
	h.phase = f.Mov(B32, I(0))
	if h.producer {
		h.vote = f.Mov(B32, I(0))
	}
	qPhase := f.Mov(B32, I(0)) // the parity of the Q mbarrier's next phase
	f.Comment("Q descriptors: K-major, 128B swizzle, 16 columns per step; warpgroup w reads rows 64w..64w+63")
	wg := f.Op3(OpShr, U32, h.warp, I(2))
	descQ := h.desc(f.Add(h.smem, f.MulC(wg, int64(64*h.swz))), int64(h.qOff()), 16)
	var buf Reg
	if h.producer {
		buf = f.Mov(U32, I(0)) // the stage of the next tile: the producer's order runs on across items
	}

	loopItems, x, err := h.items(w, first, "")
	if err != nil {
		return err
	}

	f.Comment("softmax state and output accumulators")
	m := [2]Reg{f.Mov(F32, negInf), f.Mov(F32, negInf)}
	l := [2]Reg{f.Mov(F32, Fimm(0)), f.Mov(F32, Fimm(0))}
	acc := make([][4]Reg, h.Dv/8)
	for n := range acc {
		for y := range acc[n] {
			acc[n][y] = f.Mov(F32, Fimm(0))
		}
	}
	h.i0 = f.Add(f.Add(f.Add(x.qrow0, f.MulC(h.warp, 16)), h.g4), x.off)
	h.i1 = f.Add(h.i0, I(8))

	fin := f.NewLabel("finish")
	f.CommentProg("tile class", h.p.Class)
	cur, ccur, err := h.find(x.ktlo, x.q0, x.q1)
	if err != nil {
		return err
	}
	pend := f.Setp("gt", S32, R(cur), h.kthi)
	f.Bra(fin, &pend, false)

	if !h.producer {
		f.Comment("Q tile by bulk tensor copies, rows past seq_q zero-filled (the last item's reads of Q ended before its last tile's barrier)")
		h.expect(barQ, h.qBytes)
		h.copyTile(f.Add(h.smem, I(int64(h.qOff()))), h.tmQ, x.qcls, x.qGroup, x.qHead, hopTileQ, barQ)
		buf = f.Mov(U32, I(0)) // every stage is free between items: start at stage 0
		h.load(R(cur), R(buf))
	}
	f.Comment("the second visited tile")
	nxt, cnxt, err := h.find(f.Add(R(cur), I(1)), x.q0, x.q1)
	if err != nil {
		return err
	}
	if !h.producer {
		skip1 := f.NewLabel("one")
		p1 := f.Setp("gt", S32, R(nxt), h.kthi)
		f.Bra(skip1, &p1, false)
		h.load(R(nxt), I(1))
		f.Place(skip1)
	}

	h.wait(barQ, R(qPhase))
	f.Into(OpXor, B32, qPhase, R(qPhase), I(1))
	f.Comment("S of the first tile")
	s, sNext := h.scoreRegs(), h.scoreRegs()
	h.waitStage(R(buf))
	h.scores(s, R(buf), descQ)
	f.Emit(Inst{Op: OpWgCommit})
	f.Emit(Inst{Op: OpWgWait, Src: []Operand{I(0)}})

	loop := f.NewLabel("tile")
	f.Place(loop)
	nbuf := h.nextStage(R(buf))
	nxt2, cnxt2, err := h.find(f.Add(R(nxt), I(1)), x.q0, x.q1)
	if err != nil {
		return err
	}
	if !h.producer {
		f.Comment(fmt.Sprintf("the tile after next: its copies into the stage %d ahead (freed by the last tile's barrier)", stages-1))
		noload := f.NewLabel("noprefetch")
		pl := f.Setp("gt", S32, R(nxt2), h.kthi)
		f.Bra(noload, &pl, false)
		h.load(R(nxt2), h.nextStage(nbuf))
		f.Place(noload)
	}
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
	if !h.producer {
		h.bar() // frees the stage for thread 0's copies
	} else {
		// no barrier among the consumers: the warpgroups may drift apart by
		// up to the stages in flight
		f.Comment("this tile's stage is free: release it to the producer warp")
		f.Emit(Inst{Op: OpBarArrive, Src: []Operand{f.Add(R(buf), I(barFree)), I(hopThreads + 32)}})
	}
	moved := f.NewLabel("moved")
	f.Bra(moved, &hasNext, true)
	for n := range s {
		for y := range s[n] {
			f.Set(F32, s[n][y], R(sNext[n][y]))
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
	if h.producer {
		f.Comment("this item's reads of Q are done: release it to the producer warp")
		f.Emit(Inst{Op: OpBarArrive, Src: []Operand{I(barQFree), I(hopThreads + 32)}})
	}
	f.Place(fin)

	h.finish(x.obase, x.lbase, x.qrow0, m, l, acc)
	loopItems()
	f.Place(done)
	f.Emit(Inst{Op: OpRet})
	if h.producer {
		f.Place(prod)
		if err := h.produce(w, first, barQ); err != nil {
			return err
		}
	}
	return nil
}

// produce is the producer warpgroup of the sm_90a kernel: it gives up
// registers (setmaxnreg.dec), its warps but the first exit, and the first
// warp walks the CTA's work items and their visited tiles in the
// consumers' order, its first thread issuing the copies: Q once the
// consumers have released the last item's Q (barQFree), each K/V tile
// into the next stage once the consumers have released the tile that
// stage held before (barFree+stage). At the end it takes the consumers'
// last releases, so that every barrier generation completes.
func (h *hop) produce(w *workList, first, barQ Operand) error {
	f := h.f
	h.barSrc, h.voters = nil, 0
	f.Comment("producer warpgroup")
	_, pr := hopRegs(h.D)
	f.Emit(Inst{Op: OpSetmaxnregDec, Src: []Operand{I(int64(pr))}})
	other := f.Setp("ge", U32, h.tid, I(hopThreads+32))
	out := f.NewLabel("pdone")
	f.Bra(out, &other, false)
	buf := f.Mov(U32, I(0))   // the stage of the next tile
	used := f.Mov(U32, I(0))  // stages that have held a tile (at most stages)
	qUsed := f.Mov(U32, I(0)) // 1 once Q has been loaded
	loopItems, x, err := h.items(w, first, "p")
	if err != nil {
		return err
	}
	cur, _, err := h.find(x.ktlo, x.q0, x.q1)
	if err != nil {
		return err
	}
	none := f.Setp("gt", S32, R(cur), h.kthi)
	f.Bra(h.next, &none, false)
	f.Comment("Q: once the consumers are done with the last item's")
	fresh := f.Setp("eq", U32, R(qUsed), I(0))
	qfree := f.NewLabel("qfree")
	f.Bra(qfree, &fresh, false)
	f.Emit(Inst{Op: OpBarN, Src: []Operand{I(barQFree), I(hopThreads + 32)}})
	f.Place(qfree)
	f.Set(U32, qUsed, I(1))
	h.expect(barQ, h.qBytes)
	h.copyTile(f.Add(h.smem, I(int64(h.qOff()))), h.tmQ, x.qcls, x.qGroup, x.qHead, hopTileQ, barQ)
	loop := f.NewLabel("ptile")
	f.Place(loop)
	f.Comment("the stage: once the consumers are done with the tile it held")
	unused := f.Setp("lt", U32, R(used), R(buf))
	unused = f.POr(unused, f.Setp("eq", U32, R(used), R(buf)))
	free := f.NewLabel("sfree")
	f.Bra(free, &unused, false)
	f.Emit(Inst{Op: OpBarN, Src: []Operand{f.Add(R(buf), I(barFree)), I(hopThreads + 32)}})
	f.Place(free)
	f.Set(U32, used, f.Min(f.Add(R(used), I(1)), I(stages)))
	h.load(R(cur), R(buf))
	f.Set(U32, buf, h.nextStage(R(buf)))
	nxt, _, err := h.find(f.Add(R(cur), I(1)), x.q0, x.q1)
	if err != nil {
		return err
	}
	f.Set(U32, cur, R(nxt))
	more := f.Setp("le", S32, R(cur), h.kthi)
	f.Bra(loop, &more, false)
	loopItems()
	f.Comment("the consumers' last releases of Q and of each stage used")
	noQ := f.Setp("eq", U32, R(qUsed), I(0))
	drained := f.NewLabel("qdrained")
	f.Bra(drained, &noQ, false)
	f.Emit(Inst{Op: OpBarN, Src: []Operand{I(barQFree), I(hopThreads + 32)}})
	f.Place(drained)
	for b := 0; b < stages; b++ {
		skip := f.NewLabel("sdrained")
		p := f.Setp("le", U32, R(used), I(int64(b)))
		f.Bra(skip, &p, false)
		f.Emit(Inst{Op: OpBarN, Src: []Operand{I(int64(barFree + b)), I(hopThreads + 32)}})
		f.Place(skip)
	}
	f.Place(out)
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
	s := make([][4]Reg, h.tileK/8)
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
		// 16 columns: box ks/colSteps, 32 bytes further per step inside its rows
		cs := h.colSteps()
		uq := int64(ks/cs*hopTileQ*h.swz/16 + ks%cs*colStep)
		u := int64(ks/cs*h.boxBytes/16 + ks%cs*colStep)
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
	h.scoreStage(s, h.rowsAt(kt))
	if err := h.maskPartial(kt, cls, s); err != nil {
		return err
	}
	fix := h.sanitizeIn(cls, sanLayout{
		base:  func() Operand { return f.Add(stage, f.MulC(h.tid, 4)) },
		vOff:  int64(h.tileBytes),
		words: h.vBytes / (4 * hopThreads),
		addr:  func(w int) int64 { return int64(w * 4 * hopThreads) },
		flags: func() Operand {
			a := f.Add(h.smem, I(int64(h.flagOff())))
			if h.producer {
				// this vote's set of words; the next vote takes the other
				a = f.Add(a, f.MulC(R(h.vote), int64(h.flagBytes())))
				f.Into(OpXor, B32, h.vote, R(h.vote), I(1))
			}
			return a
		},
		fence: true,
	})
	h.softmax(s, m, l, acc)

	f.Comment("O += P V: wgmma m64nDk16, P from registers, V from shared memory (MN-major, 128B swizzle)")
	a := h.pack(s[:h.tileK/8])
	// V: 64 columns per box (LBO: the next box), 8 keys per 1024 bytes (SBO)
	descV := h.desc(stage, int64(h.tileBytes), h.boxBytes)
	f.Emit(Inst{Op: OpWgFence})
	for kk := range a {
		h.wgmmaRS(flat(acc), a[kk], h.descAt(descV, int64(kk*h.kStep())), true)
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
	chunk := min(64/16, len(a)) // k-slices of 16 keys per 64 keys (or per tile)
	for b := 0; b < h.vHalves; b++ {
		for k0 := 0; k0 < len(a); k0 += chunk {
			c := make([]Reg, h.boxCols()/2)
			for x := range c {
				c[x] = f.NewReg(F32)
			}
			d := h.desc(stage, int64(b*h.boxBytes), h.boxBytes)
			f.Emit(Inst{Op: OpWgFence})
			for kk := k0; kk < k0+chunk; kk++ {
				h.wgmmaRS(c, a[kk], h.descAt(d, int64(kk*h.kStep())), kk > k0)
			}
			f.Emit(Inst{Op: OpWgCommit})
			f.Emit(Inst{Op: OpWgWait, Src: []Operand{I(0)}})
			for x := range c {
				h.addBack(c[x], acc[b*h.boxCols()/8+x/4][x%4])
			}
		}
	}
	f.Place(skip)
}
