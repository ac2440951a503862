package cpu

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/attngen/attngen/runtime/mask"
)

// segment is one residue class (or the whole sequence): nq queries and nk
// keys, segment position x at absolute position off + stride*x, its
// queries at segment positions qx0 .. qx0+nq-1 and its keys at kx0 ..
// kx0+nk-1, with its key tiles numbered from base on among the call's
// tiles; qt0 is the index of its first query tile among the call's query
// tiles.
type segment struct{ nq, nk, off, stride, qx0, kx0, tiles, base, qt0 int }

// segments returns the segments of a call of sq queries at absolute
// positions qpos.. and sk keys at kpos.. under a layout of stride st:
// class c holds the positions p = c (mod st), at segment position (p -
// c)/st. Classes without queries are left out; a class may have queries
// and no keys (its rows keep nothing). With the default positions (qpos =
// sk - sq, kpos = 0) these are mask.Segments' bottom-right aligned
// segments.
func segments(dst []segment, sq, sk, st, qpos, kpos int) []segment {
	dst = dst[:0]
	st = max(st, 1)
	base, qt := 0, 0
	for c := 0; c < st; c++ {
		kx0 := mask.FloorDiv(kpos-c+st-1, st)
		nk := max(mask.FloorDiv(kpos+sk-1-c, st)-kx0+1, 0)
		qx0 := mask.FloorDiv(qpos-c+st-1, st)
		nq := max(mask.FloorDiv(qpos+sq-1-c, st)-qx0+1, 0)
		if nq == 0 {
			continue
		}
		t := (nk + TK - 1) / TK
		dst = append(dst, segment{nq: nq, nk: nk, off: c, stride: st, qx0: qx0, kx0: kx0, tiles: t, base: base, qt0: qt})
		base += t
		qt += (nq + TQ - 1) / TQ
	}
	return dst
}

// keyAbs is the absolute position of key x (0-based) of segment g.
func (g segment) keyAbs(x int) int { return g.off + g.stride*(g.kx0+x) }

// A job is one query tile: per rows of each of nh query heads (h, h+1,
// ...; they share a key/value head and their rows share positions, so the
// tile reads each key and value once for all of them), segment queries x0
// .. x0+per-1 (within query tile qt), against the key tiles of its visit
// list, c.refs[v0:v1] (query tile qt's: a job of fewer positions skips the
// tiles its rows keep nothing of). A job split into parts > 1 items (flash
// decoding: keys across threads) keeps each part's softmax state in
// c.partial from slot part0 on, and the last part to finish merges them.
type job struct {
	b, h, nh, seg, qt, per int32
	x0                     int32
	v0, v1                 int32
	parts, part0           int32
}

// An item is the unit of work: the key tiles c.refs[r0:r1] of a job, and
// the partial state slot it fills (-1: the whole job, finished in place).
type item struct{ job, r0, r1, part int32 }

// call is the state of one Forward call shared by its workers. Calls come
// from a sync.Pool, so concurrent calls each have their own, and a call
// allocates nothing once the pool holds one of its size.
type call struct {
	mask mask.Mask
	docs []mask.Docs // one per batch, or one for all; nil without documents
	// Head parameters (data.go): nparams values per query head, head-major
	// in hvals, and one mask.Docs view per (data row, query head) in heads;
	// heads is empty for masks without head parameters.
	nparams  int
	hvals    []int32
	heads    []mask.Docs
	kern     *kernels // the variant's kernels
	s        Shape
	out, lse []float32
	out16    []uint16 // the output in the inputs' 16-bit format, instead of out
	inputs            // q, k and v (float32 or 16-bit)
	scale    float32
	sc       scoreCall // the score stage, in log2 units
	// A paged cache (pageSize > 0): key position j of batch b is row
	// j%pageSize of page table[b*tableStride + j/pageSize].
	pageSize, tableStride int
	table                 []int32
	segs                  []segment
	// The call's geometry: its real head dimensions dd and those its
	// kernels run at, kd (kernelDims: zero-padded tiles when they differ);
	// the resolved strides of q, k, v and out (ls), and of lse (lseB,
	// lseH: batch and head; rows consecutive); the absolute positions of
	// the first query and key rows (qpos, kpos).
	dd, kd     dims
	ls         Layout
	lseB, lseH int
	qpos, kpos int
	// direct: the decode kernels run whole tiles every row keeps (the
	// variant has them at the call's own dims), reading k and v rows in
	// place through their own offsets; sameKV: k and v rows lie at the
	// same offsets (the value offsets are the keys').
	direct, sameKV bool

	// The key tiles some query tile visits, found once per call: visits
	// holds, for each schedule row (visitRow: a document row, one per batch
	// with per-batch ids, else one; with head parameters a (document row,
	// query head)) and query tile, the range of refs it visits; slot maps
	// (slot row, key tile) to the tile's place among the nslots tiles a
	// (batch, kv head) packs, or -1. A slot row (slotRow) is a document row,
	// or with head parameters a (document row, kv head): its map numbers
	// the union of the tiles the group's query heads visit, since they
	// share the packed tiles of their kv head.
	tilesPerKV, qtiles int
	refs               []mask.Tile
	visits             []int32
	slot               []int32
	nslots             int

	// Packed tiles, by index p = (batch*HeadsKV + kv head)*nslots + slot:
	// kt[p] the keys transposed, vt[p] the values when they are not rows of
	// v in place; state 0 unpacked, 1 being packed, 2 ready. nonFinite[p]
	// (computed the first time a partial tile needs it: known) has bit c
	// set when value row c holds a NaN or an infinity.
	// transient: every key tile is used by one job only (decoding: one
	// job per key/value head and segment), so tiles are packed into the
	// worker's buffers when used, and nothing is kept.
	// vInPlace: the values of every whole key tile are rows of v in place
	// (float32, contiguous, stride 1), so vt holds only each (batch, kv
	// head)'s last, partial tile, at index batch*HeadsKV + kv head.
	transient bool
	vInPlace  bool
	kt, vt    []float32
	state     []atomic.Uint32
	nonFinite []atomic.Uint64
	known     []atomic.Bool

	jobs    []job
	items   []item
	partial []float32      // parts' o, m, l (partSize floats each)
	pending []atomic.Int32 // parts finished, per job
	next    atomic.Int64
	wg      sync.WaitGroup
}

// partSize is the state one part keeps: o, m and l of TQ rows.
func partSize(dv int) int { return TQ*dv + 2*TQ }

// maxPooled bounds the workspace (packed key and value tiles, in floats) a
// call keeps for the next one: 512 MiB; a larger one is left to the
// garbage collector after the call. A pooled workspace that no call reuses
// is released by the garbage collector (sync.Pool) within two cycles.
const maxPooled = 512 << 20 / 4

// minPart is the fewest key tiles a part of a split job gets; calls with
// fewer than splitJobs jobs split them.
const (
	minPart   = 4
	splitJobs = 32
)

var calls = sync.Pool{New: func() any { return new(call) }}

// setup fills the call's state and workspace.
func (c *call) setup(m mask.Mask, kern *kernels, s Shape, g *geom, out []float32, out16 []uint16, lse []float32, in inputs, docs []int32, hp *[mask.MaxHeadParams][]int32) error {
	var err error
	if c.docs, err = resetData(c.docs, m, s, g.dataLen, docs); err != nil { // a pooled call's Docs keep their buffers
		return err
	}
	c.dd = dims{s.HeadDim, g.dv}
	c.kd, _ = kern.kernelDims(c.dd) // every variant that runs has a tile kernel
	c.ls, c.lseB, c.lseH, c.qpos, c.kpos = g.ls, g.lseB, g.lseH, g.qpos, g.kpos
	c.nparams = len(mask.HeadParams(m))
	c.hvals = headValues(c.hvals, hp, c.nparams, s.HeadsQ)
	c.heads = setHeads(c.heads, c.docs, c.hvals, c.nparams, s.HeadsQ)
	c.mask, c.kern, c.s, c.out, c.out16, c.lse, c.inputs = m, kern, s, out, out16, lse, in
	c.next.Store(0)
	c.scale = s.Scale
	if c.scale == 0 {
		c.scale = float32(1 / math.Sqrt(float64(s.HeadDim)))
	}
	c.scale *= math.Log2E
	c.segs = segments(c.segs, s.SeqQ, s.SeqK, m.Stride(), c.qpos, c.kpos)
	c.tilesPerKV, c.qtiles = 0, 0
	for _, g := range c.segs {
		c.tilesPerKV += g.tiles
		c.qtiles += (g.nq + TQ - 1) / TQ
	}
	c.plan()
	group := s.HeadsQ / s.HeadsKV
	c.transient = true
	for _, g := range c.segs {
		c.transient = c.transient && g.nq <= TQ/2 && TQ/g.nq >= group
	}
	kept := c.nslots
	if c.transient {
		kept = 0
	}
	tiles, ok := mul(s.Batch, s.HeadsKV, kept)
	nkv, ok2 := mul(tiles, TK, c.kd.qk)
	nv, ok3 := mul(tiles, TK, c.kd.v)
	kv, _ := mul(s.Batch, s.HeadsKV, max(s.SeqK, 1), c.kd.qk+c.kd.v)
	if !ok || !ok2 || !ok3 || nkv+nv > 2*kv+maxPooled {
		return fmt.Errorf("%w: %+v: the key and value tiles of a layout of stride %d would take %d times the keys' memory", ErrShape, s, m.Stride(), (nkv+nv)/kv)
	}
	// Values are read in place when whole tiles of them are consecutive
	// rows of v at the kernels' width.
	c.vInPlace = in.elem == F32 && c.pageSize == 0 && m.Stride() == 1 && c.kd == c.dd && c.ls.V.Pos == c.dd.v
	if c.vInPlace && kept > 0 {
		nv = s.Batch * s.HeadsKV * TK * c.kd.v // the tail tiles only
	}
	c.direct = c.kd == c.dd && kern.hasDecode(c.kd)
	c.sameKV = c.ls.K == c.ls.V
	c.kt = grow(c.kt, nkv)
	c.vt = grow(c.vt, nv)
	if cap(c.known) < tiles {
		c.state, c.nonFinite, c.known = make([]atomic.Uint32, tiles), make([]atomic.Uint64, tiles), make([]atomic.Bool, tiles)
	}
	c.state, c.nonFinite, c.known = c.state[:tiles], c.nonFinite[:tiles], c.known[:tiles]
	clear(c.state)
	clear(c.known)
	c.makeJobs()
	return nil
}

// plan finds the key tiles each query tile visits (mask.Visit, once per
// schedule row and query tile: per document row whatever the heads, or,
// with head parameters, per document row and query head) and numbers the
// tiles some query tile visits: only those are packed. With head
// parameters the query heads of a kv head are walked in order into one
// slot map, so each packed tile has one slot whichever head reads it; a
// head with the same values as the one before it repeats that head's walk.
func (c *call) plan() {
	s := c.s
	rows := max(len(c.docs), 1)
	heads, slotRows := 1, rows
	if c.nparams > 0 {
		heads, slotRows = s.HeadsQ, rows*s.HeadsKV
	}
	group := s.HeadsQ / s.HeadsKV
	c.refs = c.refs[:0]
	c.visits = c.visits[:0]
	c.slot = grow(c.slot, slotRows*c.tilesPerKV)
	for i := range c.slot {
		c.slot[i] = -1
	}
	c.nslots = 0
	for dr := 0; dr < rows; dr++ {
		var slot []int32
		n := int32(0)
		for h := 0; h < heads; h++ {
			docs := c.viewOf(dr, h)
			if h%group == 0 || c.nparams == 0 {
				// a new slot row: the document row, or its next kv head
				sr := dr
				if c.nparams > 0 {
					sr = dr*s.HeadsKV + h/group
				}
				slot, n = c.slot[sr*c.tilesPerKV:][:c.tilesPerKV], 0
			}
			if h > 0 && c.qtiles > 0 && sameHeads(c.hvals, c.nparams, h-1, h) {
				// Equal values keep equal pairs: repeat the previous head's
				// walk instead of evaluating the mask's programs again.
				base := len(c.visits) - c.qtiles
				from, to := c.visits[base], int32(len(c.refs))
				for i := range c.qtiles {
					c.visits = append(c.visits, c.visits[base+i]+to-from)
				}
				c.refs = append(c.refs, c.refs[from:to]...)
			} else {
				for _, g := range c.segs {
					for r0 := 0; r0 < g.nq; r0 += TQ {
						c.visits = append(c.visits, int32(len(c.refs)))
						q0, q1 := r0+g.qx0, min(r0+TQ, g.nq)-1+g.qx0
						c.refs = mask.VisitFrom(c.mask, c.refs, q0, q1, g.kx0, g.nk, TK, docs)
					}
				}
			}
			// Number the tiles this head's walk visits in its slot row.
			at := len(c.visits) - c.qtiles
			for _, g := range c.segs {
				for qt := range (g.nq + TQ - 1) / TQ {
					vi := at + g.qt0 + qt
					end := int32(len(c.refs))
					if vi+1 < len(c.visits) {
						end = c.visits[vi+1]
					}
					for _, r := range c.refs[c.visits[vi]:end] {
						if t := g.base + r.K; slot[t] < 0 {
							slot[t] = n
							n++
						}
					}
				}
			}
			c.nslots = max(c.nslots, int(n))
		}
	}
	c.visits = append(c.visits, int32(len(c.refs)))
}

// viewOf returns the run-time data of document row dr at query head h: the
// head's view with head parameters, else the row's ids or parent array
// (nil without data).
func (c *call) viewOf(dr, h int) *mask.Docs {
	switch {
	case len(c.heads) > 0:
		return &c.heads[dr*c.s.HeadsQ+h]
	case len(c.docs) > 0:
		return &c.docs[dr]
	}
	return nil
}

// dataRow is the document row of batch b: b with per-batch data, else 0.
func (c *call) dataRow(b int) int {
	if len(c.docs) > 1 {
		return b
	}
	return 0
}

// visitRow is the schedule row (of c.visits) of query head h of batch b.
func (c *call) visitRow(b, h int) int {
	if c.nparams > 0 {
		return c.dataRow(b)*c.s.HeadsQ + h
	}
	return c.dataRow(b)
}

// slotRow is the slot map (of c.slot) of kv head kvh of batch b.
func (c *call) slotRow(b, kvh int) int {
	if c.nparams > 0 {
		return c.dataRow(b)*c.s.HeadsKV + kvh
	}
	return c.dataRow(b)
}

// makeJobs lists the jobs and items. The query heads of a key/value head
// share one job when a segment's rows are few (decoding: SeqQ small), so
// that keys and values are read once for the group; with head parameters
// only consecutive heads with the same values do (they keep the same
// pairs), and the others run a job each. When the jobs are
// fewer than splitJobs (decoding again), each is split into parts of at
// least minPart key tiles so that threads share its keys. The split depends
// on the shape only, so results do not depend on the number of threads.
func (c *call) makeJobs() {
	s := c.s
	c.jobs = c.jobs[:0]
	// With the heads of q side by side in each position (BSHD, packed
	// QKV), jobs go query tile by query tile, the heads of each one after
	// another: consecutive jobs then read the same pages of q and out (a
	// tile's rows lie on TQ pages there, which each job would otherwise
	// find again through the TLB) and the same key tiles. Otherwise (BHSD)
	// they go head by head, the query tiles of each in order: consecutive
	// jobs then read consecutive rows of q and out, which the hardware
	// prefetchers stream (1.5-3% faster there than the other order, which
	// is as much faster for BSHD).
	//
	// In those layouts a query tile's job also holds the rows of several
	// query heads of its kv head at fewer positions (sideHeads: 4 heads of
	// 12 positions each instead of one head of 48), so that its rows of q
	// and of the output are a few runs of adjacent heads on a quarter of
	// the pages, which the hardware prefetchers stream, and the TLB finds
	// a quarter of the pages; the jobs of one query tile's positions
	// follow each other, kv head by kv head.
	tileMajor := c.ls.Q.Head < c.ls.Q.Pos
	side := 1
	if tileMajor {
		side = sideHeads(s.HeadsQ / s.HeadsKV)
	}
	for b := 0; b < s.Batch; b++ {
		if tileMajor {
			for gi, g := range c.segs {
				if g.nq <= TQ/2 {
					// few rows: the heads of a kv head already share a job
					for kvh := 0; kvh < s.HeadsKV; kvh++ {
						c.headJobs(b, gi, kvh, 0, (g.nq+TQ-1)/TQ)
					}
					continue
				}
				for qt := 0; qt*TQ < g.nq; qt++ {
					for x0 := qt * TQ; x0 < min((qt+1)*TQ, g.nq); x0 += TQ / side {
						for kvh := 0; kvh < s.HeadsKV; kvh++ {
							c.sideJobs(b, gi, kvh, qt, x0, side)
						}
					}
				}
			}
			continue
		}
		for kvh := 0; kvh < s.HeadsKV; kvh++ {
			for gi, g := range c.segs {
				c.headJobs(b, gi, kvh, 0, (g.nq+TQ-1)/TQ)
			}
		}
	}
	split := len(c.jobs) < splitJobs
	c.items = c.items[:0]
	parts := 0
	for ji := range c.jobs {
		j := &c.jobs[ji]
		n := int(j.v1 - j.v0)
		p := 1
		if split {
			p = min((splitJobs+len(c.jobs)-1)/len(c.jobs), n/minPart)
			p = max(p, 1)
		}
		if p == 1 {
			c.items = append(c.items, item{int32(ji), j.v0, j.v1, -1})
			continue
		}
		j.parts, j.part0 = int32(p), int32(parts)
		for i := 0; i < p; i++ {
			c.items = append(c.items, item{int32(ji), j.v0 + int32(i*n/p), j.v0 + int32((i+1)*n/p), int32(parts + i)})
		}
		parts += p
	}
	c.partial = grow(c.partial, parts*partSize(c.kd.v))
	if cap(c.pending) < len(c.jobs) {
		c.pending = make([]atomic.Int32, len(c.jobs))
	}
	c.pending = c.pending[:len(c.jobs)]
	clear(c.pending)
}

// headJobs adds the jobs of query tiles qt0 .. qt1-1 of segment gi of
// (batch b, kv head kvh): per group of query heads that share a job (a
// segment's few rows: the heads with the same values), its query tiles in
// order.
func (c *call) headJobs(b, gi, kvh, qt0, qt1 int) {
	s, g := c.s, c.segs[gi]
	group := s.HeadsQ / s.HeadsKV
	heads := 1
	if g.nq <= TQ/2 {
		heads = min(group, TQ/g.nq)
	}
	for h, nh := 0, 0; h < group; h += nh {
		h0 := kvh*group + h
		nh = 1
		for nh < heads && h+nh < group && sameHeads(c.hvals, c.nparams, h0, h0+nh) {
			nh++
		}
		for qt := qt0; qt < qt1; qt++ {
			c.addJob(b, gi, h0, nh, qt, qt*TQ, min(TQ, g.nq-qt*TQ))
		}
	}
}

// sideHeads is how many query heads of a kv head (of group) share a job
// of a layout whose heads sit side by side: the most, up to group, that
// divide TQ, so that their rows fill the tile.
func sideHeads(group int) int {
	n := 1
	for d := 2; d <= min(group, TQ); d++ {
		if TQ%d == 0 {
			n = d
		}
	}
	return n
}

// sideJobs adds the jobs of segment gi of (batch b, kv head kvh) for the
// TQ/side positions from segment query x0 on (in query tile qt), each of
// up to side query heads (those with the same values, as in headJobs).
func (c *call) sideJobs(b, gi, kvh, qt, x0, side int) {
	s, g := c.s, c.segs[gi]
	group := s.HeadsQ / s.HeadsKV
	per := min(TQ/side, g.nq-x0, (qt+1)*TQ-x0)
	for h, nh := 0, 0; h < group; h += nh {
		h0 := kvh*group + h
		nh = 1
		for nh < side && h+nh < group && sameHeads(c.hvals, c.nparams, h0, h0+nh) {
			nh++
		}
		c.addJob(b, gi, h0, nh, qt, x0, per)
	}
}

// addJob adds the job of nh query heads from h0 of batch b at the per
// segment queries from x0 of segment gi, in query tile qt (whose visit
// list it takes).
func (c *call) addJob(b, gi, h0, nh, qt, x0, per int) {
	vi := c.visitRow(b, h0)*c.qtiles + c.segs[gi].qt0 + qt
	c.jobs = append(c.jobs, job{
		b: int32(b), h: int32(h0), nh: int32(nh), seg: int32(gi), qt: int32(qt), x0: int32(x0),
		per: int32(per), v0: c.visits[vi], v1: c.visits[vi+1], parts: 1, part0: -1,
	})
}

// release drops the call's references to the caller's slices and returns
// it to the pool, unless its workspace is too large to keep.
func (c *call) release() {
	c.mask, c.out, c.out16, c.lse, c.inputs, c.table = nil, nil, nil, nil, inputs{}, nil
	if cap(c.kt)+cap(c.vt) > maxPooled {
		return
	}
	calls.Put(c)
}

// docsOf returns the run-time data of query head h of batch b (viewOf),
// or nil.
func (c *call) docsOf(b, h int) *mask.Docs { return c.viewOf(c.dataRow(b), h) }

// tileData returns the transposed keys and the values of key tile t of
// segment g of (batch b, kv head kvh), and the tile's non-finite value rows
// when nf is set (partial tiles need them): packed in the worker's buffers
// for a transient call, else the call's packed tile (packed by the first
// worker that needs it).
func (c *call) tileData(w *buffers, b, kvh int, g segment, t int, nf bool) (kt, vt []float32, bad uint64) {
	D, DV := c.kd.qk, c.kd.v
	bk := b*c.s.HeadsKV + kvh
	if c.transient {
		kt, vt = w.kt[:TK*D], w.vt[:TK*DV]
		c.pack(kt, vt, w.conv, bk, g, t)
		vt = c.valueTile(vt, bk, g, t)
		if nf {
			bad = c.kern.nonFiniteRows(vt, DV)
		}
		return kt, vt, bad
	}
	p := c.packed(w, b, kvh, g, t)
	kt, vt = c.kt[p*TK*D:][:TK*D], c.valueTile(c.vtOf(p, bk), bk, g, t)
	if nf {
		if c.known[p].Load() {
			bad = c.nonFinite[p].Load()
		} else {
			// computed by whichever worker gets there first; they agree
			bad = c.kern.nonFiniteRows(vt, DV)
			c.nonFinite[p].Store(bad)
			c.known[p].Store(true)
		}
	}
	return kt, vt, bad
}

// packed returns the index of key tile t (of segment g) of (batch b, kv
// head kvh) among the packed tiles, packing it first if no worker has.
func (c *call) packed(w *buffers, b, kvh int, g segment, t int) int {
	p := (b*c.s.HeadsKV+kvh)*c.nslots + int(c.slot[c.slotRow(b, kvh)*c.tilesPerKV+g.base+t])
	st := &c.state[p]
	if st.Load() == 2 {
		return p
	}
	if st.CompareAndSwap(0, 1) {
		D := c.kd.qk
		bk := b*c.s.HeadsKV + kvh
		c.pack(c.kt[p*TK*D:][:TK*D], c.vtOf(p, bk), w.conv, bk, g, t)
		st.Store(2)
		return p
	}
	for st.Load() != 2 {
		runtime.Gosched()
	}
	return p
}

// vtOf is where packed tile p of (batch, kv head) bk keeps values that are
// not read in place: its own slot, or with vInPlace the one tail tile of
// bk (whole tiles never write it then).
func (c *call) vtOf(p, bk int) []float32 {
	D := c.kd.v
	if c.vInPlace {
		return c.vt[bk*TK*D:][:TK*D]
	}
	return c.vt[p*TK*D:][:TK*D]
}

// keyRow returns the offset in k of key row pos (0-based among the call's
// keys) of (batch, kv head) bk, with k's strides: directly, or through
// the page table of a paged cache (the batch stride is then the page's).
func (c *call) keyRow(bk, pos int) int { return c.cacheRow(c.ls.K, bk, pos) }

// valRow is keyRow for v.
func (c *call) valRow(bk, pos int) int { return c.cacheRow(c.ls.V, bk, pos) }

func (c *call) cacheRow(x Strides, bk, pos int) int {
	b, kvh := bk/c.s.HeadsKV, bk%c.s.HeadsKV
	if c.pageSize == 0 {
		return b*x.Batch + kvh*x.Head + pos*x.Pos
	}
	page := int(c.table[b*c.tableStride+pos/c.pageSize])
	return page*x.Batch + kvh*x.Head + pos%c.pageSize*x.Pos
}

// keyIndex is the row (0-based among the call's keys) of key x of
// segment g.
func (c *call) keyIndex(g segment, x int) int { return g.keyAbs(x) - c.kpos }

// rowOffsets sets off[x] to the byte offset in k of key x of whole key
// tile t of segment g of (batch, kv head) bk, and with v set, in v of its
// value row.
func (c *call) rowOffsets(off []int, bk int, g segment, t int, v bool) {
	off = off[:TK]
	es := 4
	if c.elem != F32 {
		es = 2
	}
	if first, pitch, vfirst, vpitch, ok := c.tileRun(bk, g, t); ok {
		if v {
			first, pitch = vfirst, vpitch
		}
		for x := range off {
			off[x] = es * (first + x*pitch)
		}
		return
	}
	for x := range off {
		pos := c.keyIndex(g, t*TK+x)
		if v {
			off[x] = es * c.valRow(bk, pos)
		} else {
			off[x] = es * c.keyRow(bk, pos)
		}
	}
}

// kvBase returns the first elements of k and v, which rowOffsets' offsets
// are relative to.
func (c *call) kvBase() (k, v unsafe.Pointer) {
	if c.elem == F32 {
		return unsafe.Pointer(&c.k[0]), unsafe.Pointer(&c.v[0])
	}
	return unsafe.Pointer(&c.k16[0]), unsafe.Pointer(&c.v16[0])
}

// tileRun reports whether the 64 keys of whole key tile t of segment g of
// (batch, kv head) bk lie pitch elements apart in k from offset first
// (always for a direct cache; within one page for paged ones); vfirst and
// vpitch are the same for v.
func (c *call) tileRun(bk int, g segment, t int) (first, pitch, vfirst, vpitch int, ok bool) {
	if (t+1)*TK > g.nk {
		return 0, 0, 0, 0, false
	}
	p0, p1 := c.keyIndex(g, t*TK), c.keyIndex(g, (t+1)*TK-1)
	if c.pageSize > 0 && p0/c.pageSize != p1/c.pageSize {
		return 0, 0, 0, 0, false
	}
	return c.keyRow(bk, p0), g.stride * c.ls.K.Pos, c.valRow(bk, p0), g.stride * c.ls.V.Pos, true
}

// pack lays out key tile t of segment g of (batch, kv head) bk: kt[d][c]
// (the keys transposed, times scale*log2(e), so that the kernels' scores
// come out scaled; rows past the keys' head dimension zero, when the
// kernels run wider) and vt[c][d] (zero past the values' head dimension),
// zero past the segment's keys. A whole tile of float32 keys evenly
// spaced in k at the kernels' width goes straight through the variant's
// transpose, and its values are not copied when they are consecutive rows
// at the kernels' width (valueTile reads them in place; vt is not
// written); other tiles (the last of a segment, tiles across pages,
// 16-bit inputs, which are widened, padded dims) are gathered into tmp
// first.
func (c *call) pack(kt, vt, tmp []float32, bk int, g segment, t int) {
	D, DV := c.kd.qk, c.kd.v
	dq, dv := c.dd.qk, c.dd.v
	first, pitch, vfirst, vpitch, run := c.tileRun(bk, g, t)
	if c.elem == F32 && run && dq == D {
		src := c.k[first : first+(TK-1)*pitch+D]
		if pitch == D && c.transient && c.kern.transpose != nil {
			// Decoding reads each key tile once, from memory: one sequential
			// copy and a transpose from cache beat the strided transpose from
			// memory (4.4 against 5.3-5.7 ms for a causal decode of 32k keys
			// with AVX-512).
			src = tmp[:TK*D]
			copy(src, c.k[first:first+TK*D])
		}
		c.kern.transposeTile(kt, src, pitch, D, c.scale)
		if vpitch != DV || dv != DV { // values not in place (valueTile reads them in place otherwise)
			for x := 0; x < TK; x++ {
				row := vfirst + x*vpitch
				copy(vt[x*DV:x*DV+dv], c.v[row:row+dv])
				clear(vt[x*DV+dv : (x+1)*DV])
			}
		}
		return
	}
	// Gather the rows (tail tiles, pages, residue classes, padded dims),
	// widening 16-bit ones, then transpose the keys.
	tmp = tmp[:TK*D]
	if c.elem != F32 && run && pitch == D && vpitch == DV && dq == D && dv == DV {
		// 16-bit rows back to back: one widening pass each
		c.kern.widenRow(tmp, c.k16[first:first+TK*D], c.elem)
		c.kern.widenRow(vt[:TK*DV], c.v16[vfirst:vfirst+TK*DV], c.elem)
		c.kern.transposeTile(kt, tmp, D, D, c.scale)
		return
	}
	for x := 0; x < TK; x++ {
		kr, vr := tmp[x*D:(x+1)*D], vt[x*DV:(x+1)*DV]
		key := t*TK + x
		if key >= g.nk {
			clear(kr)
			clear(vr)
			continue
		}
		pos := c.keyIndex(g, key)
		krow, vrow := c.keyRow(bk, pos), c.valRow(bk, pos)
		if c.elem == F32 {
			copy(kr, c.k[krow:krow+dq])
			copy(vr, c.v[vrow:vrow+dv])
		} else {
			c.kern.widenRow(kr[:dq], c.k16[krow:krow+dq], c.elem)
			c.kern.widenRow(vr[:dv], c.v16[vrow:vrow+dv], c.elem)
		}
		clear(kr[dq:])
		clear(vr[dv:])
	}
	c.kern.transposeTile(kt, tmp, D, D, c.scale)
}

// valueTile returns the values of key tile t of segment g of (batch, kv
// head) bk, given where pack wrote them (vt): the rows of v themselves when
// pack left them in place.
func (c *call) valueTile(vt []float32, bk int, g segment, t int) []float32 {
	if c.elem == F32 && c.dd == c.kd {
		if _, _, vfirst, vpitch, run := c.tileRun(bk, g, t); run && vpitch == c.kd.v {
			return c.v[vfirst:][:TK*c.kd.v]
		}
	}
	return vt
}

// nonFiniteRows returns the rows of a value tile that hold a NaN or an
// infinity, as bits, with k's kernel where it has one.
func (k *kernels) nonFiniteRows(v []float32, D int) uint64 {
	if nf, ok := k.nonFiniteK(v, D); ok {
		return nf
	}
	var nf uint64
	for r := 0; r < TK; r++ {
		if !allFinite(v[r*D : r*D+D]) {
			nf |= 1 << uint(r)
		}
	}
	return nf
}

// allFinite reports whether x holds no NaN and no infinity: it ORs, two
// floats at a time, the exponent fields plus one, which carries into the
// sign bit exactly for an all-ones exponent.
func allFinite(x []float32) bool {
	const exp2, one2 = 0x7f8000007f800000, 0x0080000000800000
	var a0, a1, a2, a3 uint64
	n := len(x) &^ 1
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(x))), n/2)
	for len(w) >= 4 {
		a0 |= w[0]&exp2 + one2
		a1 |= w[1]&exp2 + one2
		a2 |= w[2]&exp2 + one2
		a3 |= w[3]&exp2 + one2
		w = w[4:]
	}
	for _, b := range w {
		a0 |= b&exp2 + one2
	}
	if n < len(x) {
		a0 |= uint64(math.Float32bits(x[n]))&0x7f800000 + 0x00800000
	}
	return (a0|a1|a2|a3)&0x8000000080000000 == 0
}

// sanitize copies the value tile v into w.vclean with the non-finite
// entries of the rows in fix set to zero.
func (w *buffers) sanitize(v []float32, fix uint64, D int) []float32 {
	vc := w.vclean[:TK*D]
	copy(vc, v[:TK*D])
	for b := fix; b != 0; b &= b - 1 {
		row := vc[bits.TrailingZeros64(b)*D:][:D]
		for d, x := range row {
			if x-x != 0 {
				row[d] = 0
			}
		}
	}
	return vc
}

// restore adds to o the terms a sanitized tile left out: p times the
// non-finite value entries of the keys in fix, for the rows that keep them
// (the microkernels leave p in w.s).
func (w *buffers) restore(v []float32, fix uint64, keep []uint64, D int) {
	for r, k := range keep {
		for b := k & fix; b != 0; b &= b - 1 {
			c := bits.TrailingZeros64(b)
			p := w.s[r*TK+c]
			o := w.o[r*D:][:D]
			for d, x := range v[c*D:][:D] {
				if x-x != 0 {
					o[d] += p * x
				}
			}
		}
	}
}
