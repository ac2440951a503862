package verify_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// maskedShapes are the shapes of the masked-data tests: batches with
// grouped heads and lengths off the tile sizes, few queries against many
// keys, one query against one key.
var maskedShapes = []verify.Shape{
	{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 61, SeqK: 130, HeadDim: 64},
	{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 2, SeqK: 300, HeadDim: 64},
	{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: 64},
}

// maskedPatterns are masks with rows that keep nothing, keys no row keeps
// and partial tiles.
func maskedPatterns() []spec.Pattern {
	return []spec.Pattern{
		{Mask: spec.Window(20), Causal: true},
		{Mask: spec.Intersect(spec.Window(40), spec.QuerySet(100, 0, 1, 0), spec.Not(spec.KeySet(90, 95, 1, 0))), Causal: true},
		{Mask: spec.Dilated(3, 2), Causal: false},
		{Mask: spec.Global(1), Causal: true},
	}
}

// TestCheckMaskedDataCPU: every CPU variant passes the masked-data rule.
func TestCheckMaskedDataCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(201, 202))
	for _, p := range maskedPatterns() {
		for _, tg := range cpu.Targets {
			if !cpu.Supported(tg.Variant) {
				continue
			}
			run := cpuRun(t, p, 64, tg.Variant)
			for _, sh := range maskedShapes {
				if err := verify.CheckMaskedData(p, run, sh, r, 3); err != nil {
					t.Errorf("%v, %s: %v", p, tg.Name, err)
				}
			}
		}
	}
}

// keepsRow is whether query row x (an lse index of shape s) keeps key j
// under p.
func keepsRow(p spec.Pattern, s verify.Shape, x, j int) bool {
	return p.At(spec.Row(x%s.SeqQ, s.SeqQ, s.SeqK), j)
}

// tileReader is a kernel that computes the right outputs on finite inputs
// but reads masked data, as a tiled kernel does that multiplies a masked
// pair's weight, 0, by its value instead of skipping the pair: for each
// row, each key of the 64-key tile of its first kept key that the row
// masks adds 0 * v to the row's output. (Each row's keys are its key/value
// head's; with finite values the output does not change.)
func tileReader(p spec.Pattern, run verify.Run) verify.Run {
	return func(out, lse, q, k, v []float32, docs []int32, s verify.Shape) error {
		if err := run(out, lse, q, k, v, docs, s); err != nil {
			return err
		}
		D, group := s.HeadDim, s.HeadsQ/s.HeadsKV
		for x := 0; x < s.Batch*s.HeadsQ*s.SeqQ; x++ {
			bh := x / s.SeqQ
			kvBase := (bh/s.HeadsQ*s.HeadsKV + bh%s.HeadsQ/group) * s.SeqK * D
			first := -1
			for j := 0; j < s.SeqK && first < 0; j++ {
				if keepsRow(p, s, x, j) {
					first = j
				}
			}
			if first < 0 {
				continue
			}
			for j := first / 64 * 64; j < min(first/64*64+64, s.SeqK); j++ {
				if !keepsRow(p, s, x, j) {
					for d := 0; d < D; d++ {
						out[x*D+d] += 0 * v[kvBase+j*D+d]
					}
				}
			}
		}
		return nil
	}
}

// deadQuery is a kernel that writes a row that keeps no key as 0 * q (0
// on finite inputs) rather than 0.
func deadQuery(p spec.Pattern, run verify.Run) verify.Run {
	return func(out, lse, q, k, v []float32, docs []int32, s verify.Shape) error {
		if err := run(out, lse, q, k, v, docs, s); err != nil {
			return err
		}
		D := s.HeadDim
		for x := 0; x < s.Batch*s.HeadsQ*s.SeqQ; x++ {
			keeps := false
			for j := 0; j < s.SeqK && !keeps; j++ {
				keeps = keepsRow(p, s, x, j)
			}
			if !keeps {
				for d := 0; d < D; d++ {
					out[x*D+d] = 0 * q[x*D+d]
				}
			}
		}
		return nil
	}
}

// deadKey is a kernel that adds 0 * k of the last key, whether or not a
// row keeps it, to every row's lse: it reads a key no row keeps when the
// mask keeps none of the last key.
func deadKey(run verify.Run) verify.Run {
	return func(out, lse, q, k, v []float32, docs []int32, s verify.Shape) error {
		if err := run(out, lse, q, k, v, docs, s); err != nil {
			return err
		}
		last := (s.SeqK - 1) * s.HeadDim
		for x := range lse {
			lse[x] += 0 * k[last]
		}
		return nil
	}
}

// TestCheckMaskedDataMutants: kernels that read masked data fail the
// check although their outputs on finite inputs are right (they pass
// CheckNumeric): one that touches the masked keys of a row's first tile,
// one that writes rows keeping no key from their q, and one that reads a
// key no row keeps. A correct kernel's masked-data check passes on each
// mask first, and a kernel that computes nothing (the same outputs on
// every run) fails.
func TestCheckMaskedDataMutants(t *testing.T) {
	r := rand.New(rand.NewPCG(203, 204))
	sh := maskedShapes[0]
	for _, p := range maskedPatterns()[:2] {
		run := cpuRun(t, p, 64, cpu.Auto)
		if err := verify.CheckMaskedData(p, run, sh, r, 3); err != nil {
			t.Fatalf("%v: correct kernel: %v", p, err)
		}
		if _, err := verify.CheckNumeric(p, tileReader(p, run), sh, r); err != nil {
			t.Fatalf("%v: the tile reader's outputs: %v", p, err)
		}
		if err := verify.CheckMaskedData(p, tileReader(p, run), sh, r, 3); err == nil || !strings.Contains(err.Error(), "reads none of them, but out[") {
			t.Errorf("%v: a kernel that reads a row's masked keys: %v, want out changed", p, err)
		}
	}
	// the second mask's rows below position 100 keep no key
	p := maskedPatterns()[1]
	run := cpuRun(t, p, 64, cpu.Auto)
	if err := verify.CheckMaskedData(p, deadQuery(p, run), sh, r, 0); err == nil || !strings.Contains(err.Error(), "q of the") {
		t.Errorf("a kernel that reads the q of rows that keep no key: %v", err)
	}
	if err := verify.CheckMaskedData(p, deadQuery(p, run), sh, r, 3); err == nil {
		t.Error("a kernel that reads the q of rows that keep no key passed the row trials")
	}
	p = spec.Pattern{Mask: spec.KeySet(0, 100, 1, 0), Causal: true} // keys 100 to 129 kept by no row
	run = cpuRun(t, p, 64, cpu.Auto)
	if err := verify.CheckMaskedData(p, run, sh, r, 0); err != nil {
		t.Fatalf("%v: correct kernel: %v", p, err)
	}
	if err := verify.CheckMaskedData(p, deadKey(run), sh, r, 0); err == nil || !strings.Contains(err.Error(), "keys and values no row keeps") || !strings.Contains(err.Error(), "but lse = ") {
		t.Errorf("a kernel that reads a key no row keeps: %v", err)
	}
	// a kernel that leaves the same stale outputs on every run: bit-identical
	// to itself, and no attention
	stale := func(out, lse, q, k, v []float32, docs []int32, s verify.Shape) error {
		for i := range out {
			out[i] = 0.25
		}
		for i := range lse {
			lse[i] = 1
		}
		return nil
	}
	if err := verify.CheckMaskedData(p, stale, sh, r, 3); err == nil || !strings.Contains(err.Error(), "clean run") {
		t.Errorf("a kernel that computes nothing: %v", err)
	}
	if err := verify.CheckMaskedData(p, run, sh, r, -1); err == nil {
		t.Error("-1 rows accepted")
	}
	if err := verify.CheckMaskedData(p, run, verify.Shape{}, r, 1); err == nil {
		t.Error("an empty shape accepted")
	}
}
