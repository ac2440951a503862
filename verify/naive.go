package verify

import (
	"math"

	"github.com/attngen/attngen/spec"
)

// NaiveFP32 is a straightforward float32 masked attention, the yardstick for
// kernel error (a kernel may be a small factor worse than it against the
// float64 reference) and the "naive" line of benchmarks: per row, a dense
// keep row of the mask, then scores over every key it keeps, max, exp, sum,
// weighted sum, all in float32. out and lse (lse may be nil) are written
// like Reference.
func NaiveFP32(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, out, lse []float32) error {
	same := func(x float32) float32 { return x }
	return naive(p, docs, q, k, v, s, out, lse, same, same)
}

// naive is the straightforward attention both yardsticks share; roundP
// rounds each probability before it multiplies v, roundOut each output.
func naive(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, out, lse []float32, roundP, roundOut func(float32) float32) error {
	if err := checkInputs(s, len(q), len(k), len(v), docs); err != nil {
		return err
	}
	D, scale := s.HeadDim, float32(s.EffScale())
	group := s.HeadsQ / s.HeadsKV
	scores := make([]float32, s.SeqK)
	acc := make([]float32, D)
	keep := make([]bool, s.SeqK)
	var progs []spec.Prog
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsQ; h++ {
			kvBase := (b*s.HeadsKV + h/group) * s.SeqK * D
			for r := 0; r < s.SeqQ; r++ {
				row := (b*s.HeadsQ+h)*s.SeqQ + r
				qr := q[row*D : row*D+D]
				i := spec.Row(r, s.SeqQ, s.SeqK)
				progs = denseRow(p, docs, i, s.SeqK, keep, progs)
				m := float32(math.Inf(-1))
				for j := 0; j < s.SeqK; j++ {
					scores[j] = float32(math.Inf(-1))
					if !keep[j] {
						continue
					}
					var dot float32
					kj := k[kvBase+j*D : kvBase+j*D+D]
					for d := range qr {
						dot += qr[d] * kj[d]
					}
					scores[j] = dot * scale
					m = max(m, scores[j])
				}
				o := out[row*D : row*D+D]
				if math.IsInf(float64(m), -1) {
					clear(o)
					if lse != nil {
						lse[row] = m
					}
					continue
				}
				clear(acc)
				var sum float32
				for j := 0; j < s.SeqK; j++ {
					if math.IsInf(float64(scores[j]), -1) {
						continue
					}
					w := float32(math.Exp(float64(scores[j] - m)))
					sum += w
					w = roundP(w)
					vj := v[kvBase+j*D : kvBase+j*D+D]
					for d := range acc {
						acc[d] += w * vj[d]
					}
				}
				for d := range o {
					o[d] = roundOut(acc[d] / sum)
				}
				if lse != nil {
					lse[row] = m + float32(math.Log(float64(sum)))
				}
			}
		}
	}
	return nil
}

// denseRow fills keep with row i of the mask (the dense mask row a
// straightforward implementation consults per pair).
func denseRow(p spec.Pattern, docs *spec.Docs, i, n int, keep []bool, progs []spec.Prog) []spec.Prog {
	clear(keep)
	if docs != nil && p.Mask.HasDocument() {
		for j := range keep {
			keep[j] = p.AtDocs(i, j, docs)
		}
		return progs
	}
	progs = p.Keys(progs[:0], i, n)
	for _, g := range progs {
		for j := g.Lo; j <= g.Hi; j += g.Step {
			keep[j] = true
		}
	}
	return progs
}
