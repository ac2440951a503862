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

// TestNonFiniteRows: nonFiniteRows (with each variant's kernel or Go) marks
// exactly the value rows holding a NaN or an infinity, for special values
// at random positions, including the first and last element of a row, and
// never a row holding only finite values (largest, subnormal, -0).
func TestNonFiniteRows(t *testing.T) { eachKernels(t, nil, testNonFiniteRows) }

func testNonFiniteRows(t *testing.T, kern *kernels) {
	r := rand.New(rand.NewPCG(16, 17))
	bad := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.Float32frombits(0xffc00001)}
	good := []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1))}
	for _, d := range squareTestDims(kern) {
		for trial := 0; trial < 200; trial++ {
			v := make([]float32, TK*d)
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			var want uint64
			for k := r.IntN(6); k > 0; k-- {
				row, col := r.IntN(TK), r.IntN(d)
				switch r.IntN(3) {
				case 0:
					col = 0
				case 1:
					col = d - 1
				}
				v[row*d+col] = bad[r.IntN(len(bad))]
				want |= 1 << row
			}
			for k := r.IntN(6); k > 0; k-- {
				row, col := r.IntN(TK), r.IntN(d)
				if want>>row&1 == 0 {
					v[row*d+col] = good[r.IntN(len(good))]
				}
			}
			if got := kern.nonFiniteRows(v, d); got != want {
				t.Fatalf("D=%d trial %d: rows %064b, want %064b", d, trial, got, want)
			}
			if _, ok := kern.nonFiniteK(v, d); kern.nonFinite != nil && !ok {
				t.Fatalf("D=%d: the variant's kernel did not run", d)
			}
		}
	}
}

// TestScaleRow: each variant's output scaling is the
// product of each element and the factor, bit for bit, specials included.
func TestScaleRow(t *testing.T) {
	eachKernels(t, func(k *kernels) bool { return k.scaleRow != nil }, testScaleRow)
}

func testScaleRow(t *testing.T, kern *kernels) {
	r := rand.New(rand.NewPCG(18, 19))
	for _, n := range []int{16, 64, 128} {
		src, dst := make([]float32, n), make([]float32, n+1)
		for i := range src {
			src[i] = float32(r.NormFloat64() * 1e3)
		}
		src[0], src[n-1] = float32(math.Inf(-1)), float32(math.NaN())
		dst[n] = 7 // past the row: untouched
		s := float32(r.Float64())
		if !kern.scaleRowK(dst[:n], src, s) {
			t.Fatalf("n %d: the row scaling did not run", n)
		}
		for i, x := range src {
			if w := x * s; math.Float32bits(dst[i]) != math.Float32bits(w) && !(math.IsNaN(float64(w)) && math.IsNaN(float64(dst[i]))) {
				t.Fatalf("n %d: dst[%d] = %v, want %v", n, i, dst[i], w)
			}
		}
		if dst[n] != 7 {
			t.Fatalf("n %d: wrote past the row", n)
		}
	}
}

// TestAddScaledRow: each variant's merge of a part's output row adds the
// rounded product of each element and the factor to the row, bit for bit
// the Go loop on amd64 (product, then sum), specials included: infinities,
// signed zeros, NaN in either operand.
func TestAddScaledRow(t *testing.T) {
	eachKernels(t, func(k *kernels) bool { return k.addScaled != nil }, testAddScaledRow)
}

func testAddScaledRow(t *testing.T, kern *kernels) {
	r := rand.New(rand.NewPCG(22, 23))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, n := range []int{16, 64, 128, 256} {
		src, dst, want := make([]float32, n), make([]float32, n+1), make([]float32, n)
		for i := range src {
			src[i], dst[i] = float32(r.NormFloat64()*1e3), float32(r.NormFloat64()*1e3)
		}
		specials := [][2]float32{{inf, 1}, {-inf, inf}, {nan, 2}, {3, nan}, {nan, nan}, {0, float32(math.Copysign(0, -1))}, {1e-30, -1e-30}}
		for i, sp := range specials {
			src[i], dst[i] = sp[0], sp[1]
		}
		dst[n] = 7 // past the row: untouched
		f := float32(r.Float64())
		for i, x := range src {
			p := x * f
			want[i] = dst[i] + p
		}
		if !kern.addScaledK(dst[:n], src, f) {
			t.Fatalf("n %d: the row update did not run", n)
		}
		for i, w := range want {
			if math.Float32bits(dst[i]) != math.Float32bits(w) && !(math.IsNaN(float64(w)) && math.IsNaN(float64(dst[i]))) {
				t.Fatalf("n %d: dst[%d] = %v, want %v", n, i, dst[i], w)
			}
		}
		if dst[n] != 7 {
			t.Fatalf("n %d: wrote past the row", n)
		}
	}
}

// TestLSE: each variant's log-sum-exp of the output rows is within
// 4*2^-24 (|m| + |log2 l|) ln 2 (two float32 ulp) of the float64 value
// (m + log2 l) ln 2, over the sums a row can have (1 up to 2^40, and NaN
// and +Inf through), and past them 0 (-Inf) and subnormals, with maxima of
// either sign: the error a float32 sum of the two terms has, whose
// cancellation the float64 path avoids.
func TestLSE(t *testing.T) {
	eachKernels(t, func(k *kernels) bool { return k.lse != nil }, testLSE)
}

func testLSE(t *testing.T, kern *kernels) {
	r := rand.New(rand.NewPCG(20, 21))
	const n = 48
	for trial := 0; trial < 2000; trial++ {
		m, l, dst := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range m {
			m[i] = float32(r.NormFloat64() * 30)
			l[i] = float32(math.Exp2(r.Float64() * 40))
			if i%7 == 0 {
				l[i] = 1 + float32(r.Float64())*1e-6
			}
		}
		l[3], l[5] = float32(math.NaN()), float32(math.Inf(1))
		// zero (no key: -Inf), subnormal and smallest normal sums
		l[8], l[9], l[11], l[13] = 0, 0x1p-140, 0x1p-126, 0x1.8p-130
		if !kern.lseK(dst, m, l, n) {
			t.Fatal("the log-sum-exp did not run")
		}
		for i := range m {
			want := float32((float64(m[i]) + math.Log2(float64(l[i]))) * math.Ln2)
			switch {
			case math.IsNaN(float64(want)) || math.IsInf(float64(want), 0):
				if math.Float32bits(dst[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(dst[i]))) {
					t.Fatalf("m %v l %v: lse %v, want %v", m[i], l[i], dst[i], want)
				}
			default:
				mag := (math.Abs(float64(m[i])) + math.Abs(math.Log2(float64(l[i])))) * math.Ln2
				tol := 4 * math.Max(mag, 1) * 0x1p-24
				if d := math.Abs(float64(dst[i]) - (float64(m[i])+math.Log2(float64(l[i])))*math.Ln2); d > tol {
					t.Fatalf("m %v l %v: lse %v, want %v (error %.3g, tolerance %.3g)", m[i], l[i], dst[i], want, d, tol)
				}
			}
		}
	}
}
