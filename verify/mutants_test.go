package verify_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// scoreSpec parses a one-mask spec with a score section (YAML flow
// syntax).
func scoreSpec(t *testing.T, mask, score string, causal bool) *spec.Spec {
	t.Helper()
	c := "false"
	if causal {
		c = "true"
	}
	s, err := spec.Parse("mutant.yaml", []byte("name: mutant\ncausal: "+c+"\nhead_dim: 64\nmask: "+mask+"\nscore: "+score+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// cpuScoreKernels are a CPU variant's forward and backward of a spec with
// a score section, as cmd/attngen's verify adapts them: the shape's stage
// values go in Args and BackArgs, dsink is BackArgs.DSinks.
func cpuScoreKernels(t *testing.T, s *spec.Spec, variant cpu.Variant) (verify.Run, verify.RunBackward) {
	t.Helper()
	plan, err := gen.Compile(s, gen.CPUTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := plan.Mask()
	shape := func(s verify.Shape) cpu.Shape {
		return cpu.Shape{Batch: s.Batch, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: s.SeqQ, SeqK: s.SeqK, HeadDim: s.HeadDim, Scale: float32(s.Scale)}
	}
	fwd := func(out, lse, q, k, v []float32, docs []int32, s verify.Shape) error {
		a := cpu.Args{Q: q, K: k, V: v, Out: out, LSE: lse, Docs: docs, Shape: shape(s)}
		a.SoftCap, a.Slopes, a.Sinks = s.Score.Float32()
		return cpu.ForwardArgs(m, variant, a)
	}
	bwd := func(dq, dk, dv, dout, q, k, v, out, lse []float32, docs []int32, s verify.Shape, dsink []float32) error {
		a := cpu.BackArgs{DQ: dq, DK: dk, DV: dv, DOut: dout, Q: q, K: k, V: v, Out: out, LSE: lse, Docs: docs, DSinks: dsink, Shape: shape(s)}
		a.SoftCap, a.Slopes, a.Sinks = s.Score.Float32()
		return cpu.BackwardArgs(m, variant, a)
	}
	return fwd, bwd
}

// A mutation is a wrong score stage a kernel might ship.
type mutation int

const (
	correct       mutation = iota
	capAfterMask           // masked pairs' -Inf capped to -cap: weight exp(-cap), not 0
	alibiFlipped           // ALiBi's bias with j - i
	sinkTwice              // the sink's term twice in the denominator
	sinkNumerator          // the sink's weight times a value (key 0's) in the numerator
)

// mutantRun is a straightforward forward, written here from the stage's
// definitions (float64 per row, float32 out and lse), with one mutation.
// With correct it must pass every check the mutants fail.
func mutantRun(p spec.Pattern, mut mutation) verify.Run {
	return func(out, lse, q, k, v []float32, docs []int32, s verify.Shape) error {
		D, sc := s.HeadDim, s.Score
		scale := s.EffScale()
		if s.Scale == 0 {
			scale = 1 / math.Sqrt(float64(D))
		}
		group := s.HeadsQ / s.HeadsKV
		logits, kept := make([]float64, s.SeqK), make([]bool, s.SeqK)
		for row := 0; row < s.Batch*s.HeadsQ*s.SeqQ; row++ {
			b, h, r := row/s.SeqQ/s.HeadsQ, row/s.SeqQ%s.HeadsQ, row%s.SeqQ
			kv := (b*s.HeadsKV + h/group) * s.SeqK
			i := r + s.SeqK - s.SeqQ
			m := math.Inf(-1)
			any := false
			for j := range logits {
				kept[j] = p.At(i, j)
				x := math.Inf(-1)
				if kept[j] {
					any = true
					x = 0
					for d := 0; d < D; d++ {
						x += float64(q[row*D+d]) * float64(k[(kv+j)*D+d])
					}
					x *= scale
				} else if mut != capAfterMask {
					logits[j] = x
					continue
				}
				if sc.SoftCap > 0 {
					x = sc.SoftCap * math.Tanh(x/sc.SoftCap)
				}
				dist := float64(i - j)
				if mut == alibiFlipped {
					dist = float64(j - i)
				}
				switch sc.Alibi {
				case verify.AlibiSigned:
					x -= sc.Slopes[h] * dist
				case verify.AlibiSymmetric:
					x -= sc.Slopes[h] * math.Abs(dist)
				}
				logits[j] = x
				m = math.Max(m, x)
			}
			sink := math.Inf(-1)
			if sc.Sinks != nil {
				sink = sc.Sinks[h]
			}
			o := out[row*D:][:D]
			clear(o)
			if !any {
				lse[row] = float32(sink)
				continue
			}
			m = math.Max(m, sink)
			total := 0.0
			acc := make([]float64, D)
			for j, l := range logits {
				if w := math.Exp(l - m); w > 0 {
					total += w
					for d := range acc {
						acc[d] += w * float64(v[(kv+j)*D+d])
					}
				}
			}
			ws := math.Exp(sink - m)
			total += ws
			switch mut {
			case sinkTwice:
				total += ws
			case sinkNumerator:
				for d := range acc {
					acc[d] += ws * float64(v[kv*D+d])
				}
			}
			for d := range o {
				o[d] = float32(acc[d] / total)
			}
			lse[row] = float32(m + math.Log(total))
		}
		return nil
	}
}

// TestScoreMutants: forwards with a wrong stage fail the checks that
// judge it (CheckNumeric; CheckMaskedData where a masked value is read),
// the same forward without the mutation passes them, and the real CPU
// backward passes CheckGrad and CheckGradSampledRun with sinks while the
// same backward with dsink's sign flipped fails both on dsink.
func TestScoreMutants(t *testing.T) {
	r := rand.New(rand.NewPCG(231, 232))
	sh := verify.Shape{Batch: 2, HeadsQ: 3, HeadsKV: 1, SeqQ: 61, SeqK: 130, HeadDim: 64}
	for _, c := range []struct {
		name        string
		mask, score string
		causal      bool
		mut         mutation
		numeric     bool // CheckNumeric must fail
		maskedData  bool // CheckMaskedData must fail
	}{
		{"cap after masking, cap 5", "{window: {size: 20}}", "{softcap: 5}", true, capAfterMask, true, true},
		{"cap after masking, Gemma 2's 50", "{window: {size: 20}}", "{softcap: 50}", true, capAfterMask, false, true},
		{"ALiBi with j - i", "{window: {size: 20}}", "{alibi: {}}", true, alibiFlipped, true, false},
		{"ALiBi with j - i, call-time slopes", "{full: {}}", "{alibi: {slopes: call}}", true, alibiFlipped, true, false},
		{"sink counted twice", "{window: {size: 20}}", "{learned_sinks: true}", true, sinkTwice, true, false},
		{"sink in the numerator", "{window: {size: 20}}", "{learned_sinks: true}", true, sinkNumerator, true, false},
		{"all three, sink counted twice", "{window: {size: 20}}", "{softcap: 20, alibi: {}, learned_sinks: true}", true, sinkTwice, true, false},
	} {
		s := scoreSpec(t, c.mask, c.score, c.causal)
		p := s.Pattern()
		shape := sh
		shape.Score = verify.RandomScore(s.Score, shape.HeadsQ, r)
		if _, err := verify.CheckNumeric(p, mutantRun(p, correct), shape, r); err != nil {
			t.Errorf("%s: the forward without the mutation: %v", c.name, err)
		}
		if err := verify.CheckMaskedData(p, mutantRun(p, correct), shape, r, 3); err != nil {
			t.Errorf("%s: the forward without the mutation, masked data: %v", c.name, err)
		}
		_, err := verify.CheckNumeric(p, mutantRun(p, c.mut), shape, r)
		if c.numeric && err == nil {
			t.Errorf("%s: CheckNumeric passed the mutant", c.name)
		}
		t.Logf("%s: CheckNumeric: %v", c.name, err)
		err = verify.CheckMaskedData(p, mutantRun(p, c.mut), shape, r, 3)
		if c.maskedData && err == nil {
			t.Errorf("%s: CheckMaskedData passed the mutant", c.name)
		}
		t.Logf("%s: CheckMaskedData: %v", c.name, err)
	}

	s := scoreSpec(t, "{window: {size: 20}}", "{softcap: 20, alibi: {}, learned_sinks: true}", true)
	p := s.Pattern()
	fwd, bwd := cpuScoreKernels(t, s, cpu.Auto)
	flipped := func(dq, dk, dv, dout, q, k, v, out, lse []float32, docs []int32, s verify.Shape, dsink []float32) error {
		if err := bwd(dq, dk, dv, dout, q, k, v, out, lse, docs, s, dsink); err != nil {
			return err
		}
		for h := range dsink {
			dsink[h] = -dsink[h]
		}
		return nil
	}
	shape := sh
	shape.Score = verify.RandomScore(s.Score, shape.HeadsQ, r)
	if rep, err := verify.CheckGrad(p, fwd, bwd, shape, r); err != nil {
		t.Errorf("the CPU backward with sinks: %v", err)
	} else if rep.RefMax[3] == 0 {
		t.Errorf("the CPU backward with sinks: dsink's reference is 0: %v", rep)
	}
	if _, err := verify.CheckGradSampledRun(p, fwd, bwd, shape, r, verify.GradFP32, 16); err != nil {
		t.Errorf("the CPU backward with sinks, sampled: %v", err)
	}
	if _, err := verify.CheckGrad(p, fwd, flipped, shape, r); err == nil || !strings.Contains(err.Error(), "dsink error too large") {
		t.Errorf("dsink's sign flipped: %v, want dsink's error too large", err)
	}
	if _, err := verify.CheckGradSampledRun(p, fwd, flipped, shape, r, verify.GradFP32, 0); err == nil || !strings.Contains(err.Error(), "dsink error too large") {
		t.Errorf("dsink's sign flipped, sampled on every row: %v, want dsink's error too large", err)
	}
}
