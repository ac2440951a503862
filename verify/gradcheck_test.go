package verify

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

// bf16Backward is a backward that computes as a bf16 tensor-core backward
// does (NaiveGradRounded with bf16 rounding), with wrong applied to its
// gradients (nil: none).
func bf16Backward(p spec.Pattern, wrong func(g Grads[float32])) RunBackward {
	return func(dq, dk, dv, dout, q, k, v, out, lse []float32, ids []int32, s Shape, dsink []float32) error {
		g, err := NaiveGradRounded(p, nil, q, k, v, dout, s, roundBF16)
		if err != nil {
			return err
		}
		if wrong != nil {
			wrong(g)
		}
		copy(dq, g.Q)
		copy(dk, g.K)
		copy(dv, g.V)
		copy(dsink, g.DSink)
		return nil
	}
}

// TestCheckGradWithBF16: a backward with bf16 rounding passes GradBF16 on
// bf16 inputs, the float32 yardstick (GradFP32) rejects it, and GradBF16
// still rejects gradients off by 2% or with one key's dv dropped.
func TestCheckGradWithBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(97, 98))
	p := spec.Pattern{Mask: spec.Window(20), Causal: true}
	fwd := func(out, lse, q, k, v []float32, ids []int32, s Shape) error {
		return NaiveBF16(p, nil, q, k, v, s, out, lse)
	}
	s := Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 50, SeqK: 70, HeadDim: 32}
	rep, err := CheckGradWith(p, fwd, bf16Backward(p, nil), s, r, GradBF16)
	if err != nil {
		t.Fatalf("bf16 backward under GradBF16: %v", err)
	}
	t.Log(rep)
	if _, err := CheckGradWith(p, fwd, bf16Backward(p, nil), s, r, GradFP32); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("bf16 backward under the float32 yardstick: %v, want an error that is too large", err)
	}
	scale := func(g Grads[float32]) {
		for i := range g.Q {
			g.Q[i] *= 1.02
		}
	}
	if _, err := CheckGradWith(p, fwd, bf16Backward(p, scale), s, r, GradBF16); err == nil || !strings.Contains(err.Error(), "dq error too large") {
		t.Errorf("dq off by 2%%: %v, want dq's error too large", err)
	}
	drop := func(g Grads[float32]) {
		// key 40 of the key/value head: kept by rows of positions 40 to 59
		for d := 0; d < s.HeadDim; d++ {
			g.V[40*s.HeadDim+d] = 0
		}
	}
	if _, err := CheckGradWith(p, fwd, bf16Backward(p, drop), s, r, GradBF16); err == nil || !strings.Contains(err.Error(), "dv error too large") {
		t.Errorf("dv of one key dropped: %v, want dv's error too large", err)
	}
	if _, err := CheckGradWith(p, fwd, bf16Backward(p, nil), s, r, GradOptions{}); err == nil {
		t.Error("zero options accepted")
	}
}

// TestCheckGradBF16DSink: a bf16 backward whose dsink reads delta from
// the forward's bf16 output (as the PTX dq kernel does) passes GradBF16,
// OutUnit's floor included, on 200 seeds, and twice the dsink still fails
// on every seed: the floor does not let a wrong dsink through. (The PTX
// kernels' seeds that failed without the floor are emit/ptx's
// TestDSinkFloorSeeds.)
func TestCheckGradBF16DSink(t *testing.T) {
	p := spec.Pattern{Mask: spec.Not(spec.Window(40)), Causal: true, Score: spec.Score{LearnedSinks: true}}
	fwd := func(out, lse, q, k, v []float32, ids []int32, s Shape) error {
		return NaiveBF16(p, nil, q, k, v, s, out, lse)
	}
	// kernel's dsink is scale times -sum p_sink (dout . out)
	kernel := func(scale float32) RunBackward {
		return func(dq, dk, dv, dout, q, k, v, out, lse []float32, ids []int32, s Shape, dsink []float32) error {
			if err := bf16Backward(p, nil)(dq, dk, dv, dout, q, k, v, out, lse, ids, s, dsink); err != nil {
				return err
			}
			clear(dsink)
			for row := range lse {
				h := row / s.SeqQ % s.HeadsQ
				ps := float32(math.Exp(s.Score.sink(h) - float64(lse[row])))
				var delta float32
				for d := 0; d < s.HeadDim; d++ {
					delta += dout[row*s.HeadDim+d] * out[row*s.HeadDim+d]
				}
				dsink[h] -= scale * ps * delta
			}
			return nil
		}
	}
	s := Shape{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 69, SeqK: 132, HeadDim: 64}
	for seed := uint64(0); seed < 200; seed++ {
		if _, err := CheckGradWith(p, fwd, kernel(1), s, rand.New(rand.NewPCG(seed, 6)), GradBF16); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if _, err := CheckGradWith(p, fwd, kernel(2), s, rand.New(rand.NewPCG(seed, 6)), GradBF16); err == nil || !strings.Contains(err.Error(), "dsink error too large") {
			t.Fatalf("seed %d: twice the dsink: %v, want dsink's error too large", seed, err)
		}
	}
}

// TestCheckGradSampled: on every row, the sampled check's yardstick is
// NaiveGradRounded bit for bit (a backward that is that yardstick has
// exactly its error) and its reference is ReferenceGrad (the float64
// gradients rounded to float32 are within a float32 rounding of it); on
// sampled rows of a longer shape it rejects gradients off by 2% and a
// dead key's nonzero dv, and bad rows are errors.
func TestCheckGradSampled(t *testing.T) {
	r := rand.New(rand.NewPCG(99, 100))
	for _, c := range []struct {
		p spec.Pattern
		s Shape
	}{
		{spec.Pattern{Mask: spec.Window(20), Causal: true}, Shape{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 50, SeqK: 70, HeadDim: 32}},
		{spec.Pattern{Mask: spec.Intersect(spec.Document(), spec.Window(30)), Causal: true}, Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 60, SeqK: 60, HeadDim: 16, Scale: 0.4}},
		{spec.Pattern{Mask: spec.Block(16), Causal: false}, Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 20, SeqK: 90, HeadDim: 16}},
		// every stage, a head without a sink, rows that keep nothing
		{spec.Pattern{Mask: spec.Bridge(30, 2, 3, 0), Causal: true}, Shape{Batch: 2, HeadsQ: 3, HeadsKV: 1, SeqQ: 40, SeqK: 60, HeadDim: 16,
			Score: &Score{SoftCap: 3, Alibi: AlibiSigned, Slopes: AlibiSlopes(3), Sinks: []float64{0.5, math.Inf(-1), 2}}}},
		{spec.Pattern{Mask: spec.Window(20), Causal: false}, Shape{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 30, SeqK: 30, HeadDim: 16,
			Score: &Score{Alibi: AlibiSymmetric, Slopes: []float64{0.3, 0.01}, Sinks: []float64{-1, 3}}}},
	} {
		p, s := c.p, c.s
		nq, nkv, nl := s.Sizes()
		q, k, v, ids, docs := randomInputs(p, &s, r)
		dout := randomSlice(r, nq, 1)
		for _, x := range [][]float32{q, k, v, dout} {
			RoundBF16(x)
		}
		all := GradRows{}
		for x := 0; x < nl; x++ {
			all.Query = append(all.Query, x)
		}
		for x := 0; x < nkv/s.HeadDim; x++ {
			all.Key = append(all.Key, x)
		}
		if s.Score.hasSinks() {
			all.Sink = []int{0, 1, 2}[:s.HeadsQ]
		}
		yard, err := NaiveGradRounded(p, docs, q, k, v, dout, s, roundBF16)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := CheckGradSampled(p, ids, q, k, v, dout, s, yard.Q, yard.K, yard.V, yard.DSink, GradBF16, all)
		if err != nil {
			t.Fatalf("%v: the yardstick itself: %v", p, err)
		}
		if rep.KernelErr != rep.NaiveErr {
			t.Errorf("%v: the yardstick's error %v, the check's yardstick %v: want them equal", p, rep.KernelErr, rep.NaiveErr)
		}
		ref, err := ReferenceGrad(p, docs, q, k, v, dout, s)
		if err != nil {
			t.Fatal(err)
		}
		narrow := func(x []float64) []float32 {
			if x == nil {
				return nil
			}
			y := make([]float32, len(x))
			for i, e := range x {
				y[i] = float32(e)
			}
			return y
		}
		rep, err = CheckGradSampled(p, ids, q, k, v, dout, s, narrow(ref.Q), narrow(ref.K), narrow(ref.V), narrow(ref.DSink), GradBF16, all)
		if err != nil {
			t.Fatal(err)
		}
		for x := range rep.KernelErr {
			if rep.KernelErr[x] > 1e-6*max(rep.RefMax[x], 1) {
				t.Errorf("%v: the reference rounded to float32 has error %v (max %v)", p, rep.KernelErr[x], rep.RefMax[x])
			}
		}
		t.Logf("%v: %v", p, rep)
		if s.Score.hasSinks() {
			if rep.RefMax[3] == 0 {
				t.Errorf("%v: dsink's reference is 0", p)
			}
			wrong := slices.Clone(yard.DSink)
			wrong[0] = -wrong[0]
			if _, err := CheckGradSampled(p, ids, q, k, v, dout, s, yard.Q, yard.K, yard.V, wrong, GradBF16, all); err == nil || !strings.Contains(err.Error(), "dsink error too large") {
				t.Errorf("%v: dsink[0] negated: %v", p, err)
			}
			if math.IsInf(s.Score.Sinks[1], -1) { // head 1 has no sink: its dsink must be 0
				wrong = slices.Clone(yard.DSink)
				wrong[1] = 1e-30
				if _, err := CheckGradSampled(p, ids, q, k, v, dout, s, yard.Q, yard.K, yard.V, wrong, GradBF16, all); err == nil || !strings.Contains(err.Error(), "want exactly 0") {
					t.Errorf("%v: dsink of a head without a sink set: %v", p, err)
				}
			}
			if _, err := CheckGradSampled(p, ids, q, k, v, dout, s, yard.Q, yard.K, yard.V, nil, GradBF16, all); err == nil {
				t.Errorf("%v: no dsink accepted", p)
			}
		}
	}

	// sampled rows of a longer shape
	p := spec.Pattern{Mask: spec.Union(spec.Window(40), spec.Global(2)), Causal: true}
	s := Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 300, SeqK: 400, HeadDim: 16}
	q, k, v, _, _ := randomInputs(p, &s, r)
	nq, _, _ := s.Sizes()
	dout := randomSlice(r, nq, 1)
	for _, x := range [][]float32{q, k, v, dout} {
		RoundBF16(x)
	}
	g, err := NaiveGradRounded(p, nil, q, k, v, dout, s, roundBF16)
	if err != nil {
		t.Fatal(err)
	}
	rows := SampleGradRows(p, nil, s, 24, r)
	if len(rows.Query) == 0 || len(rows.Key) != 24 {
		t.Fatalf("sampled %d query rows and %d keys, want some and 24", len(rows.Query), len(rows.Key))
	}
	if _, err := CheckGradSampled(p, nil, q, k, v, dout, s, g.Q, g.K, g.V, nil, GradBF16, rows); err != nil {
		t.Fatalf("the yardstick on sampled rows: %v", err)
	}
	wrong := slices.Clone(g.K)
	for i := range wrong {
		wrong[i] *= 1.02
	}
	if _, err := CheckGradSampled(p, nil, q, k, v, dout, s, g.Q, wrong, g.V, nil, GradBF16, rows); err == nil || !strings.Contains(err.Error(), "dk error too large") {
		t.Errorf("dk off by 2%%: %v", err)
	}
	// the rows are positions 100 to 399: keys 2 to 60 are kept by none
	dead := slices.Clone(g.V)
	dead[10*s.HeadDim] = 1
	deadRows := GradRows{Key: []int{10}}
	if _, err := CheckGradSampled(p, nil, q, k, v, dout, s, g.Q, g.K, dead, nil, GradBF16, deadRows); err == nil || !strings.Contains(err.Error(), "want exactly 0") {
		t.Errorf("a dead key's dv set: %v", err)
	}
	if every := SampleGradRows(p, nil, s, 0, r); len(every.Query) != 600 || len(every.Key) != 400 {
		t.Errorf("n = 0: %d query rows and %d keys, want 600 and 400", len(every.Query), len(every.Key))
	}
	fwd := func(out, lse, q, k, v []float32, ids []int32, s Shape) error {
		return NaiveBF16(p, nil, q, k, v, s, out, lse)
	}
	if rep, err := CheckGradSampledRun(p, fwd, bf16Backward(p, nil), s, r, GradBF16, 30); err != nil {
		t.Errorf("CheckGradSampledRun of the bf16 backward: %v", err)
	} else if rep.KernelErr != rep.NaiveErr {
		t.Errorf("CheckGradSampledRun: the yardstick's error %v, the check's %v", rep.KernelErr, rep.NaiveErr)
	}
	if _, err := CheckGradSampledRun(p, fwd, bf16Backward(p, func(g Grads[float32]) { g.Q[5] = 0.5 }), s, r, GradBF16, 0); err == nil {
		t.Error("CheckGradSampledRun on every row: one dq element changed passed")
	}
	if _, err := CheckGradSampled(p, nil, q, k, v, dout, s, g.Q, g.K, g.V, nil, GradBF16, GradRows{Key: []int{400}}); err == nil {
		t.Error("key row 400 of 400 accepted")
	}
	if _, err := CheckGradSampled(p, nil, q, k, v, dout, s, g.Q, g.K, g.V, nil, GradBF16, GradRows{Query: []int{-1}}); err == nil {
		t.Error("query row -1 accepted")
	}
}
