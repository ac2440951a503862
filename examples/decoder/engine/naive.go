package engine

import "math"

// Loops is a straightforward Go attention on the engine's paged cache:
// for each query, every key its layer keeps, one at a time, then a
// softmax (with the soft-cap and the sink of the configuration) and the
// weighted sum of the values. It is the baseline of -bench.
type Loops struct{}

func (Loops) Name() string { return "loops" }

func (Loops) Attend(c *Config, w *Weights, a *AttnCall) error {
	D, hq, hkv := c.HeadDim, c.HeadsQ, c.HeadsKV
	window, scale, cap := c.Windows[a.Layer], float32(c.Scale()), float32(c.SoftCap)
	np := (a.SeqK + PageSize - 1) / PageSize
	var sinks []float32
	if c.Sinks {
		sinks = w.Layers[a.Layer].Sinks
	}
	scores := make([]float32, a.SeqK)
	for b := range a.B {
		nq, nk := int(a.LensQ[b]), int(a.LensK[b])
		pages := a.Table[b*np:]
		for i := range nq {
			qp := nk - nq + i // the query's position: the last nq of nk
			lo := 0
			if window > 0 {
				lo = max(0, qp-window+1)
			}
			for h := range hq {
				kh := h / (hq / hkv)
				q := a.Q[((b*a.T+i)*hq+h)*D:][:D]
				m := float32(math.Inf(-1))
				for j := lo; j <= qp; j++ {
					off := ((int(pages[j/PageSize])*PageSize+j%PageSize)*hkv + kh) * D
					s := scale * dot(q, a.K[off:off+D])
					if cap > 0 {
						s = cap * float32(math.Tanh(float64(s/cap)))
					}
					scores[j] = s
					m = max(m, s)
				}
				var sum float32
				if sinks != nil {
					m = max(m, sinks[h])
					sum = float32(math.Exp(float64(sinks[h] - m)))
				}
				out := a.Out[((b*a.T+i)*hq+h)*D:][:D]
				clear(out)
				for j := lo; j <= qp; j++ {
					p := float32(math.Exp(float64(scores[j] - m)))
					sum += p
					off := ((int(pages[j/PageSize])*PageSize+j%PageSize)*hkv + kh) * D
					for d, v := range a.V[off : off+D] {
						out[d] += p * v
					}
				}
				for d := range out {
					out[d] /= sum
				}
			}
		}
	}
	return nil
}
