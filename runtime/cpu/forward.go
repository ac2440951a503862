package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
	ErrAlias    = errors.New("output overlaps another argument")
)

// maxScale bounds |Scale|: the kernels multiply q by Scale*log2(e) in
// float32, which must be finite.
const maxScale = math.MaxFloat32 / math.Log2E

// sizes holds the element counts of one call, computed with overflow
// checks.
type sizes struct{ q, kv, lse int }

// mul multiplies non-negative ints, reporting overflow.
func mul(xs ...int) (int, bool) {
	p := 1
	for _, x := range xs {
		if x < 0 {
			return 0, false
		}
		if x != 0 && p > math.MaxInt/x {
			return 0, false
		}
		p *= x
	}
	return p, true
}

func (s Shape) check() (sizes, error) {
	var z sizes
	switch {
	case s.Batch < 1 || s.HeadsQ < 1 || s.HeadsKV < 1 || s.SeqQ < 1 || s.SeqK < 1 || s.HeadDim < 1:
		return z, fmt.Errorf("%w: %+v: every dimension must be at least 1", ErrShape, s)
	case s.HeadsQ%s.HeadsKV != 0:
		return z, fmt.Errorf("%w: HeadsQ = %d is not a multiple of HeadsKV = %d", ErrShape, s.HeadsQ, s.HeadsKV)
	case s.SeqQ > s.SeqK:
		return z, fmt.Errorf("%w: SeqQ = %d exceeds SeqK = %d", ErrShape, s.SeqQ, s.SeqK)
	case s.SeqK > math.MaxInt32:
		return z, fmt.Errorf("%w: SeqK = %d exceeds %d", ErrShape, s.SeqK, math.MaxInt32)
	case math.IsNaN(float64(s.Scale)) || math.Abs(float64(s.Scale)) > maxScale:
		return z, fmt.Errorf("%w: scale %v: the scale must be finite and at most %.4g in magnitude (scale*log2(e) is a float32)", ErrShape, s.Scale, maxScale)
	}
	q, ok1 := mul(s.Batch, s.HeadsQ, s.SeqQ, s.HeadDim)
	kv, ok2 := mul(s.Batch, s.HeadsKV, s.SeqK, s.HeadDim)
	lse, ok3 := mul(s.Batch, s.HeadsQ, s.SeqQ)
	if !ok1 || !ok2 || !ok3 {
		return z, fmt.Errorf("%w: %+v: the tensor sizes overflow int", ErrShape, s)
	}
	return sizes{q, kv, lse}, nil
}

// checkArgs checks the slices against the shape's sizes: lengths, document
// ids (one run of SeqK shared by every batch, or one per batch), and that
// no output overlaps an input or the other output.
func (z sizes) checkArgs(s Shape, out, lse, q, k, v []float32, docs []int32, needDocs bool) error {
	switch {
	case len(q) < z.q:
		return fmt.Errorf("%w: q has %d elements, the shape needs %d", ErrShort, len(q), z.q)
	case len(k) < z.kv:
		return fmt.Errorf("%w: k has %d elements, the shape needs %d", ErrShort, len(k), z.kv)
	case len(v) < z.kv:
		return fmt.Errorf("%w: v has %d elements, the shape needs %d", ErrShort, len(v), z.kv)
	case len(out) < z.q:
		return fmt.Errorf("%w: out has %d elements, the shape needs %d", ErrShort, len(out), z.q)
	case lse != nil && len(lse) < z.lse:
		return fmt.Errorf("%w: lse has %d elements, the shape needs %d (or pass nil)", ErrShort, len(lse), z.lse)
	}
	if needDocs {
		if n, ok := mul(s.Batch, s.SeqK); !ok || len(docs) != s.SeqK && len(docs) != n {
			return fmt.Errorf("%w: %d document ids; the shape needs SeqK = %d (shared by every batch) or Batch*SeqK = %d (one row per batch)", ErrDocument, len(docs), s.SeqK, n)
		}
	}
	o := span(out[:z.q])
	l := span(lse[:min(len(lse), z.lse)])
	var d memSpan
	if needDocs {
		d = span(docs[:docsLen(s, docs)])
	}
	for _, a := range []struct {
		name string
		m    memSpan
	}{{"q", span(q[:z.q])}, {"k", span(k[:z.kv])}, {"v", span(v[:z.kv])}, {"lse", l}, {"docs", d}} {
		if o.overlaps(a.m) {
			return fmt.Errorf("%w: out and %s share memory", ErrAlias, a.name)
		}
		if a.name != "lse" && l.overlaps(a.m) {
			return fmt.Errorf("%w: lse and %s share memory", ErrAlias, a.name)
		}
	}
	return nil
}

// docsLen is the number of document ids a call reads.
func docsLen(s Shape, docs []int32) int {
	if len(docs) == s.SeqK {
		return s.SeqK
	}
	return s.Batch * s.SeqK
}

// memSpan is the byte range a slice covers.
type memSpan struct{ lo, hi uintptr }

func span[T any](b []T) memSpan {
	if len(b) == 0 {
		return memSpan{}
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return memSpan{lo, lo + uintptr(len(b))*unsafe.Sizeof(b[0])}
}

func (a memSpan) overlaps(b memSpan) bool {
	return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi
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

// call is the state of one Forward call shared by its workers. Calls come
// from a sync.Pool, so concurrent calls each have their own, and a call
// allocates nothing once the pool holds one of its size.
type call struct {
	mask       mask.Mask
	docs       []mask.Docs // one per batch, or one for all; nil without documents
	tile       tileFunc
	s          Shape
	out, lse   []float32
	q, k, v    []float32
	scale      float32
	segs       []segment
	msegs      []mask.Segment
	tilesPerKV int // key tiles of one (batch, kv head) over all segments
	kt, vt     []float32
	// nonFinite has one word per key tile (like kt), computed the first
	// time a partial tile needs it (known): bit c is set when value row c
	// of the tile holds a NaN or an infinity.
	nonFinite []atomic.Uint64
	known     []atomic.Bool
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

// maxPooled bounds the workspace (key and value tiles) a call keeps for the
// next one; a larger one is left to the garbage collector after the call.
const maxPooled = 64 << 20 / 4

var calls = sync.Pool{New: func() any { return new(call) }}

// buffers are one goroutine's tile buffers.
type buffers struct {
	q, s, o, m, l []float32
	vclean        []float32 // a value tile with masked non-finite entries zeroed
	mask          []uint64
	refs          []mask.Tile
}

func newBuffers() *buffers {
	d := maxHeadDim()
	return &buffers{
		q: make([]float32, TQ*d), s: make([]float32, TQ*TK), o: make([]float32, TQ*d),
		m: make([]float32, TQ), l: make([]float32, TQ), mask: make([]uint64, TQ),
		vclean: make([]float32, TK*d),
	}
}

// callerBuffers serve the goroutine that calls Forward, which works too.
var callerBuffers = sync.Pool{New: func() any { return newBuffers() }}

// A worker is a goroutine that helps calls. Idle workers wait in the pool
// and exit after idleTimeout without work, so a process that stops calling
// Forward keeps no goroutine and no tile buffers.
type worker struct {
	*buffers
	jobs  chan *call
	timer *time.Timer
}

const idleTimeout = 2 * time.Second

var pool struct {
	sync.Mutex
	idle []*worker
	live int // worker goroutines, idle or busy
}

// helpers returns up to n workers: idle ones first, then new ones while the
// pool holds fewer than GOMAXPROCS-1 goroutines (the callers work too).
func helpers(dst []*worker, n int) []*worker {
	pool.Lock()
	defer pool.Unlock()
	for len(dst) < n && len(pool.idle) > 0 {
		w := pool.idle[len(pool.idle)-1]
		pool.idle = pool.idle[:len(pool.idle)-1]
		dst = append(dst, w)
	}
	for len(dst) < n && pool.live < runtime.GOMAXPROCS(0)-1 {
		w := &worker{buffers: newBuffers(), jobs: make(chan *call)}
		pool.live++
		go w.loop()
		dst = append(dst, w)
	}
	return dst
}

func (w *worker) loop() {
	w.timer = time.NewTimer(idleTimeout)
	for {
		select {
		case c := <-w.jobs:
			w.run(c)
			c.wg.Done()
			w.timer.Reset(idleTimeout)
			pool.Lock()
			pool.idle = append(pool.idle, w)
			pool.Unlock()
		case <-w.timer.C:
			pool.Lock()
			i := slices.Index(pool.idle, w)
			if i < 0 {
				// A caller took this worker as the timer fired: its job
				// is on the way.
				pool.Unlock()
				w.timer.Reset(idleTimeout)
				continue
			}
			pool.idle = slices.Delete(pool.idle, i, i+1)
			pool.live--
			pool.Unlock()
			return
		}
	}
}

// Workers reports the worker goroutines the package holds now (idle or
// busy); tests use it to check that idle workers exit.
func Workers() int {
	pool.Lock()
	defer pool.Unlock()
	return pool.live
}

// Forward computes masked attention: out (and lse when not nil) from q, k, v
// under the compiled mask m. When the mask has documents, docs holds the
// document id of every key position: SeqK ids shared by every batch, or
// Batch*SeqK ids, one row per batch. out is [batch, heads_q, seq_q,
// head_dim]; lse is [batch, heads_q, seq_q], natural log; rows that keep no
// key get 0 and -Inf.
//
// A masked pair never reads the key or value it masks: NaN or infinities
// at masked positions cannot reach any output. Kept pairs follow IEEE
// arithmetic: a NaN in a kept query, key or value, or a kept score of +Inf,
// makes the outputs that depend on it non-finite (see the package
// documentation for the exact rule).
//
// Forward is safe for concurrent use. Each call runs on the calling
// goroutine and on up to GOMAXPROCS-1 shared helper goroutines, which exit
// after two seconds without work; workspaces are pooled and released by the
// garbage collector when unused.
func Forward(m mask.Mask, variant Variant, out, lse, q, k, v []float32, docs []int32, s Shape) error {
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
	z, err := s.check()
	if err != nil {
		return err
	}
	if err := z.checkArgs(s, out, lse, q, k, v, docs, m.UsesDocs()); err != nil {
		return err
	}
	c := calls.Get().(*call)
	if err := c.setup(m, tile, s, out, lse, q, k, v, docs); err != nil {
		c.release()
		return err
	}
	nw := min(runtime.GOMAXPROCS(0), len(c.items))
	var hs [64]*worker
	ws := helpers(hs[:0], min(nw-1, len(hs)))
	c.prepWG.Add(len(ws) + 1)
	c.wg.Add(len(ws))
	for _, w := range ws {
		w.jobs <- c
	}
	b := callerBuffers.Get().(*buffers)
	b.run(c)
	callerBuffers.Put(b)
	c.wg.Wait()
	c.release()
	return nil
}

// setup fills the call's state and workspace.
func (c *call) setup(m mask.Mask, tile tileFunc, s Shape, out, lse, q, k, v []float32, docs []int32) error {
	c.docs = c.docs[:0]
	if m.UsesDocs() {
		rows := docsLen(s, docs) / s.SeqK
		for b := 0; b < rows; b++ {
			if b == len(c.docs) {
				c.docs = append(c.docs, mask.Docs{})
			}
			c.docs = c.docs[:b+1]
			if err := c.docs[b].Reset(docs[b*s.SeqK : (b+1)*s.SeqK]); err != nil {
				if rows > 1 {
					return fmt.Errorf("%w: batch %d: %v", ErrDocument, b, err)
				}
				return fmt.Errorf("%w: %v", ErrDocument, err)
			}
		}
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
	c.segs, c.msegs = segments(c.segs, c.msegs, s.SeqQ, s.SeqK, m.Stride())
	for _, g := range c.segs {
		c.tilesPerKV += g.tiles
	}
	tiles, ok := mul(s.Batch, s.HeadsKV, c.tilesPerKV)
	nkv, ok2 := mul(tiles, TK, s.HeadDim)
	kv, _ := mul(s.Batch, s.HeadsKV, s.SeqK, s.HeadDim)
	if !ok || !ok2 || nkv > 2*kv+maxPooled {
		return fmt.Errorf("%w: %+v: the key and value tiles of a layout of stride %d would take %d times the keys' memory", ErrShape, s, m.Stride(), nkv/kv)
	}
	c.kt = grow(c.kt, nkv)
	c.vt = grow(c.vt, nkv)
	if cap(c.known) < tiles {
		c.nonFinite, c.known = make([]atomic.Uint64, tiles), make([]atomic.Bool, tiles)
	}
	c.nonFinite, c.known = c.nonFinite[:tiles], c.known[:tiles]
	clear(c.known)
	c.items = c.items[:0]
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsQ; h++ {
			for g, seg := range c.segs {
				for qt := 0; qt < (seg.nq+TQ-1)/TQ; qt++ {
					c.items = append(c.items, item{int32(b), int32(h), int32(g), int32(qt)})
				}
			}
		}
	}
	c.nprep = int64(s.Batch * s.HeadsKV)
	return nil
}

// release drops the call's references to the caller's slices and returns
// it to the pool, unless its workspace is too large to keep.
func (c *call) release() {
	c.mask, c.out, c.lse, c.q, c.k, c.v = nil, nil, nil, nil, nil, nil
	if cap(c.kt) > maxPooled {
		return
	}
	calls.Put(c)
}

// docsOf returns the document ids of batch b, or nil.
func (c *call) docsOf(b int) *mask.Docs {
	switch len(c.docs) {
	case 0:
		return nil
	case 1:
		return &c.docs[0]
	}
	return &c.docs[b]
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

func (w *buffers) run(c *call) {
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
// past the segment's keys. Value tiles that
// are already contiguous rows of v (identity layout, whole tile) are not
// copied: valueTile reads them in place.
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

// nonFiniteRows returns the nonFinite word of key tile i, whose values are
// v: the rows holding a NaN or an infinity. Only partial tiles need it, so
// it is computed on first use (by whichever worker gets there first; they
// compute the same word).
func (c *call) nonFiniteRows(i int, v []float32, D int) uint64 {
	if c.known[i].Load() {
		return c.nonFinite[i].Load()
	}
	var nf uint64
	for r := 0; r < TK; r++ {
		if !allFinite(v[r*D : r*D+D]) {
			nf |= 1 << uint(r)
		}
	}
	c.nonFinite[i].Store(nf)
	c.known[i].Store(true)
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

// valueTile returns value tile t of segment g for (batch, kv head) p: the
// rows of v themselves when prepare left them in place.
func (c *call) valueTile(p int, g segment, t int) []float32 {
	D := c.s.HeadDim
	if g.stride == 1 && (t+1)*TK <= g.nk {
		return c.v[(p*c.s.SeqK+t*TK)*D:][:TK*D]
	}
	return c.vt[(p*c.tilesPerKV+g.base+t)*TK*D:][:TK*D]
}

func (w *buffers) queryTile(c *call, it item) {
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
	docs := c.docsOf(b)
	w.refs = mask.Visit(c.mask, w.refs[:0], q0, q1, g.nk, TK, docs)
	kvBase := ((b*s.HeadsKV+hk)*c.tilesPerKV + g.base) * TK * D
	for _, ref := range w.refs {
		k0 := ref.K * TK
		class := ref.Class
		words := w.mask[:TQ]
		if class == mask.Partial {
			// exact class and keep words of the tile's rows
			class = mask.Refine(c.mask, words, q0, q1, ref.K, g.nk, TK, docs)
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
		vt := c.valueTile(b*s.HeadsKV+hk, g, ref.K)
		// Value rows holding NaN or infinities that some row of the tile
		// masks: the kernels multiply masked p = 0 by v, so they run on a
		// copy with those entries zeroed, and the rows that keep the keys
		// get their terms afterwards.
		var fix uint64
		if keep != nil { // a full tile keeps every pair
			if nf := c.nonFiniteRows(off/(TK*D), vt, D); nf != 0 {
				all := ^uint64(0)
				for _, k := range keep[:rows] {
					all &= k
				}
				if fix = nf &^ all; fix != 0 {
					vt = w.sanitize(vt, fix, D)
				}
			}
		}
		c.tile(qt0, c.kt[off:off+TK*D], vt, w.s[:TQ*TK], o, m, l, keep, D)
		if fix != 0 {
			w.restore(c.valueTile(b*s.HeadsKV+hk, g, ref.K), fix, keep[:rows], D)
		}
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
