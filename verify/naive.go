package verify

import (
	"math"

	"github.com/attngen/attngen/spec"
)

// NaiveFP32 is a straightforward float32 masked attention, the yardstick for
// kernel error (a kernel may be a small factor worse than it against the
// float64 reference) and the "naive" line of benchmarks: per row, a dense
// keep row of the mask, then scores over every key it keeps, max, exp, sum,
// weighted sum, all in float32, with the score stage (Shape.Score) on each
// kept score and the sink in the sum (softmax32). out and lse (lse may be nil) are written
// like Reference.
func NaiveFP32(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, out, lse []float32) error {
	return naiveRowsFP32(p, docs, q, k, v, s, nil, out, lse)
}

func naiveRowsFP32(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, rows []int, out, lse []float32) error {
	same := func(x float32) float32 { return x }
	return naive(p, docs, q, k, v, s, rows, out, lse, same, same)
}

// naive is the straightforward attention both yardsticks share; roundP
// rounds each probability before it multiplies v, roundOut each output.
// rows lists the lse rows to compute (nil: every row, in order, on one
// goroutine; see forRows); the others are left as they are.
func naive(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, rows []int, out, lse []float32, roundP, roundOut func(float32) float32) error {
	if err := checkInputs(s, len(q), len(k), len(v), docs); err != nil {
		return err
	}
	if err := checkRows(rows, s.Batch*s.HeadsQ*s.SeqQ); err != nil {
		return err
	}
	hs, err := headsOf(p, s)
	if err != nil {
		return err
	}
	forRows(s, rows, func() func(row int) {
		x := naiveRow{p: hs, docs: docs, q: q, k: k, v: v, s: s, out: out, lse: lse, roundP: roundP, roundOut: roundOut,
			scores: make([]float32, s.SeqK), acc: make([]float32, s.DV()), keep: make([]bool, s.SeqK), kept: make([]int, 0, s.SeqK)}
		return x.run
	})
	return nil
}

// naiveRow computes naive's rows with its own scratch.
type naiveRow struct {
	p                heads
	docs             *spec.Docs
	q, k, v          []float32
	s                Shape
	out, lse         []float32
	roundP, roundOut func(float32) float32
	scores, acc      []float32
	keep             []bool
	kept             []int
	progs            []spec.Prog
}

func (x *naiveRow) run(row int) {
	s, D, DV, scale := x.s, x.s.HeadDim, x.s.DV(), float32(x.s.EffScale())
	group := s.HeadsQ / s.HeadsKV
	bh, r := row/s.SeqQ, row%s.SeqQ
	b, h := bh/s.HeadsQ, bh%s.HeadsQ
	nq, nk, qpos, kpos := s.Row(b)
	kvRow := (b*s.HeadsKV + h/group) * s.SeqK
	kvBase := kvRow * D
	o := x.out[row*DV : row*DV+DV]
	if r >= nq {
		clear(o)
		if x.lse != nil {
			x.lse[row] = float32(math.Inf(-1))
		}
		return
	}
	qr := x.q[row*D : row*D+D]
	i := qpos + r
	x.progs = denseRowAt(x.p.at(h), x.docs, i, kpos, nk, x.keep, x.progs)
	scores, acc, keep, kept := x.scores, x.acc, x.keep, x.kept[:0]
	for j := 0; j < nk; j++ {
		if !keep[j] {
			continue
		}
		var dot float32
		kj := x.k[kvBase+j*D : kvBase+j*D+D]
		for d := range qr {
			dot += qr[d] * kj[d]
		}
		scores[j], _ = stage32(s.Score, dot*scale, h, i, kpos+j)
		kept = append(kept, j)
	}
	x.kept = kept
	m, sum, lse, ok := softmax32(scores, kept, float32(s.Score.sink(h)))
	if x.lse != nil {
		x.lse[row] = lse
	}
	if !ok {
		clear(o)
		return
	}
	clear(acc)
	for _, j := range kept {
		if math.IsInf(float64(scores[j]), -1) {
			continue // weight 0: its value is never read
		}
		w := x.roundP(float32(math.Exp(float64(scores[j] - m))))
		vj := x.v[(kvRow+j)*DV:][:DV]
		for d := range acc {
			acc[d] += w * vj[d]
		}
	}
	for d := range o {
		o[d] = x.roundOut(acc[d] / sum)
	}
}

// denseRow fills keep with row i of the mask (the dense mask row a
// straightforward implementation consults per pair).
func denseRow(p spec.Pattern, docs *spec.Docs, i, n int, keep []bool, progs []spec.Prog) []spec.Prog {
	return denseRowAt(p, docs, i, 0, n, keep, progs)
}

// denseRowAt is denseRow at the key positions kpos..kpos+n-1: keep[j] for
// position kpos+j.
func denseRowAt(p spec.Pattern, docs *spec.Docs, i, kpos, n int, keep []bool, progs []spec.Prog) []spec.Prog {
	keep = keep[:n]
	clear(keep)
	if docs != nil && p.Mask.HasData() {
		for j := range keep {
			keep[j] = p.AtDocs(i, kpos+j, docs)
		}
		return progs
	}
	progs = p.Keys(progs[:0], i, max(kpos+n, i+1))
	for _, g := range progs {
		g = g.Clip(kpos, kpos+n-1)
		for j := g.Lo; j <= g.Hi; j += g.Step {
			keep[j-kpos] = true
		}
	}
	return progs
}
