package verify

import (
	"fmt"
	"math"

	"github.com/attngen/attngen/spec"
)

// Grads are the gradients of a scalar loss with respect to q, k and v,
// laid out like q, k and v.
type Grads[T float32 | float64] struct {
	Q, K, V []T
}

// ReferenceGrad computes in float64 the gradients of masked attention (as
// Reference defines it) given dout, the gradient of the loss with respect
// to the output: with P the softmax of the scaled scores over the kept
// keys of a row, O = P V and delta = rowsum(dout * O),
//
//	dV = P^T dout
//	dP = dout V^T
//	dS = P * (dP - delta)
//	dQ = dS K * scale
//	dK = dS^T Q * scale
//
// Query heads of a group sum their dK and dV into their key/value head.
// A row that keeps no key (or whose kept scores are all -Inf) contributes
// nothing, so its dQ is exactly 0, as are dK and dV of keys no row keeps.
// Masked pairs never read their key or value. Nothing of size SeqQ x SeqK
// is stored.
func ReferenceGrad(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape) (Grads[float64], error) {
	if err := checkGradInputs(p, docs, q, k, v, dout, s); err != nil {
		return Grads[float64]{}, err
	}
	return grad64(p, docs, wide(q), wide(k), wide(v), wide(dout), s, nil), nil
}

// GradMagnitude returns, for every entry of dq, dk and dv, the scale of
// the rounding error a float32 backward may make there (in units of the
// rounding unit): the sum of the magnitudes of the terms that make up the
// entry, each term weighted by the magnitudes that feed it. For a kept
// pair (i, j) of a row with weights P,
//
//	a_ij = |dout_i|·|v_j|                 (the terms of dP_ij)
//	c_ij = scale |q_i|·|k_j|              (the terms of the score)
//	e_ij = 1 + c_ij + max_j' c_ij'        (P_ij's relative error: its score, the row's lse)
//	b_i  = sum_j P_ij e_ij a_ij           (delta_i = dout_i·out_i, out's error included)
//	m_ij = P_ij (a_ij + b_i + e_ij |dP_ij - delta_i|)   (dS_ij's)
//
// and then |dq_i| <- scale sum_j m_ij |k_j|, |dk_j| <- scale sum_i m_ij
// |q_i| and |dv_j| <- sum_i P_ij e_ij |dout_i| (elementwise |x|). A
// gradient entry whose true value cancels to 0 (as dq and dk do when a
// row keeps a single key: dS = P (dP - delta) = 0) still has rounding
// noise of about this size times 2^-24, which no yardstick that happens
// to cancel exactly can measure. Entries of rows and keys no pair keeps
// are 0.
func GradMagnitude(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape) (Grads[float64], error) {
	if err := checkGradInputs(p, docs, q, k, v, dout, s); err != nil {
		return Grads[float64]{}, err
	}
	_, mag := referenceGrad(p, docs, q, k, v, dout, s)
	return mag, nil
}

// checkGradInputs checks the arguments of ReferenceGrad and GradMagnitude.
func checkGradInputs(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape) error {
	if err := checkInputs(s, len(q), len(k), len(v), docs); err != nil {
		return err
	}
	if nq, _, _ := s.Sizes(); len(dout) < nq {
		return fmt.Errorf("dout has %d elements, shape needs %d", len(dout), nq)
	}
	return checkHeads(p, s)
}

// referenceGrad is ReferenceGrad and GradMagnitude in one pass, on inputs
// already checked.
func referenceGrad(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape) (ref, mag Grads[float64]) {
	nq, nkv, _ := s.Sizes()
	mag = Grads[float64]{Q: make([]float64, nq), K: make([]float64, nkv), V: make([]float64, nkv)}
	ref = grad64(p, docs, wide(q), wide(k), wide(v), wide(dout), s, &mag)
	return ref, mag
}

func wide(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, e := range x {
		y[i] = float64(e)
	}
	return y
}

// rowProbs fills kept with the keys row r (of head bh = b*HeadsQ + h)
// keeps and prob with their softmax weights (float64), and returns false
// when the row has no weight (keeps nothing, or every kept score -Inf).
func rowProbs(p spec.Pattern, docs *spec.Docs, q, k []float64, s Shape, bh, r int, kept []int, prob []float64) ([]int, bool) {
	D, scale := s.HeadDim, s.EffScale()
	group := s.HeadsQ / s.HeadsKV
	b, h := bh/s.HeadsQ, bh%s.HeadsQ
	kvBase := (b*s.HeadsKV + h/group) * s.SeqK * D
	row := bh*s.SeqQ + r
	qr := q[row*D : row*D+D]
	i := spec.Row(r, s.SeqQ, s.SeqK)
	kept = kept[:0]
	m := math.Inf(-1)
	for j := 0; j < s.SeqK; j++ {
		if !p.AtDocs(i, j, docs) {
			continue
		}
		kj := k[kvBase+j*D : kvBase+j*D+D]
		dot := 0.0
		for d := range qr {
			dot += qr[d] * kj[d]
		}
		prob[j] = dot * scale
		kept = append(kept, j)
		m = math.Max(m, prob[j])
	}
	if len(kept) == 0 {
		return kept, false
	}
	ms := m
	if math.IsInf(m, -1) {
		ms = 0
	}
	sum := 0.0
	for _, j := range kept {
		prob[j] = math.Exp(prob[j] - ms)
		sum += prob[j]
	}
	if sum == 0 {
		return kept, false
	}
	for _, j := range kept {
		prob[j] /= sum
	}
	return kept, true
}

// attention64 is masked attention with float64 inputs (the finite
// difference checks differentiate it).
func attention64(p spec.Pattern, docs *spec.Docs, q, k, v []float64, s Shape) []float64 {
	nq, _, _ := s.Sizes()
	D := s.HeadDim
	group := s.HeadsQ / s.HeadsKV
	out := make([]float64, nq)
	prob := make([]float64, s.SeqK)
	hs := mustHeads(p, s)
	var kept []int
	for bh := 0; bh < s.Batch*s.HeadsQ; bh++ {
		kvBase := (bh/s.HeadsQ*s.HeadsKV + bh%s.HeadsQ/group) * s.SeqK * D
		for r := 0; r < s.SeqQ; r++ {
			var ok bool
			kept, ok = rowProbs(hs.at(bh%s.HeadsQ), docs, q, k, s, bh, r, kept, prob)
			if !ok {
				continue
			}
			o := out[(bh*s.SeqQ+r)*D:][:D]
			for _, j := range kept {
				for d, x := range v[kvBase+j*D : kvBase+j*D+D] {
					o[d] += prob[j] * x
				}
			}
		}
	}
	return out
}

// grad64 is ReferenceGrad on float64 inputs; with mag non-nil (its
// slices allocated, zero) it also accumulates GradMagnitude there.
func grad64(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float64, s Shape, mag *Grads[float64]) Grads[float64] {
	nq, nkv, _ := s.Sizes()
	D, scale := s.HeadDim, s.EffScale()
	group := s.HeadsQ / s.HeadsKV
	g := Grads[float64]{Q: make([]float64, nq), K: make([]float64, nkv), V: make([]float64, nkv)}
	prob := make([]float64, s.SeqK)
	hs := mustHeads(p, s)
	ds := make([]float64, s.SeqK)
	o := make([]float64, D)
	var kept []int
	for bh := 0; bh < s.Batch*s.HeadsQ; bh++ {
		kvBase := (bh/s.HeadsQ*s.HeadsKV + bh%s.HeadsQ/group) * s.SeqK * D
		for r := 0; r < s.SeqQ; r++ {
			var ok bool
			kept, ok = rowProbs(hs.at(bh%s.HeadsQ), docs, q, k, s, bh, r, kept, prob)
			if !ok {
				continue
			}
			row := bh*s.SeqQ + r
			qr, dor := q[row*D:][:D], dout[row*D:][:D]
			clear(o)
			for _, j := range kept {
				for d, x := range v[kvBase+j*D : kvBase+j*D+D] {
					o[d] += prob[j] * x
				}
			}
			delta := 0.0
			for d := range o {
				delta += dor[d] * o[d]
			}
			if mag != nil {
				magRow(mag, kept, prob, qr, dor, q, k, v, delta, scale, kvBase, row, D)
			}
			for _, j := range kept {
				vj := v[kvBase+j*D : kvBase+j*D+D]
				dp := 0.0
				for d := range vj {
					dp += dor[d] * vj[d]
				}
				ds[j] = prob[j] * (dp - delta)
				dv := g.V[kvBase+j*D : kvBase+j*D+D]
				dk := g.K[kvBase+j*D : kvBase+j*D+D]
				kj := k[kvBase+j*D : kvBase+j*D+D]
				dq := g.Q[row*D : row*D+D]
				for d := range dv {
					dv[d] += prob[j] * dor[d]
					dk[d] += ds[j] * qr[d] * scale
					dq[d] += ds[j] * kj[d] * scale
				}
			}
		}
	}
	return g
}

// absDot is |x|·|y|.
func absDot(x, y []float64) float64 {
	t := 0.0
	for d, a := range x {
		t += math.Abs(a) * math.Abs(y[d])
	}
	return t
}

// magRow adds the GradMagnitude terms of one query row (lse index row, its
// keys at kvBase, weights prob over kept, delta = dout . out) to mag.
func magRow(mag *Grads[float64], kept []int, prob, qr, dor, q, k, v []float64, delta, scale float64, kvBase, row, D int) {
	a, c := make([]float64, len(kept)), make([]float64, len(kept))
	cmax := 0.0
	for n, j := range kept {
		a[n] = absDot(dor, v[kvBase+j*D:][:D])
		c[n] = scale * absDot(qr, k[kvBase+j*D:][:D])
		cmax = max(cmax, c[n])
	}
	b := 0.0
	for n, j := range kept {
		b += prob[j] * (1 + c[n] + cmax) * a[n]
	}
	dq := mag.Q[row*D:][:D]
	for n, j := range kept {
		vj, kj := v[kvBase+j*D:][:D], k[kvBase+j*D:][:D]
		dp := 0.0
		for d := range vj {
			dp += dor[d] * vj[d]
		}
		e := 1 + c[n] + cmax
		m := prob[j] * (a[n] + b + e*math.Abs(dp-delta))
		dk, dv := mag.K[kvBase+j*D:][:D], mag.V[kvBase+j*D:][:D]
		for d := range dv {
			dv[d] += prob[j] * e * math.Abs(dor[d])
			dk[d] += scale * m * math.Abs(qr[d])
			dq[d] += scale * m * math.Abs(kj[d])
		}
	}
}

// NaiveGradFP32 is a straightforward float32 backward, the yardstick for
// the error of backward kernels: per row, a dense keep row of the mask,
// scores, max, exp, sum and probabilities in float32 (recomputed, not
// taken from a forward), then delta = dout . out and the gradients of
// ReferenceGrad accumulated in float32, rows in order.
func NaiveGradFP32(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape) (Grads[float32], error) {
	return NaiveGradRounded(p, docs, q, k, v, dout, s, nil)
}

// NaiveGradRounded is NaiveGradFP32 for kernels that feed 16-bit tensor
// cores: round (nil: none) is applied to the output before delta, to the
// probabilities before dv += P dout, and to dS before dk and dq (the
// values a bf16 or f16 backward multiplies), accumulating in float32.
func NaiveGradRounded(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape, round func(float32) float32) (Grads[float32], error) {
	if round == nil {
		round = func(x float32) float32 { return x }
	}
	if err := checkInputs(s, len(q), len(k), len(v), docs); err != nil {
		return Grads[float32]{}, err
	}
	nq, nkv, _ := s.Sizes()
	if len(dout) < nq {
		return Grads[float32]{}, fmt.Errorf("dout has %d elements, shape needs %d", len(dout), nq)
	}
	hs, err := headsOf(p, s)
	if err != nil {
		return Grads[float32]{}, err
	}
	D, scale := s.HeadDim, float32(s.EffScale())
	group := s.HeadsQ / s.HeadsKV
	g := Grads[float32]{Q: make([]float32, nq), K: make([]float32, nkv), V: make([]float32, nkv)}
	scores := make([]float32, s.SeqK)
	keep := make([]bool, s.SeqK)
	o := make([]float32, D)
	var progs []spec.Prog
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsQ; h++ {
			kvBase := (b*s.HeadsKV + h/group) * s.SeqK * D
			for r := 0; r < s.SeqQ; r++ {
				row := (b*s.HeadsQ+h)*s.SeqQ + r
				qr, dor := q[row*D:][:D], dout[row*D:][:D]
				progs = denseRow(hs.at(h), docs, spec.Row(r, s.SeqQ, s.SeqK), s.SeqK, keep, progs)
				m := float32(math.Inf(-1))
				for j := 0; j < s.SeqK; j++ {
					if !keep[j] {
						continue
					}
					var dot float32
					for d, x := range k[kvBase+j*D : kvBase+j*D+D] {
						dot += qr[d] * x
					}
					scores[j] = dot * scale
					m = max(m, scores[j])
				}
				if math.IsInf(float64(m), -1) {
					continue
				}
				var sum float32
				for j := 0; j < s.SeqK; j++ {
					if keep[j] {
						scores[j] = float32(math.Exp(float64(scores[j] - m)))
						sum += scores[j]
					}
				}
				clear(o)
				for j := 0; j < s.SeqK; j++ {
					if keep[j] {
						scores[j] /= sum
						for d, x := range v[kvBase+j*D : kvBase+j*D+D] {
							o[d] += scores[j] * x
						}
					}
				}
				var delta float32
				for d := range o {
					delta += dor[d] * round(o[d])
				}
				for j := 0; j < s.SeqK; j++ {
					if !keep[j] {
						continue
					}
					vj := v[kvBase+j*D : kvBase+j*D+D]
					var dp float32
					for d := range vj {
						dp += dor[d] * vj[d]
					}
					ds := round(scores[j]*(dp-delta)) * scale
					pj := round(scores[j])
					kj := k[kvBase+j*D : kvBase+j*D+D]
					dv, dk, dq := g.V[kvBase+j*D:][:D], g.K[kvBase+j*D:][:D], g.Q[row*D:][:D]
					for d := range dv {
						dv[d] += pj * dor[d]
						dk[d] += ds * qr[d]
						dq[d] += ds * kj[d]
					}
				}
			}
		}
	}
	return g, nil
}
