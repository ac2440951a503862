package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// exp2MaxRel bounds the relative error of exp2 against math.Exp2 over
// [-126, 128). The polynomial's own error is below 2e-9; the rest is float32
// rounding: about half an ulp (2^-24 ≈ 6e-8) in each of the last Horner
// steps and in the final product. Measured it is about 1.0e-7; 4e-7 (a bit
// over 3 ulp of 2^-23) leaves room without hiding a wrong coefficient,
// which shows up as 1e-5 or worse.
const exp2MaxRel = 4e-7

func exp2RelErr(x float32) float64 {
	want := math.Exp2(float64(x))
	got := float64(exp2(x))
	return math.Abs(got-want) / want
}

func TestExp2Sweep(t *testing.T) {
	worst, worstX := 0.0, float32(0)
	check := func(x float32) {
		if e := exp2RelErr(x); e > worst || e != e {
			worst, worstX = e, x
		}
	}
	// A dense sweep of the whole normal range.
	const n = 1 << 21
	for i := range n {
		check(-126 + 254*float32(i)/n)
	}
	// Every float32 in [1, 2): n = 1 and 2 cover every reduced argument f
	// in [-0.5, 0.5) at the finest spacing any x in [1, 128) produces.
	for b := math.Float32bits(1); b < math.Float32bits(2); b++ {
		check(math.Float32frombits(b))
	}
	// Every float32 in [-0.5, 0.5) with magnitude above 2^-20 at a stride,
	// and random arguments everywhere.
	for b := math.Float32bits(0x1p-20); b < math.Float32bits(0.5); b += 61 {
		check(math.Float32frombits(b))
		check(-math.Float32frombits(b))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(-126 + 254*rng.Float32())
	}
	t.Logf("exp2: max relative error %.3g (%.2f ulp of 2^-23) at x = %v", worst, worst/0x1p-23, worstX)
	if !(worst <= exp2MaxRel) {
		t.Fatalf("exp2: max relative error %g at x = %v, want <= %g", worst, worstX, exp2MaxRel)
	}
}

func TestExp2Special(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	exact := []struct{ x, want float32 }{
		{0, 1},
		{1, 2},
		{-1, 0.5},
		{10, 1024},
		{-126, 0x1p-126},
		{127, 0x1p127},
		{float32(math.Inf(-1)), 0},
		{-126.00001, 0},
		{-127, 0},
		{-150, 0},
		{-1e30, 0},
		{float32(-math.MaxFloat32), 0},
		{128, inf},
		{200, inf},
		{float32(math.MaxFloat32), inf},
		{inf, inf},
	}
	for _, c := range exact {
		if got := exp2(c.x); got != c.want {
			t.Errorf("exp2(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := exp2(0); math.Float32bits(got) != math.Float32bits(1) {
		t.Errorf("exp2(0) bits %#x", math.Float32bits(got))
	}
	if got := exp2(nan); got == got {
		t.Errorf("exp2(NaN) = %v, want NaN", got)
	}
	// Integers are exact, including the top half-unit below overflow and
	// the smallest normal results.
	for n := -126; n <= 127; n++ {
		if got, want := exp2(float32(n)), float32(math.Ldexp(1, n)); got != want {
			t.Errorf("exp2(%d) = %v, want %v", n, got, want)
		}
	}
	// Close to the edges the error stays within the bound, results stay
	// finite below 128 and are never subnormal.
	edge := []float32{127.4999, 127.5, 127.50001, 127.9, 127.99999, -125.5, -125.99999, -125.50001}
	for _, x := range edge {
		got := exp2(x)
		if math.IsInf(float64(got), 0) || got < 0x1p-126 {
			t.Errorf("exp2(%v) = %v", x, got)
			continue
		}
		if e := exp2RelErr(x); e > exp2MaxRel {
			t.Errorf("exp2(%v): relative error %g", x, e)
		}
	}
	// Monotone across the reduction boundaries at half integers.
	for n := -125; n <= 127; n++ {
		h := float32(n) - 0.5
		lo := math.Nextafter32(h, -1000)
		hi := math.Nextafter32(h, 1000)
		if !(exp2(lo) <= exp2(h) && exp2(h) <= exp2(hi)) {
			t.Errorf("exp2 not monotone around %v: %v %v %v", h, exp2(lo), exp2(h), exp2(hi))
		}
	}
}

func BenchmarkExp2(b *testing.B) {
	xs := make([]float32, 1024)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range xs {
		xs[i] = -30 * rng.Float32()
	}
	var sink float32
	for b.Loop() {
		for _, x := range xs {
			sink += exp2Core(x)
		}
	}
	_ = sink
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(xs)), "ns/exp2")
}
