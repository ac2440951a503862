package ptx

import (
	"math"
	"math/rand/v2"
	"testing"

	ptxi "github.com/attngen/attngen/verify/ptx"
)

// tanhULP is |got - want| in units of the last place of float32(want).
func tanhULP(got float32, want float64) float64 {
	w := float32(want)
	ulp := float64(math.Nextafter32(float32(math.Abs(float64(w))), float32(math.Inf(1)))) - math.Abs(float64(w))
	if w == 0 {
		ulp = float64(math.SmallestNonzeroFloat32)
	}
	return math.Abs(float64(got)-want) / ulp
}

// runTanh runs the score stage's tanh (kit.tanh, as the kernels emit it)
// under the interpreter on xs, one thread per value.
func runTanh(t *testing.T, xs []float32) []float32 {
	t.Helper()
	g := &kit{f: NewFunc("tanh_sweep")}
	f := g.f
	f.Params = []Param{{Name: "x", T: U64}, {Name: "y", T: U64}}
	x, y := g.global("x"), g.global("y")
	i := f.Add(f.MulC(g.special("%ctaid.x"), 128), g.special("%tid.x"))
	xa := g.wide(x, i, 4)
	v := f.NewReg(F32)
	f.Emit(Inst{Op: OpLd, T: F32, Space: "global", Dst: []Operand{R(v)}, Src: []Operand{Addr(xa.Reg, 0)}})
	th := g.tanh(R(v))
	f.Emit(Inst{Op: OpSt, T: F32, Space: "global", Dst: []Operand{Addr(g.wide(y, i, 4).Reg, 0)}, Src: []Operand{th}})
	f.Emit(Inst{Op: OpRet})
	text, err := (&Module{SM: 80, Funcs: []*Func{f}}).Text()
	if err != nil {
		t.Fatal(err)
	}
	mod, err := ptxi.Parse("tanh.ptx", text)
	if err != nil {
		t.Fatal(err)
	}
	n := (len(xs) + 127) / 128 * 128
	in := make([]float32, n)
	copy(in, xs)
	dev := ptxi.NewDevice()
	xb, err := dev.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := dev.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.WriteF32(xb, in); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Launch(mod, f.Name, [3]int{n / 128, 1, 1}, [3]int{128, 1, 1}, 0, xb, yb); err != nil {
		t.Fatal(err)
	}
	out, err := dev.ReadF32(yb, n)
	if err != nil {
		t.Fatal(err)
	}
	return out[:len(xs)]
}

// TestTanhInterp measures the kernels' tanh (runtime/cpu's tanh32
// algorithm on ex2.approx and rcp.approx with a Newton step) under the
// interpreter against math.Tanh, on TestTanh32's sweep (every 1.0001x
// from 1e-30 to 50, both signs; every 1.001x with -short) and on normal
// values of deviation 3: within 2.5 ulp, as tanh32; exact at 0 and -0,
// +-1 for +-Inf and past 44, NaN for NaN. The interpreter's ex2.approx
// and rcp.approx are correctly rounded; an H200's differ by up to 2 ulp
// and 1 ulp (verify/ptx's goldens), which the Newton step absorbs for the
// quotient and which moves tanh by at most 1.5 ulp above the threshold.
func TestTanhInterp(t *testing.T) {
	t.Parallel()
	step := 1.0001
	if testing.Short() {
		step = 1.001
	}
	var xs []float32
	for x := float32(1e-30); x < 50; x = float32(float64(x)*step) + 1e-38 {
		xs = append(xs, x, -x)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for n := 0; n < len(xs)/2; n++ {
		xs = append(xs, float32(r.NormFloat64()*3))
	}
	special := []struct{ x, want float32 }{
		{0, 0}, {float32(math.Inf(1)), 1}, {float32(math.Inf(-1)), -1}, {60, 1}, {-60, -1}, {44, 1},
	}
	for _, c := range special {
		xs = append(xs, c.x)
	}
	nan, negZero := float32(math.NaN()), float32(math.Copysign(0, -1))
	xs = append(xs, nan, negZero)
	got := runTanh(t, xs)
	worst, at := 0.0, float32(0)
	for k, x := range xs[:len(xs)-len(special)-2] {
		if e := tanhULP(got[k], math.Tanh(float64(x))); e > worst {
			worst, at = e, x
		}
	}
	t.Logf("kernel tanh under the interpreter: worst %.2f ulp at %g over %d values", worst, at, len(xs))
	if worst > 2.5 {
		t.Errorf("kernel tanh: %.2f ulp at %g, want at most 2.5", worst, at)
	}
	base := len(xs) - len(special) - 2
	for k, c := range special {
		if g := got[base+k]; g != c.want {
			t.Errorf("tanh(%g) = %g, want %g", c.x, g, c.want)
		}
	}
	if g := got[len(xs)-2]; g == g {
		t.Errorf("tanh(NaN) = %g", g)
	}
	if g := got[len(xs)-1]; g != 0 || !math.Signbit(float64(g)) {
		t.Errorf("tanh(-0) = %g", g)
	}
}
