package verify

import (
	"fmt"
	"math"

	"github.com/attngen/attngen/spec"
)

// Grads are the gradients of a scalar loss with respect to q, k and v,
// laid out like q, k and v, and with learned sinks (Score.Sinks) with
// respect to each query head's sink logit: DSink has HeadsQ values (nil
// without sinks).
type Grads[T float32 | float64] struct {
	Q, K, V []T
	DSink   []T
}

// ReferenceGrad computes in float64 the gradients of masked attention (as
// Reference defines it, score stage included) given dout, the gradient of
// the loss with respect to the output: with x = scale*q.k, S the staged
// scores (Score.apply), dx their derivative with respect to x (1 without
// soft-capping, 1 - tanh^2 with), P the softmax of S over the kept keys
// of a row and its sink, p_sink the sink's weight (exp(sink - lse)), O =
// P V and delta = rowsum(dout * O),
//
//	dV    = P^T dout
//	dP    = dout V^T
//	dS    = P * (dP - delta) * dx
//	dQ    = dS K * scale
//	dK    = dS^T Q * scale
//	dsink = -sum over the head's rows (every batch) of p_sink * delta
//
// (the sink is a softmax term with no value: its dP is 0). Query heads of
// a group sum their dK and dV into their key/value head. A row that keeps
// no key (or whose kept scores are all -Inf) contributes nothing, so its
// dQ is exactly 0, as are dK and dV of keys no row keeps; with a sink its
// output is 0, so its delta and its dsink term are 0 too. Masked pairs
// never read their key or value. Nothing of size SeqQ x SeqK is stored.
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
//	c_ij = dx_ij scale |q_i|·|k_j| + g_ij (the terms of the staged score)
//	e_ij = 1 + c_ij + max_j' c_ij'        (P_ij's relative error: its score, the row's lse)
//	b_i  = sum_j P_ij e_ij a_ij           (delta_i = dout_i·out_i, out's error included)
//	m_ij = dx_ij P_ij (a_ij + b_i + e_ij |dP_ij - delta_i|) + |P_ij (dP_ij - delta_i)| f_ij   (dS_ij's)
//
// where dx_ij is the stage's derivative and g_ij and f_ij the rounding
// the stage adds to the score and to dx (Score.stageMag; all three 1, 0
// and 0 without a stage), the max also taken over |sink| with a sink.
// Then |dq_i| <- scale sum_j m_ij |k_j|, |dk_j| <- scale sum_i m_ij
// |q_i|, |dv_j| <- sum_i P_ij e_ij |dout_i| (elementwise |x|) and
// |dsink_h| <- sum_i p_sink,i ((1 + |sink_h| + max_j c_ij) |delta_i| +
// b_i) over the head's rows. A
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
	if _, no := s.SizesV(); len(dout) < no {
		return fmt.Errorf("dout has %d elements, shape needs %d", len(dout), no)
	}
	return checkHeads(p, s)
}

// referenceGrad is ReferenceGrad and GradMagnitude in one pass, on inputs
// already checked.
func referenceGrad(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape) (ref, mag Grads[float64]) {
	mag = newGrads[float64](s)
	ref = grad64(p, docs, wide(q), wide(k), wide(v), wide(dout), s, &mag)
	return ref, mag
}

// newGrads returns zero gradients of a shape (DSink only with sinks).
func newGrads[T float32 | float64](s Shape) Grads[T] {
	nq, nkv, _ := s.Sizes()
	nv, _ := s.SizesV()
	g := Grads[T]{Q: make([]T, nq), K: make([]T, nkv), V: make([]T, nv)}
	if s.Score.hasSinks() {
		g.DSink = make([]T, s.HeadsQ)
	}
	return g
}

func wide(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, e := range x {
		y[i] = float64(e)
	}
	return y
}

// rowSoft is one query row's softmax in float64 with the score stage:
// the keys the row keeps, their weights (prob, indexed by key), the
// derivative of their staged scores with respect to x = scale*q.k (dx,
// indexed by key), the sink's weight psink (0 without a sink), the row's
// absolute position i and that of its batch row's first key, kpos.
type rowSoft struct {
	kept     []int
	prob, dx []float64
	psink    float64
	i, kpos  int
}

func newRowSoft(s Shape) *rowSoft {
	return &rowSoft{prob: make([]float64, s.SeqK), dx: make([]float64, s.SeqK)}
}

// rowProbs fills x with the softmax of row r of head bh = b*HeadsQ + h
// (float64, through the score stage and the one softmax) and returns
// false when the row has no weight (keeps nothing, or every kept score
// -Inf): its output is then 0, and with a sink its lse is the sink logit.
func rowProbs(p spec.Pattern, docs *spec.Docs, q, k []float64, s Shape, bh, r int, x *rowSoft) bool {
	D, scale := s.HeadDim, s.EffScale()
	group := s.HeadsQ / s.HeadsKV
	b, h := bh/s.HeadsQ, bh%s.HeadsQ
	kvBase := (b*s.HeadsKV + h/group) * s.SeqK * D
	row := bh*s.SeqQ + r
	qr := q[row*D : row*D+D]
	nq, nk, qpos, kpos := s.Row(b)
	x.kept, x.psink = x.kept[:0], 0
	if r >= nq {
		return false // past the batch row's queries: output 0, lse -Inf
	}
	i := qpos + r
	x.i, x.kpos = i, kpos
	for j := 0; j < nk; j++ {
		if !p.AtDocs(i, kpos+j, docs) {
			continue
		}
		kj := k[kvBase+j*D : kvBase+j*D+D]
		dot := 0.0
		for d := range qr {
			dot += qr[d] * kj[d]
		}
		x.prob[j], x.dx[j] = s.Score.apply(dot*scale, h, i, kpos+j)
		x.kept = append(x.kept, j)
	}
	sink := s.Score.sink(h)
	ms, sum, _, ok := softmax(x.prob, x.kept, sink)
	if !ok {
		return false
	}
	for _, j := range x.kept {
		x.prob[j] = math.Exp(x.prob[j]-ms) / sum
	}
	x.psink = math.Exp(sink-ms) / sum
	return true
}

// attention64 is masked attention with float64 inputs, the score stage
// included (the finite difference checks differentiate it, sink logits
// included).
func attention64(p spec.Pattern, docs *spec.Docs, q, k, v []float64, s Shape) []float64 {
	_, no := s.SizesV()
	DV := s.DV()
	group := s.HeadsQ / s.HeadsKV
	out := make([]float64, no)
	hs := mustHeads(p, s)
	x := newRowSoft(s)
	for bh := 0; bh < s.Batch*s.HeadsQ; bh++ {
		vBase := (bh/s.HeadsQ*s.HeadsKV + bh%s.HeadsQ/group) * s.SeqK * DV
		for r := 0; r < s.SeqQ; r++ {
			if !rowProbs(hs.at(bh%s.HeadsQ), docs, q, k, s, bh, r, x) {
				continue
			}
			o := out[(bh*s.SeqQ+r)*DV:][:DV]
			for _, j := range x.kept {
				for d, y := range v[vBase+j*DV : vBase+j*DV+DV] {
					o[d] += x.prob[j] * y
				}
			}
		}
	}
	return out
}

// grad64 is ReferenceGrad on float64 inputs; with mag non-nil (its
// slices allocated, zero) it also accumulates GradMagnitude there.
func grad64(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float64, s Shape, mag *Grads[float64]) Grads[float64] {
	D, DV, scale := s.HeadDim, s.DV(), s.EffScale()
	group := s.HeadsQ / s.HeadsKV
	g := newGrads[float64](s)
	hs := mustHeads(p, s)
	x := newRowSoft(s)
	o := make([]float64, DV)
	for bh := 0; bh < s.Batch*s.HeadsQ; bh++ {
		h := bh % s.HeadsQ
		kv := bh/s.HeadsQ*s.HeadsKV + h/group
		kvBase, vBase := kv*s.SeqK*D, kv*s.SeqK*DV
		for r := 0; r < s.SeqQ; r++ {
			if !rowProbs(hs.at(h), docs, q, k, s, bh, r, x) {
				continue
			}
			row := bh*s.SeqQ + r
			qr, dor := q[row*D:][:D], dout[row*DV:][:DV]
			clear(o)
			for _, j := range x.kept {
				for d, y := range v[vBase+j*DV : vBase+j*DV+DV] {
					o[d] += x.prob[j] * y
				}
			}
			delta := 0.0
			for d := range o {
				delta += dor[d] * o[d]
			}
			if mag != nil {
				magRow(mag, x, qr, dor, k, v, delta, s, h, kv, row)
			}
			if g.DSink != nil {
				g.DSink[h] -= x.psink * delta
			}
			for _, j := range x.kept {
				vj := v[vBase+j*DV : vBase+j*DV+DV]
				dp := 0.0
				for d := range vj {
					dp += dor[d] * vj[d]
				}
				ds := x.prob[j] * (dp - delta) * x.dx[j]
				dv := g.V[vBase+j*DV : vBase+j*DV+DV]
				dk := g.K[kvBase+j*D : kvBase+j*D+D]
				kj := k[kvBase+j*D : kvBase+j*D+D]
				dq := g.Q[row*D : row*D+D]
				for d := range dv {
					dv[d] += x.prob[j] * dor[d]
				}
				for d := range dk {
					dk[d] += ds * qr[d] * scale
					dq[d] += ds * kj[d] * scale
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

// magRow adds the GradMagnitude terms of one query row (lse index row of
// query head h, its keys those of kv head row kv ([batch, kv head]), its
// softmax x, delta = dout . out) to mag.
func magRow(mag *Grads[float64], x *rowSoft, qr, dor, k, v []float64, delta float64, s Shape, h, kv, row int) {
	D, DV, scale := s.HeadDim, s.DV(), s.EffScale()
	kvBase, vBase, i := kv*s.SeqK*D, kv*s.SeqK*DV, x.i
	kept := x.kept
	a, c, f := make([]float64, len(kept)), make([]float64, len(kept)), make([]float64, len(kept))
	cmax := 0.0
	for n, j := range kept {
		kj := k[kvBase+j*D:][:D]
		a[n] = absDot(dor, v[vBase+j*DV:][:DV])
		raw := scale * absDot(qr, kj)
		dot := 0.0
		for d := range qr {
			dot += qr[d] * kj[d]
		}
		g, fe := s.Score.stageMag(dot*scale, raw, h, i, x.kpos+j)
		c[n], f[n] = x.dx[j]*raw+g, fe
		cmax = max(cmax, c[n])
	}
	sink := math.Abs(s.Score.sink(h))
	if x.psink > 0 {
		cmax = max(cmax, sink) // the sink's rounding reaches lse
	}
	b := 0.0
	for n, j := range kept {
		b += x.prob[j] * (1 + c[n] + cmax) * a[n]
	}
	if mag.DSink != nil && x.psink > 0 {
		mag.DSink[h] += x.psink * ((1+sink+cmax)*math.Abs(delta) + b)
	}
	dq := mag.Q[row*D:][:D]
	for n, j := range kept {
		vj, kj := v[vBase+j*DV:][:DV], k[kvBase+j*D:][:D]
		dp := 0.0
		for d := range vj {
			dp += dor[d] * vj[d]
		}
		e := 1 + c[n] + cmax
		m := x.dx[j]*x.prob[j]*(a[n]+b+e*math.Abs(dp-delta)) + math.Abs(x.prob[j]*(dp-delta))*f[n]
		dk, dv := mag.K[kvBase+j*D:][:D], mag.V[vBase+j*DV:][:DV]
		for d := range dv {
			dv[d] += x.prob[j] * e * math.Abs(dor[d])
		}
		for d := range dk {
			dk[d] += scale * m * math.Abs(qr[d])
			dq[d] += scale * m * math.Abs(kj[d])
		}
	}
}

// NaiveGradFP32 is a straightforward float32 backward, the yardstick for
// the error of backward kernels: per row, a dense keep row of the mask,
// scores, the score stage (computed in float64, rounded to float32, with
// its derivative), max, exp, sum and probabilities in float32
// (softmax32; recomputed, not taken from a forward), then delta = dout .
// out and the gradients of ReferenceGrad accumulated in float32, rows in
// order (dsink too, batch by batch).
func NaiveGradFP32(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape) (Grads[float32], error) {
	return NaiveGradRounded(p, docs, q, k, v, dout, s, nil)
}

// NaiveGradRounded is NaiveGradFP32 for kernels that feed 16-bit tensor
// cores: round (nil: none) is applied to the output before delta, to the
// probabilities before dv += P dout, and to dS (after the stage's
// derivative) before dk and dq (the values a bf16 or f16 backward
// multiplies), accumulating in float32.
func NaiveGradRounded(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape, round func(float32) float32) (Grads[float32], error) {
	if round == nil {
		round = func(x float32) float32 { return x }
	}
	if err := checkInputs(s, len(q), len(k), len(v), docs); err != nil {
		return Grads[float32]{}, err
	}
	if _, no := s.SizesV(); len(dout) < no {
		return Grads[float32]{}, fmt.Errorf("dout has %d elements, shape needs %d", len(dout), no)
	}
	hs, err := headsOf(p, s)
	if err != nil {
		return Grads[float32]{}, err
	}
	D, DV, scale := s.HeadDim, s.DV(), float32(s.EffScale())
	group := s.HeadsQ / s.HeadsKV
	g := newGrads[float32](s)
	scores, dx := make([]float32, s.SeqK), make([]float32, s.SeqK)
	keep := make([]bool, s.SeqK)
	kept := make([]int, 0, s.SeqK)
	o := make([]float32, DV)
	var progs []spec.Prog
	for b := 0; b < s.Batch; b++ {
		nq, nk, qpos, kpos := s.Row(b)
		for h := 0; h < s.HeadsQ; h++ {
			kvBase := (b*s.HeadsKV + h/group) * s.SeqK * D
			vBase := (b*s.HeadsKV + h/group) * s.SeqK * DV
			sink := float32(s.Score.sink(h))
			for r := 0; r < nq; r++ {
				row := (b*s.HeadsQ+h)*s.SeqQ + r
				qr, dor := q[row*D:][:D], dout[row*DV:][:DV]
				i := qpos + r
				if kpos == 0 {
					progs = denseRow(hs.at(h), docs, i, nk, keep[:nk], progs)
				} else {
					for j := range keep[:nk] {
						keep[j] = hs.at(h).AtDocs(i, kpos+j, docs)
					}
				}
				kept = kept[:0]
				for j := 0; j < nk; j++ {
					if !keep[j] {
						continue
					}
					var dot float32
					for d, x := range k[kvBase+j*D : kvBase+j*D+D] {
						dot += qr[d] * x
					}
					scores[j], dx[j] = stage32(s.Score, dot*scale, h, i, kpos+j)
					kept = append(kept, j)
				}
				m, sum, _, ok := softmax32(scores, kept, sink)
				if !ok {
					continue
				}
				clear(o)
				for _, j := range kept {
					scores[j] = float32(math.Exp(float64(scores[j]-m))) / sum
					for d, x := range v[vBase+j*DV : vBase+j*DV+DV] {
						o[d] += scores[j] * x
					}
				}
				var delta float32
				for d := range o {
					delta += dor[d] * round(o[d])
				}
				if g.DSink != nil {
					g.DSink[h] -= float32(math.Exp(float64(sink-m))) / sum * delta
				}
				for _, j := range kept {
					vj := v[vBase+j*DV : vBase+j*DV+DV]
					var dp float32
					for d := range vj {
						dp += dor[d] * vj[d]
					}
					ds := round(scores[j]*(dp-delta)*dx[j]) * scale
					pj := round(scores[j])
					kj := k[kvBase+j*D : kvBase+j*D+D]
					dv, dk, dq := g.V[vBase+j*DV:][:DV], g.K[kvBase+j*D:][:D], g.Q[row*D:][:D]
					for d := range dv {
						dv[d] += pj * dor[d]
					}
					for d := range dk {
						dk[d] += ds * qr[d]
						dq[d] += ds * kj[d]
					}
				}
			}
		}
	}
	return g, nil
}

// stage32 is the score stage as the float32 yardsticks apply it: on the
// float32 score x, in float64, rounded to float32 (score and
// derivative); x itself and 1 without a stage.
func stage32(sc *Score, x float32, h, i, j int) (float32, float32) {
	if sc == nil {
		return x, 1
	}
	y, dx := sc.apply(float64(x), h, i, j)
	return float32(y), float32(dx)
}
