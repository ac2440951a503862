package verify

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for k := range x {
		x[k] = float32(r.NormFloat64())
	}
	return x
}

// denseNaive is a second, independent formulation: it materializes the
// (small) mask matrix and the full score matrix per head, then normalizes.
func denseNaive(p spec.Pattern, q, k, v []float32, s Shape) (out, lse []float64) {
	D := s.HeadDim
	mask := make([][]bool, s.SeqQ)
	for r := range mask {
		mask[r] = make([]bool, s.SeqK)
		for j := range mask[r] {
			mask[r][j] = p.At(r+s.SeqK-s.SeqQ, j)
		}
	}
	out = make([]float64, s.Batch*s.HeadsQ*s.SeqQ*D)
	lse = make([]float64, s.Batch*s.HeadsQ*s.SeqQ)
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsQ; h++ {
			hk := h * s.HeadsKV / s.HeadsQ
			for r := 0; r < s.SeqQ; r++ {
				row := (b*s.HeadsQ+h)*s.SeqQ + r
				var ws []float64
				var js []int
				for j := 0; j < s.SeqK; j++ {
					if !mask[r][j] {
						continue
					}
					dot := 0.0
					for d := 0; d < D; d++ {
						dot += float64(q[row*D+d]) * float64(k[((b*s.HeadsKV+hk)*s.SeqK+j)*D+d])
					}
					ws = append(ws, dot*s.EffScale())
					js = append(js, j)
				}
				if len(ws) == 0 {
					lse[row] = math.Inf(-1)
					continue
				}
				total := 0.0
				for _, w := range ws {
					total += math.Exp(w)
				}
				lse[row] = math.Log(total)
				for n, j := range js {
					p := math.Exp(ws[n]) / total
					for d := 0; d < D; d++ {
						out[row*D+d] += p * float64(v[((b*s.HeadsKV+hk)*s.SeqK+j)*D+d])
					}
				}
			}
		}
	}
	return out, lse
}

func closeTo(a, b, tol float64) bool {
	if math.IsInf(a, -1) || math.IsInf(b, -1) {
		return a == b
	}
	return math.Abs(a-b) <= tol*(1+math.Abs(b))
}

func TestReferenceAgainstDense(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := 0; iter < 200; iter++ {
		p := spectest.Pattern(r, 20, 2)
		hkv := 1 + r.IntN(2)
		s := Shape{Batch: 1 + r.IntN(2), HeadsQ: hkv * (1 + r.IntN(3)), HeadsKV: hkv, SeqK: 1 + r.IntN(40), HeadDim: 1 + r.IntN(9)}
		s.SeqQ = 1 + r.IntN(s.SeqK)
		if r.IntN(2) == 0 {
			s.Scale = r.Float64() * 2
		}
		nq, nkv, _ := s.Sizes()
		q, k, v := randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv)
		out, lse, err := Reference(p, nil, q, k, v, s)
		if err != nil {
			t.Fatal(err)
		}
		wo, wl := denseNaive(p, q, k, v, s)
		for n := range out {
			if !closeTo(out[n], wo[n], 1e-12) {
				t.Fatalf("%v %+v: out[%d] = %v, dense %v", p, s, n, out[n], wo[n])
			}
		}
		for n := range lse {
			if !closeTo(lse[n], wl[n], 1e-12) {
				t.Fatalf("%v %+v: lse[%d] = %v, dense %v", p, s, n, lse[n], wl[n])
			}
		}
	}
}

// TestReferenceMaskedRows: a row that keeps nothing yields exactly 0 and -Inf.
func TestReferenceMaskedRows(t *testing.T) {
	// Bridge only: phases >= targets and the whole first block keep nothing.
	p := spec.Pattern{Mask: spec.Bridge(4, 1, 2, 0), Causal: true}
	s := Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 9, SeqK: 9, HeadDim: 3}
	r := rand.New(rand.NewPCG(1, 1))
	nq, nkv, _ := s.Sizes()
	out, lse, err := Reference(p, nil, randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv), s)
	if err != nil {
		t.Fatal(err)
	}
	for row := range lse {
		i := row % s.SeqQ
		masked := i%4 != 0 || i < 4
		if masked != math.IsInf(lse[row], -1) {
			t.Fatalf("row %d: lse %v, masked %v", row, lse[row], masked)
		}
		for d := 0; d < s.HeadDim; d++ {
			o := out[row*s.HeadDim+d]
			if math.IsNaN(o) || (masked && o != 0) {
				t.Fatalf("row %d: out %v", row, o)
			}
		}
	}
}

// TestReferenceDocuments: two packed documents give exactly what each
// document gives alone, with document-local positions.
func TestReferenceDocuments(t *testing.T) {
	inner := spec.Union(spec.Global(2), spec.Block(3))
	packed := spec.Pattern{Mask: spec.Intersect(spec.Document(), inner), Causal: true}
	alone := spec.Pattern{Mask: inner, Causal: true}
	r := rand.New(rand.NewPCG(2, 2))
	lens := []int{5, 7}
	D := 4
	s := Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 12, SeqK: 12, HeadDim: D}
	q, k, v := randSlice(r, 12*D), randSlice(r, 12*D), randSlice(r, 12*D)
	docs, err := spec.NewDocs([]int32{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	out, lse, err := Reference(packed, docs, q, k, v, s)
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for _, n := range lens {
		sd := Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: n, SeqK: n, HeadDim: D}
		o2, l2, err := Reference(alone, nil, q[off*D:(off+n)*D], k[off*D:(off+n)*D], v[off*D:(off+n)*D], sd)
		if err != nil {
			t.Fatal(err)
		}
		for x := range o2 {
			if out[off*D+x] != o2[x] {
				t.Fatalf("doc at %d: out differs", off)
			}
		}
		for x := range l2 {
			if lse[off+x] != l2[x] {
				t.Fatalf("doc at %d: lse differs", off)
			}
		}
		off += n
	}
	if _, err := spec.NewDocs([]int32{0, 1, 0}); err == nil {
		t.Fatal("decreasing document ids accepted")
	}
}

func TestReferenceBadInputs(t *testing.T) {
	p := spec.Pattern{Mask: spec.Full(), Causal: true}
	good := Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 3, SeqK: 4, HeadDim: 2}
	nq, nkv, _ := good.Sizes()
	mk := func(n int) []float32 { return make([]float32, n) }
	cases := []struct {
		name    string
		s       Shape
		q, k, v int
	}{
		{"short q", good, nq - 1, nkv, nkv},
		{"short k", good, nq, nkv - 1, nkv},
		{"short v", good, nq, nkv, nkv - 1},
		{"zero dim", Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1}, 1, 1, 1},
		{"gqa", Shape{Batch: 1, HeadsQ: 3, HeadsKV: 2, SeqQ: 1, SeqK: 1, HeadDim: 1}, 3, 2, 2},
		{"sq > sk", Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 2, SeqK: 1, HeadDim: 1}, 2, 1, 1},
		{"nan scale", Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: 1, Scale: math.NaN()}, 1, 1, 1},
	}
	for _, c := range cases {
		if _, _, err := Reference(p, nil, mk(c.q), mk(c.k), mk(c.v), c.s); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	docs, _ := spec.NewDocs([]int32{0, 0})
	if _, _, err := Reference(p, docs, mk(nq), mk(nkv), mk(nkv), good); err == nil {
		t.Error("short document ids: no error")
	}
}

// TestKeptPairs compares the progression count with a brute-force count.
func TestKeptPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for iter := 0; iter < 500; iter++ {
		p := spectest.Pattern(r, 30, 3)
		sk := 1 + r.IntN(60)
		sq := 1 + r.IntN(sk)
		var want int64
		for q := 0; q < sq; q++ {
			for j := 0; j < sk; j++ {
				if p.At(spec.Row(q, sq, sk), j) {
					want++
				}
			}
		}
		if got := KeptPairs(p, sq, sk); got != want {
			t.Fatalf("%v sq %d sk %d: KeptPairs %d, brute force %d", p, sq, sk, got, want)
		}
	}
}

// TestNaiveYardsticks: the float32 and bf16 yardsticks compute the same
// function as the reference, within their precision.
func TestNaiveYardsticks(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for iter := 0; iter < 100; iter++ {
		p := spectest.Pattern(r, 30, 2)
		s := Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqK: 1 + r.IntN(60), HeadDim: 1 + r.IntN(16)}
		s.SeqQ = 1 + r.IntN(s.SeqK)
		nq, nkv, nl := s.Sizes()
		q, k, v := randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv)
		RoundBF16(q)
		RoundBF16(k)
		RoundBF16(v)
		ref, refLSE, _ := Reference(p, nil, q, k, v, s)
		for name, tol := range map[string]float64{"fp32": 1e-5, "bf16": 2e-2} {
			out, lse := make([]float32, nq), make([]float32, nl)
			f := NaiveFP32
			if name == "bf16" {
				f = NaiveBF16
			}
			if err := f(p, nil, q, k, v, s, out, lse); err != nil {
				t.Fatal(err)
			}
			for n := range out {
				if math.Abs(float64(out[n])-ref[n]) > tol*(1+math.Abs(ref[n])) {
					t.Fatalf("%s %v: out[%d] = %v, reference %v", name, p, n, out[n], ref[n])
				}
			}
			for n := range lse {
				if !closeTo(float64(lse[n]), refLSE[n], 1e-5) {
					t.Fatalf("%s %v: lse[%d] = %v, reference %v", name, p, n, lse[n], refLSE[n])
				}
			}
		}
	}
	if BF16(1) != 0x3f80 || FromBF16(0x3f80) != 1 || BF16(float32(math.Inf(1))) != 0x7f80 {
		t.Fatal("bf16 conversion")
	}
	if x := FromBF16(BF16(1 + 1.0/256)); x != 1 { // tie rounds to even
		t.Fatalf("bf16 tie: %v", x)
	}
}
