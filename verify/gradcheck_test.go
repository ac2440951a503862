package verify

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

// bf16Backward is a backward that computes as a bf16 tensor-core backward
// does (NaiveGradRounded with bf16 rounding), with wrong applied to its
// gradients (nil: none).
func bf16Backward(p spec.Pattern, wrong func(g Grads[float32])) RunBackward {
	return func(dq, dk, dv, dout, q, k, v, out, lse []float32, ids []int32, s Shape) error {
		g, err := NaiveGradRounded(p, nil, q, k, v, dout, s, roundBF16)
		if err != nil {
			return err
		}
		if wrong != nil {
			wrong(g)
		}
		copy(dq, g.Q)
		copy(dk, g.K)
		copy(dv, g.V)
		return nil
	}
}

// TestCheckGradWithBF16: a backward with bf16 rounding passes GradBF16 on
// bf16 inputs, the float32 yardstick (GradFP32) rejects it, and GradBF16
// still rejects gradients off by 2% or with one key's dv dropped.
func TestCheckGradWithBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(97, 98))
	p := spec.Pattern{Mask: spec.Window(20), Causal: true}
	fwd := func(out, lse, q, k, v []float32, ids []int32, s Shape) error {
		return NaiveBF16(p, nil, q, k, v, s, out, lse)
	}
	s := Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 50, SeqK: 70, HeadDim: 32}
	rep, err := CheckGradWith(p, fwd, bf16Backward(p, nil), s, r, GradBF16)
	if err != nil {
		t.Fatalf("bf16 backward under GradBF16: %v", err)
	}
	t.Log(rep)
	if _, err := CheckGradWith(p, fwd, bf16Backward(p, nil), s, r, GradFP32); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("bf16 backward under the float32 yardstick: %v, want an error that is too large", err)
	}
	scale := func(g Grads[float32]) {
		for i := range g.Q {
			g.Q[i] *= 1.02
		}
	}
	if _, err := CheckGradWith(p, fwd, bf16Backward(p, scale), s, r, GradBF16); err == nil || !strings.Contains(err.Error(), "dq error too large") {
		t.Errorf("dq off by 2%%: %v, want dq's error too large", err)
	}
	drop := func(g Grads[float32]) {
		// key 40 of the key/value head: kept by rows of positions 40 to 59
		for d := 0; d < s.HeadDim; d++ {
			g.V[40*s.HeadDim+d] = 0
		}
	}
	if _, err := CheckGradWith(p, fwd, bf16Backward(p, drop), s, r, GradBF16); err == nil || !strings.Contains(err.Error(), "dv error too large") {
		t.Errorf("dv of one key dropped: %v, want dv's error too large", err)
	}
	if _, err := CheckGradWith(p, fwd, bf16Backward(p, nil), s, r, GradOptions{}); err == nil {
		t.Error("zero options accepted")
	}
}
