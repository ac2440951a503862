package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAllFinite: allFinite agrees with a float comparison for every length
// up to 40 and a special value (NaN, ±Inf, largest finite, subnormal) at
// every position.
func TestAllFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 15))
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 0}
	for n := 0; n <= 40; n++ {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		if !allFinite(x) {
			t.Fatalf("n %d: finite values called non-finite", n)
		}
		for i := 0; i < n; i++ {
			for _, sp := range specials {
				old := x[i]
				x[i] = sp
				want := !math.IsNaN(float64(sp)) && !math.IsInf(float64(sp), 0)
				if got := allFinite(x); got != want {
					t.Fatalf("n %d, x[%d] = %v: allFinite %v", n, i, sp, got)
				}
				x[i] = old
			}
		}
	}
}

func BenchmarkAllFinite(b *testing.B) {
	x := make([]float32, 128)
	for i := range x {
		x[i] = float32(i)
	}
	n := 0
	for b.Loop() {
		if allFinite(x) {
			n++
		}
	}
	_ = n
}
