package cpu

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/attngen/attngen/runtime/mask"
)

// Shape describes one attention call. Tensors are laid out [batch,
// heads, seq, head_dim], row-major, unless Args.Layout gives strides.
// Query head h reads key/value head h / (HeadsQ/HeadsKV) (grouped-query
// attention). Query row r sits at absolute position r + SeqK - SeqQ
// (bottom-right aligned), so SeqQ <= SeqK, unless Args.QPos and KPos say
// where the queries and keys are.
type Shape struct {
	Batch, HeadsQ, HeadsKV int
	// HeadDim is the head dimension of q and k, and of v and the output
	// unless Args.HeadDimV says otherwise.
	SeqQ, SeqK, HeadDim int
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

// docsLen is the number of document ids a call reads, n a row.
func docsLen(s Shape, n int, docs []int32) int {
	if len(docs) == n {
		return n
	}
	return s.Batch * n
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
	// HeadsQ values in the order of the heads (or one value for every
	// head), each within the parameter's [Min, Max]. Query head h computes the mask with every parameter at
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
	// Layout gives the element strides of Q, K, V and the output (see
	// Layout: BHSD, BSHD, PackedQKV or any strides); the zero value is
	// contiguous [batch, heads, seq, head_dim] for each.
	Layout Layout
	// Ragged batches and positions, each nil or one entry per batch row:
	// SeqLensQ[b] queries (at most SeqQ) and SeqLensK[b] keys (at most
	// SeqK) of row b, the rest of its rows are never read (a row's
	// output past its queries gets zeros and an lse of -Inf; keys past
	// its length, and with a paged cache the table entries past its
	// pages, are never read). QPos[b] and KPos[b] are the absolute
	// positions of row b's first query and first key (QPos and KPos may
	// also hold one entry for every row): its queries are at QPos[b] ..
	// QPos[b]+SeqLensQ[b]-1 and its keys likewise, and the mask is
	// evaluated on those positions, so a chunk of queries may attend to
	// any slice of keys. The defaults are KPos 0 and QPos = KPos + keys -
	// queries (bottom-right alignment, as without them). With positions,
	// a mask's document ids or parents cover positions 0 .. (the largest
	// query or key position + 1) a row. A call with per-row values runs
	// its rows one after another, each as one call.
	SeqLensQ, SeqLensK []int32
	QPos, KPos         []int32
	// HeadDimV is the head dimension of V and the output when it is not
	// Shape.HeadDim (MLA-style attention: q and k of 192, v of 128); 0
	// means HeadDim.
	HeadDimV int
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
	var v validated
	if err := a.validate(m, variant, &v); err != nil {
		return err
	}
	if !v.ragged {
		return v.run(m, kern, a, a.Shape, &v.g, &v.io)
	}
	return v.runRows(m, kern, a)
}

// prepare sets up a call of shape s, geometry g and slices io from the
// pool.
func (v *validated) prepare(m mask.Mask, kern *kernels, a *Args, s Shape, g *geom, io *callIO) (*call, error) {
	c := calls.Get().(*call)
	if err := checkScore(&c.sc, mask.ScoreOf(m), s, a.SoftCap, a.Slopes, a.Sinks); err != nil {
		calls.Put(c)
		return nil, err
	}
	c.pageSize, c.tableStride, c.table = 0, 0, nil
	if io.table != nil {
		c.pageSize, c.tableStride, c.table = a.Paged.PageSize, v.tableStride, io.table
	}
	if err := c.setup(m, kern, s, g, io.out, io.out16, io.lse, io.in, io.data, &a.HeadParams); err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

// run runs one validated call of shape s, geometry g and slices io.
func (v *validated) run(m mask.Mask, kern *kernels, a *Args, s Shape, g *geom, io *callIO) error {
	c, err := v.prepare(m, kern, a, s, g, io)
	if err != nil {
		return err
	}
	dispatch(c, &c.wg, len(c.items))
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
