package gpurun

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// example is one example spec's sm_80 kernel under the interpreter.
type example struct {
	file string
	spec *spec.Spec
	k    *Kernel
}

func exampleKernels(t *testing.T) []example {
	t.Helper()
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	var es []example
	for _, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := gen.Compile(s, ptx.SM80, nil)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := ptx.GenerateForward(plan, ptx.Config{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		k, err := Interp(fw)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, example{f, s, k})
	}
	return es
}

// TestInterpExamples runs every example spec's PTX kernel under the
// interpreter on small awkward shapes against the float64 reference (judged
// against a straightforward bf16 implementation) and checks dependencies
// by perturbation.
func TestInterpExamples(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(71, 72))
	for _, e := range exampleKernels(t) {
		f, s, k := e.file, e.spec, e.k
		D := s.HeadDim
		shapes := []verify.Shape{
			{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: D},
			{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 37, SeqK: 70, HeadDim: D},
			{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 65, SeqK: 65, HeadDim: D},
		}
		if testing.Short() {
			shapes = shapes[:2]
		}
		for _, sh := range shapes {
			rep, err := verify.CheckNumericWith(s.Pattern(), k.Run(), sh, r, verify.BF16Kernel)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			t.Logf("%s: %v", filepath.Base(f), rep)
		}
		dep := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 20, SeqK: 40, HeadDim: D}
		if !testing.Short() {
			if err := verify.CheckDependencies(s.Pattern(), k.Run(), dep, r); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
}

func TestF16RoundTrip(t *testing.T) {
	for _, x := range []float32{0, 1, -2.5, 65504, 6.1035156e-05, 5.9604645e-08, 0.33325195} {
		if got := verify.FromF16(verify.F16(x)); got != x {
			t.Errorf("f16 round trip of %v gave %v", x, got)
		}
	}
	if verify.FromF16(verify.F16(1e6)) != verify.FromF16(0x7c00) {
		t.Error("overflow is not +Inf")
	}
}

// TestInterpMaskedRows: rows that keep no key give exactly 0 and -Inf, for
// random nested masks too, with grouped heads and fewer queries than keys.
func TestInterpMaskedRows(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	pats := []spec.Pattern{
		{Mask: spec.Bridge(16, 3, 5, 0), Causal: true},
		{Mask: spec.Intersect(spec.Block(40), spec.Bridge(40, 4, 4, 0)), Causal: true},
		{Mask: spec.Union(spec.Global(2), spec.Dilated(3, 4)), Causal: false},
	}
	for _, p := range pats {
		plan, err := gen.Compile(&spec.Spec{Name: "t", Mask: p.Mask, Causal: p.Causal, HeadDim: 64}, ptx.SM80, nil)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := ptx.GenerateForward(plan, ptx.Config{})
		if err != nil {
			t.Fatalf("%v: %v", p, err)
		}
		k, err := Interp(fw)
		if err != nil {
			t.Fatal(err)
		}
		sh := verify.Shape{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 45, SeqK: 77, HeadDim: 64}
		rep, err := verify.CheckNumericWith(p, k.Run(), sh, r, verify.BF16Kernel)
		if err != nil {
			t.Fatalf("%v: %v", p, err)
		}
		t.Logf("%v: %v", p, rep)
	}
}
