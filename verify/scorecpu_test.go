package verify_test

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/verify"
)

// scoreBackwardShapes are the shapes of the CPU backward's score tests:
// batches of grouped heads off the tile sizes, and decoding.
var scoreBackwardShapes = []verify.Shape{
	{Batch: 2, HeadsQ: 3, HeadsKV: 1, SeqQ: 61, SeqK: 130, HeadDim: 64},
	{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 2, SeqK: 300, HeadDim: 64},
}

// TestCPUBackwardScore: every CPU variant's backward passes the gradient
// checks (CheckGrad, CheckGradSampledRun, CheckGradDependencies and
// CheckGradNonFinite, dsink included) with every stage combination, on
// a causal window (every row keeps keys) and a non-causal one.
func TestCPUBackwardScore(t *testing.T) {
	r := rand.New(rand.NewPCG(241, 242))
	for _, c := range []struct {
		mask, score string
		causal      bool
	}{
		{"{window: {size: 40}}", "{softcap: 20, alibi: {}, learned_sinks: true}", true},
		{"{window: {size: 40}}", "{softcap: call}", true},
		{"{window: {left: 30, right: 7}}", "{alibi: {slopes: call}, learned_sinks: true}", false},
	} {
		s := scoreSpec(t, c.mask, c.score, c.causal)
		p := s.Pattern()
		for _, tg := range cpu.Targets {
			if !cpu.Supported(tg.Variant) {
				continue
			}
			fwd, bwd := cpuScoreKernels(t, s, tg.Variant)
			for _, sh := range scoreBackwardShapes {
				sh.Score = verify.RandomScore(s.Score, sh.HeadsQ, r)
				if _, err := verify.CheckGrad(p, fwd, bwd, sh, r); err != nil {
					t.Errorf("%s %s, %s: %v", c.mask, c.score, tg.Name, err)
				}
				if _, err := verify.CheckGradSampledRun(p, fwd, bwd, sh, r, verify.GradFP32, 12); err != nil {
					t.Errorf("%s %s, %s, sampled: %v", c.mask, c.score, tg.Name, err)
				}
				if err := verify.CheckGradNonFinite(p, fwd, bwd, sh, r, 3); err != nil {
					t.Errorf("%s %s, %s: %v", c.mask, c.score, tg.Name, err)
				}
			}
			dep := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 70, SeqK: 70, HeadDim: 64}
			dep.Score = verify.RandomScore(s.Score, 1, r)
			if err := verify.CheckGradDependencies(p, fwd, bwd, dep, r); err != nil {
				t.Errorf("%s %s, %s: %v", c.mask, c.score, tg.Name, err)
			}
		}
	}
}

// TestCPUBackwardSinkEmptyRows: with learned sinks, a row that keeps no
// key has output 0 and lse = its sink logit, so it adds nothing to dsink
// whatever its dout. The CPU backward passes CheckGrad there, and must
// pass CheckGradNonFinite: NaN or an infinity in the dout of such a row
// may not reach dsink.
//
// It fails today on every variant (a runtime/cpu bug, not fixed here):
// bcall.deltas (runtime/cpu/backward.go) computes delta = dout . out for
// every row whose lse is not -Inf, which with a sink includes the rows
// that keep nothing (lse = sink), so a non-finite dout gives delta =
// NaN * 0 = NaN; sinkGrads then adds exp(sink - lse) * delta = 1 * NaN
// to dsink[h]. Rows that keep no key need delta 0 (or to be skipped).
func TestCPUBackwardSinkEmptyRows(t *testing.T) {
	r := rand.New(rand.NewPCG(243, 244))
	// rows before position 100 keep nothing
	s := scoreSpec(t, "{intersect: [{window: {size: 40}}, {queries: {from: 100}}]}", "{learned_sinks: true}", true)
	p := s.Pattern()
	for _, tg := range cpu.Targets {
		if !cpu.Supported(tg.Variant) {
			continue
		}
		fwd, bwd := cpuScoreKernels(t, s, tg.Variant)
		sh := verify.Shape{Batch: 2, HeadsQ: 3, HeadsKV: 1, SeqQ: 61, SeqK: 130, HeadDim: 64}
		sh.Score = verify.RandomScore(s.Score, sh.HeadsQ, r)
		if rep, err := verify.CheckGrad(p, fwd, bwd, sh, r); err != nil {
			t.Errorf("%s: %v", tg.Name, err)
		} else if rep.MaskedRows == 0 {
			t.Fatalf("%s: no row keeps nothing: %v", tg.Name, rep)
		}
		if err := verify.CheckGradNonFinite(p, fwd, bwd, sh, r, 5); err != nil {
			t.Errorf("%s: %v", tg.Name, err)
		}
	}
}
