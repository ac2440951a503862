package gpurun

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// scoreRunners are the interpreter runners of a spec's sm_80 kernels.
func scoreRunners(t *testing.T, src string) (*spec.Spec, *Kernel, *BackwardKernel) {
	t.Helper()
	s, err := spec.Parse("score.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.Compile(s, ptx.SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ptx.Kernels(p, ptx.Config{Target: ptx.SM80, SoftLg2: true})
	if err != nil {
		t.Fatal(err)
	}
	fk, err := Interp(ks.Forward)
	if err != nil {
		t.Fatal(err)
	}
	bk, err := InterpBackward(ks.Backward)
	if err != nil {
		t.Fatal(err)
	}
	return s, fk, bk
}

// TestInterpScore: the runners pass a call's score values (a call-time
// cap, call-time slopes, sinks) to the kernels and return dsink, which
// the checks judge against the float64 reference; a shape without values
// for a kernel with a stage, values for a kernel without one, or a sink
// array of the wrong length are errors, not runs.
func TestInterpScore(t *testing.T) {
	s, fk, bk := scoreRunners(t, "name: all\nmask: {window: {size: 20}}\nhead_dim: 64\nscore: {softcap: call, alibi: {slopes: call}, learned_sinks: true}\n")
	r := rand.New(rand.NewPCG(7, 8))
	sh := verify.Shape{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 40, SeqK: 70, HeadDim: 64}
	if _, err := verify.CheckNumericWith(s.Pattern(), fk.Run(), sh, r, verify.BF16Kernel); err != nil {
		t.Errorf("forward: %v", err)
	}
	rep, err := verify.CheckGradWith(s.Pattern(), fk.Run(), bk.Run(), sh, r, verify.GradBF16)
	if err != nil {
		t.Errorf("backward: %v", err)
	}
	if rep.RefMax[3] == 0 {
		t.Errorf("backward: no dsink judged: %v", rep)
	}
	nq, nkv, nl := sh.Sizes()
	buf := func(n int) []float32 { return make([]float32, n) }
	run := func(sh verify.Shape) error {
		return fk.Run()(buf(nq), buf(nl), buf(nq), buf(nkv), buf(nkv), nil, sh)
	}
	if err := run(sh); err == nil || !strings.Contains(err.Error(), "no values") {
		t.Errorf("a shape without score values: %v", err)
	}
	bad := sh
	bad.Score = verify.RandomScore(s.Score, sh.HeadsQ, r)
	bad.Score.Sinks = bad.Score.Sinks[:2]
	if err := run(bad); err == nil || !strings.Contains(err.Error(), "sink logits") {
		t.Errorf("2 sink logits for 3 heads: %v", err)
	}
	cap0 := sh
	cap0.Score = verify.RandomScore(s.Score, sh.HeadsQ, r)
	cap0.Score.SoftCap = math.NaN()
	if err := run(cap0); err == nil {
		t.Errorf("a NaN soft-cap runs")
	}
	_, plain, _ := scoreRunners(t, "name: plain\nmask: {window: {size: 20}}\nhead_dim: 64\n")
	if err := plain.Run()(buf(nq), buf(nl), buf(nq), buf(nkv), buf(nkv), nil, bad); err == nil || !strings.Contains(err.Error(), "without a score stage") {
		t.Errorf("score values for a kernel without a stage: %v", err)
	}
}
