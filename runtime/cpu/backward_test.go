package cpu_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

type bargs struct {
	dq, dk, dv, dout, q, k, v, out, lse []float32
}

func newBargs(r *rand.Rand, s cpu.Shape) bargs {
	nq := s.Batch * s.HeadsQ * s.SeqQ * s.HeadDim
	nkv := s.Batch * s.HeadsKV * s.SeqK * s.HeadDim
	a := bargs{make([]float32, nq), make([]float32, nkv), make([]float32, nkv), randSlice(r, nq),
		randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv), make([]float32, nq), make([]float32, nq/s.HeadDim)}
	return a
}

func (a bargs) call(m causal, v cpu.Variant, s cpu.Shape) error {
	return cpu.Backward(m, v, a.dq, a.dk, a.dv, a.dout, a.q, a.k, a.v, a.out, a.lse, nil, s)
}

// TestBackwardErrors: the forward's validation, for every argument.
func TestBackwardErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	s := cpu.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 9, SeqK: 12, HeadDim: 64}
	a := newBargs(r, s)
	if err := cpu.Forward(causal{}, cpu.PureGo, a.out, a.lse, a.q, a.k, a.v, nil, s); err != nil {
		t.Fatal(err)
	}
	if err := a.call(causal{}, cpu.PureGo, s); err != nil {
		t.Fatal(err)
	}
	short := func(f func(*bargs)) bargs { b := a; f(&b); return b }
	for name, c := range map[string]struct {
		a    bargs
		s    cpu.Shape
		want error
	}{
		"short dq":   {short(func(b *bargs) { b.dq = b.dq[1:] }), s, cpu.ErrShort},
		"short dk":   {short(func(b *bargs) { b.dk = b.dk[1:] }), s, cpu.ErrShort},
		"short dv":   {short(func(b *bargs) { b.dv = b.dv[1:] }), s, cpu.ErrShort},
		"short dout": {short(func(b *bargs) { b.dout = b.dout[1:] }), s, cpu.ErrShort},
		"short out":  {short(func(b *bargs) { b.out = b.out[1:] }), s, cpu.ErrShort},
		"nil lse":    {short(func(b *bargs) { b.lse = nil }), s, cpu.ErrShort},
		"short v":    {short(func(b *bargs) { b.v = b.v[1:] }), s, cpu.ErrShort},
		"dq = q":     {short(func(b *bargs) { b.dq = b.q }), s, cpu.ErrAlias},
		"dk = dv":    {short(func(b *bargs) { b.dk = b.dv }), s, cpu.ErrAlias},
		"dv = lse":   {short(func(b *bargs) { b.dv = append(b.lse[:0:0], make([]float32, len(b.dv))...); b.lse = b.dv[:len(a.lse)] }), s, cpu.ErrAlias},
		"dq = dout":  {short(func(b *bargs) { b.dq = b.dout }), s, cpu.ErrAlias},
		"sq > sk":    {a, cpu.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 3, SeqK: 2, HeadDim: 64}, cpu.ErrShape},
		"gqa":        {a, cpu.Shape{Batch: 1, HeadsQ: 3, HeadsKV: 2, SeqQ: 1, SeqK: 1, HeadDim: 64}, cpu.ErrShape},
		"head dim":   {a, cpu.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: 100}, cpu.ErrHeadDim},
		"overflow":   {a, cpu.Shape{Batch: 1 << 57, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: 64}, cpu.ErrShape},
	} {
		if err := c.a.call(causal{}, cpu.PureGo, c.s); !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", name, err, c.want)
		}
	}
	if err := a.call(causal{}, cpu.Variant(99), s); !errors.Is(err, cpu.ErrVariant) {
		t.Errorf("unknown variant: error %v", err)
	}
}

// TestBackwardThreads: the gradients do not depend on the number of
// threads, bit for bit, for each variant (AVX-512 and AVX2 run the tiled
// backward with their own kernels, PureGo the per-pair backward), on a
// shape with grouped heads, tail tiles and several key tiles per query
// tile.
func TestBackwardThreads(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	s := cpu.Shape{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 150, SeqK: 200, HeadDim: 64}
	a := newBargs(r, s)
	if err := cpu.Forward(causal{}, cpu.PureGo, a.out, a.lse, a.q, a.k, a.v, nil, s); err != nil {
		t.Fatal(err)
	}
	first := map[cpu.Variant][3][]float32{}
	for _, procs := range []int{1, 2, 3, 8} {
		old := runtime.GOMAXPROCS(procs)
		for _, v := range []cpu.Variant{cpu.Auto, cpu.AVX512, cpu.AVX2, cpu.PureGo} {
			for _, x := range [][]float32{a.dq, a.dk, a.dv} {
				for i := range x {
					x[i] = float32(math.NaN())
				}
			}
			if err := a.call(causal{}, v, s); errors.Is(err, cpu.ErrVariant) {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			f, ok := first[v]
			if !ok {
				first[v] = [3][]float32{append([]float32(nil), a.dq...), append([]float32(nil), a.dk...), append([]float32(nil), a.dv...)}
				continue
			}
			for g, x := range [][]float32{a.dq, a.dk, a.dv} {
				for i := range x {
					if math.Float32bits(x[i]) != math.Float32bits(f[g][i]) {
						t.Fatalf("GOMAXPROCS %d, %s: gradient %d differs at %d: %v vs %v", procs, v, g, i, x[i], f[g][i])
					}
				}
			}
		}
		runtime.GOMAXPROCS(old)
	}
}

// TestBackwardNonFinite: verify's non-finite check on every variant, both
// schedules of the tiled backward (one fused pass at GOMAXPROCS 1, two
// passes at 8) and both head dimensions: NaN and infinities in the keys
// and values a row masks, or in q and dout of a row (one that keeps keys,
// and one that keeps none where the mask has such rows), reach no
// gradient through a masked pair.
func TestBackwardNonFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	pats := []spec.Pattern{
		{Mask: spec.Full(), Causal: true},
		{Mask: spec.Bridge(16, 3, 5, 0), Causal: true}, // most rows keep nothing
		{Mask: spec.Union(spec.Global(3), spec.Window(100)), Causal: true},
		{Mask: spec.Dilated(3, 0), Causal: true},
		{Mask: spec.Intersect(spec.Document(), spec.Window(90)), Causal: true},
	}
	shapes := []verify.Shape{
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 100, HeadDim: 64},
		{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 130, SeqK: 130, HeadDim: 128},
	}
	for _, procs := range []int{1, 8} {
		old := runtime.GOMAXPROCS(procs)
		for _, tg := range cpu.Targets {
			if !cpu.Supported(tg.Variant) || emulated && tg.Variant == cpu.PureGo {
				continue
			}
			for _, p := range pats {
				for _, s := range shapes {
					plan, err := gen.Compile(&spec.Spec{Name: "t", Mask: p.Mask, Causal: p.Causal, HeadDim: s.HeadDim}, gen.CPUTarget, nil)
					if err != nil {
						t.Fatal(err)
					}
					m, v := plan.Mask(), tg.Variant
					cs := func(s verify.Shape) cpu.Shape {
						return cpu.Shape{Batch: s.Batch, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: s.SeqQ, SeqK: s.SeqK, HeadDim: s.HeadDim}
					}
					fwd := func(out, lse, q, k, v2 []float32, docs []int32, s verify.Shape) error {
						return cpu.Forward(m, v, out, lse, q, k, v2, docs, cs(s))
					}
					bwd := func(dq, dk, dv, dout, q, k, v2, out, lse []float32, docs []int32, s verify.Shape, _ []float32) error {
						return cpu.Backward(m, v, dq, dk, dv, dout, q, k, v2, out, lse, docs, cs(s))
					}
					if err := verify.CheckGradNonFinite(p, fwd, bwd, s, r, 3); err != nil {
						t.Fatalf("GOMAXPROCS %d, %s, %v: %v", procs, tg.Name, p, err)
					}
				}
			}
		}
		runtime.GOMAXPROCS(old)
	}
}

// TestBackwardNonFiniteNoAllocs: a call whose q and dout hold NaN and
// infinities (the tiled backward's copies of such rows) allocates
// nothing after warm-up either, on every variant.
func TestBackwardNonFiniteNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := rand.New(rand.NewPCG(13, 14))
	s := cpu.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 300, SeqK: 300, HeadDim: 64}
	a := newBargs(r, s)
	a.q[5*64+3], a.dout[70*64+9], a.dout[70*64+10] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
	if err := cpu.Forward(causal{}, cpu.Auto, a.out, a.lse, a.q, a.k, a.v, nil, s); err != nil {
		t.Fatal(err)
	}
	for _, v := range []cpu.Variant{cpu.Auto, cpu.AVX512, cpu.AVX2, cpu.PureGo} {
		if !cpu.Supported(v) {
			continue
		}
		if err := a.call(causal{}, v, s); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(5, func() { _ = a.call(causal{}, v, s) }); n != 0 {
			t.Errorf("%s: %v allocations per call", v, n)
		}
	}
}
