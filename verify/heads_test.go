package verify

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

func headPattern(t *testing.T) spec.Pattern {
	t.Helper()
	s, err := spec.Parse("h.yaml", []byte("name: h\nhead_params:\n  w: {min: 1, max: 40}\n  g: {min: 0, max: 3}\nmask: {union: [{global: {tokens: g}}, {window: {size: w}}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return s.Pattern()
}

// perHead runs attention head by head with the float32 yardstick on the
// pattern bound to that head's values: a kernel that honours head
// parameters.
func perHead(p spec.Pattern, bindHead func(h int) int) Run {
	return func(out, lse, q, k, v []float32, ids []int32, s Shape) error {
		n := len(p.Params)
		group := s.HeadsQ / s.HeadsKV
		one := s
		one.Batch, one.HeadsQ, one.HeadsKV, one.HeadParams = 1, 1, 1, nil
		D := s.HeadDim
		for b := 0; b < s.Batch; b++ {
			for h := 0; h < s.HeadsQ; h++ {
				src := bindHead(h)
				vals := make([]int, n)
				for x := range vals {
					vals[x] = int(s.HeadParams[src*n+x])
				}
				bp, err := p.Bind(vals)
				if err != nil {
					return err
				}
				qo := (b*s.HeadsQ + h) * s.SeqQ
				kv := (b*s.HeadsKV + h/group) * s.SeqK
				if err := NaiveFP32(bp, nil, q[qo*D:][:s.SeqQ*D], k[kv*D:][:s.SeqK*D], v[kv*D:][:s.SeqK*D], one, out[qo*D:][:s.SeqQ*D], lse[qo:][:s.SeqQ]); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// TestHeadParamsChecked: CheckNumeric draws values per head and binds the
// reference per head: a kernel that honours them passes; one that gives
// every head head 0's values, or the next head's, fails; values that do
// not fit are errors.
func TestHeadParamsChecked(t *testing.T) {
	p := headPattern(t)
	r := rand.New(rand.NewPCG(3, 4))
	s := Shape{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 37, SeqK: 53, HeadDim: 8}
	if _, err := CheckNumeric(p, perHead(p, func(h int) int { return h }), s, r); err != nil {
		t.Fatalf("a per-head kernel fails: %v", err)
	}
	for name, wrong := range map[string]func(int) int{"head 0": func(int) int { return 0 }, "next head": func(h int) int { return (h + 1) % 4 }} {
		if _, err := CheckNumeric(p, perHead(p, wrong), s, r); err == nil {
			t.Errorf("a kernel using %s's values passes", name)
		}
	}
	bad := s
	bad.HeadParams = make([]int32, 8) // w = 0 is below its min
	if _, _, err := Reference(p, nil, make([]float32, 2*4*37*8), make([]float32, 2*2*53*8), make([]float32, 2*2*53*8), bad); err == nil || !strings.Contains(err.Error(), "out of its range") {
		t.Errorf("a value out of range: %v", err)
	}
	bad.HeadParams = make([]int32, 7)
	if _, _, err := Reference(p, nil, make([]float32, 2*4*37*8), make([]float32, 2*2*53*8), make([]float32, 2*2*53*8), bad); err == nil {
		t.Error("7 values for 4 heads of 2 parameters accepted")
	}
	plain := spec.Pattern{Mask: spec.Window(4), Causal: true}
	if _, _, err := Reference(plain, nil, make([]float32, 2*4*37*8), make([]float32, 2*2*53*8), make([]float32, 2*2*53*8), s.withValues(8)); err == nil {
		t.Error("head parameter values for a mask without parameters accepted")
	}
	vals := RandomHeadParams(p, r, 4, 53)
	for k, hp := range p.Params {
		if vals[k] != int32(hp.Min) || vals[3*2+k] != int32(hp.Max) {
			t.Errorf("RandomHeadParams: head 0 and the last head must take %s's min and max: %v", hp.Name, vals)
		}
	}
}

func (s Shape) withValues(n int) Shape {
	s.HeadParams = make([]int32, n)
	return s
}
