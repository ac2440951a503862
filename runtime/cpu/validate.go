package cpu

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/attngen/attngen/runtime/mask"
)

// geom is a call's geometry beyond its Shape: the resolved strides, lse's
// batch and head strides (its rows are consecutive), the absolute
// positions of the first query and key rows, and the positions a row of
// document ids or parents covers.
type geom struct {
	dv         int // the head dimension of v and the output
	ls         Layout
	lseB, lseH int
	qpos, kpos int
	dataLen    int
}

// callIO are the slices of one call, or of one batch row of a ragged
// call.
type callIO struct {
	in    inputs
	out   []float32
	out16 []uint16
	lse   []float32
	table []int32 // the part of the page table the call reads; nil without pages
	data  []int32 // document ids or parents; nil without
}

// validated is a checked Args: everything a call reads and writes lies in
// its slices, no output overlaps another argument, and every value is in
// range, so running it cannot fail halfway.
type validated struct {
	g           geom
	io          callIO
	tableStride int
	// ragged: one call per batch row (per-row lengths or positions), with
	// each row's queries, keys and positions in r.
	ragged bool
	r      rows
}

// checkDims checks a shape's dimensions; with positions (free) SeqQ may
// exceed SeqK, since the queries need not be the last keys.
func (s Shape) checkDims(free bool) error {
	switch {
	case s.Batch < 1 || s.HeadsQ < 1 || s.HeadsKV < 1 || s.SeqQ < 1 || s.SeqK < 1 || s.HeadDim < 1:
		return fmt.Errorf("%w: %+v: every dimension must be at least 1", ErrShape, s)
	case s.HeadsQ%s.HeadsKV != 0:
		return fmt.Errorf("%w: HeadsQ = %d is not a multiple of HeadsKV = %d", ErrShape, s.HeadsQ, s.HeadsKV)
	case s.SeqQ > s.SeqK && !free:
		return fmt.Errorf("%w: SeqQ = %d exceeds SeqK = %d (queries are the last SeqQ keys unless Args.QPos says where they are)", ErrShape, s.SeqQ, s.SeqK)
	case s.SeqK > math.MaxInt32 || s.SeqQ > math.MaxInt32:
		return fmt.Errorf("%w: SeqQ = %d, SeqK = %d: at most %d", ErrShape, s.SeqQ, s.SeqK, math.MaxInt32)
	case math.IsNaN(float64(s.Scale)) || math.Abs(float64(s.Scale)) > maxScale:
		return fmt.Errorf("%w: scale %v: the scale must be finite and at most %.4g in magnitude (scale*log2(e) is a float32)", ErrShape, s.Scale, maxScale)
	}
	return nil
}

// rows are a call's per-batch-row lengths and positions (Args.SeqLensQ,
// SeqLensK, QPos, KPos), read with their defaults.
type rows struct {
	s            Shape
	lensQ, lensK []int32
	qpos, kpos   []int32
}

func (r *rows) lenQ(b int) int {
	if r.lensQ == nil {
		return r.s.SeqQ
	}
	return int(r.lensQ[b])
}

func (r *rows) lenK(b int) int {
	if r.lensK == nil {
		return r.s.SeqK
	}
	return int(r.lensK[b])
}

func (r *rows) kPos(b int) int {
	switch len(r.kpos) {
	case 0:
		return 0
	case 1:
		return int(r.kpos[0])
	}
	return int(r.kpos[b])
}

func (r *rows) qPos(b int) int {
	switch len(r.qpos) {
	case 0:
		return r.kPos(b) + r.lenK(b) - r.lenQ(b)
	case 1:
		return int(r.qpos[0])
	}
	return int(r.qpos[b])
}

// check checks the entry counts.
func (r *rows) check() error {
	n := r.s.Batch
	for _, x := range []struct {
		what string
		v    []int32
		one  bool
	}{{"SeqLensQ", r.lensQ, false}, {"SeqLensK", r.lensK, false}, {"QPos", r.qpos, true}, {"KPos", r.kpos, true}} {
		switch {
		case x.v == nil || len(x.v) == n || len(x.v) == 1 && x.one:
		case x.one:
			return fmt.Errorf("%w: %s has %d entries; want 1 or Batch = %d", ErrShape, x.what, len(x.v), n)
		default:
			return fmt.Errorf("%w: %s has %d entries; want Batch = %d", ErrShape, x.what, len(x.v), n)
		}
	}
	return nil
}

// validate checks a against the mask and the variant before anything is
// written (see ForwardArgs for the errors).
func (a *Args) validate(m mask.Mask, variant Variant, v *validated) error {
	s := a.Shape
	t, _ := TargetOf(variant)
	if a.HeadDimV < 0 {
		return fmt.Errorf("%w: HeadDimV = %d", ErrShape, a.HeadDimV)
	}
	v.g.dv = orDim(a.HeadDimV, s.HeadDim)
	if err := t.Supports(s.HeadDim, v.g.dv); err != nil {
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
	positions := a.QPos != nil || a.KPos != nil
	if err := s.checkDims(positions); err != nil {
		return err
	}
	if err := checkHeads(m, s, &a.HeadParams); err != nil {
		return err
	}
	v.ragged = a.SeqLensQ != nil || a.SeqLensK != nil || len(a.QPos) > 1 || len(a.KPos) > 1
	v.r = rows{s: s, lensQ: a.SeqLensQ, lensK: a.SeqLensK, qpos: a.QPos, kpos: a.KPos}
	if err := v.r.check(); err != nil {
		return err
	}
	v.g.dataLen = s.SeqK
	if positions {
		v.g.dataLen = 0
	}
	for b := 0; b < s.Batch; b++ {
		nq, nk, qp, kp := v.r.lenQ(b), v.r.lenK(b), v.r.qPos(b), v.r.kPos(b)
		switch {
		case nq < 0 || nq > s.SeqQ:
			return fmt.Errorf("%w: batch row %d: SeqLensQ = %d, want 0 to SeqQ = %d", ErrShape, b, nq, s.SeqQ)
		case nk < 0 || nk > s.SeqK:
			return fmt.Errorf("%w: batch row %d: SeqLensK = %d, want 0 to SeqK = %d", ErrShape, b, nk, s.SeqK)
		case kp < 0 || kp > math.MaxInt32-nk:
			return fmt.Errorf("%w: batch row %d: KPos = %d: key positions must lie in 0 to %d", ErrShape, b, kp, math.MaxInt32)
		case qp < 0 && a.QPos == nil:
			return fmt.Errorf("%w: batch row %d: %d queries but %d keys: bottom-right alignment puts queries before position 0 (give QPos)", ErrShape, b, nq, nk)
		case qp < 0 || qp > math.MaxInt32-nq:
			return fmt.Errorf("%w: batch row %d: QPos = %d: query positions must lie in 0 to %d", ErrShape, b, qp, math.MaxInt32)
		}
		if positions {
			v.g.dataLen = max(v.g.dataLen, qp+nq, kp+nk, 1)
		}
		if !v.ragged {
			break // every row is row 0
		}
	}
	v.g.qpos, v.g.kpos = v.r.qPos(0), v.r.kPos(0)
	v.g.ls = a.Layout.resolve(s, v.g.dv, a.Paged.PageSize)
	v.g.lseB, v.g.lseH = s.HeadsQ*s.SeqQ, s.SeqQ
	v.io = callIO{in: in, out: a.Out, out16: a.Out16, lse: a.LSE}
	if err := v.checkSlices(m, a, data); err != nil {
		return err
	}
	if v.ragged && m.UsesDocs() {
		// Each row's data is checked now, before any row runs.
		c := calls.Get().(*call)
		c.docs, err = resetData(c.docs, m, s, v.g.dataLen, data)
		calls.Put(c)
		if err != nil {
			return err
		}
	}
	return nil
}

// checkSlices checks the slices of a validated call against its shape and
// strides: lengths, the page table, the data rows and aliasing.
func (v *validated) checkSlices(m mask.Mask, a *Args, data []int32) error {
	s, ls, in := a.Shape, v.g.ls, v.io.in
	dq, dv := s.HeadDim, v.g.dv
	lq, lk, lvv := in.lens()
	nq := [3]int{s.Batch, s.HeadsQ, s.SeqQ}
	qe, err := checkStrides("q", ls.Q, nq, dq, lq)
	if err != nil {
		return err
	}
	if a.Out == nil && a.Out16 == nil {
		return fmt.Errorf("%w: no output (Out, or Out16 for 16-bit inputs)", ErrShort)
	}
	lo, oname := len(a.Out), "out"
	if a.Out16 != nil {
		lo, oname = len(a.Out16), "out16"
	}
	oe, err := checkStrides(oname, ls.Out, nq, dv, lo)
	if err != nil {
		return err
	}
	if !ls.Out.disjoint(nq, dv) {
		return fmt.Errorf("%w: %s strides %+v make rows of the output overlap", ErrAlias, oname, ls.Out)
	}
	nl, _ := mul(s.Batch, s.HeadsQ, s.SeqQ)
	if a.LSE != nil && len(a.LSE) < nl {
		return fmt.Errorf("%w: lse has %d elements, the shape needs %d (or pass nil)", ErrShort, len(a.LSE), nl)
	}
	var ke, ve int
	pg := &a.Paged
	if paged := pg.PageSize != 0 || pg.Table != nil || pg.TableStride != 0; paged {
		if ke, ve, err = v.checkPages(s, pg, lk, lvv); err != nil {
			return err
		}
	} else {
		nk := [3]int{s.Batch, s.HeadsKV, s.SeqK}
		if ke, err = checkStrides("k", ls.K, nk, dq, lk); err != nil {
			return err
		}
		if ve, err = checkStrides("v", ls.V, nk, dv, lvv); err != nil {
			return err
		}
	}
	var d memSpan
	dname := "docs"
	if m.UsesDocs() {
		if err := checkDataLen(m, s, v.g.dataLen, data); err != nil {
			return err
		}
		d = span(data[:docsLen(s, v.g.dataLen, data)])
		if mask.UsesTree(m) {
			dname = "tree"
		}
		v.io.data = data
	}
	var o memSpan
	if a.Out16 != nil {
		o = span(a.Out16[:oe])
	} else {
		o = span(a.Out[:oe])
	}
	l := span(a.LSE[:min(len(a.LSE), nl)])
	sp := in.extents(qe, ke, ve)
	for _, x := range []struct {
		name string
		m    memSpan
	}{{"q", sp[0]}, {"k", sp[1]}, {"v", sp[2]}, {"lse", l}, {dname, d}, {"the page table", span(v.io.table)}} {
		if o.overlaps(x.m) {
			return fmt.Errorf("%w: %s and %s share memory", ErrAlias, oname, x.name)
		}
		if x.name != "lse" && l.overlaps(x.m) {
			return fmt.Errorf("%w: lse and %s share memory", ErrAlias, x.name)
		}
	}
	return nil
}

// extents returns the memory of the first nq, nk and nv elements of q, k
// and v.
func (in inputs) extents(nq, nk, nv int) [3]memSpan {
	if in.elem == F32 {
		return [3]memSpan{span(in.q[:nq]), span(in.k[:nk]), span(in.v[:nv])}
	}
	return [3]memSpan{span(in.q16[:nq]), span(in.k16[:nk]), span(in.v16[:nv])}
}

func (pg *Paged) stride(s Shape) int {
	if pg.TableStride > 0 {
		return pg.TableStride
	}
	return (s.SeqK + pg.PageSize - 1) / pg.PageSize
}

// checkPages validates a page table against the shape, the per-row key
// counts and the caches, with overflow-safe sizes: every entry a row
// reads (the pages of its keys) names a page that lies in k and v with
// their strides (Batch: the page stride). It sets v.io.table to the part
// of the table the call reads and returns the elements of k and v the
// pages span.
func (v *validated) checkPages(s Shape, pg *Paged, lk, lv int) (ke, ve int, err error) {
	if pg.PageSize < 1 || pg.PageSize > math.MaxInt32 || pg.TableStride < 0 {
		return 0, 0, fmt.Errorf("%w: page size %d, table stride %d", ErrPage, pg.PageSize, pg.TableStride)
	}
	need := (s.SeqK + pg.PageSize - 1) / pg.PageSize
	stride := pg.stride(s)
	if stride < need {
		return 0, 0, fmt.Errorf("%w: table stride %d is below the %d pages of SeqK = %d", ErrPage, stride, need, s.SeqK)
	}
	rows, ok := mul(s.Batch-1, stride)
	if !ok || rows > math.MaxInt-need || len(pg.Table) < rows+need {
		return 0, 0, fmt.Errorf("%w: %d table entries; %d batches of %d pages, %d apart, need %d", ErrPage, len(pg.Table), s.Batch, need, stride, rows+need)
	}
	// A longer table is refused rather than read in part: it is most
	// likely laid out with another stride (a fixed number of pages per
	// batch) than the one the call reads it with.
	if pg.TableStride == 0 && len(pg.Table) != rows+need {
		return 0, 0, fmt.Errorf("%w: %d table entries; %d batches of ceil(SeqK/PageSize) = %d pages back to back are exactly %d (a table with more entries per batch needs TableStride)", ErrPage, len(pg.Table), s.Batch, need, rows+need)
	}
	if full, ok := mul(s.Batch, stride); pg.TableStride > 0 && ok && len(pg.Table) > full {
		return 0, 0, fmt.Errorf("%w: %d table entries; %d batches of TableStride %d entries are at most %d", ErrPage, len(pg.Table), s.Batch, stride, full)
	}
	ls := v.g.ls
	pages := func(what string, x Strides, w, length int) (int, error) {
		inner, ok := Strides{0, x.Head, x.Pos}.extent([3]int{1, s.HeadsKV, pg.PageSize}, w)
		if !ok || x.Batch < 0 {
			return 0, fmt.Errorf("%w: %s strides %+v: a stride is negative or a page's extent overflows", ErrPage, what, x)
		}
		if length < inner {
			return 0, nil
		}
		if x.Batch == 0 {
			return 0, fmt.Errorf("%w: %s strides %+v: a paged cache needs a page stride (Batch) above 0", ErrPage, what, x)
		}
		return (length-inner)/x.Batch + 1, nil
	}
	pk, err := pages("k", ls.K, s.HeadDim, lk)
	if err != nil {
		return 0, 0, err
	}
	pv, err := pages("v", ls.V, v.g.dv, lv)
	if err != nil {
		return 0, 0, err
	}
	np := min(pk, pv)
	for b := 0; b < s.Batch; b++ {
		nb := (v.r.lenK(b) + pg.PageSize - 1) / pg.PageSize
		for i, p := range pg.Table[b*stride : b*stride+nb] {
			if p < 0 || int(p) >= np {
				return 0, 0, fmt.Errorf("%w: batch %d, entry %d: page %d, but k and v hold %d pages", ErrPage, b, i, p, np)
			}
		}
	}
	v.tableStride = stride
	v.io.table = pg.Table[:rows+need]
	if np == 0 {
		return 0, 0, nil
	}
	ke, _ = ls.K.extent([3]int{np, s.HeadsKV, pg.PageSize}, s.HeadDim)
	ve, _ = ls.V.extent([3]int{np, s.HeadsKV, pg.PageSize}, v.g.dv)
	return ke, ve, nil
}

// runRows runs a ragged call: each batch row as its own call of its
// queries, keys and positions (the call that row alone would be, so its
// results are that call's bits), all rows' items dispatched together to
// the workers. Rows past a row's SeqLensQ get zeros and an lse of -Inf.
func (v *validated) runRows(m mask.Mask, kern *kernels, a *Args) error {
	s, ls := a.Shape, v.g.ls
	rc := rowCalls.Get().(*rowCall)
	defer rowCalls.Put(rc)
	rc.calls, rc.starts = rc.calls[:0], rc.starts[:0]
	release := func() {
		for _, c := range rc.calls {
			c.release()
		}
		clear(rc.calls)
	}
	n := 0
	for b := 0; b < s.Batch; b++ {
		nq, nk := v.r.lenQ(b), v.r.lenK(b)
		if nq == 0 {
			continue
		}
		sb := s
		sb.Batch, sb.SeqQ, sb.SeqK = 1, nq, nk
		g := v.g
		g.qpos, g.kpos, g.lseB = v.r.qPos(b), v.r.kPos(b), 0
		io := v.io
		io.in = v.io.in.row(b, ls, a.Paged.PageSize != 0)
		if io.out != nil {
			io.out = io.out[b*ls.Out.Batch:]
		} else {
			io.out16 = io.out16[b*ls.Out.Batch:]
		}
		if io.lse != nil {
			io.lse = io.lse[b*v.g.lseB:]
		}
		if io.table != nil {
			io.table = io.table[b*v.tableStride:][:(nk+a.Paged.PageSize-1)/a.Paged.PageSize]
		}
		if io.data != nil && len(io.data) != v.g.dataLen {
			io.data = io.data[b*v.g.dataLen:][:v.g.dataLen]
		}
		c, err := v.prepare(m, kern, a, sb, &g, &io)
		if err != nil {
			release()
			return err
		}
		rc.calls = append(rc.calls, c)
		rc.starts = append(rc.starts, n)
		n += len(c.items)
	}
	rc.n = n
	rc.next.Store(0)
	dispatch(rc, &rc.wg, n)
	release()
	// the rows past each row's queries
	for b := 0; b < s.Batch; b++ {
		nq := v.r.lenQ(b)
		for h := 0; h < s.HeadsQ; h++ {
			for r := nq; r < s.SeqQ; r++ {
				at := b*ls.Out.Batch + h*ls.Out.Head + r*ls.Out.Pos
				if a.Out16 != nil {
					clear(a.Out16[at : at+v.g.dv])
				} else {
					clear(a.Out[at : at+v.g.dv])
				}
				if a.LSE != nil {
					a.LSE[b*v.g.lseB+h*v.g.lseH+r] = float32(math.Inf(-1))
				}
			}
		}
	}
	return nil
}

// A rowCall is the task of a ragged call: the items of one call per
// batch row, numbered across them (starts[i] is call i's first), taken by
// the workers in order.
type rowCall struct {
	calls  []*call
	starts []int
	n      int
	next   atomic.Int64
	wg     sync.WaitGroup
}

var rowCalls = sync.Pool{New: func() any { return new(rowCall) }}

func (rc *rowCall) work(w *buffers) { w.drain(rc) }

// claim takes the next item of the rows' calls.
func (rc *rowCall) claim() (*call, item, bool) {
	n := int(rc.next.Add(1) - 1)
	if n >= rc.n {
		return nil, item{}, false
	}
	i := sort.SearchInts(rc.starts, n+1) - 1
	c := rc.calls[i]
	return c, c.items[n-rc.starts[i]], true
}

func (rc *rowCall) done() { rc.wg.Done() }

// row returns the inputs of batch row b: q from its batch offset, k and v
// too unless the cache is paged (pages are found through the table).
func (in inputs) row(b int, ls Layout, paged bool) inputs {
	kb, vb := b*ls.K.Batch, b*ls.V.Batch
	if paged {
		kb, vb = 0, 0
	}
	if in.elem == F32 {
		in.q, in.k, in.v = in.q[b*ls.Q.Batch:], in.k[kb:], in.v[vb:]
	} else {
		in.q16, in.k16, in.v16 = in.q16[b*ls.Q.Batch:], in.k16[kb:], in.v16[vb:]
	}
	return in
}
