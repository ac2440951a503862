package verify

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/attngen/attngen/spec"
)

// Shape describes one attention call. Tensors are laid out
// [batch, heads, seq, head_dim], row-major. Query head h reads key/value head
// h / (HeadsQ/HeadsKV) (grouped-query attention). Query row r sits at
// absolute position r + SeqK - SeqQ (bottom-right aligned).
type Shape struct {
	Batch, HeadsQ, HeadsKV int
	SeqQ, SeqK, HeadDim    int
	// HeadDimV is the head dimension of v and the output (0: HeadDim;
	// Reference, ReferenceGrad, GradMagnitude, NaiveGradFP32 and
	// CheckGrad take it, the other references and checks do not).
	HeadDimV int
	// Ragged rows and positions (as HeadDimV: Reference and the gradient
	// reference and CheckGrad), each nil or
	// one entry per batch row (QPos, KPos: or one for all): batch row b
	// has SeqLensQ[b] queries and SeqLensK[b] keys (its other rows get
	// output 0 and lse -Inf), its first query at absolute position QPos[b]
	// and its first key at KPos[b] (defaults: KPos 0, QPos = KPos + keys -
	// queries). The mask is evaluated at those positions; document ids
	// index absolute positions.
	SeqLensQ, SeqLensK []int32
	QPos, KPos         []int32
	// Scale multiplies the scores; 0 means 1/sqrt(HeadDim).
	Scale float64
	// HeadParams are the values of the mask's head parameters, head-major
	// ([HeadsQ][n] for n parameters; heads.go): query head h computes the
	// mask bound to HeadParams[h*n : h*n+n]. nil for masks without them;
	// the Check functions draw random values (WithHeadParams) when nil.
	HeadParams []int32
	// Score is the call's score stage (score.go); nil: none.
	Score *Score
}

// Validate reports a shape no kernel can run.
func (s Shape) Validate() error {
	switch {
	case s.Batch < 1 || s.HeadsQ < 1 || s.HeadsKV < 1 || s.SeqQ < 1 || s.SeqK < 1 || s.HeadDim < 1:
		return fmt.Errorf("shape %+v: every dimension must be at least 1", s)
	case s.HeadsQ%s.HeadsKV != 0:
		return fmt.Errorf("shape: HeadsQ = %d is not a multiple of HeadsKV = %d", s.HeadsQ, s.HeadsKV)
	case s.SeqQ > s.SeqK && s.QPos == nil:
		return fmt.Errorf("shape: SeqQ = %d exceeds SeqK = %d (queries are the last SeqQ positions of the keys)", s.SeqQ, s.SeqK)
	case s.HeadDimV < 0:
		return fmt.Errorf("shape: HeadDimV = %d", s.HeadDimV)
	case math.IsNaN(s.Scale) || math.IsInf(s.Scale, 0):
		return fmt.Errorf("shape: scale %v is not finite", s.Scale)
	}
	return nil
}

// DV is the head dimension of v and the output.
func (s Shape) DV() int {
	if s.HeadDimV == 0 {
		return s.HeadDim
	}
	return s.HeadDimV
}

// Row returns batch row b's queries, keys and the positions of its first
// query and key, with the defaults filled in (SeqQ and SeqK; KPos 0, QPos
// = KPos + keys - queries).
func (s Shape) Row(b int) (nq, nk, qpos, kpos int) {
	at := func(x []int32, def int) int {
		switch len(x) {
		case 0:
			return def
		case 1:
			return int(x[0])
		}
		return int(x[b])
	}
	nq, nk = at(s.SeqLensQ, s.SeqQ), at(s.SeqLensK, s.SeqK)
	kpos = at(s.KPos, 0)
	qpos = at(s.QPos, kpos+nk-nq)
	return
}

// pairAt returns the positions of lse row x ([batch, heads_q, seq_q]) and
// key index j of its batch row, and whether both lie within the row's
// lengths (a pair past them is kept by no mask).
func (s Shape) pairAt(x, j int) (i, kj int, ok bool) {
	nq, nk, qpos, kpos := s.Row(x / s.SeqQ / s.HeadsQ)
	if r := x % s.SeqQ; r < nq && j < nk {
		return qpos + r, kpos + j, true
	}
	return 0, 0, false
}

// SizesV returns the number of elements of v and of out (those of k and q
// unless HeadDimV differs).
func (s Shape) SizesV() (v, out int) {
	nq, nkv, _ := s.Sizes()
	return nkv / s.HeadDim * s.DV(), nq / s.HeadDim * s.DV()
}

// Sizes returns the number of elements of q (and out), of k (and v), and of lse.
func (s Shape) Sizes() (q, kv, lse int) {
	return s.Batch * s.HeadsQ * s.SeqQ * s.HeadDim, s.Batch * s.HeadsKV * s.SeqK * s.HeadDim, s.Batch * s.HeadsQ * s.SeqQ
}

// EffScale is the scale the call uses.
func (s Shape) EffScale() float64 {
	if s.Scale == 0 {
		return 1 / math.Sqrt(float64(s.HeadDim))
	}
	return s.Scale
}

// checkInputs validates the shape, the slice lengths and the document ids.
func checkInputs(s Shape, q, k, v int, docs *spec.Docs) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if err := s.Score.check(s); err != nil {
		return err
	}
	nq, nkv, _ := s.Sizes()
	nv := nkv / s.HeadDim * s.DV()
	switch {
	case q < nq:
		return fmt.Errorf("q has %d elements, shape needs %d", q, nq)
	case k < nkv:
		return fmt.Errorf("k has %d elements, shape needs %d", k, nkv)
	case v < nv:
		return fmt.Errorf("v has %d elements, shape needs %d", v, nv)
	case docs != nil && s.QPos == nil && s.KPos == nil && docs.Len() < s.SeqK:
		return fmt.Errorf("run-time data (document ids or parent array) covers %d positions, shape needs SeqK = %d", docs.Len(), s.SeqK)
	}
	return s.checkRows(docs)
}

// checkRows checks the per-row lengths and positions: entry counts, the
// lengths within SeqQ and SeqK, positions at least 0, and the run-time
// data (docs, when not nil) covering every position a row reaches.
func (s Shape) checkRows(docs *spec.Docs) error {
	for _, x := range []struct {
		v   []int32
		one bool
	}{{s.SeqLensQ, false}, {s.SeqLensK, false}, {s.QPos, true}, {s.KPos, true}} {
		if x.v != nil && len(x.v) != s.Batch && !(x.one && len(x.v) == 1) {
			return fmt.Errorf("shape: a per-row slice has %d entries, want Batch = %d", len(x.v), s.Batch)
		}
	}
	for b := 0; b < s.Batch; b++ {
		if rq, rk, qp, kp := s.Row(b); rq < 0 || rq > s.SeqQ || rk < 0 || rk > s.SeqK || qp < 0 || kp < 0 {
			return fmt.Errorf("shape: batch row %d: %d queries at %d, %d keys at %d", b, rq, qp, rk, kp)
		} else if docs != nil && docs.Len() < max(qp+rq, kp+rk) {
			return fmt.Errorf("run-time data covers %d positions, batch row %d reaches %d", docs.Len(), b, max(qp+rq, kp+rk))
		}
	}
	return nil
}

// Reference computes masked attention in float64: for each batch, query head
// and query row, softmax over the kept keys of scale*q.k, times v. It returns
// the output ([batch, heads_q, seq_q, head_dim]) and the natural-log
// log-sum-exp of the scaled scores per row. A row with no kept key has output
// 0 and log-sum-exp -Inf. Non-finite inputs follow IEEE arithmetic through
// the kept pairs only: m is the maximum kept score (NaN if one is NaN), p_j
// = exp(s_j - m) (m taken as 0 when every kept score is -Inf), out = sum
// p_j v_j / sum p_j, lse = m + log sum p_j; a row whose p sum to 0 (every
// kept score -Inf) gets 0 and -Inf like a row that keeps nothing. Masked
// pairs never read their key or value. With a score stage (Shape.Score)
// each kept score goes through it and a sink logit joins the sum: a row
// that keeps nothing then gets output 0 and lse = the sink logit. The
// mask is evaluated row by row (docs may be nil);
// nothing of size SeqQ x SeqK is stored.
func Reference(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape) (out, lse []float64, err error) {
	return ReferenceRows(p, docs, q, k, v, s, nil)
}

// ReferenceRows is Reference on the listed rows of lse ([batch][heads_q]
// [seq_q] indices, as SampleRows returns them) only, spread over the
// machine's threads; the other rows of out and lse are left 0. nil rows
// means every row (one thread, as Reference).
func ReferenceRows(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, rows []int) (out, lse []float64, err error) {
	if err := checkInputs(s, len(q), len(k), len(v), docs); err != nil {
		return nil, nil, err
	}
	nq, _, nl := s.Sizes()
	if err := checkRows(rows, nl); err != nil {
		return nil, nil, err
	}
	if err := checkScore(p, s); err != nil {
		return nil, nil, err
	}
	hs, err := headsOf(p, s)
	if err != nil {
		return nil, nil, err
	}
	out, lse = make([]float64, nq/s.HeadDim*s.DV()), make([]float64, nl)
	forRows(s, rows, func() func(row int) {
		r := refRow{p: hs, docs: docs, q: q, k: k, v: v, s: s, out: out, lse: lse,
			scores: make([]float64, s.SeqK), kept: make([]int, 0, s.SeqK), acc: make([]float64, s.DV())}
		return r.run
	})
	return out, lse, nil
}

// refRow computes Reference's rows with its own scratch.
type refRow struct {
	p        heads
	docs     *spec.Docs
	q, k, v  []float32
	s        Shape
	out, lse []float64
	scores   []float64
	kept     []int
	acc      []float64
}

func (x *refRow) run(row int) {
	s, D, DV, scale := x.s, x.s.HeadDim, x.s.DV(), x.s.EffScale()
	group := s.HeadsQ / s.HeadsKV
	bh, r := row/s.SeqQ, row%s.SeqQ
	b, h := bh/s.HeadsQ, bh%s.HeadsQ
	nq, nk, qpos, kpos := s.Row(b)
	kvRow := (b*s.HeadsKV + h/group) * s.SeqK
	o := x.out[row*DV : row*DV+DV]
	if r >= nq {
		clear(o)
		x.lse[row] = math.Inf(-1)
		return
	}
	qr := x.q[row*D : row*D+D]
	i := qpos + r
	scores, kept, acc := x.scores, x.kept[:0], x.acc
	p := x.p.at(h)
	for j := 0; j < nk; j++ {
		if !p.AtDocs(i, kpos+j, x.docs) {
			continue
		}
		kj := x.k[(kvRow+j)*D:][:D]
		dot := 0.0
		for d := range qr {
			dot += float64(qr[d]) * float64(kj[d])
		}
		scores[j], _ = s.Score.apply(dot*scale, h, i, kpos+j)
		kept = append(kept, j)
	}
	x.kept = kept
	ms, sum, lse, ok := softmax(scores, kept, s.Score.sink(h))
	x.lse[row] = lse
	if !ok {
		clear(o)
		return
	}
	clear(acc)
	for _, j := range kept {
		w := math.Exp(scores[j] - ms)
		vj := x.v[(kvRow+j)*DV:][:DV]
		for d := range acc {
			acc[d] += w * float64(vj[d])
		}
	}
	for d := range o {
		o[d] = acc[d] / sum
	}
}

// checkRows reports a row list with an index outside [0, n) or repeated.
func checkRows(rows []int, n int) error {
	seen := make(map[int]bool, len(rows))
	for _, r := range rows {
		if r < 0 || r >= n || seen[r] {
			return fmt.Errorf("rows: %d is outside [0, %d) or repeated", r, n)
		}
		seen[r] = true
	}
	return nil
}

// forRows runs every row of a shape in order on one goroutine (rows nil),
// or the listed rows spread over GOMAXPROCS goroutines, each with the row
// function newRow makes for it (its own scratch).
func forRows(s Shape, rows []int, newRow func() func(row int)) {
	if rows == nil {
		run := newRow()
		for row := 0; row < s.Batch*s.HeadsQ*s.SeqQ; row++ {
			run(row)
		}
		return
	}
	workers := min(runtime.GOMAXPROCS(0), len(rows))
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := newRow()
			for {
				n := int(next.Add(1)) - 1
				if n >= len(rows) {
					return
				}
				run(rows[n])
			}
		}()
	}
	wg.Wait()
}
