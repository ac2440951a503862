package ptx_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	"github.com/attngen/attngen/verify/gpurun"
)

// scoreSpecs are small specs with every combination of the score stage's
// parts the kernels render: a call-time cap on a window (partial tiles), a
// fixed small cap (the immediate, where tanh is far from linear), signed
// ALiBi with call-time slopes, symmetric ALiBi with geometric slopes
// without the causal flag, signed ALiBi on a residue layout (positions
// offset + stride x segment position), learned sinks on a mask whose first
// rows keep nothing (out 0, lse = the sink), and all three together.
var scoreSpecs = map[string]string{
	"cap":      "mask: {window: {size: 40}}\nscore: {softcap: call}",
	"capfixed": "mask: {window: {size: 40}}\nscore: {softcap: 1.5}",
	"alibi":    "mask: {full: {}}\nscore: {alibi: {slopes: call}}",
	"alibisym": "mask: {window: {size: 30}}\ncausal: false\nscore: {alibi: {symmetric: true}}",
	"alibidil": "mask: {dilated: {stride: 3}}\nscore: {alibi: {slopes: call}}",
	"sinks":    "mask: {not: {window: {size: 64}}}\nscore: {learned_sinks: true}",
	"all":      "mask: {not: {window: {size: 16}}}\nscore: {softcap: call, alibi: {slopes: call}, learned_sinks: true}",
}

func scoreSpec(t *testing.T, name string, d int) *spec.Spec {
	t.Helper()
	src := fmt.Sprintf("name: %s\nhead_dim: %d\n%s\n", name, d, scoreSpecs[name])
	s, err := spec.Parse(name+".yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// scoreKernels are the kernels of spec s for target tg (mutant m of the
// score stage when m is not 0) bound to the interpreter: the forward and,
// for targets with one, the backward.
func scoreKernels(t *testing.T, s *spec.Spec, tg ptx.Target, m int) (*gpurun.Kernel, *gpurun.BackwardKernel) {
	t.Helper()
	p, err := gen.Compile(s, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ptx.Kernels(p, ptx.WithScoreMutant(ptx.Config{Target: tg, SoftLg2: true}, m))
	if err != nil {
		t.Fatal(err)
	}
	fk, err := gpurun.Interp(ks.Forward)
	if err != nil {
		t.Fatal(err)
	}
	var bk *gpurun.BackwardKernel
	if ks.Backward != nil {
		if bk, err = gpurun.InterpBackward(ks.Backward); err != nil {
			t.Fatal(err)
		}
	}
	return fk, bk
}

// scoreShapes are the shapes of the score tests: three query heads (so
// that RandomScore gives one head no sink and one a sink of 12), grouped,
// fewer queries than keys; with -short one shape. Lengths are multiples
// of 3, the residue spec's stride (the sm_90a kernel needs them).
func scoreShapes(d int) []verify.Shape {
	sh := []verify.Shape{{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 69, SeqK: 132, HeadDim: d}}
	if !testing.Short() {
		sh = append(sh, verify.Shape{Batch: 2, HeadsQ: 3, HeadsKV: 3, SeqQ: 66, SeqK: 66, HeadDim: d, Scale: 0.4})
	}
	return sh
}

// TestScoreStage runs the kernels of every combination of the score stage
// under the interpreter with random stage values (verify.RandomScore: caps
// in [2, 60], slopes in [0.001, 1], sinks N(0, 2) with one head -Inf and
// one 12) against the float64 reference: the sm_80 and sm_90a forwards
// (verify.CheckNumericWith: outputs poisoned, rows that keep nothing
// exact), the masked-data rule (NaN and infinities at masked positions
// reach no output), and the sm_80 backward (verify.CheckGradWith: dq, dk,
// dv and dsink).
func TestScoreStage(t *testing.T) {
	t.Parallel()
	for name := range scoreSpecs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := scoreSpec(t, name, 64)
			r := rand.New(rand.NewPCG(21, uint64(len(name))))
			for _, tg := range []ptx.Target{ptx.SM80, ptx.SM90a} {
				fk, bk := scoreKernels(t, s, tg, 0)
				for _, sh := range scoreShapes(64) {
					rep, err := verify.CheckNumericWith(s.Pattern(), fk.Run(), sh, r, verify.BF16Kernel)
					if err != nil {
						t.Errorf("%s forward: %v", tg.Name(), err)
					} else {
						t.Logf("%s forward: %s", tg.Name(), rep)
					}
					if bk == nil {
						continue
					}
					g, err := verify.CheckGradWith(s.Pattern(), fk.Run(), bk.Run(), sh, r, verify.GradBF16)
					if err != nil {
						t.Errorf("%s backward: %v", tg.Name(), err)
					} else {
						t.Logf("%s backward: %s", tg.Name(), g)
					}
				}
				md := verify.Shape{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 60, SeqK: 129, HeadDim: 64}
				if err := verify.CheckMaskedData(s.Pattern(), fk.Run(), md, r, 1); err != nil {
					t.Errorf("%s masked data: %v", tg.Name(), err)
				}
			}
		})
	}
}

// TestScoreMutants: kernels with a wrong score stage fail the checks that
// TestScoreStage passes: ALiBi with j - i (forward), the soft-cap applied
// after masking (masked pairs get weight e^-cap; forward, on the small
// fixed cap), a sink counted twice in the denominator (forward) and dsink
// with the wrong sign (backward).
func TestScoreMutants(t *testing.T) {
	t.Parallel()
	sh := verify.Shape{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 69, SeqK: 132, HeadDim: 64}
	for _, c := range []struct {
		what, spec string
		m          int
		bwd        bool
	}{
		{"ALiBi with j - i", "alibi", ptx.MutAlibiJI, false},
		{"the soft-cap after masking", "capfixed", ptx.MutCapAfterMask, false},
		{"a sink counted twice", "sinks", ptx.MutSinkTwice, false},
		{"dsink with the wrong sign", "sinks", ptx.MutDSinkSign, true},
	} {
		t.Run(c.spec+"/"+strings.ReplaceAll(c.what, " ", "_"), func(t *testing.T) {
			t.Parallel()
			s := scoreSpec(t, c.spec, 64)
			r := rand.New(rand.NewPCG(22, uint64(c.m)))
			fk, bk := scoreKernels(t, s, ptx.SM80, c.m)
			var err error
			if c.bwd {
				_, err = verify.CheckGradWith(s.Pattern(), fk.Run(), bk.Run(), sh, r, verify.GradBF16)
			} else {
				_, err = verify.CheckNumericWith(s.Pattern(), fk.Run(), sh, r, verify.BF16Kernel)
			}
			if err == nil {
				t.Fatalf("the mutant with %s passes", c.what)
			}
			t.Logf("the mutant with %s fails: %v", c.what, err)
		})
	}
}
