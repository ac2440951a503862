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
// there are enough of them for the threads); PureGo runs the pure-Go
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
// p_sink = exp(sink[h] - lse) (summed over the batch too, in order).
type BackArgs struct {
	DQ, DK, DV              []float32
	DOut, Q, K, V, Out, LSE []float32
	Docs                    []int32
	HeadParams              [mask.MaxHeadParams][]int32
	SoftCap                 float32
	Slopes, Sinks           []float32
	DSinks                  []float32
	Shape                   Shape
	// Layout gives the strides of Q, K, V and Out (see Layout); DQ, DK and
	// DV take those of Q, K and V, DOut that of Out. The zero value is
	// contiguous [batch, heads, seq, head_dim] for each. A strided call
	// gathers its tensors into pooled contiguous buffers and scatters the
	// gradients back (the backward's products dwarf the copies), so it
	// gives the bits of the contiguous call.
	Layout Layout
}

// BackwardArgs is Backward with every argument in a (see BackArgs): the
// general entry point, which Backward and BackwardHeads call. With a score
// stage the gradients go through it (soft-capping's derivative 1 -
// tanh^2; ALiBi's bias has none; the sink's probability is in lse), and
// bad stage values are ErrScore.
func BackwardArgs(m mask.Mask, variant Variant, a BackArgs) error {
	if a.Layout != (Layout{}) {
		return backwardStrided(m, variant, &a)
	}
	dq, dk, dv, dout, q, k, v, out, lse, docs, heads, s := a.DQ, a.DK, a.DV, a.DOut, a.Q, a.K, a.V, a.Out, a.LSE, a.Docs, a.HeadParams, a.Shape
	if variant == Auto {
		variant = Best()
	}
	kern, ok := kernelsOf(variant)
	if !ok {
		return fmt.Errorf("%w: %s", ErrVariant, variant)
	}
	t, _ := TargetOf(variant)
	if err := t.Supports(s.HeadDim, s.HeadDim); err != nil {
		return err
	}
	if !m.UsesDocs() {
		docs = nil // ignored by masks without run-time data
	}
	z, err := s.check()
	if err != nil {
		return err
	}
	if err := checkHeads(m, s, &heads); err != nil {
		return err
	}
	for _, x := range []struct {
		name    string
		n, want int
	}{
		{"dq", len(dq), z.q}, {"dk", len(dk), z.kv}, {"dv", len(dv), z.kv}, {"dout", len(dout), z.q},
		{"q", len(q), z.q}, {"k", len(k), z.kv}, {"v", len(v), z.kv}, {"out", len(out), z.q}, {"lse", len(lse), z.lse},
	} {
		if x.n < x.want {
			return fmt.Errorf("%w: %s has %d elements, the shape needs %d", ErrShort, x.name, x.n, x.want)
		}
	}
	st := mask.ScoreOf(m)
	if a.DSinks != nil && !st.LearnedSinks {
		return fmt.Errorf("%w: DSinks given, but the mask has no learned sinks (DSinks must be nil)", ErrScore)
	}
	if a.DSinks != nil && len(a.DSinks) < s.HeadsQ {
		return fmt.Errorf("%w: DSinks has %d elements, the shape needs HeadsQ = %d", ErrShort, len(a.DSinks), s.HeadsQ)
	}
	var ds memSpan
	if m.UsesDocs() {
		if err := checkDataLen(m, s, s.SeqK, docs); err != nil {
			return err
		}
		ds = span(docs[:docsLen(s, s.SeqK, docs)])
	}
	type named struct {
		name string
		m    memSpan
	}
	ins := [...]named{{"dq", span(dq[:z.q])}, {"dk", span(dk[:z.kv])}, {"dv", span(dv[:z.kv])},
		{"dout", span(dout[:z.q])}, {"q", span(q[:z.q])}, {"k", span(k[:z.kv])}, {"v", span(v[:z.kv])},
		{"out", span(out[:z.q])}, {"lse", span(lse[:z.lse])}, {"docs", ds},
		{"dsinks", span(a.DSinks[:min(len(a.DSinks), s.HeadsQ)])}, {"sinks", span(a.Sinks)}, {"slopes", span(a.Slopes)}}
	for x, o := range ins {
		if x >= 3 && o.name != "dsinks" {
			continue
		}
		for y, p := range ins {
			if x != y && o.m.overlaps(p.m) {
				return fmt.Errorf("%w: %s and %s share memory", ErrAlias, o.name, p.name)
			}
		}
	}
	c := bcalls.Get().(*bcall)
	defer bcalls.Put(c)
	if err := checkScore(&c.sc, st, s, a.SoftCap, a.Slopes, a.Sinks); err != nil {
		return err
	}
	c.dq, c.dk, c.dv, c.dout, c.q, c.k, c.v, c.out, c.lse = dq[:z.q], dk[:z.kv], dv[:z.kv], dout[:z.q], q[:z.q], k[:z.kv], v[:z.kv], out[:z.q], lse[:z.lse]
	defer c.drop()
	if err := c.setup(m, s, docs, &heads); err != nil {
		return err
	}
	c.kern = kern
	// A score stage that rewrites scores needs the variant's scoreBwd too;
	// without it the per-pair Go backward runs the stage.
	// The tiled kernels' products run 64 columns at a time: head sizes
	// that are not a multiple of 64 take the per-pair path.
	c.asm = kern.gemm != nil && kern.bwdProb != nil && (!c.sc.modifies || kern.scoreBwd != nil) && s.HeadDim%64 == 0
	c.deltas()
	if c.asm {
		c.markNonFinite()
	}
	clear(c.dq)
	clear(c.dk)
	clear(c.dv)
	if c.asm && len(c.items3) >= runtime.GOMAXPROCS(0) {
		c.run(3) // enough kv heads for every thread: one fused pass
	} else {
		c.run(1)
		c.run(2)
	}
	if a.DSinks != nil {
		c.sinkGrads(a.DSinks[:s.HeadsQ])
	}
	return nil
}

// sinkGrads writes dsink[h] = -sum p_sink*delta over the rows of query
// head h (batch by batch, row by row, in float64): the sink's softmax
// term has no value, so its probability's gradient is -p_sink*delta.
func (c *bcall) sinkGrads(dsink []float32) {
	s := c.s
	for h := range dsink {
		sk := c.sc.sinksN[h]
		var sum float64
		for b := 0; b < s.Batch; b++ {
			r0 := (b*s.HeadsQ + h) * s.SeqQ
			for row := r0; row < r0+s.SeqQ; row++ {
				l := float64(c.lse[row])
				if math.IsInf(l, -1) || math.IsInf(sk, -1) {
					continue
				}
				sum += math.Exp(sk-l) * float64(c.dlt[row])
			}
		}
		dsink[h] = float32(-sum)
	}
}

// bcall is the state of one Backward call; pooled like call.
type bcall struct {
	mask                                     mask.Mask
	s                                        Shape
	scale                                    float32
	dq, dk, dv, dout, q, k, v, out, lse, dlt []float32
	sc                                       scoreCall // the score stage
	docs                                     []mask.Docs
	nparams                                  int         // head parameters (data.go): values head-major in hvals,
	hvals                                    []int32     // one view per (document row, query head) in heads,
	heads                                    []mask.Docs // one schedule each in cols
	segs                                     []segment
	msegs                                    []mask.Segment
	cols                                     []mask.Columns // per (schedule row, segment): schedRow
	items                                    []bitem        // pass 1: key tiles; pass 2: query tiles
	items2                                   []bitem
	items3                                   []bitem // fused: one per (batch, kv head, segment)
	pass                                     int
	asm                                      bool     // the tiled kernels (backward_tiled.go): kern has gemm and bwdProb
	kern                                     *kernels // the variant's
	qbad                                     []uint64 // tiled: bit row%64 of word row/64 set when q or dout of the row holds a NaN or an infinity
	anyBad                                   bool     // some bit of qbad is set
	next                                     atomic.Int64
	wg                                       sync.WaitGroup
}

// A bitem is a key tile (pass 1: kt, of kv head h) or a query tile (pass
// 2: qt, of query head h) of one segment of one batch.
type bitem struct{ b, h, seg, t int32 }

var bcalls = sync.Pool{New: func() any { return new(bcall) }}

func (c *bcall) drop() {
	c.mask = nil
	c.dq, c.dk, c.dv, c.dout, c.q, c.k, c.v, c.out, c.lse = nil, nil, nil, nil, nil, nil, nil, nil, nil
}

func (c *bcall) setup(m mask.Mask, s Shape, docs []int32, hp *[mask.MaxHeadParams][]int32) error {
	var err error
	if c.docs, err = resetData(c.docs, m, s, s.SeqK, docs); err != nil {
		return err
	}
	c.nparams = len(mask.HeadParams(m))
	c.hvals = headValues(c.hvals, hp, c.nparams, s.HeadsQ)
	c.heads = setHeads(c.heads, c.docs, c.hvals, c.nparams, s.HeadsQ)
	c.mask, c.s = m, s
	c.scale = s.Scale
	if c.scale == 0 {
		c.scale = float32(1 / math.Sqrt(float64(s.HeadDim)))
	}
	c.segs = segments(c.segs, s.SeqQ, s.SeqK, m.Stride(), s.SeqK-s.SeqQ, 0)
	rows := max(len(c.docs), 1)
	if c.nparams > 0 {
		rows *= s.HeadsQ
	}
	n := rows * len(c.segs)
	for len(c.cols) < n {
		c.cols = append(c.cols, mask.Columns{})
	}
	for sr := 0; sr < rows; sr++ {
		for gi, g := range c.segs {
			c.cols[sr*len(c.segs)+gi].Build(m, g.nq, g.nk, TQ, TK, c.docsRow(sr))
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
			cs := c.colsOf(b, h)
			for gi, g := range c.segs {
				for qt := 0; qt*TQ < g.nq; qt++ {
					if len(cs[gi].Row(qt)) > 0 {
						c.items2 = append(c.items2, bitem{int32(b), int32(h), int32(gi), int32(qt)})
					}
				}
			}
		}
	}
	c.dlt = grow(c.dlt, len(c.lse))
	return nil
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

// colsOf returns the schedules (one per segment) of query head h of batch
// b; the heads share them without head parameters.
func (c *bcall) colsOf(b, h int) []mask.Columns {
	return c.cols[c.schedRow(b, h)*len(c.segs):][:len(c.segs)]
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
		if len(c.colsOf(b, h)[gi].Of(kt)) > 0 {
			return true
		}
	}
	return false
}

// deltas computes delta = rowsum(dout * out) of every row that keeps a
// key (lse > -Inf).
func (c *bcall) deltas() {
	D := c.s.HeadDim
	for row, l := range c.lse {
		if math.IsInf(float64(l), -1) {
			continue
		}
		o := c.out[row*D:][:D]
		if len(c.sc.sinks) > 0 && allZero(o) {
			// With a learned sink a row that keeps no key has a finite
			// lse and out exactly 0: its delta, a sum over kept keys, is
			// 0 (and a NaN in its dout must not reach dsink).
			c.dlt[row] = 0
			continue
		}
		c.dlt[row] = dot(c.dout[row*D:][:D], o)
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

// qrow returns the row index ([batch, head, seq_q]) of segment position x
// of segment g, and kvrow the row ([batch, kv head, seq_k]) of key x.
func (c *bcall) qrow(b, h int, g segment, x int) int {
	s := c.s
	return (b*s.HeadsQ+h)*s.SeqQ + g.off + g.stride*x - (s.SeqK - s.SeqQ)
}

func (c *bcall) kvrow(b, h int, g segment, x int) int {
	return (b*c.s.HeadsKV+h)*c.s.SeqK + g.off + g.stride*x
}

// words fills w.mask with the keep words of query tile qt against key tile
// kt of segment g (rows past the segment's queries get 0) and reports
// whether the tile keeps a pair.
func (c *bcall) words(w *buffers, b, h int, g segment, qt, kt int, class mask.Class) bool {
	words := w.mask[:TQ]
	off := g.nk - g.nq
	q0 := qt*TQ + off
	q1 := min(qt*TQ+TQ, g.nq) - 1 + off
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
	return mask.Refine(c.mask, words, q0, q1, kt, g.nk, TK, c.docsOf(b, h)) != mask.Empty
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
	s, D := c.s, c.s.HeadDim
	b, kvh, g, kt := int(it.b), int(it.h), c.segs[it.seg], int(it.t)
	group := s.HeadsQ / s.HeadsKV
	k0 := kt * TK
	nk := min(TK, g.nk-k0)
	off := g.nk - g.nq
	step := c.headStep()
	for h0 := kvh * group; h0 < (kvh+1)*group; h0 += step {
		for _, ct := range c.colsOf(b, h0)[it.seg].Of(kt) {
			if !c.words(w, b, h0, g, ct.Q, kt, ct.Class) {
				continue
			}
			for h := h0; h < h0+step; h++ {
				for r, word := range w.mask[:TQ] {
					if word == 0 {
						continue
					}
					row := c.qrow(b, h, g, ct.Q*TQ+r+off)
					l := c.lse[row]
					if math.IsInf(float64(l), -1) {
						continue
					}
					qi, di := c.q[row*D:][:D], c.dout[row*D:][:D]
					delta := c.dlt[row]
					ip := g.off + g.stride*(ct.Q*TQ+r+off)
					for j := 0; j < nk; j++ {
						if word&(1<<uint(j)) == 0 {
							continue
						}
						kr := c.kvrow(b, kvh, g, k0+j) * D
						p, ds := c.prob(qi, c.k[kr:][:D], di, c.v[kr:][:D], l, delta, h, ip, g.off+g.stride*(k0+j))
						axpy(p, di, c.dv[kr:][:D])
						axpy(ds*c.scale, qi, c.dk[kr:][:D])
					}
				}
			}
		}
	}
}

// queryTile is pass 2 for one query tile of one query head: dQ of its rows
// over the key tiles it visits.
func (c *bcall) queryTile(w *buffers, it bitem) {
	s, D := c.s, c.s.HeadDim
	b, h, g, qt := int(it.b), int(it.h), c.segs[it.seg], int(it.t)
	kvh := h / (s.HeadsQ / s.HeadsKV)
	off := g.nk - g.nq
	for _, t := range c.colsOf(b, h)[it.seg].Row(qt) {
		if !c.words(w, b, h, g, qt, t.K, t.Class) {
			continue
		}
		k0 := t.K * TK
		nk := min(TK, g.nk-k0)
		for r, word := range w.mask[:TQ] {
			if word == 0 {
				continue
			}
			row := c.qrow(b, h, g, qt*TQ+r+off)
			l := c.lse[row]
			if math.IsInf(float64(l), -1) {
				continue
			}
			qi, di, dqi := c.q[row*D:][:D], c.dout[row*D:][:D], c.dq[row*D:][:D]
			delta := c.dlt[row]
			ip := g.off + g.stride*(qt*TQ+r+off)
			for j := 0; j < nk; j++ {
				if word&(1<<uint(j)) == 0 {
					continue
				}
				kr := c.kvrow(b, kvh, g, k0+j) * D
				kj := c.k[kr:][:D]
				_, ds := c.prob(qi, kj, di, c.v[kr:][:D], l, delta, h, ip, g.off+g.stride*(k0+j))
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
