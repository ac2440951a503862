package gpurun

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// perheadSpec is issue 11's example: per-head sink counts (0 at some
// heads) and window sizes.
const perheadSpec = `name: perhead
head_params:
  window: {min: 1, max: 8192}
  sinks: {min: 0, max: 64}
mask: {union: [{global: {tokens: sinks}}, {window: {size: window}}]}
head_dim: 64
`

func perhead(t *testing.T) *spec.Spec {
	t.Helper()
	s, err := spec.Parse("perhead.yaml", []byte(perheadSpec))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// headShapes are grouped-head shapes off the tiles; the Check functions
// draw the values (verify.RandomHeadParams: every Min at head 0, every Max
// at the last head, so each group of two heads differs).
var headShapes = []verify.Shape{
	{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 45, SeqK: 77, HeadDim: 64},
	{Batch: 2, HeadsQ: 3, HeadsKV: 1, SeqQ: 65, SeqK: 130, HeadDim: 64},
}

// sameHeads wraps a forward so that every query head gets head 0's
// values: a kernel that ignores which head it computes.
func sameHeads(run verify.Run, n int) verify.Run {
	return func(out, lse, q, k, v []float32, ids []int32, s verify.Shape) error {
		s.HeadParams = slices.Clone(s.HeadParams)
		for x := range s.HeadParams {
			s.HeadParams[x] = s.HeadParams[x%n]
		}
		return run(out, lse, q, k, v, ids, s)
	}
}

// TestInterpHeadParams runs the perhead kernels (sm_80 forward and
// backward, sm_90a forward) through the runner, which uploads
// verify.Shape.HeadParams, against the reference bound per head, and
// checks that a run given head 0's values at every head fails.
func TestInterpHeadParams(t *testing.T) {
	s := perhead(t)
	r := rand.New(rand.NewPCG(111, 112))
	fk, bk := interpPair(t, s, ptx.SM80)
	for _, sh := range headShapes {
		rep, err := verify.CheckNumericWith(s.Pattern(), fk.Run(), sh, r, verify.BF16Kernel)
		if err != nil {
			t.Fatalf("forward %v: %v", sh, err)
		}
		t.Logf("forward: %v", rep)
		grep, err := verify.CheckGradWith(s.Pattern(), fk.Run(), bk.Run(), sh, r, verify.GradBF16)
		if err != nil {
			t.Fatalf("backward %v: %v", sh, err)
		}
		t.Logf("backward: %v", grep)
	}
	hk, _ := interpHopperKernel(t, s)
	rep, err := verify.CheckNumericWith(s.Pattern(), hk.Run(), headShapes[0], r, verify.BF16Kernel)
	if err != nil {
		t.Fatalf("sm_90a forward: %v", err)
	}
	t.Logf("sm_90a forward: %v", rep)
	if _, err := verify.CheckNumericWith(s.Pattern(), sameHeads(fk.Run(), 2), headShapes[0], r, verify.BF16Kernel); err == nil {
		t.Error("a run with head 0's values at every head passed")
	}
}

// interpHopperKernel is the spec's sm_90a forward under the interpreter.
func interpHopperKernel(t *testing.T, s *spec.Spec) (*Kernel, *ptx.Forward) {
	t.Helper()
	tg := ptx.Target{SM: 90, Elem: "bf16", Accel: true}
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
	return k, fw
}

// TestHeadParamsRefused: the runner refuses head parameter values of the
// wrong count or out of range, and values for a kernel without head
// parameters.
func TestHeadParamsRefused(t *testing.T) {
	fk, _ := interpPair(t, perhead(t), ptx.SM80)
	sh := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 10, SeqK: 20, HeadDim: 64}
	nq, nkv, nl := sh.Sizes()
	out, lse := make([]float32, nq), make([]float32, nl)
	q, k, v := make([]float32, nq), make([]float32, nkv), make([]float32, nkv)
	for _, c := range []struct {
		vals []int32
		want string
	}{
		{nil, "0 head parameter values, want 4"},
		{[]int32{1, 0, 2}, "3 head parameter values"},
		{[]int32{1, 0, 0, 3}, "window = 0 at query head 1"},
		{[]int32{1, 65, 8, 3}, "sinks = 65 at query head 0"},
	} {
		s := sh
		s.HeadParams = c.vals
		if err := fk.Run()(out, lse, q, k, v, nil, s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("values %v: err = %v, want it to mention %q", c.vals, err, c.want)
		}
	}
	plain, err := spec.Parse("w.yaml", []byte("name: w\nhead_dim: 64\nmask: {window: {size: 5}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := interpPair(t, plain, ptx.SM80)
	s := sh
	s.HeadParams = []int32{1, 2}
	if err := pk.Run()(out, lse, q, k, v, nil, s); err == nil || !strings.Contains(err.Error(), "takes none") {
		t.Errorf("values for a kernel without head parameters: err = %v", err)
	}
}
