package cpu

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/attngen/attngen/runtime/mask"
)

// Shape describes one attention call. Tensors are laid out
// [batch, heads, seq, head_dim], row-major. Query head h reads key/value
// head h / (HeadsQ/HeadsKV) (grouped-query attention). Query row r sits at
// absolute position r + SeqK - SeqQ (bottom-right aligned), so SeqQ <= SeqK.
type Shape struct {
	Batch, HeadsQ, HeadsKV int
	SeqQ, SeqK, HeadDim    int
	// Scale multiplies the scores q.k; 0 means 1/sqrt(HeadDim).
	Scale float32
}

// Variant selects a microkernel.
type Variant int

const (
	Auto   Variant = iota // the best the CPU supports
	AVX512                // AVX-512F
	AVX2                  // AVX2 and FMA
	PureGo                // portable Go
)

// tileFunc is one microkernel (see the package documentation).
type tileFunc func(q, kt, v, s, o, m, l []float32, mask []uint64, d int)

// Supported reports whether this machine and build can run the variant.
func Supported(v Variant) bool { _, ok := tileFor(v); return ok }

// Best is the variant Auto picks here: the first of Targets this machine
// runs.
func Best() Variant {
	for _, t := range Targets {
		if Supported(t.Variant) {
			return t.Variant
		}
	}
	return PureGo
}

// Errors a call can return.
var (
	ErrShape    = errors.New("bad shape")
	ErrShort    = errors.New("slice shorter than the shape")
	ErrVariant  = errors.New("variant not supported on this machine")
	ErrHeadDim  = errors.New("head dimension not supported")
	ErrDocument = errors.New("bad document ids")
)

func (s Shape) check(out, lse, q, k, v int, docs []int32, needDocs bool) error {
	switch {
	case s.Batch < 1 || s.HeadsQ < 1 || s.HeadsKV < 1 || s.SeqQ < 1 || s.SeqK < 1:
		return fmt.Errorf("%w: %+v: every dimension must be at least 1", ErrShape, s)
	case s.HeadsQ%s.HeadsKV != 0:
		return fmt.Errorf("%w: HeadsQ = %d is not a multiple of HeadsKV = %d", ErrShape, s.HeadsQ, s.HeadsKV)
	case s.SeqQ > s.SeqK:
		return fmt.Errorf("%w: SeqQ = %d exceeds SeqK = %d", ErrShape, s.SeqQ, s.SeqK)
	case s.SeqK > math.MaxInt32 || int64(s.Batch)*int64(s.HeadsQ)*int64(s.SeqQ)*int64(s.HeadDim) > math.MaxInt:
		return fmt.Errorf("%w: too large", ErrShape)
	case math.IsNaN(float64(s.Scale)) || math.IsInf(float64(s.Scale), 0):
		return fmt.Errorf("%w: scale %v is not finite", ErrShape, s.Scale)
	}
	nq := s.Batch * s.HeadsQ * s.SeqQ * s.HeadDim
	nkv := s.Batch * s.HeadsKV * s.SeqK * s.HeadDim
	switch {
	case q < nq:
		return fmt.Errorf("%w: q has %d elements, the shape needs %d", ErrShort, q, nq)
	case k < nkv:
		return fmt.Errorf("%w: k has %d elements, the shape needs %d", ErrShort, k, nkv)
	case v < nkv:
		return fmt.Errorf("%w: v has %d elements, the shape needs %d", ErrShort, v, nkv)
	case out < nq:
		return fmt.Errorf("%w: out has %d elements, the shape needs %d", ErrShort, out, nq)
	case lse >= 0 && lse < s.Batch*s.HeadsQ*s.SeqQ:
		return fmt.Errorf("%w: lse has %d elements, the shape needs %d (or pass nil)", ErrShort, lse, s.Batch*s.HeadsQ*s.SeqQ)
	case needDocs && len(docs) < s.SeqK:
		return fmt.Errorf("%w: %d document ids, the shape needs SeqK = %d", ErrDocument, len(docs), s.SeqK)
	}
	return nil
}

// segment is one residue class (or the whole sequence): nq queries and nk
// keys, position x at absolute position off + stride*x (mask.Segments),
// with its key tiles stored from tile base on.
type segment struct{ nq, nk, off, stride, tiles, base int }

func segments(dst []segment, scratch []mask.Segment, sq, sk, st int) ([]segment, []mask.Segment) {
	dst = dst[:0]
	scratch = mask.Segments(scratch[:0], sq, sk, st)
	base := 0
	for _, g := range scratch {
		t := (g.SeqK + TK - 1) / TK
		dst = append(dst, segment{nq: g.SeqQ, nk: g.SeqK, off: g.Offset, stride: g.Stride, tiles: t, base: base})
		base += t
	}
	return dst, scratch
}

// call is the state of one Forward call shared by its workers.
type call struct {
	mask       mask.Mask
	docs       *mask.Docs
	tile       tileFunc
	s          Shape
	out, lse   []float32
	q, k, v    []float32
	scale      float32
	segs       []segment
	tilesPerKV int // key tiles of one (batch, kv head) over all segments
	kt, vt     []float32
	// work items: phase 0 prepares (batch, kv head) key/value tiles, phase 1
	// runs (batch, q head, segment, query tile).
	next   atomic.Int64
	items  []item
	prep   atomic.Int64
	nprep  int64
	wg     sync.WaitGroup
	prepWG sync.WaitGroup
}

type item struct{ b, h, seg, qt int32 }

// worker holds one goroutine's tile buffers.
type worker struct {
	q, s, o, m, l []float32
	mask          []uint64
	refs          []mask.Tile
	jobs          chan *call
}

// The worker pool persists across calls so a call allocates nothing after
// warm-up.
var pool struct {
	sync.Mutex
	workers []*worker
	segs    []segment
	msegs   []mask.Segment
	docs    mask.Docs
	items   []item
	kt, vt  []float32
	call    call
}

func newWorker() *worker {
	w := &worker{
		q: make([]float32, TQ*maxHeadDim()), s: make([]float32, TQ*TK), o: make([]float32, TQ*maxHeadDim()),
		m: make([]float32, TQ), l: make([]float32, TQ), mask: make([]uint64, TQ),
		jobs: make(chan *call),
	}
	go func() {
		for c := range w.jobs {
			w.run(c)
			c.wg.Done()
		}
	}()
	return w
}

// Forward computes masked attention: out (and lse when not nil) from q, k, v
// under the compiled mask m. docs holds one document id per key position
// when the mask has document. out is [batch, heads_q, seq_q, head_dim];
// lse is [batch, heads_q, seq_q], natural log; rows that keep no key get 0
// and -Inf. Work is spread over up to GOMAXPROCS goroutines; calls are
// serialized (they share one workspace).
func Forward(m mask.Mask, variant Variant, out, lse, q, k, v []float32, docs []int32, s Shape) error {
	nl := len(lse)
	if lse == nil {
		nl = -1
	}
	if variant == Auto {
		variant = Best()
	}
	tile, ok := tileFor(variant)
	if !ok {
		return fmt.Errorf("%w: %s", ErrVariant, variant)
	}
	t, _ := TargetOf(variant)
	if err := t.Supports(s.HeadDim); err != nil {
		return err
	}
	if err := s.check(len(out), nl, len(q), len(k), len(v), docs, m.UsesDocs()); err != nil {
		return err
	}
	pool.Lock()
	defer pool.Unlock()
	c := &pool.call
	c.docs = nil
	if m.UsesDocs() {
		if err := pool.docs.Reset(docs[:s.SeqK]); err != nil {
			return fmt.Errorf("%w: %v", ErrDocument, err)
		}
		c.docs = &pool.docs
	}
	c.mask, c.tile, c.s, c.out, c.lse, c.q, c.k, c.v = m, tile, s, out, lse, q, k, v
	c.next.Store(0)
	c.prep.Store(0)
	c.tilesPerKV = 0
	c.scale = s.Scale
	if c.scale == 0 {
		c.scale = float32(1 / math.Sqrt(float64(s.HeadDim)))
	}
	c.scale *= math.Log2E
	pool.segs, pool.msegs = segments(pool.segs, pool.msegs, s.SeqQ, s.SeqK, m.Stride())
	c.segs = pool.segs
	for _, g := range c.segs {
		c.tilesPerKV += g.tiles
	}
	nkv := s.Batch * s.HeadsKV * c.tilesPerKV * TK * s.HeadDim
	pool.kt = grow(pool.kt, nkv)
	pool.vt = grow(pool.vt, nkv)
	c.kt, c.vt = pool.kt, pool.vt
	pool.items = pool.items[:0]
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsQ; h++ {
			for g, seg := range c.segs {
				for qt := 0; qt < (seg.nq+TQ-1)/TQ; qt++ {
					pool.items = append(pool.items, item{int32(b), int32(h), int32(g), int32(qt)})
				}
			}
		}
	}
	c.items = pool.items
	c.nprep = int64(s.Batch * s.HeadsKV)
	nw := min(runtime.GOMAXPROCS(0), len(c.items))
	for len(pool.workers) < nw {
		pool.workers = append(pool.workers, newWorker())
	}
	c.prepWG.Add(nw)
	c.wg.Add(nw)
	for _, w := range pool.workers[:nw] {
		w.jobs <- c
	}
	c.wg.Wait()
	// Drop references to the caller's slices.
	c.mask, c.docs, c.out, c.lse, c.q, c.k, c.v = nil, nil, nil, nil, nil, nil, nil
	return nil
}

// maxHeadDim is the largest head dimension any target supports.
func maxHeadDim() int {
	d := 0
	for _, t := range Targets {
		d = max(d, slices.Max(t.HeadDims))
	}
	return d
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func (w *worker) run(c *call) {
	// Phase 0: gather and transpose key tiles, copy value tiles (padded).
	for {
		p := c.prep.Add(1) - 1
		if p >= c.nprep {
			break
		}
		c.prepare(int(p))
	}
	c.prepWG.Done()
	c.prepWG.Wait()
	for {
		n := c.next.Add(1) - 1
		if n >= int64(len(c.items)) {
			return
		}
		w.queryTile(c, c.items[n])
	}
}

// prepare lays out the key and value tiles of one (batch, kv head): for each
// segment and key tile, kt[d][c] (the keys transposed) and vt[c][d], zero
// past the segment's keys. Value tiles that are already contiguous rows of v
// (identity layout, whole tile) are not copied: valueTile reads them in
// place.
func (c *call) prepare(p int) {
	s, D := c.s, c.s.HeadDim
	src := p * s.SeqK * D
	dst := p * c.tilesPerKV * TK * D
	var rows [4][]float32
	zero := make([]float32, 0) // stands for a key past the end
	for _, g := range c.segs {
		for t := 0; t < g.tiles; t++ {
			kt := c.kt[dst+(g.base+t)*TK*D:][:TK*D]
			inPlace := g.stride == 1 && (t+1)*TK <= g.nk
			vt := c.vt[dst+(g.base+t)*TK*D:][:TK*D]
			// Four keys at a time, so that each d writes four adjacent floats.
			for col := 0; col < TK; col += 4 {
				for u := range rows {
					x := t*TK + col + u
					if x >= g.nk {
						rows[u] = zero
						if !inPlace {
							clear(vt[(col+u)*D : (col+u)*D+D])
						}
						continue
					}
					row := src + (g.off+g.stride*x)*D
					rows[u] = c.k[row : row+D]
					if !inPlace {
						copy(vt[(col+u)*D:(col+u)*D+D], c.v[row:row+D])
					}
				}
				r0, r1, r2, r3 := rows[0], rows[1], rows[2], rows[3]
				if len(r0) == D && len(r1) == D && len(r2) == D && len(r3) == D {
					for d := 0; d < D; d++ {
						o := kt[d*TK+col : d*TK+col+4]
						o[0], o[1], o[2], o[3] = r0[d], r1[d], r2[d], r3[d]
					}
					continue
				}
				for d := 0; d < D; d++ {
					for u, r := range rows {
						if len(r) == D {
							kt[d*TK+col+u] = r[d]
						} else {
							kt[d*TK+col+u] = 0
						}
					}
				}
			}
		}
	}
}

// valueTile returns value tile t of segment g for (batch, kv head) p: the
// rows of v themselves when prepare left them in place.
func (c *call) valueTile(p int, g segment, t int) []float32 {
	D := c.s.HeadDim
	if g.stride == 1 && (t+1)*TK <= g.nk {
		return c.v[(p*c.s.SeqK+t*TK)*D:][:TK*D]
	}
	return c.vt[(p*c.tilesPerKV+g.base+t)*TK*D:][:TK*D]
}

func (w *worker) queryTile(c *call, it item) {
	s, D := c.s, c.s.HeadDim
	g := c.segs[it.seg]
	b, h, qt := int(it.b), int(it.h), int(it.qt)
	hk := h / (s.HeadsQ / s.HeadsKV)
	r0 := qt * TQ
	rows := min(TQ, g.nq-r0)
	qoff := g.nk - g.nq // segment position of segment query row 0
	// Load the query tile: segment query row r is absolute position
	// off + stride*(r + qoff), which is call row that - (SeqK - SeqQ).
	qbase := (b*s.HeadsQ + h) * s.SeqQ
	qt0 := w.q[:TQ*D]
	scale := c.scale
	for r := 0; r < TQ; r++ {
		dst := qt0[r*D : r*D+D]
		if r >= rows {
			clear(dst)
			continue
		}
		abs := g.off + g.stride*(r0+r+qoff)
		src := c.q[(qbase+abs-(s.SeqK-s.SeqQ))*D:][:D]
		for d, x := range src {
			dst[d] = x * scale
		}
	}
	o, m, l := w.o[:TQ*D], w.m[:TQ], w.l[:TQ]
	clear(o)
	clear(l)
	for r := range m {
		m[r] = float32(math.Inf(-1))
	}
	q0, q1 := r0+qoff, r0+qoff+rows-1
	w.refs = mask.Visit(c.mask, w.refs[:0], q0, q1, g.nk, TK, c.docs)
	kvBase := ((b*s.HeadsKV+hk)*c.tilesPerKV + g.base) * TK * D
	for _, ref := range w.refs {
		k0 := ref.K * TK
		class := ref.Class
		words := w.mask[:TQ]
		if class == mask.Partial {
			// exact class and keep words of the tile's rows
			class = mask.Refine(c.mask, words, q0, q1, ref.K, g.nk, TK, c.docs)
			if class == mask.Empty {
				continue
			}
		}
		var keep []uint64
		if class == mask.Partial || k0+TK > g.nk {
			keep = words
			if class == mask.Full {
				for r := range keep {
					keep[r] = 0
					if r < rows {
						keep[r] = mask.TailBits(g.nk - k0)
					}
				}
			}
		}
		off := kvBase + ref.K*TK*D
		c.tile(qt0, c.kt[off:off+TK*D], c.valueTile(b*s.HeadsKV+hk, g, ref.K), w.s[:TQ*TK], o, m, l, keep, D)
	}
	// Finish rows: out = o / l, lse = (m + log2 l) ln 2.
	for r := 0; r < rows; r++ {
		abs := g.off + g.stride*(r0+r+qoff)
		row := qbase + abs - (s.SeqK - s.SeqQ)
		dst := c.out[row*D : row*D+D]
		if l[r] == 0 {
			clear(dst)
			if c.lse != nil {
				c.lse[row] = float32(math.Inf(-1))
			}
			continue
		}
		inv := 1 / l[r]
		for d, x := range o[r*D : r*D+D] {
			dst[d] = x * inv
		}
		if c.lse != nil {
			c.lse[row] = float32((float64(m[r]) + math.Log2(float64(l[r]))) * math.Ln2)
		}
	}
}
