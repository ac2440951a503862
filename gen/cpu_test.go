package gen

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
	"github.com/attngen/attngen/verify"
)

func cpuRun(t testing.TB, p spec.Pattern, variant cpu.Variant, d int) verify.Run {
	plan, err := Compile(&spec.Spec{Name: "t", Mask: p.Mask, Causal: p.Causal, HeadDim: d, HeadParams: p.Params, Score: p.Score}, CPUTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := plan.Mask()
	return func(out, lse, q, k, v []float32, docs []int32, s verify.Shape) error {
		cs := cpu.Shape{Batch: s.Batch, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: s.SeqQ, SeqK: s.SeqK, HeadDim: s.HeadDim, Scale: float32(s.Scale)}
		if p.HasParams() || p.Score.Active() {
			a := cpu.Args{Q: q, K: k, V: v, Out: out, LSE: lse, HeadParams: cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), Shape: cs}
			a.SoftCap, a.Slopes, a.Sinks = s.Score.Float32()
			if p.Mask.HasTree() {
				a.Tree = docs
			} else {
				a.Docs = docs
			}
			return cpu.ForwardArgs(m, variant, a)
		}
		return cpu.Forward(m, variant, out, lse, q, k, v, docs, cs)
	}
}

func variants() []cpu.Variant {
	var out []cpu.Variant
	for _, v := range []cpu.Variant{cpu.AVX512, cpu.AVX2, cpu.PureGo} {
		if cpu.Supported(v) {
			out = append(out, v)
		}
	}
	return out
}

// TestCPURandomMasks runs every supported variant on random nested masks,
// masks with fully masked rows, documents and dilated layouts.
func TestCPURandomMasks(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	pats := []spec.Pattern{
		{Mask: spec.Bridge(16, 3, 5, 0), Causal: true},                                 // most rows keep nothing
		{Mask: spec.Intersect(spec.Block(40), spec.Bridge(40, 4, 4, 0)), Causal: true}, // empty everywhere
		{Mask: spec.Dilated(5, 0), Causal: true},
		{Mask: spec.Dilated(3, 4), Causal: false},
		{Mask: spec.Intersect(spec.Document(), spec.Union(spec.Global(3), spec.Window(20))), Causal: true},
		{Mask: spec.Full(), Causal: false},
	}
	for k := 0; k < 12; k++ {
		pats = append(pats, spectest.Pattern(r, 150, 3))
	}
	shapes := []verify.Shape{
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 1, SeqK: 1},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 97, SeqK: 161},
		{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 130, SeqK: 130},
	}
	for _, v := range variants() {
		for _, d := range []int{64, 128} {
			for _, p := range pats {
				run := cpuRun(t, p, v, d)
				for _, s := range shapes {
					s.HeadDim = d
					if _, err := verify.CheckNumeric(p, run, s, r); err != nil {
						t.Fatalf("%s %v: %v", v, p, err)
					}
				}
			}
		}
	}
}

// TestCPUDependencies: output rows depend exactly on the keys the mask keeps.
func TestCPUDependencies(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	for _, v := range variants() {
		for iter := 0; iter < 4; iter++ {
			p := spectest.Pattern(r, 60, 2)
			n := 1 + r.IntN(90)
			s := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1 + r.IntN(n), SeqK: n, HeadDim: 64}
			if err := verify.CheckDependencies(p, cpuRun(t, p, v, 64), s, r); err != nil {
				t.Fatalf("%s %v: %v", v, p, err)
			}
		}
	}
}

// TestCPUErrors: bad shapes and short slices are errors, never crashes.
func TestCPUErrors(t *testing.T) {
	p := spec.Pattern{Mask: spec.Full(), Causal: true}
	run := cpuRun(t, p, cpu.PureGo, 64)
	good := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 3, SeqK: 5, HeadDim: 64}
	nq, nkv, nl := good.Sizes()
	mk := func(n int) []float32 { return make([]float32, n) }
	if err := run(mk(nq), mk(nl), mk(nq), mk(nkv), mk(nkv), nil, good); err != nil {
		t.Fatal(err)
	}
	if err := run(mk(nq), nil, mk(nq), mk(nkv), mk(nkv), nil, good); err != nil {
		t.Fatalf("nil lse: %v", err)
	}
	bad := []struct {
		name              string
		out, lse, q, k, v int
		s                 verify.Shape
	}{
		{"short out", nq - 1, nl, nq, nkv, nkv, good},
		{"short lse", nq, nl - 1, nq, nkv, nkv, good},
		{"short q", nq, nl, nq - 1, nkv, nkv, good},
		{"short k", nq, nl, nq, nkv - 1, nkv, good},
		{"short v", nq, nl, nq, nkv, nkv - 1, good},
		{"head dim", nq, nl, nq, nkv, nkv, verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: 100}},
		{"sq > sk", nq, nl, nq, nkv, nkv, verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 2, SeqK: 1, HeadDim: 64}},
		{"gqa", nq, nl, nq, nkv, nkv, verify.Shape{Batch: 1, HeadsQ: 3, HeadsKV: 2, SeqQ: 1, SeqK: 1, HeadDim: 64}},
		{"zero", nq, nl, nq, nkv, nkv, verify.Shape{HeadDim: 64}},
	}
	for _, c := range bad {
		if err := run(mk(c.out), mk(c.lse), mk(c.q), mk(c.k), mk(c.v), nil, c.s); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	dp := spec.Pattern{Mask: spec.Intersect(spec.Document(), spec.Full()), Causal: true}
	drun := cpuRun(t, dp, cpu.PureGo, 64)
	if err := drun(mk(nq), mk(nl), mk(nq), mk(nkv), mk(nkv), []int32{0, 0}, good); err == nil {
		t.Error("short document ids: no error")
	}
	if err := drun(mk(nq), mk(nl), mk(nq), mk(nkv), mk(nkv), []int32{0, 1, 0, 1, 1}, good); err == nil {
		t.Error("decreasing document ids: no error")
	}
}

// TestCPUNoAllocs: after warm-up a call allocates nothing.
func TestCPUNoAllocs(t *testing.T) {
	masks := []*spec.Mask{
		spec.Union(spec.Block(64), spec.Bridge(64, 8, 8, 0)),
		spec.Intersect(spec.Window(100), spec.Union(spec.Block(64), spec.Global(3))),
	}
	for k, v := range append(variants(), cpu.PureGo) {
		p := spec.Pattern{Mask: masks[k%len(masks)], Causal: true}
		plan, _ := Compile(&spec.Spec{Name: "t", Mask: p.Mask, Causal: true, HeadDim: 64}, CPUTarget, nil)
		m := plan.Mask()
		s := cpu.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 300, SeqK: 300, HeadDim: 64}
		q, k, vv := make([]float32, 2*300*64), make([]float32, 300*64), make([]float32, 300*64)
		out, lse := make([]float32, 2*300*64), make([]float32, 600)
		allocs := testing.AllocsPerRun(5, func() {
			if err := cpu.Forward(m, v, out, lse, q, k, vv, nil, s); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s %v: %v allocations per call", v, p, allocs)
		}
	}
}
