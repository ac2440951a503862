package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/attngen/attngen/runtime/mask"
)

// Backward computes the gradients of masked attention under the compiled
// mask m: dq, dk and dv of a loss whose gradient with respect to the
// output is dout, from the inputs q, k, v and the forward's out and lse
// (the natural-log log-sum-exp Forward writes). Layouts are those of
// Forward: q, out, dout and dq are [Batch, HeadsQ, SeqQ, HeadDim], k, v,
// dk and dv [Batch, HeadsKV, SeqK, HeadDim], lse [Batch, HeadsQ, SeqQ];
// docs as in Forward (ignored by masks without documents or a tree).
// BackwardArgs takes the rest of the forward's shapes: a head size of v
// of its own, strides, per-row lengths and positions (BackArgs).
//
// It is the FlashAttention-2 backward walked through the plan: delta =
// rowsum(dout * out); then, per key tile, over the query tiles that visit
// it (mask.Columns, the forward schedule transposed), P = exp(S - lse)
// recomputed, dV += P^T dout, dS = P * (dout V^T - delta), dK += dS^T Q
// * scale; and a second pass per query tile over the key tiles it visits
// for dQ += dS K * scale. Every output row is written by one thread, in a
// fixed order, so results do not depend on the number of threads. The
// query heads of a group sum into their key/value head's dK and dV. Empty
// tiles are never visited, and a masked pair never reads its key or value,
// nor its query's q or dout: non-finite data at masked positions cannot
// reach any gradient, and a NaN or an infinity in q or dout of a row
// reaches only its dq and dk and dv of the keys it keeps. A row
// whose lse is -Inf (it keeps no key) contributes nothing: its dq is 0, as
// are dk and dv of keys no row keeps.
//
// The AVX512 and AVX2 variants run the tiled backward of
// backward_tiled.go with their own kernels (one fused pass per kv head when
// there are enough of them for the threads), at every head size that is a
// multiple of 8 up to 256 (padded to 64 columns); PureGo runs the pure-Go
// per-pair code below (Go dot products and math.Exp per kept pair), which
// the tiled paths match within float32 rounding, not bit for bit (nor do
// the AVX-512 and AVX2 kernels match each other bit for bit).
//
// Errors wrap ErrShape, ErrShort (a slice shorter than the shape),
// ErrDocument (ErrTree for a tree mask, whose parent array docs holds),
// ErrAlias (dq, dk or dv overlapping each other or any
// input), ErrHeadParam (a mask with head parameters: use BackwardHeads),
// ErrVariant or ErrHeadDim. After warm-up a call allocates nothing.
func Backward(m mask.Mask, variant Variant, dq, dk, dv, dout, q, k, v, out, lse []float32, docs []int32, s Shape) error {
	return BackwardHeads(m, variant, dq, dk, dv, dout, q, k, v, out, lse, docs, [mask.MaxHeadParams][]int32{}, s)
}

// BackwardHeads is Backward for a mask with head parameters
// (mask.HeadParams): heads holds their values as Args.HeadParams does
// (entry k: HeadsQ values of parameter k, in range; the entries past the
// mask's parameters nil), the values the forward took. Each query head's
// rows are walked on its own schedule (mask.Columns with its values) and
// its gradient summed into its kv head's dk and dv with the other heads'
// of the group. Bad values are ErrHeadParam.
func BackwardHeads(m mask.Mask, variant Variant, dq, dk, dv, dout, q, k, v, out, lse []float32, docs []int32, heads [mask.MaxHeadParams][]int32, s Shape) error {
	return BackwardArgs(m, variant, BackArgs{DQ: dq, DK: dk, DV: dv, DOut: dout, Q: q, K: k, V: v, Out: out, LSE: lse, Docs: docs, HeadParams: heads, Shape: s})
}

// BackArgs are the arguments of BackwardArgs: Backward's slices, the head
// parameter values (as BackwardHeads takes them), the score stage's values
// the forward took (Args.SoftCap, Slopes, Sinks) and, for a mask with
// learned sinks, DSinks: when not nil, HeadsQ floats that receive the
// gradient of the loss with respect to each query head's sink logit,
// dsink[h] = -sum over the head's rows of p_sink * rowsum(dout * out),
// p_sink = exp(sink[h] - lse) (summed over the batch too, in order, in
// float64). The shape fields after Shape mean what Args' do; the
// gradients take the shapes and strides of their inputs.
type BackArgs struct {
	DQ, DK, DV              []float32
	DOut, Q, K, V, Out, LSE []float32
	Docs                    []int32
	HeadParams              [mask.MaxHeadParams][]int32
	SoftCap                 float32
	Slopes, Sinks           []float32
	DSinks                  []float32
	Shape                   Shape
	// HeadDimV is the head dimension of v, out, dout and dv (0: HeadDim),
	// as Args.HeadDimV: q, k, dq and dk have rows of HeadDim.
	HeadDimV int
	// Layout gives the strides of Q, K, V and Out (see Layout); DQ, DK and
	// DV take those of Q, K and V, DOut that of Out. The zero value is
	// contiguous [batch, heads, seq, head_dim] for each. The backward reads
	// and writes every tensor in place through its strides, so any layout
	// gives the bits of the contiguous call on the same values. The
	// gradients must not overlap each other or an input (ErrAlias), except
	// that dq, dk and dv may share one packed buffer as q, k and v do
	// (PackedQKV): their rows then share tokens, not elements.
	Layout Layout
	// SeqLensQ, SeqLensK, QPos and KPos are per-row lengths and positions,
	// as Args' (lse and out as the forward wrote them): batch row b runs
	// as the backward call of that row alone, so its gradients are that
	// call's bits. Rows of dq past a row's queries and rows of dk and dv
	// past its keys are written 0; nothing there (q, dout, out, lse, k, v)
	// is read, so stale data past the lengths never reaches a gradient.
	// With positions the mask and the score stage are evaluated at the
	// absolute positions, and document ids (or parents) cover them, as in
	// the forward.
	SeqLensQ, SeqLensK []int32
	QPos, KPos         []int32
}

// BackwardArgs is Backward with every argument in a (see BackArgs): the
// general entry point, which Backward and BackwardHeads call. With a score
// stage the gradients go through it (soft-capping's derivative 1 -
// tanh^2; ALiBi's bias has none; the sink's probability is in lse), and
// bad stage values are ErrScore. Everything is checked before anything is
// written.
func BackwardArgs(m mask.Mask, variant Variant, a BackArgs) error {
	if variant == Auto {
		variant = Best()
	}
	kern, ok := kernelsOf(variant)
	if !ok {
		return fmt.Errorf("%w: %s", ErrVariant, variant)
	}
	s := a.Shape
	if a.HeadDimV < 0 {
		return fmt.Errorf("%w: HeadDimV = %d", ErrShape, a.HeadDimV)
	}
	dv := orDim(a.HeadDimV, s.HeadDim)
	t, _ := TargetOf(variant)
	if err := t.Supports(s.HeadDim, dv); err != nil {
		return err
	}
	docs := a.Docs
	if !m.UsesDocs() {
		docs = nil // ignored by masks without run-time data
	}
	positions := a.QPos != nil || a.KPos != nil
	if err := s.checkDims(positions); err != nil {
		return err
	}
	if err := checkHeads(m, s, &a.HeadParams); err != nil {
		return err
	}
	r := rows{s: s, lensQ: a.SeqLensQ, lensK: a.SeqLensK, qpos: a.QPos, kpos: a.KPos}
	if err := r.check(); err != nil {
		return err
	}
	dataLen, err := r.backRows(a.QPos != nil, positions)
	if err != nil {
		return err
	}
	ragged := a.SeqLensQ != nil || a.SeqLensK != nil || len(a.QPos) > 1 || len(a.KPos) > 1
	ls := a.Layout.resolve(s, dv, 0)
	st := mask.ScoreOf(m)
	if a.DSinks != nil && !st.LearnedSinks {
		return fmt.Errorf("%w: DSinks given, but the mask has no learned sinks (DSinks must be nil)", ErrScore)
	}
	if a.DSinks != nil && len(a.DSinks) < s.HeadsQ {
		return fmt.Errorf("%w: DSinks has %d elements, the shape needs HeadsQ = %d", ErrShort, len(a.DSinks), s.HeadsQ)
	}
	var ds memSpan
	if m.UsesDocs() {
		if err := checkDataLen(m, s, dataLen, docs); err != nil {
			return err
		}
		ds = span(docs[:docsLen(s, dataLen, docs)])
	}
	if err := checkBackSlices(&a, ls, dv, ds); err != nil {
		return err
	}
	c := bcalls.Get().(*bcall)
	defer bcalls.Put(c)
	defer c.drop()
	if err := checkScore(&c.sc, st, s, a.SoftCap, a.Slopes, a.Sinks); err != nil {
		return err
	}
	if ragged && m.UsesDocs() {
		// Every row's data is checked now, before any row runs.
		if c.docs, err = resetData(c.docs, m, s, dataLen, docs); err != nil {
			return err
		}
	}
	c.kern, c.mask, c.dvd, c.ls = kern, m, dv, ls
	c.lseB, c.lseH = s.HeadsQ*s.SeqQ, s.SeqQ
	// A score stage that rewrites scores needs the variant's scoreBwd too;
	// without it the per-pair Go backward runs the stage. The products of
	// the tiled kernels run 64 columns at a time: head sizes that are not a
	// multiple of 64 run on rows padded with zeros (backward_tiled.go).
	c.asm = kern.tiledBackward(s.HeadDim, dv, c.sc.modifies)
	c.sums = grow(c.sums, s.HeadsQ)
	clear(c.sums)
	if !ragged {
		c.dq, c.dk, c.dv, c.dout, c.q, c.k, c.v, c.out, c.lse = a.DQ, a.DK, a.DV, a.DOut, a.Q, a.K, a.V, a.Out, a.LSE
		c.qpos, c.kpos = r.qPos(0), r.kPos(0)
		if err := c.setup(s, docs, &a.HeadParams, dataLen); err != nil {
			return err
		}
		c.zeroGrads(&a)
		c.exec()
		if a.DSinks != nil {
			c.sinkSums()
		}
	} else {
		c.zeroGrads(&a)
		for b := 0; b < s.Batch; b++ {
			lq, lk := r.lenQ(b), r.lenK(b)
			if lq == 0 || lk == 0 {
				continue // no pair: its gradients stay 0
			}
			sb := s
			sb.Batch, sb.SeqQ, sb.SeqK = 1, lq, lk
			qo, ko, vo, oo := b*ls.Q.Batch, b*ls.K.Batch, b*ls.V.Batch, b*ls.Out.Batch
			c.dq, c.q, c.dk, c.k, c.dv, c.v = a.DQ[qo:], a.Q[qo:], a.DK[ko:], a.K[ko:], a.DV[vo:], a.V[vo:]
			c.dout, c.out, c.lse = a.DOut[oo:], a.Out[oo:], a.LSE[b*s.HeadsQ*s.SeqQ:]
			c.lseB = 0
			c.qpos, c.kpos = r.qPos(b), r.kPos(b)
			rd := docs
			if rd != nil && len(rd) != dataLen {
				rd = rd[b*dataLen:][:dataLen]
			}
			if err := c.setup(sb, rd, &a.HeadParams, dataLen); err != nil {
				return err // checked above: cannot happen
			}
			c.exec()
			if a.DSinks != nil {
				c.sinkSums()
			}
		}
	}
	for h, sum := range c.sums[:min(len(a.DSinks), s.HeadsQ)] {
		a.DSinks[h] = float32(-sum)
	}
	return nil
}

// tiledBackward reports whether the variant's tiled backward runs head
// sizes qk and v (multiples of 8, padded to 64 columns inside the
// kernels' buffers), with a score stage that rewrites scores (modifies)
// or not.
func (kn *kernels) tiledBackward(qk, v int, modifies bool) bool {
	return kn.gemm != nil && kn.bwdProb != nil && (!modifies || kn.scoreBwd != nil) &&
		qk%8 == 0 && v%8 == 0 && padDim(qk) <= maxHeadDim() && padDim(v) <= maxHeadDim()
}

// backRows checks the per-row lengths and positions of a backward call
// as the forward does (Args.validate) and returns the positions a row of
// document ids covers: SeqK, or with positions the last one any row
// reaches.
func (r *rows) backRows(qpos, positions bool) (int, error) {
	s := r.s
	dataLen := s.SeqK
	if positions {
		dataLen = 0
	}
	ragged := r.lensQ != nil || r.lensK != nil || len(r.qpos) > 1 || len(r.kpos) > 1
	for b := 0; b < s.Batch; b++ {
		nq, nk, qp, kp := r.lenQ(b), r.lenK(b), r.qPos(b), r.kPos(b)
		switch {
		case nq < 0 || nq > s.SeqQ:
			return 0, fmt.Errorf("%w: batch row %d: SeqLensQ = %d, want 0 to SeqQ = %d", ErrShape, b, nq, s.SeqQ)
		case nk < 0 || nk > s.SeqK:
			return 0, fmt.Errorf("%w: batch row %d: SeqLensK = %d, want 0 to SeqK = %d", ErrShape, b, nk, s.SeqK)
		case kp < 0 || kp > math.MaxInt32-nk:
			return 0, fmt.Errorf("%w: batch row %d: KPos = %d: key positions must lie in 0 to %d", ErrShape, b, kp, math.MaxInt32)
		case qp < 0 && !qpos:
			return 0, fmt.Errorf("%w: batch row %d: %d queries but %d keys: bottom-right alignment puts queries before position 0 (give QPos)", ErrShape, b, nq, nk)
		case qp < 0 || qp > math.MaxInt32-nq:
			return 0, fmt.Errorf("%w: batch row %d: QPos = %d: query positions must lie in 0 to %d", ErrShape, b, qp, math.MaxInt32)
		}
		if positions {
			dataLen = max(dataLen, qp+nq, kp+nk, 1)
		}
		if !ragged {
			break // every row is row 0
		}
	}
	return dataLen, nil
}

// checkBackSlices checks the tensors of a backward call against their
// strides (every element read or written lies in its slice; sizes in
// overflow-safe arithmetic), lse's length, and the gradients for overlaps
// with each other (dq, dk and dv of one packed buffer share token rows,
// not elements: tokenDisjoint) and with every input; dsinks overlaps
// nothing. ds is the document ids' memory.
func checkBackSlices(a *BackArgs, ls Layout, dv int, ds memSpan) error {
	s := a.Shape
	d := s.HeadDim
	nq, nk := [3]int{s.Batch, s.HeadsQ, s.SeqQ}, [3]int{s.Batch, s.HeadsKV, s.SeqK}
	type tensor struct {
		name string
		x    []float32
		st   Strides
		n    [3]int
		w    int
		out  bool
	}
	ts := [...]tensor{{"dq", a.DQ, ls.Q, nq, d, true}, {"dk", a.DK, ls.K, nk, d, true}, {"dv", a.DV, ls.V, nk, dv, true},
		{"dout", a.DOut, ls.Out, nq, dv, false}, {"q", a.Q, ls.Q, nq, d, false}, {"k", a.K, ls.K, nk, d, false},
		{"v", a.V, ls.V, nk, dv, false}, {"out", a.Out, ls.Out, nq, dv, false}}
	var spans [len(ts)]memSpan
	for i, t := range ts {
		e, err := checkStrides(t.name, t.st, t.n, t.w, len(t.x))
		if err != nil {
			return err
		}
		if t.out && !t.st.disjoint(t.n, t.w) {
			return fmt.Errorf("%w: %s strides %+v make rows of the gradient overlap", ErrAlias, t.name, t.st)
		}
		spans[i] = span(t.x[:e])
	}
	nl, ok := mul(s.Batch, s.HeadsQ, s.SeqQ)
	if !ok {
		return fmt.Errorf("%w: %+v: the tensor sizes overflow int", ErrShape, s)
	}
	if len(a.LSE) < nl {
		return fmt.Errorf("%w: lse has %d elements, the shape needs %d", ErrShort, len(a.LSE), nl)
	}
	dsinks := span(a.DSinks[:min(len(a.DSinks), s.HeadsQ)])
	others := [...]memSpan{span(a.LSE[:nl]), ds, dsinks, span(a.Sinks), span(a.Slopes)}
	for i, t := range ts {
		if !t.out {
			continue
		}
		for j, u := range ts {
			if i == j || !spans[i].overlaps(spans[j]) {
				continue
			}
			// Gradients in one packed buffer share token rows, not elements.
			if u.out && spans[i].lo <= spans[j].lo {
				delta := int(spans[j].lo-spans[i].lo) / 4
				if t.w == u.w && tokenDisjoint(t.st, u.st, t.n[1], u.n[1], max(s.SeqQ, s.SeqK), d, delta) {
					continue
				}
			} else if u.out {
				continue // the pair is checked the other way round
			}
			return fmt.Errorf("%w: %s and %s share memory", ErrAlias, t.name, u.name)
		}
		for _, o := range others {
			if spans[i].overlaps(o) {
				return fmt.Errorf("%w: %s shares memory with lse, the document ids, dsinks or the score values", ErrAlias, t.name)
			}
		}
	}
	for j, o := range spans {
		if dsinks.overlaps(o) {
			return fmt.Errorf("%w: dsinks and %s share memory", ErrAlias, ts[j].name)
		}
	}
	for j, o := range others {
		if j != 2 && dsinks.overlaps(o) {
			return fmt.Errorf("%w: dsinks shares memory with lse, the document ids or the score values", ErrAlias)
		}
	}
	return nil
}

// zeroGrads writes 0 to every row of dq, dk and dv (through their
// strides): the backward adds into them, and rows no pair reaches (a
// ragged call's rows past its lengths among them) stay 0.
func (c *bcall) zeroGrads(a *BackArgs) {
	s, ls := a.Shape, c.ls
	nq, nk := [3]int{s.Batch, s.HeadsQ, s.SeqQ}, [3]int{s.Batch, s.HeadsKV, s.SeqK}
	zeroRows(a.DQ, nq, s.HeadDim, ls.Q)
	zeroRows(a.DK, nk, s.HeadDim, ls.K)
	zeroRows(a.DV, nk, c.dvd, ls.V)
}

// zeroRows writes 0 to the n = (batches, heads, positions) rows of w
// elements of a tensor with strides x.
func zeroRows(dst []float32, n [3]int, w int, x Strides) {
	for b := 0; b < n[0]; b++ {
		for h := 0; h < n[1]; h++ {
			for p := 0; p < n[2]; p++ {
				clear(dst[b*x.Batch+h*x.Head+p*x.Pos:][:w])
			}
		}
	}
}

// sinkSums adds to c.sums[h] the sum of p_sink*delta over the rows of
// query head h (batch by batch, row by row, in float64): the sink's
// softmax term has no value, so its probability's gradient is
// -p_sink*delta. A ragged call adds its rows' calls in batch order, so
// the sums are those of one call over the rows.
func (c *bcall) sinkSums() {
	s := c.s
	for h := range c.sums {
		sk := c.sc.sinksN[h]
		sum := c.sums[h]
		for b := 0; b < s.Batch; b++ {
			for row := 0; row < s.SeqQ; row++ {
				li := c.lAt(b, h, row)
				l := float64(c.lse[li])
				if math.IsInf(l, -1) || math.IsInf(sk, -1) {
					continue
				}
				sum += math.Exp(sk-l) * float64(c.dlt[li])
			}
		}
		c.sums[h] = sum
	}
}

// bcall is the state of one Backward call (one batch row's of a ragged
// call); pooled like call. The tensors are read and written in place
// through ls; rows of lse are lseB and lseH apart (a ragged call's row
// call has lseB 0 and lseH the whole call's SeqQ).
type bcall struct {
	mask                                mask.Mask
	s                                   Shape
	dvd                                 int // the head dimension of v, out, dout and dv
	ls                                  Layout
	lseB, lseH                          int
	qpos, kpos                          int // absolute positions of the first query and key
	scale                               float32
	dq, dk, dv, dout, q, k, v, out, lse []float32
	dlt                                 []float32 // delta of each row, indexed like lse
	sums                                []float64 // the dsink sums of each query head
	sc                                  scoreCall // the score stage
	docs                                []mask.Docs
	nparams                             int         // head parameters (data.go): values head-major in hvals,
	hvals                               []int32     // one view per (document row, query head) in heads,
	heads                               []mask.Docs // one schedule each in sched
	segs                                []segment
	sched                               []bsched // per (schedule row, segment): schedRow
	items                               []bitem  // pass 1: key tiles; pass 2: query tiles
	items2                              []bitem
	items3                              []bitem // fused: one per (batch, kv head, segment)
	pass                                int
	asm                                 bool     // the tiled kernels (backward_tiled.go): kern has gemm and bwdProb
	kern                                *kernels // the variant's
	qbad                                []uint64 // tiled: bit i%64 of word i/64 set when q or dout of the row of lse index i holds a NaN or an infinity
	anyBad                              bool     // some bit of qbad is set
	next                                atomic.Int64
	wg                                  sync.WaitGroup
}

// bsched is the schedule of one segment of one schedule row: the forward
// visit list of each query tile (mask.VisitFrom at the segment's
// positions), rows[at[qt]:at[qt+1]], and its transpose, the query tiles
// that visit each key tile (mask.Columns).
type bsched struct {
	cols mask.Columns
	rows []mask.Tile
	at   []int32
}

func (x *bsched) build(m mask.Mask, g segment, d *mask.Docs) {
	x.rows, x.at = x.rows[:0], x.at[:0]
	for r0 := 0; r0 < g.nq; r0 += TQ {
		x.at = append(x.at, int32(len(x.rows)))
		x.rows = mask.VisitFrom(m, x.rows, r0+g.qx0, min(r0+TQ, g.nq)-1+g.qx0, g.kx0, g.nk, TK, d)
	}
	x.at = append(x.at, int32(len(x.rows)))
	x.cols.Transpose(x.rows, x.at, g.tiles)
}

// Of returns the query tiles that visit key tile kt; Row the key tiles
// query tile qt visits.
func (x *bsched) Of(kt int) []mask.ColTile { return x.cols.Of(kt) }
func (x *bsched) Row(qt int) []mask.Tile   { return x.rows[x.at[qt]:x.at[qt+1]] }

// A bitem is a key tile (pass 1: kt, of kv head h) or a query tile (pass
// 2: qt, of query head h) of one segment of one batch.
type bitem struct{ b, h, seg, t int32 }

var bcalls = sync.Pool{New: func() any { return new(bcall) }}

func (c *bcall) drop() {
	c.mask = nil
	c.dq, c.dk, c.dv, c.dout, c.q, c.k, c.v, c.out, c.lse = nil, nil, nil, nil, nil, nil, nil, nil, nil
}

// setup readies the call of shape s at c.qpos, c.kpos: its data rows
// (dataLen positions a row), head values, segments, schedules and items.
func (c *bcall) setup(s Shape, docs []int32, hp *[mask.MaxHeadParams][]int32, dataLen int) error {
	m := c.mask
	var err error
	if c.docs, err = resetData(c.docs, m, s, dataLen, docs); err != nil {
		return err
	}
	c.nparams = len(mask.HeadParams(m))
	c.hvals = headValues(c.hvals, hp, c.nparams, s.HeadsQ)
	c.heads = setHeads(c.heads, c.docs, c.hvals, c.nparams, s.HeadsQ)
	c.s = s
	c.scale = s.Scale
	if c.scale == 0 {
		c.scale = float32(1 / math.Sqrt(float64(s.HeadDim)))
	}
	c.segs = segments(c.segs, s.SeqQ, s.SeqK, m.Stride(), c.qpos, c.kpos)
	rows := max(len(c.docs), 1)
	if c.nparams > 0 {
		rows *= s.HeadsQ
	}
	n := rows * len(c.segs)
	for len(c.sched) < n {
		c.sched = append(c.sched, bsched{})
	}
	for sr := 0; sr < rows; sr++ {
		for gi, g := range c.segs {
			c.sched[sr*len(c.segs)+gi].build(m, g, c.docsRow(sr))
		}
	}
	c.items, c.items2, c.items3 = c.items[:0], c.items2[:0], c.items3[:0]
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsKV; h++ {
			for gi, g := range c.segs {
				n := len(c.items)
				for kt := 0; kt < g.tiles; kt++ {
					if c.keyTileUsed(b, h, gi, kt) {
						c.items = append(c.items, bitem{int32(b), int32(h), int32(gi), int32(kt)})
					}
				}
				if len(c.items) > n {
					c.items3 = append(c.items3, bitem{int32(b), int32(h), int32(gi), 0})
				}
			}
		}
		for h := 0; h < s.HeadsQ; h++ {
			cs := c.schedOf(b, h)
			for gi, g := range c.segs {
				for qt := 0; qt*TQ < g.nq; qt++ {
					if len(cs[gi].Row(qt)) > 0 {
						c.items2 = append(c.items2, bitem{int32(b), int32(h), int32(gi), int32(qt)})
					}
				}
			}
		}
	}
	c.dlt = grow(c.dlt, c.lseLen())
	return nil
}

// lseLen is one past the largest lse index of the call.
func (c *bcall) lseLen() int {
	s := c.s
	return (s.Batch-1)*c.lseB + (s.HeadsQ-1)*c.lseH + s.SeqQ
}

// exec runs the call: deltas, then the passes.
func (c *bcall) exec() {
	c.deltas()
	if c.asm {
		c.markNonFinite()
	}
	if c.asm && len(c.items3) >= runtime.GOMAXPROCS(0) {
		c.run(3) // enough kv heads for every thread: one fused pass
	} else {
		c.run(1)
		c.run(2)
	}
}

// docsRow returns the run-time data of schedule row sr (schedRow): a
// document row's, or with head parameters a (document row, query head)
// view.
func (c *bcall) docsRow(sr int) *mask.Docs {
	switch {
	case len(c.heads) > 0:
		return &c.heads[sr]
	case len(c.docs) > 0:
		return &c.docs[sr]
	}
	return nil
}

// schedRow is the schedule row of query head h of batch b: its document
// row (b with per-batch data, else 0), or with head parameters that row's
// view of head h.
func (c *bcall) schedRow(b, h int) int {
	dr := 0
	if len(c.docs) > 1 {
		dr = b
	}
	if c.nparams > 0 {
		return dr*c.s.HeadsQ + h
	}
	return dr
}

// schedOf returns the schedules (one per segment) of query head h of
// batch b; the heads share them without head parameters.
func (c *bcall) schedOf(b, h int) []bsched {
	return c.sched[c.schedRow(b, h)*len(c.segs):][:len(c.segs)]
}

func (c *bcall) docsOf(b, h int) *mask.Docs { return c.docsRow(c.schedRow(b, h)) }

// headStep is how many query heads share a schedule walk in pass 1: the
// group of a kv head without head parameters (one schedule for all), 1
// with them (each head its own).
func (c *bcall) headStep() int {
	if c.nparams > 0 {
		return 1
	}
	return c.s.HeadsQ / c.s.HeadsKV
}

// keyTileUsed reports whether some query tile of some query head of kv
// head kvh visits key tile kt of segment gi of batch b.
func (c *bcall) keyTileUsed(b, kvh, gi, kt int) bool {
	group := c.s.HeadsQ / c.s.HeadsKV
	for h := kvh * group; h < (kvh+1)*group; h += c.headStep() {
		if len(c.schedOf(b, h)[gi].Of(kt)) > 0 {
			return true
		}
	}
	return false
}

// deltas computes delta = rowsum(dout * out) of every row that keeps a
// key (lse > -Inf).
func (c *bcall) deltas() {
	s, DV := c.s, c.dvd
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsQ; h++ {
			for row := 0; row < s.SeqQ; row++ {
				li := c.lAt(b, h, row)
				if math.IsInf(float64(c.lse[li]), -1) {
					continue
				}
				at := c.oAt(b, h, row)
				o := c.out[at:][:DV]
				if len(c.sc.sinks) > 0 && allZero(o) {
					// With a learned sink a row that keeps no key has a
					// finite lse and out exactly 0: its delta, a sum over
					// kept keys, is 0 (and a NaN in its dout must not
					// reach dsink).
					c.dlt[li] = 0
					continue
				}
				c.dlt[li] = dot(c.dout[at:][:DV], o)
			}
		}
	}
}

// run runs one pass on the calling goroutine and the helpers.
func (c *bcall) run(pass int) {
	c.pass = pass
	c.next.Store(0)
	n := len(c.passItems())
	dispatch(c, &c.wg, n)
}

func (c *bcall) done() { c.wg.Done() }

// passItems returns the items of the current pass.
func (c *bcall) passItems() []bitem {
	switch c.pass {
	case 2:
		return c.items2
	case 3:
		return c.items3
	}
	return c.items
}

func (c *bcall) work(w *buffers) {
	items := c.passItems()
	for {
		n := c.next.Add(1) - 1
		if n >= int64(len(items)) {
			return
		}
		switch {
		case c.pass == 3:
			c.columnAsm(w, items[n])
		case c.pass == 1 && c.asm:
			c.keyTileAsm(w, items[n], false)
		case c.pass == 1:
			c.keyTile(w, items[n])
		case c.asm:
			c.queryTileAsm(w, items[n])
		default:
			c.queryTile(w, items[n])
		}
	}
}

// qRow returns the query row (0-based among the call's queries) of query
// x of segment g, and kIdx the key index of key x.
func (c *bcall) qRow(g segment, x int) int { return g.off + g.stride*(g.qx0+x) - c.qpos }
func (c *bcall) kIdx(g segment, x int) int { return g.keyAbs(x) - c.kpos }

// qAbs is the absolute position of query x of segment g.
func qAbs(g segment, x int) int { return g.off + g.stride*(g.qx0+x) }

// qAt, oAt, kAt, vAt and lAt are the offsets of a row in q and dq, out
// and dout, k and dk, v and dv, and lse.
func (c *bcall) qAt(b, h, row int) int { return b*c.ls.Q.Batch + h*c.ls.Q.Head + row*c.ls.Q.Pos }
func (c *bcall) oAt(b, h, row int) int { return b*c.ls.Out.Batch + h*c.ls.Out.Head + row*c.ls.Out.Pos }
func (c *bcall) kAt(b, h, j int) int   { return b*c.ls.K.Batch + h*c.ls.K.Head + j*c.ls.K.Pos }
func (c *bcall) vAt(b, h, j int) int   { return b*c.ls.V.Batch + h*c.ls.V.Head + j*c.ls.V.Pos }
func (c *bcall) lAt(b, h, row int) int { return b*c.lseB + h*c.lseH + row }

// words fills w.mask with the keep words of query tile qt against key tile
// kt of segment g (rows past the segment's queries get 0) and reports
// whether the tile keeps a pair.
func (c *bcall) words(w *buffers, b, h int, g segment, qt, kt int, class mask.Class) bool {
	words := w.mask[:TQ]
	q0 := qt*TQ + g.qx0
	q1 := min(qt*TQ+TQ, g.nq) - 1 + g.qx0
	if class == mask.Full {
		tail := mask.TailBits(g.nk - kt*TK)
		for r := range words {
			words[r] = 0
			if q0+r <= q1 {
				words[r] = tail
			}
		}
		return true
	}
	return mask.RefineFrom(c.mask, words, q0, q1, g.kx0, kt, g.nk, TK, c.docsOf(b, h)) != mask.Empty
}

// prob returns P = exp(s - lse) and dS = P * (dout.v - delta) of one kept
// pair, s its score after the score stage (query head h at absolute
// position i, key at j), dS times the stage's derivative.
func (c *bcall) prob(qi, kj, di, vj []float32, lse, delta float32, h, i, j int) (p, ds float32) {
	sc, f := c.sc.natural(float64(dot(qi, kj)*c.scale), h, i, j)
	p = float32(math.Exp(sc - float64(lse)))
	return p, p * (dot(di, vj) - delta) * float32(f)
}

// keyTile is pass 1 for one key tile of one kv head: dK and dV of its keys,
// over the query heads of the group and the query tiles that visit it
// (query tile by query tile, each over the group's heads; with head
// parameters head by head, each over its own query tiles).
func (c *bcall) keyTile(w *buffers, it bitem) {
	s, D, DV := c.s, c.s.HeadDim, c.dvd
	b, kvh, g, kt := int(it.b), int(it.h), c.segs[it.seg], int(it.t)
	group := s.HeadsQ / s.HeadsKV
	k0 := kt * TK
	nk := min(TK, g.nk-k0)
	step := c.headStep()
	for h0 := kvh * group; h0 < (kvh+1)*group; h0 += step {
		for _, ct := range c.schedOf(b, h0)[it.seg].Of(kt) {
			if !c.words(w, b, h0, g, ct.Q, kt, ct.Class) {
				continue
			}
			for h := h0; h < h0+step; h++ {
				for r, word := range w.mask[:TQ] {
					if word == 0 {
						continue
					}
					x := ct.Q*TQ + r
					row := c.qRow(g, x)
					li := c.lAt(b, h, row)
					l := c.lse[li]
					if math.IsInf(float64(l), -1) {
						continue
					}
					qi, di := c.q[c.qAt(b, h, row):][:D], c.dout[c.oAt(b, h, row):][:DV]
					delta := c.dlt[li]
					ip := qAbs(g, x)
					for j := 0; j < nk; j++ {
						if word&(1<<uint(j)) == 0 {
							continue
						}
						ki := c.kIdx(g, k0+j)
						ko, vo := c.kAt(b, kvh, ki), c.vAt(b, kvh, ki)
						p, ds := c.prob(qi, c.k[ko:][:D], di, c.v[vo:][:DV], l, delta, h, ip, g.keyAbs(k0+j))
						axpy(p, di, c.dv[vo:][:DV])
						axpy(ds*c.scale, qi, c.dk[ko:][:D])
					}
				}
			}
		}
	}
}

// queryTile is pass 2 for one query tile of one query head: dQ of its rows
// over the key tiles it visits.
func (c *bcall) queryTile(w *buffers, it bitem) {
	s, D, DV := c.s, c.s.HeadDim, c.dvd
	b, h, g, qt := int(it.b), int(it.h), c.segs[it.seg], int(it.t)
	kvh := h / (s.HeadsQ / s.HeadsKV)
	for _, t := range c.schedOf(b, h)[it.seg].Row(qt) {
		if !c.words(w, b, h, g, qt, t.K, t.Class) {
			continue
		}
		k0 := t.K * TK
		nk := min(TK, g.nk-k0)
		for r, word := range w.mask[:TQ] {
			if word == 0 {
				continue
			}
			x := qt*TQ + r
			row := c.qRow(g, x)
			li := c.lAt(b, h, row)
			l := c.lse[li]
			if math.IsInf(float64(l), -1) {
				continue
			}
			qo := c.qAt(b, h, row)
			qi, di, dqi := c.q[qo:][:D], c.dout[c.oAt(b, h, row):][:DV], c.dq[qo:][:D]
			delta := c.dlt[li]
			ip := qAbs(g, x)
			for j := 0; j < nk; j++ {
				if word&(1<<uint(j)) == 0 {
					continue
				}
				ki := c.kIdx(g, k0+j)
				kj := c.k[c.kAt(b, kvh, ki):][:D]
				_, ds := c.prob(qi, kj, di, c.v[c.vAt(b, kvh, ki):][:DV], l, delta, h, ip, g.keyAbs(k0+j))
				axpy(ds*c.scale, kj, dqi)
			}
		}
	}
}

// dot is the float32 dot product of a and b (len(b) >= len(a)), in four
// partial sums.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy adds a*x to y (len(y) >= len(x)).
func axpy(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, e := range x {
		y[i] += a * e
	}
}

// allZero reports whether every element of x is +0 or -0.
func allZero(x []float32) bool {
	for _, e := range x {
		if e != 0 {
			return false
		}
	}
	return true
}
