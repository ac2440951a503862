package gpurun

import (
	"math"
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

// TestSplitHeadDims: the runner sizes v and the output by the shape's
// HeadDimV, so a kernel of head_dim {qk: 192, v: 128} runs (its output
// within bf16 rounding of the float64 reference), and a shape whose
// HeadDimV is not the kernel's is refused.
func TestSplitHeadDims(t *testing.T) {
	s := &spec.Spec{Name: "mla", Mask: spec.Full(), Causal: true, HeadDim: 192, HeadDimV: 128}
	p, err := gen.Compile(s, ptx.SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ptx.Kernels(p, ptx.Config{SoftLg2: true})
	if err != nil {
		t.Fatal(err)
	}
	k, err := Interp(ks.Forward)
	if err != nil {
		t.Fatal(err)
	}
	sh := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 9, SeqK: 13, HeadDim: 192, HeadDimV: 128}
	nq, nkv, nl := sh.Sizes()
	nv, nout := sh.SizesV()
	r := rand.New(rand.NewPCG(3, 4))
	draw := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = verify.FromBF16(verify.BF16(float32(r.NormFloat64())))
		}
		return x
	}
	q, kk, v := draw(nq), draw(nkv), draw(nv)
	out, lse := make([]float32, nout), make([]float32, nl)
	if err := k.Run()(out, lse, q, kk, v, nil, sh); err != nil {
		t.Fatal(err)
	}
	ref, _, err := verify.Reference(p.Source, nil, q, kk, v, sh)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ref {
		if d := math.Abs(float64(out[i]) - ref[i]); !(d <= 0.02*(1+math.Abs(ref[i]))) {
			t.Fatalf("out[%d] = %g, want %g", i, out[i], ref[i])
		}
	}
	bad := sh
	bad.HeadDimV = 192
	nv, nout = bad.SizesV()
	if err := k.Run()(make([]float32, nout), lse, q, kk, make([]float32, nv), nil, bad); err == nil || !strings.Contains(err.Error(), "head dim of v") {
		t.Errorf("HeadDimV 192 on a {192, 128} kernel: err = %v", err)
	}
	if _, err := InterpBackward(ks.Backward); err != nil {
		t.Errorf("InterpBackward: %v", err)
	}
}
