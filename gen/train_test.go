package gen

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// A tiny model for the training test: one attention layer between linear
// projections, y = sum_h attention(x Wq_h, x Wk_g, x Wv_g) Wo_h, with
// grouped heads (two query heads share one key/value head), trained on
// mean squared error against a fixed teacher of the same architecture.
const (
	trainB, trainS, trainHq, trainHkv, trainD = 2, 100, 2, 1, 64
	trainIn, trainOut                         = 16, 8
	trainSteps, trainBatches                  = 300, 4
	trainLR                                   = 4
)

// trainParams are the model's weights, flat and row-major: Wq [In][Hq*D],
// Wk and Wv [In][Hkv*D], Wo [Hq*D][Out].
type trainParams[T float32 | float64] struct{ wq, wk, wv, wo []T }

// attention is one precision's attention layer: the forward returns out and
// what its backward needs; the backward returns dq, dk and dv.
type attention[T float32 | float64] struct {
	fwd func(q, k, v []T) (out []T, aux []float32, err error)
	bwd func(dout, q, k, v, out []T, aux []float32) (dq, dk, dv []T, err error)
}

// project computes x W for each head: x is [B][S][In], w [In][H*D]; the
// result is [B][H][S][D], the attention layout.
func project[T float32 | float64](x, w []T, h int) []T {
	out := make([]T, trainB*h*trainS*trainD)
	for b := 0; b < trainB; b++ {
		for i := 0; i < trainS; i++ {
			xi := x[(b*trainS+i)*trainIn:][:trainIn]
			for hh := 0; hh < h; hh++ {
				o := out[((b*h+hh)*trainS+i)*trainD:][:trainD]
				for c, xc := range xi {
					for d, wv := range w[c*h*trainD+hh*trainD:][:trainD] {
						o[d] += xc * wv
					}
				}
			}
		}
	}
	return out
}

// projectGrad returns dW = x^T dy for y = project(x, w, h).
func projectGrad[T float32 | float64](x, dy []T, h int) []T {
	dw := make([]T, trainIn*h*trainD)
	for b := 0; b < trainB; b++ {
		for i := 0; i < trainS; i++ {
			xi := x[(b*trainS+i)*trainIn:][:trainIn]
			for hh := 0; hh < h; hh++ {
				g := dy[((b*h+hh)*trainS+i)*trainD:][:trainD]
				for c, xc := range xi {
					row := dw[c*h*trainD+hh*trainD:][:trainD]
					for d, gd := range g {
						row[d] += xc * gd
					}
				}
			}
		}
	}
	return dw
}

// output computes y = sum_h o_h Wo_h, [B][S][Out].
func output[T float32 | float64](o, wo []T) []T {
	y := make([]T, trainB*trainS*trainOut)
	for b := 0; b < trainB; b++ {
		for i := 0; i < trainS; i++ {
			yi := y[(b*trainS+i)*trainOut:][:trainOut]
			for h := 0; h < trainHq; h++ {
				for d, od := range o[((b*trainHq+h)*trainS+i)*trainD:][:trainD] {
					for c, w := range wo[(h*trainD+d)*trainOut:][:trainOut] {
						yi[c] += od * w
					}
				}
			}
		}
	}
	return y
}

// step runs one SGD step on a batch (x, target) and returns the loss
// before the step: 0.5 * mean squared error over every output element.
func step[T float32 | float64](p *trainParams[T], a attention[T], x, target []T) (float64, error) {
	q, k, v := project(x, p.wq, trainHq), project(x, p.wk, trainHkv), project(x, p.wv, trainHkv)
	o, aux, err := a.fwd(q, k, v)
	if err != nil {
		return 0, err
	}
	y := output(o, p.wo)
	n := T(len(y))
	loss := 0.0
	dy := make([]T, len(y))
	for i := range y {
		e := y[i] - target[i]
		loss += 0.5 * float64(e) * float64(e)
		dy[i] = e / n
	}
	loss /= float64(len(y))
	// Through the output projection: dWo = o^T dy, do = dy Wo^T.
	dwo := make([]T, len(p.wo))
	do := make([]T, len(o))
	for b := 0; b < trainB; b++ {
		for i := 0; i < trainS; i++ {
			g := dy[(b*trainS+i)*trainOut:][:trainOut]
			for h := 0; h < trainHq; h++ {
				row := ((b*trainHq+h)*trainS + i) * trainD
				for d := 0; d < trainD; d++ {
					w := p.wo[(h*trainD+d)*trainOut:][:trainOut]
					dw := dwo[(h*trainD+d)*trainOut:][:trainOut]
					var s T
					for c, gc := range g {
						dw[c] += o[row+d] * gc
						s += gc * w[c]
					}
					do[row+d] = s
				}
			}
		}
	}
	dq, dk, dv, err := a.bwd(do, q, k, v, o, aux)
	if err != nil {
		return 0, err
	}
	for _, u := range []struct{ w, g []T }{
		{p.wq, projectGrad(x, dq, trainHq)}, {p.wk, projectGrad(x, dk, trainHkv)},
		{p.wv, projectGrad(x, dv, trainHkv)}, {p.wo, dwo},
	} {
		for i := range u.w {
			u.w[i] -= trainLR * u.g[i]
		}
	}
	return loss, nil
}

// train runs the SGD steps from a float32 initialization over the batches
// in turn and returns the final weights as float64 and the loss of every
// step.
func train[T float32 | float64](init trainParams[float32], a attention[T], xs, ts [][]float32) (trainParams[float64], []float64, error) {
	conv := func(x []float32) []T {
		y := make([]T, len(x))
		for i, e := range x {
			y[i] = T(e)
		}
		return y
	}
	p := trainParams[T]{conv(init.wq), conv(init.wk), conv(init.wv), conv(init.wo)}
	var x, t [][]T
	for i := range xs {
		x, t = append(x, conv(xs[i])), append(t, conv(ts[i]))
	}
	var losses []float64
	for s := 0; s < trainSteps; s++ {
		l, err := step(&p, a, x[s%len(x)], t[s%len(t)])
		if err != nil {
			return trainParams[float64]{}, nil, err
		}
		losses = append(losses, l)
	}
	wide := func(x []T) []float64 {
		y := make([]float64, len(x))
		for i, e := range x {
			y[i] = float64(e)
		}
		return y
	}
	return trainParams[float64]{wide(p.wq), wide(p.wk), wide(p.wv), wide(p.wo)}, losses, nil
}

func narrow(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, e := range x {
		y[i] = float32(e)
	}
	return y
}

// paramDiff is the largest difference between two sets of weights.
func paramDiff(a, b trainParams[float64]) float64 {
	d := 0.0
	for _, x := range [][2][]float64{{a.wq, b.wq}, {a.wk, b.wk}, {a.wv, b.wv}, {a.wo, b.wo}} {
		for i := range x[0] {
			d = max(d, math.Abs(x[0][i]-x[1][i]))
		}
	}
	return d
}

// TestTraining trains the tiny model for a few hundred SGD steps through
// the runtime's Forward and Backward on a compiled sliding-window mask
// (window 24 at 100 positions: three query tiles of 48 by two key tiles
// of 64, empty and partial ones; two query heads on one key/value head),
// checks that the loss falls below a tenth, and compares the
// final weights with the same training run in float64 (the float64
// reference forward and ReferenceGrad; only the attention's inputs are
// rounded to float32, as those functions take them).
//
// The tolerance follows the project's rule for kernels (a small multiple
// of a straightforward float32 implementation's error), applied to the
// whole run: the weights of the float32 run may drift from the float64
// run's by at most four times the drift of the same training with the
// straightforward float32 attention (verify.NaiveFP32 and
// verify.NaiveGradFP32), and by at most 1e-5 of the largest weight. Every
// step's gradient carries float32 rounding of about 1e-7 relative whatever
// computes the attention, and 300 steps at this learning rate neither
// amplify nor damp it much, so both float32 runs end about 1e-6 from the
// float64 one (measured: within a factor 0.8 to 1.3 of each other across
// learning rates 0.5 to 4). A wrong gradient (a missing scale, a dropped
// pair, a masked pair read) moves the weights by orders of magnitude more.
func TestTraining(t *testing.T) {
	p := spec.Pattern{Mask: spec.Window(24), Causal: true}
	plan, err := Compile(&spec.Spec{Name: "train", Mask: p.Mask, Causal: true, HeadDim: trainD}, CPUTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := plan.Mask()
	vs := verify.Shape{Batch: trainB, HeadsQ: trainHq, HeadsKV: trainHkv, SeqQ: trainS, SeqK: trainS, HeadDim: trainD}
	cs := cpuShape(vs)
	nq, nkv, nl := vs.Sizes()
	kernel := attention[float32]{
		fwd: func(q, k, v []float32) ([]float32, []float32, error) {
			out, lse := make([]float32, nq), make([]float32, nl)
			return out, lse, cpu.Forward(m, cpu.Auto, out, lse, q, k, v, nil, cs)
		},
		bwd: func(dout, q, k, v, out []float32, lse []float32) ([]float32, []float32, []float32, error) {
			dq, dk, dv := make([]float32, nq), make([]float32, nkv), make([]float32, nkv)
			return dq, dk, dv, cpu.Backward(m, cpu.Auto, dq, dk, dv, dout, q, k, v, out, lse, nil, cs)
		},
	}
	naive := attention[float32]{
		fwd: func(q, k, v []float32) ([]float32, []float32, error) {
			out, lse := make([]float32, nq), make([]float32, nl)
			return out, lse, verify.NaiveFP32(p, nil, q, k, v, vs, out, lse)
		},
		bwd: func(dout, q, k, v, _ []float32, _ []float32) ([]float32, []float32, []float32, error) {
			g, err := verify.NaiveGradFP32(p, nil, q, k, v, dout, vs)
			return g.Q, g.K, g.V, err
		},
	}
	ref := attention[float64]{
		fwd: func(q, k, v []float64) ([]float64, []float32, error) {
			out, _, err := verify.Reference(p, nil, narrow(q), narrow(k), narrow(v), vs)
			return out, nil, err
		},
		bwd: func(dout, q, k, v, _ []float64, _ []float32) ([]float64, []float64, []float64, error) {
			g, err := verify.ReferenceGrad(p, nil, narrow(q), narrow(k), narrow(v), narrow(dout), vs)
			return g.Q, g.K, g.V, err
		},
	}

	r := rand.New(rand.NewPCG(71, 72))
	normal := func(n int, sd float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(sd * r.NormFloat64())
		}
		return x
	}
	weights := func(qk float64) trainParams[float32] {
		in, hd := 1/math.Sqrt(trainIn), 1/math.Sqrt(trainHq*trainD)
		return trainParams[float32]{
			wq: normal(trainIn*trainHq*trainD, qk*in), wk: normal(trainIn*trainHkv*trainD, qk*in),
			wv: normal(trainIn*trainHkv*trainD, in), wo: normal(trainHq*trainD*trainOut, hd),
		}
	}
	// The teacher's sharper scores make its targets depend on which keys
	// in the window each row weights.
	teacher, init := weights(2.5), weights(1)
	var xs, ts [][]float32
	for b := 0; b < trainBatches; b++ {
		x := normal(trainB*trainS*trainIn, 1)
		tp := trainParams[float64]{}
		for _, w := range [][]float32{teacher.wq, teacher.wk, teacher.wv, teacher.wo} {
			y := make([]float64, len(w))
			for i, e := range w {
				y[i] = float64(e)
			}
			switch {
			case tp.wq == nil:
				tp.wq = y
			case tp.wk == nil:
				tp.wk = y
			case tp.wv == nil:
				tp.wv = y
			default:
				tp.wo = y
			}
		}
		xw := make([]float64, len(x))
		for i, e := range x {
			xw[i] = float64(e)
		}
		o, _, err := ref.fwd(project(xw, tp.wq, trainHq), project(xw, tp.wk, trainHkv), project(xw, tp.wv, trainHkv))
		if err != nil {
			t.Fatal(err)
		}
		xs, ts = append(xs, x), append(ts, narrow(output(o, tp.wo)))
	}

	got, losses, err := train(init, kernel, xs, ts)
	if err != nil {
		t.Fatal(err)
	}
	want, refLosses, err := train(init, ref, xs, ts)
	if err != nil {
		t.Fatal(err)
	}
	yard, _, err := train(init, naive, xs, ts)
	if err != nil {
		t.Fatal(err)
	}
	// The loss of the first and the last pass over the batches.
	mean := func(l []float64) float64 {
		s := 0.0
		for _, x := range l {
			s += x
		}
		return s / float64(len(l))
	}
	first, last := mean(losses[:trainBatches]), mean(losses[len(losses)-trainBatches:])
	refFirst, refLast := mean(refLosses[:trainBatches]), mean(refLosses[len(refLosses)-trainBatches:])
	scale := 0.0
	for _, w := range [][]float64{want.wq, want.wk, want.wv, want.wo} {
		for _, x := range w {
			scale = max(scale, math.Abs(x))
		}
	}
	kerr, nerr := paramDiff(got, want), paramDiff(yard, want)
	t.Logf("loss %.4g -> %.4g (float64 run %.4g -> %.4g); weights: largest %.3g, kernel run off by %.3g, straightforward float32 run by %.3g",
		first, last, refFirst, refLast, scale, kerr, nerr)
	if !(last < first/10) {
		t.Errorf("the loss fell from %.4g to %.4g only, want below a tenth", first, last)
	}
	if math.Abs(last-refLast) > 1e-3*refLast {
		t.Errorf("final loss %.6g, float64 run %.6g", last, refLast)
	}
	if !(kerr <= 4*nerr && kerr <= 1e-5*scale) {
		t.Errorf("final weights differ from the float64 run's by %.3g; the straightforward float32 run's by %.3g (allowed: four times that, and at most %.3g)", kerr, nerr, 1e-5*scale)
	}
}
