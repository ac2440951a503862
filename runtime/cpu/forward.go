package cpu

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
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
	ErrPage     = errors.New("bad page table")
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

// Elem is the element type of q, k and v. The kernels compute in float32
// whatever it is (16-bit inputs are widened, exactly, as tiles are packed);
// out and lse are float32.
type Elem int

const (
	F32  Elem = iota // float32
	BF16             // bfloat16, as its 16 bits (the high half of a float32)
	F16              // IEEE 754 half precision, as its 16 bits
)

func (e Elem) String() string {
	switch e {
	case F32:
		return "fp32"
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	}
	return fmt.Sprintf("Elem(%d)", int(e))
}

// inputs are q, k and v in their element type: the float32 slices for
// F32, the 16-bit ones otherwise.
type inputs struct {
	elem          Elem
	q, k, v       []float32
	q16, k16, v16 []uint16
}

func (in inputs) lens() (q, k, v int) {
	if in.elem == F32 {
		return len(in.q), len(in.k), len(in.v)
	}
	return len(in.q16), len(in.k16), len(in.v16)
}

// spans returns the memory of the first nq, nkv, nkv elements.
func (in inputs) spans(nq, nkv int) [3]memSpan {
	if in.elem == F32 {
		return [3]memSpan{span(in.q[:nq]), span(in.k[:nkv]), span(in.v[:nkv])}
	}
	return [3]memSpan{span(in.q16[:nq]), span(in.k16[:nkv]), span(in.v16[:nkv])}
}

// checkArgs checks the slices against the shape's sizes: lengths, document
// ids (one run of SeqK shared by every batch, or one per batch), and that
// no output overlaps an input or the other output.
func (z sizes) checkArgs(s Shape, out, lse []float32, in inputs, docs []int32, needDocs bool) error {
	lq, lk, lv := in.lens()
	switch {
	case lq < z.q:
		return fmt.Errorf("%w: q has %d elements, the shape needs %d", ErrShort, lq, z.q)
	case lk < z.kv:
		return fmt.Errorf("%w: k has %d elements, the shape needs %d", ErrShort, lk, z.kv)
	case lv < z.kv:
		return fmt.Errorf("%w: v has %d elements, the shape needs %d", ErrShort, lv, z.kv)
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
	sp := in.spans(z.q, z.kv)
	for _, a := range []struct {
		name string
		m    memSpan
	}{{"q", sp[0]}, {"k", sp[1]}, {"v", sp[2]}, {"lse", l}, {"docs", d}} {
		if o.overlaps(a.m) {
			return fmt.Errorf("%w: out and %s share memory", ErrAlias, a.name)
		}
		if a.name != "lse" && l.overlaps(a.m) {
			return fmt.Errorf("%w: lse and %s share memory", ErrAlias, a.name)
		}
	}
	return nil
}

func (pg *Paged) stride(s Shape) int {
	if pg.TableStride > 0 {
		return pg.TableStride
	}
	return (s.SeqK + pg.PageSize - 1) / pg.PageSize
}

// check validates a page table against the shape and the caches, with
// overflow-safe sizes, and returns the elements of k and v the pages span
// (what the length and aliasing checks then use).
func (pg *Paged) check(s Shape, in inputs) (int, error) {
	if pg.PageSize < 1 || pg.PageSize > math.MaxInt32 || pg.TableStride < 0 {
		return 0, fmt.Errorf("%w: page size %d, table stride %d", ErrPage, pg.PageSize, pg.TableStride)
	}
	need := (s.SeqK + pg.PageSize - 1) / pg.PageSize
	stride := pg.stride(s)
	if stride < need {
		return 0, fmt.Errorf("%w: table stride %d is below the %d pages of SeqK = %d", ErrPage, stride, need, s.SeqK)
	}
	rows, ok := mul(s.Batch-1, stride)
	if !ok || rows > math.MaxInt-need || len(pg.Table) < rows+need {
		return 0, fmt.Errorf("%w: %d table entries; %d batches of %d pages, %d apart, need %d", ErrPage, len(pg.Table), s.Batch, need, stride, rows+need)
	}
	per, ok := mul(s.HeadsKV, pg.PageSize, s.HeadDim)
	if !ok {
		return 0, fmt.Errorf("%w: a page of %d heads x %d positions x %d overflows", ErrPage, s.HeadsKV, pg.PageSize, s.HeadDim)
	}
	_, lk, lv := in.lens()
	pages := min(lk, lv) / per
	for b := 0; b < s.Batch; b++ {
		for i, p := range pg.Table[b*stride : b*stride+need] {
			if p < 0 || int(p) >= pages {
				return 0, fmt.Errorf("%w: batch %d, entry %d: page %d, but k and v hold %d pages of %d elements", ErrPage, b, i, p, pages, per)
			}
		}
	}
	return pages * per, nil
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
// garbage collector when unused. Only the key tiles some query visits are
// packed, so a decoding call (few queries) costs what its kept keys cost;
// the query heads that share a key/value head then share one pass over the
// keys, and the keys are split across threads (flash decoding). Results do
// not depend on the number of threads.
func Forward(m mask.Mask, variant Variant, out, lse, q, k, v []float32, docs []int32, s Shape) error {
	return forward(m, variant, out, lse, inputs{elem: F32, q: q, k: k, v: v}, docs, nil, s)
}

// Paged describes a paged KV cache: k and v hold pages of PageSize key
// positions, [page][HeadsKV][PageSize][HeadDim], and Table lists, for each
// batch, the pages of its SeqK positions in order: position j of batch b
// is row j % PageSize of page Table[b*TableStride + j/PageSize]. Only the
// first ceil(SeqK/PageSize) entries of a batch are read; pages may be
// shared, and rows of a page past SeqK are never read.
type Paged struct {
	PageSize    int
	Table       []int32
	TableStride int // entries per batch in Table; 0 means ceil(SeqK/PageSize)
}

// ForwardPaged is Forward on a paged KV cache (see Paged): pages are read
// in place, and pages the mask leaves empty are not touched.
func ForwardPaged(m mask.Mask, variant Variant, out, lse, q, k, v []float32, docs []int32, pg Paged, s Shape) error {
	return forward(m, variant, out, lse, inputs{elem: F32, q: q, k: k, v: v}, docs, &pg, s)
}

// Forward16 is Forward with q, k and v in a 16-bit format, elem (BF16 or
// F16), as their bits: the kernels widen them exactly to float32 and
// compute in float32; out and lse are float32. A 16-bit cache is half the
// bytes to read, which is what decoding costs.
func Forward16(m mask.Mask, variant Variant, elem Elem, out, lse []float32, q, k, v []uint16, docs []int32, s Shape) error {
	if elem != BF16 && elem != F16 {
		return fmt.Errorf("%w: %s is not a 16-bit element type", ErrShape, elem)
	}
	return forward(m, variant, out, lse, inputs{elem: elem, q16: q, k16: k, v16: v}, docs, nil, s)
}

func forward(m mask.Mask, variant Variant, out, lse []float32, in inputs, docs []int32, pg *Paged, s Shape) error {
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
	if pg != nil {
		if z.kv, err = pg.check(s, in); err != nil {
			return err
		}
	}
	if err := z.checkArgs(s, out, lse, in, docs, m.UsesDocs()); err != nil {
		return err
	}
	c := calls.Get().(*call)
	c.pageSize, c.tableStride, c.table = 0, 0, nil
	if pg != nil {
		c.pageSize, c.tableStride, c.table = pg.PageSize, pg.stride(s), pg.Table
	}
	c.decode = hasDecode(variant)
	if err := c.setup(m, tile, s, out, lse, in, docs); err != nil {
		c.release()
		return err
	}
	nw := min(runtime.GOMAXPROCS(0), len(c.items))
	var hs [64]*worker
	ws := helpers(hs[:0], min(nw-1, len(hs)))
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
