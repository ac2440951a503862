package gpurun

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"

	"github.com/attngen/attngen/verify"
)

// TestInterpNonFinite: in every example's PTX kernel (under the
// interpreter), NaN and infinities at masked positions never reach an
// output and kept ones give the reference's kinds of results, as on the
// CPU.
func TestInterpNonFinite(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(73, 74))
	for _, e := range exampleKernels(t) {
		f, s, k := e.file, e.spec, e.k
		D := s.HeadDim
		shapes := []verify.Shape{
			{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 37, SeqK: 70, HeadDim: D},
			{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 80, SeqK: 80, HeadDim: D},
		}
		trials := 4
		if testing.Short() {
			shapes, trials = shapes[:1], 2
		}
		for _, sh := range shapes {
			if err := verify.CheckNonFinite(s.Pattern(), k.Run(), sh, r, trials); err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
			}
		}
	}
}

// TestInterpF16Yardstick: f16 kernels are within the error of a
// straightforward f16 implementation (verify.F16Kernel), the yardstick
// attngen verify -dtype f16 uses.
func TestInterpF16Yardstick(t *testing.T) {
	r := rand.New(rand.NewPCG(75, 76))
	for _, name := range []string{"causal", "bridge", "dilated", "document"} {
		s, err := spec.ParseFile("../../spec/examples/" + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		tg := ptx.Target{SM: 80, Elem: "f16"}
		plan, err := gen.Compile(s, tg, nil)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := ptx.GenerateForward(plan, ptx.Config{Target: tg})
		if err != nil {
			t.Fatal(err)
		}
		k, err := Interp(fw)
		if err != nil {
			t.Fatal(err)
		}
		sh := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 37, SeqK: 70, HeadDim: s.HeadDim}
		rep, err := verify.CheckNumericWith(s.Pattern(), k.Run(), sh, r, verify.F16Kernel)
		if err != nil {
			t.Errorf("%s f16: %v", name, err)
		}
		t.Logf("%s f16: %v", name, rep)
	}
}

// TestRefusesSplitHeadDims: kernels of head_dim {qk, v} are refused with
// an error (a verify.Shape has one head dimension), not run on wrongly
// sized tensors.
func TestRefusesSplitHeadDims(t *testing.T) {
	s := &spec.Spec{Name: "mla", Mask: spec.Full(), Causal: true, HeadDim: 192, HeadDimV: 128}
	p, err := gen.Compile(s, ptx.SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ptx.Kernels(p, ptx.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Interp(ks.Forward); err == nil || !strings.Contains(err.Error(), "{qk: 192, v: 128}") {
		t.Errorf("Interp: err = %v", err)
	}
	if _, err := InterpBackward(ks.Backward); err == nil || !strings.Contains(err.Error(), "{qk: 192, v: 128}") {
		t.Errorf("InterpBackward: err = %v", err)
	}
}
