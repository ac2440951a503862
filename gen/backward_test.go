package gen

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
	"github.com/attngen/attngen/verify"
)

func cpuShape(s verify.Shape) cpu.Shape {
	return cpu.Shape{Batch: s.Batch, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: s.SeqQ, SeqK: s.SeqK, HeadDim: s.HeadDim, Scale: float32(s.Scale)}
}

func cpuBackward(t testing.TB, p spec.Pattern, variant cpu.Variant, d int) verify.RunBackward {
	plan, err := Compile(&spec.Spec{Name: "t", Mask: p.Mask, Causal: p.Causal, HeadDim: d, HeadParams: p.Params, Score: p.Score}, CPUTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := plan.Mask()
	return func(dq, dk, dv, dout, q, k, v, out, lse []float32, docs []int32, s verify.Shape, dsink []float32) error {
		if p.Score.Active() {
			a := cpu.BackArgs{DQ: dq, DK: dk, DV: dv, DOut: dout, Q: q, K: k, V: v, Out: out, LSE: lse, Docs: docs,
				HeadParams: cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), DSinks: dsink, Shape: cpuShape(s)}
			a.SoftCap, a.Slopes, a.Sinks = s.Score.Float32()
			return cpu.BackwardArgs(m, variant, a)
		}
		if p.HasParams() {
			return cpu.BackwardHeads(m, variant, dq, dk, dv, dout, q, k, v, out, lse, docs, cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), cpuShape(s))
		}
		return cpu.Backward(m, variant, dq, dk, dv, dout, q, k, v, out, lse, docs, cpuShape(s))
	}
}

// backwardPatterns are masks with fully masked rows, documents, dilated
// layouts and random nests.
func backwardPatterns(r *rand.Rand, n int) []spec.Pattern {
	pats := []spec.Pattern{
		{Mask: spec.Bridge(16, 3, 5, 0), Causal: true}, // most rows keep nothing
		{Mask: spec.Intersect(spec.Block(40), spec.Bridge(40, 4, 4, 0)), Causal: true},
		{Mask: spec.Dilated(5, 0), Causal: true},
		{Mask: spec.Dilated(3, 4), Causal: false},
		{Mask: spec.Intersect(spec.Document(), spec.Union(spec.Global(3), spec.Window(20))), Causal: true},
		{Mask: spec.Full(), Causal: false},
	}
	for k := 0; k < n; k++ {
		pats = append(pats, spectest.Pattern(r, 150, 3))
	}
	return pats
}

// TestBackwardNumeric: gradients against the float64 reference on the
// forward's awkward shapes, every supported variant (the tiled backward
// with the AVX-512 or the AVX2 kernels, the pure-Go per-pair one), within
// a small factor of a float32 backward.
func TestBackwardNumeric(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	shapes := []verify.Shape{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 77, SeqK: 77},
		{Batch: 2, HeadsQ: 2, HeadsKV: 2, SeqQ: 50, SeqK: 130},
		{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 97, SeqK: 161, Scale: 0.3},
		{Batch: 2, HeadsQ: 3, HeadsKV: 1, SeqQ: 3, SeqK: 200},
	}
	for vi, v := range variants() {
		for _, d := range []int{64, 128} {
			for _, p := range backwardPatterns(r, 4) {
				fwd, bwd := cpuRun(t, p, v, d), cpuBackward(t, p, v, d)
				for si, s := range shapes {
					if (si+vi)%2 == 1 && d == 128 {
						continue // keep the test short: half the shapes at 128
					}
					s.HeadDim = d
					if _, err := verify.CheckGrad(p, fwd, bwd, s, r); err != nil {
						t.Fatalf("%s %v: %v", v, p, err)
					}
				}
			}
		}
	}
}

// TestBackwardExamples runs the backward of every example spec.
func TestBackwardExamples(t *testing.T) {
	files, _ := filepath.Glob("../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	r := rand.New(rand.NewPCG(63, 64))
	for _, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := s.Pattern()
		fwd, bwd := cpuRun(t, p, cpu.Auto, s.HeadDim), cpuBackward(t, p, cpu.Auto, s.HeadDim)
		for _, sh := range []verify.Shape{
			{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 300, SeqK: 300, HeadDim: s.HeadDim},
			{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 5, SeqK: 600, HeadDim: s.HeadDim},
		} {
			rep, err := verify.CheckGrad(p, fwd, bwd, sh, r)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			t.Logf("%s: %v", s.Name, rep)
		}
	}
}

// TestBackwardDependencies: perturbing dout row i changes dv exactly at the
// keys row i keeps, dk only there, dq only in row i.
func TestBackwardDependencies(t *testing.T) {
	r := rand.New(rand.NewPCG(65, 66))
	for iter := 0; iter < 8; iter++ {
		p := spectest.Pattern(r, 60, 2)
		if iter == 0 {
			p = spec.Pattern{Mask: spec.Bridge(16, 3, 5, 0), Causal: true}
		}
		n := 1 + r.IntN(90)
		s := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1 + r.IntN(n), SeqK: n, HeadDim: 64}
		if err := verify.CheckGradDependencies(p, cpuRun(t, p, cpu.Auto, 64), cpuBackward(t, p, cpu.Auto, 64), s, r); err != nil {
			t.Fatalf("%v: %v", p, err)
		}
	}
}

// TestBackwardNonFinite: NaN and infinities at masked positions never
// reach a gradient.
func TestBackwardNonFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(67, 68))
	for _, p := range backwardPatterns(r, 3) {
		for _, s := range []verify.Shape{
			{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 100, HeadDim: 64},
			{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 130, SeqK: 130, HeadDim: 64},
		} {
			if err := verify.CheckGradNonFinite(p, cpuRun(t, p, cpu.Auto, 64), cpuBackward(t, p, cpu.Auto, 64), s, r, 4); err != nil {
				t.Fatalf("%v: %v", p, err)
			}
		}
	}
}

// TestBackwardNoAllocs: after warm-up a call allocates nothing, on every
// supported variant.
func TestBackwardNoAllocs(t *testing.T) {
	p := spec.Pattern{Mask: spec.Union(spec.Block(64), spec.Bridge(64, 8, 8, 0)), Causal: true}
	plan, _ := Compile(&spec.Spec{Name: "t", Mask: p.Mask, Causal: true, HeadDim: 64}, CPUTarget, nil)
	m := plan.Mask()
	s := cpu.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 300, SeqK: 300, HeadDim: 64}
	mk := func(n int) []float32 { return make([]float32, n) }
	nq, nkv := 2*300*64, 300*64
	q, k, v, out, lse, dout := mk(nq), mk(nkv), mk(nkv), mk(nq), mk(600), mk(nq)
	dq, dk, dv := mk(nq), mk(nkv), mk(nkv)
	if err := cpu.Forward(m, cpu.Auto, out, lse, q, k, v, nil, s); err != nil {
		t.Fatal(err)
	}
	for _, vr := range append(variants(), cpu.Auto) {
		allocs := testing.AllocsPerRun(5, func() {
			if err := cpu.Backward(m, vr, dq, dk, dv, dout, q, k, v, out, lse, nil, s); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per call", vr, allocs)
		}
	}
}

// TestBackwardDocumentErrors: document ids of a wrong length or decreasing
// are ErrDocument.
func TestBackwardDocumentErrors(t *testing.T) {
	p := spec.Pattern{Mask: spec.Intersect(spec.Document(), spec.Full()), Causal: true}
	bwd := cpuBackward(t, p, cpu.PureGo, 64)
	s := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 3, SeqK: 5, HeadDim: 64}
	nq, nkv, nl := s.Sizes()
	mk := func(n int) []float32 { return make([]float32, n) }
	for _, ids := range [][]int32{{0, 0}, {0, 1, 0, 1, 1}, nil} {
		err := bwd(mk(nq), mk(nkv), mk(nkv), mk(nq), mk(nq), mk(nkv), mk(nkv), mk(nq), mk(nl), ids, s, nil)
		if !errors.Is(err, cpu.ErrDocument) {
			t.Errorf("ids %v: error %v, want ErrDocument", ids, err)
		}
	}
	if err := bwd(mk(nq), mk(nkv), mk(nkv), mk(nq), mk(nq), mk(nkv), mk(nkv), mk(nq), mk(nl), []int32{0, 0, 1, 1, 1}, s, nil); err != nil {
		t.Error(err)
	}
}
