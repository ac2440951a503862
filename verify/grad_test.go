package verify

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// TestReferenceGradFiniteDifferences checks ReferenceGrad against central
// finite differences of the float64 loss sum(dout * out) on small shapes:
// length 1, grouped heads, fewer queries than keys, masks with fully
// masked rows, documents and random masks.
func TestReferenceGradFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	pats := []spec.Pattern{
		{Mask: spec.Full(), Causal: true},
		{Mask: spec.Window(3), Causal: true},
		{Mask: spec.Bridge(4, 1, 2, 0), Causal: true}, // most rows keep nothing
		{Mask: spec.Dilated(2, 0), Causal: false},
		{Mask: spec.Intersect(spec.Document(), spec.Union(spec.Global(1), spec.Window(2))), Causal: true},
	}
	for k := 0; k < 6; k++ {
		pats = append(pats, spectest.Pattern(r, 10, 2))
	}
	shapes := []Shape{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: 3},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 4, SeqK: 9, HeadDim: 3},
		{Batch: 2, HeadsQ: 2, HeadsKV: 2, SeqQ: 7, SeqK: 7, HeadDim: 2, Scale: 0.7},
		{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 1, SeqK: 6, HeadDim: 4},
	}
	for _, p := range pats {
		for _, s := range shapes {
			checkFD(t, p, s, r)
		}
	}
}

func checkFD(t *testing.T, p spec.Pattern, s Shape, r *rand.Rand) {
	t.Helper()
	nq, nkv, _ := s.Sizes()
	wide64 := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	q, k, v, dout := wide64(nq), wide64(nkv), wide64(nkv), wide64(nq)
	var docs *spec.Docs
	if p.Mask.HasDocument() {
		docs, _ = spec.NewDocs(RandomDocs(r, s.SeqK))
	}
	loss := func() float64 {
		out := attention64(p, docs, q, k, v, s)
		l := 0.0
		for i, o := range out {
			l += dout[i] * o
		}
		return l
	}
	g := grad64(p, docs, q, k, v, dout, s, nil)
	const h = 1e-5
	pairs := []struct {
		name string
		in   []float64
		grad []float64
	}{{"dq", q, g.Q}, {"dk", k, g.K}, {"dv", v, g.V}}
	if s.Score.hasSinks() {
		// the sink logits themselves (a head without one has dsink 0)
		sinks := s.Score.Sinks
		for h, x := range sinks {
			if math.IsInf(x, -1) && g.DSink[h] != 0 {
				t.Fatalf("%v %+v: dsink[%d] = %v for a head without a sink", p, s, h, g.DSink[h])
			}
		}
		pairs = append(pairs, struct {
			name string
			in   []float64
			grad []float64
		}{"dsink", sinks, g.DSink})
	} else if g.DSink != nil {
		t.Fatalf("%v %+v: dsink %v without sinks", p, s, g.DSink)
	}
	for x, pair := range pairs {
		_ = x
		for i := range pair.in {
			if math.IsInf(pair.in[i], -1) {
				continue // a head without a sink
			}
			keep := pair.in[i]
			pair.in[i] = keep + h
			up := loss()
			pair.in[i] = keep - h
			down := loss()
			pair.in[i] = keep
			fd := (up - down) / (2 * h)
			if e := math.Abs(fd - pair.grad[i]); e > 1e-7*(1+math.Abs(fd)) {
				t.Fatalf("%v %+v: %s[%d] = %v, finite difference %v (error %.2e)", p, s, pair.name, i, pair.grad[i], fd, e)
			}
			if fd == 0 && pair.grad[i] != 0 {
				t.Fatalf("%v %+v: %s[%d] = %v where the loss does not depend on the input", p, s, pair.name, i, pair.grad[i])
			}
		}
	}
}

// TestAttention64 ties the float64 forward that the finite differences
// differentiate to Reference.
func TestAttention64(t *testing.T) {
	r := rand.New(rand.NewPCG(93, 94))
	for k := 0; k < 20; k++ {
		p := spectest.Pattern(r, 30, 2)
		s := Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 1 + r.IntN(20), SeqK: 20, HeadDim: 5}
		nq, nkv, _ := s.Sizes()
		q, kk, v := randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv)
		ref, _, err := Reference(p, nil, q, kk, v, s)
		if err != nil {
			t.Fatal(err)
		}
		got := attention64(p, nil, wide(q), wide(kk), wide(v), s)
		for i := range ref {
			if math.Abs(ref[i]-got[i]) > 1e-12 {
				t.Fatalf("%v: out[%d] = %v, Reference %v", p, i, got[i], ref[i])
			}
		}
	}
}

// TestNaiveGradFP32 checks the yardstick against the reference: float32
// error only, without a score stage and with each (dsink included).
func TestNaiveGradFP32(t *testing.T) {
	r := rand.New(rand.NewPCG(95, 96))
	for k := 0; k < 10+len(stageCases); k++ {
		p := spectest.Pattern(r, 60, 2)
		s := Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 1 + r.IntN(60), SeqK: 60, HeadDim: 16}
		if k >= 10 {
			s.Score = stageCases[k-10].make(r, s.HeadsQ)
		}
		nq, nkv, _ := s.Sizes()
		q, kk, v, dout := randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv), randSlice(r, nq)
		ref, err := ReferenceGrad(p, nil, q, kk, v, dout, s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := NaiveGradFP32(p, nil, q, kk, v, dout, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			a []float32
			b []float64
		}{{got.Q, ref.Q}, {got.K, ref.K}, {got.V, ref.V}, {got.DSink, ref.DSink}} {
			if len(c.a) != len(c.b) {
				t.Fatalf("%v: %d values, reference %d", p, len(c.a), len(c.b))
			}
			for i := range c.a {
				if math.Abs(float64(c.a[i])-c.b[i]) > 1e-4*(1+math.Abs(c.b[i])) {
					t.Fatalf("%v: %v vs reference %v", p, c.a[i], c.b[i])
				}
			}
		}
	}
}
