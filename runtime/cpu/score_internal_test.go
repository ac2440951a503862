package cpu

import (
	"math"
	"math/rand"
	"testing"
)

// ulpErr is |got - want| in units of the float32 spacing at want.
func ulpErr(got float32, want float64) float64 {
	w := float32(want)
	ulp := float64(math.Nextafter32(float32(math.Abs(float64(w))), float32(math.Inf(1)))) - math.Abs(float64(w))
	if w == 0 {
		ulp = float64(math.SmallestNonzeroFloat32)
	}
	return math.Abs(float64(got)-want) / ulp
}

// TestTanh32 measures tanh32 against math.Tanh on a dense sweep and at
// the special values: within 2.5 ulp everywhere (the score stage's error
// budget), exact at 0, +-1 past 44, NaN for NaN.
func TestTanh32(t *testing.T) {
	worst, at := 0.0, float32(0)
	check := func(x float32) {
		got := tanh32(x)
		e := ulpErr(got, math.Tanh(float64(x)))
		if e > worst {
			worst, at = e, x
		}
	}
	for x := float32(1e-30); x < 50; x = x*1.0001 + 1e-38 {
		check(x)
		check(-x)
	}
	r := rand.New(rand.NewSource(1))
	for n := 0; n < 1<<20; n++ {
		check(float32(r.NormFloat64() * 3))
	}
	t.Logf("tanh32: worst %.2f ulp at %g", worst, at)
	if worst > 2.5 {
		t.Errorf("tanh32: %.2f ulp at %g, want at most 2.5", worst, at)
	}
	for _, c := range []struct{ x, want float32 }{
		{0, 0}, {float32(math.Inf(1)), 1}, {float32(math.Inf(-1)), -1}, {60, 1}, {-60, -1},
	} {
		if got := tanh32(c.x); got != c.want {
			t.Errorf("tanh32(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if got := tanh32(float32(math.NaN())); got == got {
		t.Errorf("tanh32(NaN) = %g", got)
	}
	if got := tanh32(float32(math.Copysign(0, -1))); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("tanh32(-0) = %g", got)
	}
}
