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
	AVX2                  // AVX2, FMA and F16C
	PureGo                // portable Go
	NEON                  // arm64 Advanced SIMD
)

// tileFunc is one microkernel (see the package documentation).
// d are its head dimensions: q [TQ][d.qk], kt [d.qk][TK], v [TK][d.v], o
// [TQ][d.v].
type tileFunc func(q, kt, v, s, o, m, l []float32, mask []uint64, d dims)

// tileScoreFunc is a microkernel with the score stage (scoreTile).
type tileScoreFunc func(q, kt, v, s, o, m, l []float32, mask []uint64, d dims, sc *scoreTile)

// Supported reports whether this machine and build can run the variant:
// always for Auto, which runs Best.
func Supported(v Variant) bool {
	if v == Auto {
		return true
	}
	_, ok := tileFor(v)
	return ok
}

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
	ErrTree     = errors.New("bad tree")
	ErrAlias    = errors.New("output overlaps another argument")
	ErrPage     = errors.New("bad page table")
	// ErrHeadParam: head parameter values (Args.HeadParams) missing, of a
	// wrong length, outside their range, or given to a mask without them.
	ErrHeadParam = errors.New("bad head parameter")
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
// lse is float32, out float32 or, through ForwardArgs, the inputs' 16-bit
// format.
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
// no output (out or out16, lse) overlaps an input (q, k, v, document ids,
// the page table) or the other output. table is the part of the page table
// the call reads (nil without pages).
func (z sizes) checkArgs(m mask.Mask, s Shape, a *Args, in inputs, table []int32, data []int32) error {
	needDocs := m.UsesDocs()
	lq, lk, lv := in.lens()
	lo, oname := len(a.Out), "out"
	if a.Out16 != nil {
		lo, oname = len(a.Out16), "out16"
	}
	switch {
	case lq < z.q:
		return fmt.Errorf("%w: q has %d elements, the shape needs %d", ErrShort, lq, z.q)
	case lk < z.kv:
		return fmt.Errorf("%w: k has %d elements, the shape needs %d", ErrShort, lk, z.kv)
	case lv < z.kv:
		return fmt.Errorf("%w: v has %d elements, the shape needs %d", ErrShort, lv, z.kv)
	case lo < z.q:
		return fmt.Errorf("%w: %s has %d elements, the shape needs %d", ErrShort, oname, lo, z.q)
	case a.LSE != nil && len(a.LSE) < z.lse:
		return fmt.Errorf("%w: lse has %d elements, the shape needs %d (or pass nil)", ErrShort, len(a.LSE), z.lse)
	}
	if needDocs {
		if err := checkDataLen(m, s, data); err != nil {
			return err
		}
	}
	var o memSpan
	if a.Out16 != nil {
		o = span(a.Out16[:z.q])
	} else {
		o = span(a.Out[:z.q])
	}
	l := span(a.LSE[:min(len(a.LSE), z.lse)])
	var d memSpan
	dname := "docs"
	if needDocs {
		d = span(data[:docsLen(s, data)])
		if mask.UsesTree(m) {
			dname = "tree"
		}
	}
	sp := in.spans(z.q, z.kv)
	for _, x := range []struct {
		name string
		m    memSpan
	}{{"q", sp[0]}, {"k", sp[1]}, {"v", sp[2]}, {"lse", l}, {dname, d}, {"the page table", span(table)}} {
		if o.overlaps(x.m) {
			return fmt.Errorf("%w: %s and %s share memory", ErrAlias, oname, x.name)
		}
		if x.name != "lse" && l.overlaps(x.m) {
			return fmt.Errorf("%w: lse and %s share memory", ErrAlias, x.name)
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
// (what the length and aliasing checks then use) and the part of the
// table the call reads.
func (pg *Paged) check(s Shape, in inputs) (int, []int32, error) {
	if pg.PageSize < 1 || pg.PageSize > math.MaxInt32 || pg.TableStride < 0 {
		return 0, nil, fmt.Errorf("%w: page size %d, table stride %d", ErrPage, pg.PageSize, pg.TableStride)
	}
	need := (s.SeqK + pg.PageSize - 1) / pg.PageSize
	stride := pg.stride(s)
	if stride < need {
		return 0, nil, fmt.Errorf("%w: table stride %d is below the %d pages of SeqK = %d", ErrPage, stride, need, s.SeqK)
	}
	rows, ok := mul(s.Batch-1, stride)
	if !ok || rows > math.MaxInt-need || len(pg.Table) < rows+need {
		return 0, nil, fmt.Errorf("%w: %d table entries; %d batches of %d pages, %d apart, need %d", ErrPage, len(pg.Table), s.Batch, need, stride, rows+need)
	}
	// A longer table is refused rather than read in part: it is most
	// likely laid out with another stride (a fixed number of pages per
	// batch) than the one the call reads it with.
	if pg.TableStride == 0 && len(pg.Table) != rows+need {
		return 0, nil, fmt.Errorf("%w: %d table entries; %d batches of ceil(SeqK/PageSize) = %d pages back to back are exactly %d (a table with more entries per batch needs TableStride)", ErrPage, len(pg.Table), s.Batch, need, rows+need)
	}
	if full, ok := mul(s.Batch, stride); pg.TableStride > 0 && ok && len(pg.Table) > full {
		return 0, nil, fmt.Errorf("%w: %d table entries; %d batches of TableStride %d entries are at most %d", ErrPage, len(pg.Table), s.Batch, stride, full)
	}
	per, ok := mul(s.HeadsKV, pg.PageSize, s.HeadDim)
	if !ok {
		return 0, nil, fmt.Errorf("%w: a page of %d heads x %d positions x %d overflows", ErrPage, s.HeadsKV, pg.PageSize, s.HeadDim)
	}
	_, lk, lv := in.lens()
	pages := min(lk, lv) / per
	for b := 0; b < s.Batch; b++ {
		for i, p := range pg.Table[b*stride : b*stride+need] {
			if p < 0 || int(p) >= pages {
				return 0, nil, fmt.Errorf("%w: batch %d, entry %d: page %d, but k and v hold %d pages of %d elements", ErrPage, b, i, p, pages, per)
			}
		}
	}
	return pages * per, pg.Table[:rows+need], nil
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

// Args are the arguments of one call of ForwardArgs, the general entry
// point: inputs in float32 or a 16-bit format, output in float32 or the
// inputs' format, contiguous or paged caches, in any combination. A slice
// is given when it is not nil.
type Args struct {
	// Elem is the element type of q, k and v: F32 (the zero value) reads Q,
	// K and V; BF16 and F16 read Q16, K16 and V16, the formats' bits. The
	// slices of the other type must be nil.
	Elem          Elem
	Q, K, V       []float32
	Q16, K16, V16 []uint16
	// Exactly one of Out and Out16 is given: Out receives the output as
	// float32, Out16 (a 16-bit Elem only) in Elem's format, each element
	// the float32 that Out would hold rounded to nearest, ties to even
	// (f16 overflows to an infinity; NaN stays NaN). Both are [Batch,
	// HeadsQ, SeqQ, HeadDim].
	Out   []float32
	Out16 []uint16
	// LSE, when given, receives the natural log-sum-exp of each row's kept
	// scaled scores, [Batch, HeadsQ, SeqQ], float32 whatever Elem is.
	LSE []float32
	// Docs are the document ids of the key positions when the mask has
	// documents: SeqK ids shared by every batch, or Batch*SeqK, one row per
	// batch. They must be nil for a mask without documents.
	Docs []int32
	// Tree is the parent array of a tree mask, one entry per key position
	// (the parent position, before it, or -1 for a root), with Docs' shapes:
	// SeqK entries shared by every batch or Batch*SeqK, one row per batch.
	// It must be nil for a mask without a tree.
	Tree []int32
	// HeadParams are the values of the mask's head parameters
	// (mask.HeadParams: window sizes or sink counts that differ between
	// query heads): entry k holds parameter k's value at each query head,
	// HeadsQ values in the order of the heads, each within the parameter's
	// [Min, Max]. Query head h computes the mask with every parameter at
	// its value at h. Entries past the mask's parameters, and all of them
	// for a mask without head parameters, must be nil. The values are
	// read before anything is written.
	HeadParams [mask.MaxHeadParams][]int32
	// Paged describes K and V (or K16 and V16) as a paged cache when its
	// PageSize is not 0; the zero value is a contiguous cache.
	Paged Paged
	// The values of the mask's score stage (mask.ScoreOf) that the call
	// gives: SoftCap, the soft-cap of a mask whose spec writes softcap:
	// call (0 otherwise); Slopes, one ALiBi slope per query head for a
	// mask whose spec writes slopes: call (nil otherwise: the geometric
	// slopes of HeadsQ); Sinks, the learned sink logit of each query head
	// (natural units, HeadsQ values, -Inf for none) for a mask with
	// learned sinks, nil otherwise. Bad values are ErrScore.
	SoftCap float32
	Slopes  []float32
	Sinks   []float32
	Shape   Shape
}

// inputs checks that the slices given fit Elem and returns q, k and v.
func (a *Args) inputs() (inputs, error) {
	switch a.Elem {
	case F32:
		if a.Q16 != nil || a.K16 != nil || a.V16 != nil {
			return inputs{}, fmt.Errorf("%w: Elem %s reads Q, K and V; Q16, K16 and V16 must be nil", ErrShape, a.Elem)
		}
		if a.Out16 != nil {
			return inputs{}, fmt.Errorf("%w: Out16 is the output in the inputs' 16-bit format, and Elem is %s: write Out", ErrShape, a.Elem)
		}
	case BF16, F16:
		if a.Q != nil || a.K != nil || a.V != nil {
			return inputs{}, fmt.Errorf("%w: Elem %s reads Q16, K16 and V16; Q, K and V must be nil", ErrShape, a.Elem)
		}
	default:
		return inputs{}, fmt.Errorf("%w: %s is not an element type (F32, BF16 or F16)", ErrShape, a.Elem)
	}
	if a.Out != nil && a.Out16 != nil {
		return inputs{}, fmt.Errorf("%w: both Out and Out16 are given; the output goes to one of them", ErrShape)
	}
	return inputs{elem: a.Elem, q: a.Q, k: a.K, v: a.V, q16: a.Q16, k16: a.K16, v16: a.V16}, nil
}

// ForwardArgs computes masked attention under the compiled mask m: the
// output (and the log-sum-exp when a.LSE is given) from q, k and v, in
// the element types, layout and shape a describes. Every other entry
// point (Forward, ForwardPaged, Forward16) is a call of it.
//
// A row that keeps no key gets 0 and -Inf. A masked pair never reads the
// key or value it masks: NaN or infinities at masked positions cannot
// reach any output. Kept pairs follow IEEE arithmetic: a NaN in a kept
// query, key or value, or a kept score of +Inf, makes the outputs that
// depend on it non-finite (see the package documentation for the exact
// rule).
//
// Errors wrap ErrShape (a bad shape, slices that do not fit Elem, both or
// an unknown Elem), ErrShort (a slice shorter than the shape, or no
// output), ErrDocument (document ids of a wrong length, decreasing, or
// given to a mask without documents), ErrTree (a parent array of a wrong
// length, with a parent not before its child, or given to a mask without
// a tree), ErrHeadParam (head parameter values missing, of a wrong
// length, out of range, or given to a mask without head parameters),
// ErrAlias (an output overlapping an
// input, the page table or the other output), ErrPage, ErrVariant or
// ErrHeadDim.
//
// ForwardArgs is safe for concurrent use. Each call runs on the calling
// goroutine and on up to GOMAXPROCS-1 shared helper goroutines, which exit
// after two seconds without work; workspaces of up to 512 MiB are pooled
// for the next call and released by the garbage collector when unused (a
// larger one is allocated per call). Only the key tiles some query visits
// are packed, so a decoding call (few queries) costs what its kept keys
// cost; the query heads that share a key/value head then share one pass
// over the keys (with head parameters, those with the same values), and
// the keys are split across threads (flash decoding). Results do not
// depend on the number of threads.
func ForwardArgs(m mask.Mask, variant Variant, a Args) error {
	return forward(m, variant, &a)
}

// docsFor returns docs when the mask has documents: the entry points
// before ForwardArgs ignore ids given to other masks.
func docsFor(m mask.Mask, docs []int32) []int32 {
	if m.UsesDocs() && !mask.UsesTree(m) {
		return docs
	}
	return nil
}

// treeFor returns docs when the mask has a tree: the entry points before
// ForwardArgs take its parent array where others take document ids.
func treeFor(m mask.Mask, docs []int32) []int32 {
	if mask.UsesTree(m) {
		return docs
	}
	return nil
}

// Forward is ForwardArgs with float32 q, k, v and out on a contiguous
// cache. When the mask has documents, docs holds the document id of every
// key position: SeqK ids shared by every batch, or Batch*SeqK ids, one row
// per batch; when it has a tree, docs holds the parent array (Args.Tree)
// in the same shapes (other masks ignore docs). out is [batch, heads_q, seq_q,
// head_dim]; lse, when not nil, is [batch, heads_q, seq_q], natural log.
// Forward, ForwardPaged and Forward16 take no head parameter values: for a
// mask with head parameters they return ErrHeadParam, and ForwardArgs
// (Args.HeadParams) is the entry point.
func Forward(m mask.Mask, variant Variant, out, lse, q, k, v []float32, docs []int32, s Shape) error {
	return forward(m, variant, &Args{Q: q, K: k, V: v, Out: out, LSE: lse, Docs: docsFor(m, docs), Tree: treeFor(m, docs), Shape: s})
}

// Paged describes a paged KV cache: k and v hold pages of PageSize key
// positions, [page][HeadsKV][PageSize][HeadDim], and Table lists, for each
// batch, the pages of its SeqK positions in order: position j of batch b
// is row j % PageSize of page Table[b*TableStride + j/PageSize]. With
// TableStride 0 the table holds exactly Batch*ceil(SeqK/PageSize) entries;
// with a TableStride, at least (Batch-1)*TableStride + ceil(SeqK/PageSize)
// and at most Batch*TableStride, and only the first ceil(SeqK/PageSize)
// entries of a batch are read. Any other length is ErrPage. Pages may be
// shared, and rows of a page past SeqK are never read. Pages are read in
// place, and pages the mask leaves empty are not touched. The zero value
// (PageSize 0, no table) is a contiguous cache.
type Paged struct {
	PageSize    int
	Table       []int32
	TableStride int // entries per batch in Table; 0 means ceil(SeqK/PageSize)
}

// ForwardPaged is Forward on a paged KV cache (see Paged).
func ForwardPaged(m mask.Mask, variant Variant, out, lse, q, k, v []float32, docs []int32, pg Paged, s Shape) error {
	if pg.PageSize == 0 { // not the contiguous cache of ForwardArgs
		return fmt.Errorf("%w: page size 0", ErrPage)
	}
	return forward(m, variant, &Args{Q: q, K: k, V: v, Out: out, LSE: lse, Docs: docsFor(m, docs), Tree: treeFor(m, docs), Paged: pg, Shape: s})
}

// Forward16 is Forward with q, k and v in a 16-bit format, elem (BF16 or
// F16), as their bits: the kernels widen them exactly to float32 and
// compute in float32; out and lse are float32. A 16-bit cache is half the
// bytes to read, which is what decoding costs.
func Forward16(m mask.Mask, variant Variant, elem Elem, out, lse []float32, q, k, v []uint16, docs []int32, s Shape) error {
	if elem != BF16 && elem != F16 {
		return fmt.Errorf("%w: %s is not a 16-bit element type", ErrShape, elem)
	}
	return forward(m, variant, &Args{Elem: elem, Q16: q, K16: k, V16: v, Out: out, LSE: lse, Docs: docsFor(m, docs), Tree: treeFor(m, docs), Shape: s})
}

func forward(m mask.Mask, variant Variant, a *Args) error {
	if variant == Auto {
		variant = Best()
	}
	kern, ok := kernelsOf(variant)
	if !ok {
		return fmt.Errorf("%w: %s", ErrVariant, variant)
	}
	s := a.Shape
	t, _ := TargetOf(variant)
	if err := t.Supports(s.HeadDim, s.HeadDim); err != nil {
		return err
	}
	in, err := a.inputs()
	if err != nil {
		return err
	}
	tree := mask.UsesTree(m)
	if a.Docs != nil && (!m.UsesDocs() || tree) {
		return fmt.Errorf("%w: %d document ids given, but the mask has no documents (Docs must be nil)", ErrDocument, len(a.Docs))
	}
	if a.Tree != nil && !tree {
		return fmt.Errorf("%w: %d parent entries given in Tree, but the mask has no tree (Tree must be nil)", ErrTree, len(a.Tree))
	}
	data := a.Docs
	if tree {
		data = a.Tree
	}
	z, err := s.check()
	if err != nil {
		return err
	}
	if err := checkHeads(m, s, &a.HeadParams); err != nil {
		return err
	}
	var table []int32
	pg := &a.Paged
	if paged := pg.PageSize != 0 || pg.Table != nil || pg.TableStride != 0; paged {
		if z.kv, table, err = pg.check(s, in); err != nil {
			return err
		}
	}
	if err := z.checkArgs(m, s, a, in, table, data); err != nil {
		return err
	}
	c := calls.Get().(*call)
	if err := checkScore(&c.sc, mask.ScoreOf(m), s, a.SoftCap, a.Slopes, a.Sinks); err != nil {
		calls.Put(c)
		return err
	}
	c.pageSize, c.tableStride, c.table = 0, 0, nil
	if table != nil {
		c.pageSize, c.tableStride, c.table = pg.PageSize, pg.stride(s), table
	}
	if err := c.setup(m, kern, s, a.Out, a.Out16, a.LSE, in, data, &a.HeadParams); err != nil {
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

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}
