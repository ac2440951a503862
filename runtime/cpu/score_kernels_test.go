package cpu

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/attngen/attngen/emit/avo"
)

// TestScoreABI holds emit/avo's view of the score stage to this package's:
// the scoreTile offsets and size the kernels address, the flag bits and
// the tanh constants its constant table holds.
func TestScoreABI(t *testing.T) {
	var sc scoreTile
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"cap", unsafe.Offsetof(sc.cap), avo.ScoreCapOff},
		{"invCap", unsafe.Offsetof(sc.invCap), avo.ScoreInvCapOff},
		{"flags", unsafe.Offsetof(sc.flags), avo.ScoreFlagsOff},
		{"slope", unsafe.Offsetof(sc.slope), avo.ScoreSlopeOff},
		{"rows", unsafe.Offsetof(sc.rows), avo.ScoreRowsOff},
		{"cols", unsafe.Offsetof(sc.cols), avo.ScoreColsOff},
		{"size", unsafe.Sizeof(sc), avo.ScoreSize},
	} {
		if c.got != c.want {
			t.Errorf("scoreTile %s at %d, emit/avo says %d", c.name, c.got, c.want)
		}
	}
	if scoreCap != avo.ScoreCap || scoreAlibi != avo.ScoreAlibi || scoreAbs != avo.ScoreAbs {
		t.Errorf("flags %d %d %d, emit/avo says %d %d %d", scoreCap, scoreAlibi, scoreAbs, avo.ScoreCap, avo.ScoreAlibi, avo.ScoreAbs)
	}
	poly := [8]float64{tanhT3, tanhT5, tanhT7, tanhT9, tanhT11, tanhT13, tanhT15, tanhT17}
	if poly != avo.TanhPoly {
		t.Errorf("tanh coefficients %v, emit/avo says %v", poly, avo.TanhPoly)
	}
	if tanhSmall != avo.TanhSmall || tanhM2L2E != avo.TanhM2L2E {
		t.Errorf("tanh threshold and exponent scale %v %v, emit/avo says %v %v", tanhSmall, tanhM2L2E, avo.TanhSmall, avo.TanhM2L2E)
	}
}

// TestTanhKernels measures each variant's vector tanh (the score stage's,
// run alone by the kernels' tanh field) as TestTanh32 measures tanh32: a
// dense sweep of both signs and Gaussian values within 2.5 ulp of
// math.Tanh, and the special values exact (0 and -0 with their sign, +-1
// at +-Inf and +-60, NaN for NaN).
func TestTanhKernels(t *testing.T) {
	eachKernels(t, func(k *kernels) bool { return k.tanh != nil }, func(t *testing.T, k *kernels) {
		negZero, inf := float32(math.Copysign(0, -1)), float32(math.Inf(1))
		exact := []struct{ x, want float32 }{{0, 0}, {negZero, negZero}, {inf, 1}, {-inf, -1}, {60, 1}, {-60, -1}}
		xs := []float32{float32(math.NaN()), -float32(math.NaN())}
		for _, c := range exact {
			xs = append(xs, c.x)
		}
		nSpecial := len(xs)
		// Around the threshold between the halves and where e underflows.
		for _, x := range []float32{tanhSmall, 44} {
			for i, y := 0, x; i < 64; i++ {
				xs = append(xs, y, -y)
				y = math.Nextafter32(y, 0)
			}
		}
		for x := float32(1e-30); x < 50; x = x*1.0001 + 1e-38 {
			xs = append(xs, x, -x)
		}
		r := rand.New(rand.NewSource(1))
		for n := 0; n < 1<<20; n++ {
			xs = append(xs, float32(r.NormFloat64()*3))
		}
		xs = xs[:len(xs)/k.lanes*k.lanes]
		ys := make([]float32, len(xs))
		k.tanh(&ys[0], &xs[0], len(xs))
		for i := 0; i < 2; i++ {
			if ys[i] == ys[i] {
				t.Errorf("tanh(%g) = %g, want NaN", xs[i], ys[i])
			}
		}
		for i, c := range exact {
			if got := ys[2+i]; math.Float32bits(got) != math.Float32bits(c.want) {
				t.Errorf("tanh(%g) = %g, want %g", c.x, got, c.want)
			}
		}
		worst, at := 0.0, float32(0)
		for i, x := range xs[nSpecial:] {
			if e := ulpErr(ys[nSpecial+i], math.Tanh(float64(x))); e > worst {
				worst, at = e, x
			}
		}
		t.Logf("worst %.2f ulp at %g over %d values", worst, at, len(xs))
		if worst > 2.5 {
			t.Errorf("%.2f ulp at %g, want at most 2.5", worst, at)
		}
	})
}
