//go:build ptxinterp

package ptx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// bf16 rounds to the nearest bfloat16 (ties to even) and returns its bits.
func bf16(x float32) uint16 {
	b := math.Float32bits(x)
	if x != x {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

type shape struct{ batch, hq, hkv, sq, sk int }

// runForward runs the kernel of plan p under the interpreter on random
// bf16 inputs and compares with the float64 reference.
func runForward(t *testing.T, p *gen.Plan, cfg Config, s shape) {
	t.Helper()
	k, err := GenerateForward(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := ptxi.Parse(k.Name+".ptx", k.PTX)
	if err != nil {
		t.Fatal(err)
	}
	D := p.HeadDim
	vs := verify.Shape{Batch: s.batch, HeadsQ: s.hq, HeadsKV: s.hkv, SeqQ: s.sq, SeqK: s.sk, HeadDim: D}
	nq, nkv, nl := vs.Sizes()
	rng := rand.New(rand.NewPCG(uint64(s.sq), uint64(s.sk*7+D)))
	gen16 := func(n int) ([]uint16, []float32) {
		h, f := make([]uint16, n), make([]float32, n)
		for i := range h {
			h[i] = bf16(float32(rng.NormFloat64()))
			f[i] = fromBF16(h[i])
		}
		return h, f
	}
	qh, qf := gen16(nq)
	kh, kf := gen16(nkv)
	vh, vf := gen16(nkv)
	dev := ptxi.NewDevice()
	alloc := func(n int) uint64 {
		a, err := dev.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	qa, ka, va, oa, la := alloc(2*nq), alloc(2*nkv), alloc(2*nkv), alloc(2*nq), alloc(4*nl)
	for _, w := range []struct {
		a uint64
		h []uint16
	}{{qa, qh}, {ka, kh}, {va, vh}} {
		if err := dev.WriteU16(w.a, w.h); err != nil {
			t.Fatal(err)
		}
	}
	l, err := k.Geometry(s.batch, s.hq, s.hkv, s.sq, s.sk, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Launch(mod, k.Name, l.Grid, l.Block, l.DynShared, qa, ka, va, oa, la, l.SeqQ, l.SeqK, l.HeadsQ, l.HeadsKV, l.ScaleLog2); err != nil {
		t.Fatal(err)
	}
	oh, err := dev.ReadU16(oa, nq)
	if err != nil {
		t.Fatal(err)
	}
	lse, err := dev.ReadF32(la, nl)
	if err != nil {
		t.Fatal(err)
	}
	ref, refLse, err := verify.Reference(p.Source, nil, qf, kf, vf, vs)
	if err != nil {
		t.Fatal(err)
	}
	maxV := 0.0
	for _, x := range vf {
		maxV = math.Max(maxV, math.Abs(float64(x)))
	}
	// P is rounded to bf16 (relative 2^-9 per weight, so at most 2^-9 max|v|
	// on the weighted mean) and so is the output (2^-9 |out| <= 2^-9 max|v|);
	// f32 accumulation and ex2.approx add far less. Allow 1.5x that sum.
	tol := 1.5 * math.Ldexp(maxV, -8)
	bad := 0
	for i := range ref {
		got := float64(fromBF16(oh[i]))
		if d := math.Abs(got - ref[i]); !(d <= tol) {
			if bad < 5 {
				row := i / D
				t.Errorf("out[row %d, col %d] = %g, want %g (diff %g > tol %g)", row, i%D, got, ref[i], d, tol)
			}
			bad++
		}
	}
	for i := range refLse {
		got := float64(lse[i])
		want := refLse[i]
		if math.IsInf(want, -1) {
			if !math.IsInf(got, -1) {
				t.Errorf("lse[%d] = %g, want -Inf", i, got)
				bad++
			}
			continue
		}
		if d := math.Abs(got - want); !(d <= 1e-4*(1+math.Abs(want))) {
			if bad < 10 {
				t.Errorf("lse[%d] = %g, want %g", i, got, want)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d mismatches", bad)
	}
}

func compile(t *testing.T, name string, m *spec.Mask, causal bool, d int) *gen.Plan {
	t.Helper()
	p, err := gen.Compile(&spec.Spec{Name: name, Mask: m, Causal: causal, HeadDim: d}, Sm80, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var shapes = []shape{
	{1, 2, 1, 70, 130}, // grouped heads, SeqQ < SeqK, not multiples of 64
	{1, 1, 1, 1, 77},   // decode
	{2, 2, 2, 100, 100},
}

func TestInterpExamples(t *testing.T) {
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	for _, file := range files {
		s, err := spec.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := gen.Compile(s, Sm80, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := GenerateForward(p, Config{SoftLg2: true}); err != nil {
			if strings.Contains(err.Error(), "not supported") {
				t.Logf("%s: %v", s.Name, err)
				continue
			}
			t.Fatal(err)
		}
		for _, sh := range shapes {
			t.Run(fmt.Sprintf("%s/%v", s.Name, sh), func(t *testing.T) { runForward(t, p, Config{SoftLg2: true}, sh) })
		}
	}
}

func TestInterpSmallMasks(t *testing.T) {
	masks := []struct {
		name   string
		m      *spec.Mask
		causal bool
	}{
		{"block48", spec.Block(48), true},
		{"pbb", spec.Union(spec.Block(64), spec.Bridge(64, 8, 8, 0)), true},
		{"bridge_only", spec.Bridge(32, 4, 8, 0), true},
		{"bridge_md", spec.Bridge(48, 16, 48, 20), true},
		{"window40", spec.Window(40), true},
		{"streaming", spec.Union(spec.Global(4), spec.Window(50)), true},
		{"noncausal_lr", spec.WindowLR(30, 20), false},
		{"full_nc", spec.Full(), false},
		{"intersect", spec.Intersect(spec.Block(96), spec.Window(70)), true},
		{"block_nc", spec.Block(40), false},
	}
	for _, mk := range masks {
		for _, d := range []int{64, 128} {
			p := compile(t, mk.name, mk.m, mk.causal, d)
			for _, sh := range []shape{{1, 2, 1, 150, 200}, {1, 1, 1, 1, 150}} {
				t.Run(fmt.Sprintf("%s/d%d/%v", mk.name, d, sh), func(t *testing.T) { runForward(t, p, Config{SoftLg2: true}, sh) })
			}
		}
	}
}
