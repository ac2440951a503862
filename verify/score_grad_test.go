package verify

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/spec"
)

// stageCase is a score stage for the tests, made for a shape's query heads.
type stageCase struct {
	name   string
	causal bool // the pattern's causal flag the case runs with
	make   func(r *rand.Rand, heads int) *Score
}

// randomSinks are heads sink logits from N(0, 2), with head 1 (of at
// least two) at -Inf: a head without a sink.
func randomSinks(r *rand.Rand, heads int) []float64 {
	x := make([]float64, heads)
	for h := range x {
		x[h] = 2 * r.NormFloat64()
	}
	if heads >= 2 {
		x[1] = math.Inf(-1)
	}
	return x
}

// stageCases are every combination the finite differences check: the
// soft-cap alone (small, so tanh bends on these scores), ALiBi signed
// (causal) and symmetric (not causal), learned sinks alone, and all three.
var stageCases = []stageCase{
	{"softcap", true, func(r *rand.Rand, heads int) *Score { return &Score{SoftCap: 1.5} }},
	{"alibi signed", true, func(r *rand.Rand, heads int) *Score {
		return &Score{Alibi: AlibiSigned, Slopes: AlibiSlopes(heads)}
	}},
	{"alibi symmetric", false, func(r *rand.Rand, heads int) *Score {
		return &Score{Alibi: AlibiSymmetric, Slopes: AlibiSlopes(heads)}
	}},
	{"sinks", true, func(r *rand.Rand, heads int) *Score { return &Score{Sinks: randomSinks(r, heads)} }},
	{"softcap alibi sinks", true, func(r *rand.Rand, heads int) *Score {
		sl := make([]float64, heads)
		for h := range sl {
			sl[h] = 0.05 + r.Float64()
		}
		return &Score{SoftCap: 2, Alibi: AlibiSigned, Slopes: sl, Sinks: randomSinks(r, heads)}
	}},
}

// TestReferenceGradScoreFiniteDifferences checks ReferenceGrad with every
// combination of the score stage against central finite differences of
// the float64 loss sum(dout * out) (attention64 through the stage), dq,
// dk and dv, and dsink by differences in each sink logit, on masks with
// fully masked rows, documents and windows.
func TestReferenceGradScoreFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(211, 212))
	masks := []*spec.Mask{
		spec.Full(),
		spec.Window(3),
		spec.Bridge(4, 1, 2, 0), // most rows keep nothing
		spec.Intersect(spec.Document(), spec.Union(spec.Global(1), spec.Window(2))),
	}
	shapes := []Shape{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: 3},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 4, SeqK: 9, HeadDim: 3},
		{Batch: 2, HeadsQ: 2, HeadsKV: 2, SeqQ: 7, SeqK: 7, HeadDim: 2, Scale: 0.7},
		{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 1, SeqK: 6, HeadDim: 4},
	}
	for _, c := range stageCases {
		for _, m := range masks {
			p := spec.Pattern{Mask: m, Causal: c.causal}
			for _, s := range shapes {
				s.Score = c.make(r, s.HeadsQ)
				checkFD(t, p, s, r)
			}
		}
	}
}

// TestSinkRowsThatKeepNothing: with a sink, a row that keeps no key has
// output 0 and lse = the sink logit (-Inf for a head without one) in
// Reference and NaiveFP32, dq exactly 0 in ReferenceGrad and NaiveGradFP32,
// and adds nothing to dsink; dsink is its definition computed from
// Reference's own out and lse, -sum_rows exp(sink - lse) (dout . out).
func TestSinkRowsThatKeepNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(213, 214))
	// most rows keep nothing (bridge keys lie 10 back), some keep keys
	p := spec.Pattern{Mask: spec.Bridge(10, 1, 1, 0), Causal: true}
	s := Shape{Batch: 2, HeadsQ: 3, HeadsKV: 1, SeqQ: 14, SeqK: 14, HeadDim: 8,
		Score: &Score{SoftCap: 5, Alibi: AlibiSigned, Slopes: AlibiSlopes(3), Sinks: []float64{0.5, math.Inf(-1), 3}}}
	nq, nkv, nl := s.Sizes()
	q, k, v, dout := randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv), randSlice(r, nq)
	out, lse, err := Reference(p, nil, q, k, v, s)
	if err != nil {
		t.Fatal(err)
	}
	out32, lse32 := make([]float32, nq), make([]float32, nl)
	if err := NaiveFP32(p, nil, q, k, v, s, out32, lse32); err != nil {
		t.Fatal(err)
	}
	g, err := ReferenceGrad(p, nil, q, k, v, dout, s)
	if err != nil {
		t.Fatal(err)
	}
	g32, err := NaiveGradFP32(p, nil, q, k, v, dout, s)
	if err != nil {
		t.Fatal(err)
	}
	rowKeeps, _ := structure(p, nil, s)
	D := s.HeadDim
	want := make([]float64, s.HeadsQ)
	dead := 0
	for row := 0; row < nl; row++ {
		h := row / s.SeqQ % s.HeadsQ
		sink := s.Score.Sinks[h]
		if !rowKeeps[row] {
			dead++
			if lse[row] != sink || lse32[row] != float32(sink) {
				t.Fatalf("row %d keeps nothing: lse %v (float32 %v), want the sink logit %v", row, lse[row], lse32[row], sink)
			}
			for d := 0; d < D; d++ {
				if out[row*D+d] != 0 || out32[row*D+d] != 0 || g.Q[row*D+d] != 0 || g32.Q[row*D+d] != 0 {
					t.Fatalf("row %d keeps nothing: out %v / %v, dq %v / %v at dim %d, want 0", row, out[row*D+d], out32[row*D+d], g.Q[row*D+d], g32.Q[row*D+d], d)
				}
			}
			continue
		}
		delta := 0.0
		for d := 0; d < D; d++ {
			delta += float64(dout[row*D+d]) * out[row*D+d]
		}
		want[h] -= math.Exp(sink-lse[row]) * delta
	}
	if dead == 0 || dead == nl {
		t.Fatalf("%d of %d rows keep nothing, want some but not all", dead, nl)
	}
	for h := range want {
		if math.Abs(g.DSink[h]-want[h]) > 1e-12*(1+math.Abs(want[h])) {
			t.Errorf("dsink[%d] = %v, from Reference's out and lse %v", h, g.DSink[h], want[h])
		}
		if math.Abs(float64(g32.DSink[h])-want[h]) > 1e-5*(1+math.Abs(want[h])) {
			t.Errorf("NaiveGradFP32's dsink[%d] = %v, reference %v", h, g32.DSink[h], want[h])
		}
	}
	if g.DSink[1] != 0 || g32.DSink[1] != 0 {
		t.Errorf("head 1 has no sink: dsink %v / %v, want 0", g.DSink[1], g32.DSink[1])
	}
}

// TestAttention64Score ties attention64 to Reference with every stage.
func TestAttention64Score(t *testing.T) {
	r := rand.New(rand.NewPCG(215, 216))
	for _, c := range stageCases {
		p := spec.Pattern{Mask: spec.Union(spec.Window(5), spec.Global(1)), Causal: c.causal}
		s := Shape{Batch: 2, HeadsQ: 3, HeadsKV: 1, SeqQ: 9, SeqK: 20, HeadDim: 5}
		s.Score = c.make(r, s.HeadsQ)
		nq, nkv, _ := s.Sizes()
		q, k, v := randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv)
		ref, _, err := Reference(p, nil, q, k, v, s)
		if err != nil {
			t.Fatal(err)
		}
		got := attention64(p, nil, wide(q), wide(k), wide(v), s)
		for i := range ref {
			if math.Abs(ref[i]-got[i]) > 1e-12 {
				t.Fatalf("%s: out[%d] = %v, Reference %v", c.name, i, got[i], ref[i])
			}
		}
	}
}

// TestDependenciesStrongAlibi: the dependency checks do not fail correct
// kernels (the float32 yardsticks) whose stage gives far pairs weights
// too small for float32 to show (a steep ALiBi slope, a cap, a heavy
// sink: row i's weight of key j near e^-60); they still fail a kernel
// that drops a visible pair or reads a masked one.
func TestDependenciesStrongAlibi(t *testing.T) {
	r := rand.New(rand.NewPCG(217, 218))
	p := spec.Pattern{Mask: spec.Window(100), Causal: true}
	s := Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 70, SeqK: 70, HeadDim: 64,
		Score: &Score{SoftCap: 6.9, Alibi: AlibiSigned, Slopes: []float64{0.87}, Sinks: []float64{-0.8}}}
	fwd := func(out, lse, q, k, v []float32, ids []int32, s Shape) error {
		return NaiveFP32(p, nil, q, k, v, s, out, lse)
	}
	bwd := func(dq, dk, dv, dout, q, k, v, out, lse []float32, ids []int32, s Shape, dsink []float32) error {
		g, err := NaiveGradFP32(p, nil, q, k, v, dout, s)
		if err != nil {
			return err
		}
		copy(dq, g.Q)
		copy(dk, g.K)
		copy(dv, g.V)
		copy(dsink, g.DSink)
		return nil
	}
	for n := 0; n < 3; n++ {
		if err := CheckDependencies(p, fwd, s, r); err != nil {
			t.Errorf("forward: %v", err)
		}
		if err := CheckGradDependencies(p, fwd, bwd, s, r); err != nil {
			t.Errorf("backward: %v", err)
		}
	}
	// a forward that drops key 3 of row 5 (weight about e^-2 with the slope)
	drop := func(out, lse, q, k, v []float32, ids []int32, s Shape) error {
		k2 := clone(k)
		if err := fwd(out, lse, q, k, v, ids, s); err != nil {
			return err
		}
		o5 := make([]float32, s.SeqQ*s.HeadDim)
		for d := 0; d < s.HeadDim; d++ {
			k2[3*s.HeadDim+d] = k[4*s.HeadDim+d]
		}
		v2 := clone(v)
		copy(v2[3*s.HeadDim:4*s.HeadDim], v[4*s.HeadDim:5*s.HeadDim])
		if err := fwd(o5, make([]float32, s.SeqQ), q, k2, v2, ids, s); err != nil {
			return err
		}
		copy(out[5*s.HeadDim:6*s.HeadDim], o5[5*s.HeadDim:6*s.HeadDim])
		return nil
	}
	if err := CheckDependencies(p, drop, s, r); err == nil {
		t.Error("a forward whose row 5 ignores key 3 passed")
	}
	wide := Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 70, SeqK: 70, HeadDim: 64, Score: s.Score}
	narrow := spec.Pattern{Mask: spec.Window(10), Causal: true}
	if err := CheckDependencies(narrow, fwd, wide, r); err == nil {
		t.Error("a window-100 forward passed as a window-10 one")
	}
}
