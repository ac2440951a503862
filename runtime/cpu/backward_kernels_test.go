package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemm: gemmAVX512 and gemmAVX2 against a float64 loop, for awkward m
// (every row block and remainder: 6, 4, 2, 1 on AVX-512, 3, 2, 1 on
// AVX2), n of one to three 64-column chunks (two AVX2 chunks each), k from
// 0, A row-major and transposed with padded strides, B and C with padded
// rows, overwriting and accumulating; nothing outside C's m x n changes.
func TestGemm(t *testing.T) { eachBwdKernels(t, testGemm) }

func testGemm(t *testing.T, kern *kernels) {
	r := rand.New(rand.NewPCG(91, 92))
	for iter := 0; iter < 400; iter++ {
		m, n, k := 1+r.IntN(70), 64*(1+r.IntN(3)), r.IntN(140)
		if iter < 8 {
			m = iter + 1 // each remainder of the row blocks
		}
		var sam, sak int
		if r.IntN(2) == 0 { // row-major A
			sak, sam = 1, k+r.IntN(5)
		} else { // transposed A
			sam, sak = 1, m+r.IntN(5)
		}
		ldb, ldc := n+16*r.IntN(3), n+16*r.IntN(3)
		acc := r.IntN(2) == 1
		a := randF32(r, max((m-1)*sam+(k-1)*sak+1, 1))
		b := randF32(r, max((k-1)*ldb+n, 1))
		c := randF32(r, (m-1)*ldc+n+7)
		c0 := append([]float32(nil), c...)
		kern.gemmK(c, a, b, m, n, k, sam, sak, ldb, ldc, acc)
		for i := range c {
			row, j := i/ldc, i%ldc
			if row >= m || j >= n {
				if math.Float32bits(c[i]) != math.Float32bits(c0[i]) {
					t.Fatalf("m %d n %d k %d: element %d outside C changed", m, n, k, i)
				}
				continue
			}
			want, mag := 0.0, 0.0
			if acc {
				want, mag = float64(c0[i]), math.Abs(float64(c0[i]))
			}
			for l := 0; l < k; l++ {
				x := float64(a[row*sam+l*sak]) * float64(b[l*ldb+j])
				want += x
				mag += math.Abs(x)
			}
			if d := math.Abs(float64(c[i]) - want); d > 1e-6*(mag+1)*float64(k+1) {
				t.Fatalf("m %d n %d k %d sam %d sak %d acc %v: C[%d][%d] = %v, want %v", m, n, k, sam, sak, acc, row, j, c[i], want)
			}
		}
	}
}

// TestGemmNaN: a NaN or infinity in A or B reaches exactly the C elements
// whose sums include it, for each kernel.
func TestGemmNaN(t *testing.T) { eachBwdKernels(t, testGemmNaN) }

func testGemmNaN(t *testing.T, kern *kernels) {
	m, n, k := 13, 128, 9
	a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
	for i := range a {
		a[i] = 1
	}
	for i := range b {
		b[i] = 1
	}
	a[5*k+3] = float32(math.NaN()) // row 5
	b[7*n+70] = float32(math.Inf(1))
	kern.gemmK(c, a, b, m, n, k, k, 1, n, n, false)
	for i, x := range c {
		row, j := i/n, i%n
		switch {
		case row == 5 && !math.IsNaN(float64(x)):
			t.Fatalf("C[5][%d] = %v, want NaN", j, x)
		case row != 5 && j == 70 && !math.IsInf(float64(x), 1):
			t.Fatalf("C[%d][70] = %v, want +Inf", row, x)
		case row != 5 && j != 70 && x != float32(k):
			t.Fatalf("C[%d][%d] = %v, want %d", row, j, x, k)
		}
	}
}

// TestBwdProb: p and dS of bwdProbAVX512 and bwdProbAVX2 against Go,
// masked lanes exactly +0 even where s and dp hold NaN or infinities, NaN
// kept scores give NaN, rows past rows untouched.
func TestBwdProb(t *testing.T) { eachBwdKernels(t, testBwdProb) }

func testBwdProb(t *testing.T, kern *kernels) {
	r := rand.New(rand.NewPCG(93, 94))
	for iter := 0; iter < 50; iter++ {
		rows := 1 + r.IntN(TQ)
		s, dp := randF32(r, TQ*TK), randF32(r, TQ*TK)
		lb, dl := randF32(r, TQ), randF32(r, TQ)
		words := make([]uint64, TQ)
		scale := float32(0.1 + r.Float64())
		c := scale * math.Log2E
		for i := range s {
			s[i] *= 4
		}
		for row := range lb {
			lb[row] = 8 + 4*lb[row] // above every c*s, as lse is
			words[row] = r.Uint64() & r.Uint64()
		}
		words[0], words[rows-1] = ^uint64(0), 0
		specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
		for i := range s {
			if words[i/TK]&(1<<uint(i%TK)) == 0 && r.IntN(3) == 0 {
				s[i], dp[i] = specials[r.IntN(3)], specials[r.IntN(3)]
			}
		}
		nanAt := TK * (rows / 2)
		if words[rows/2]&1 == 0 {
			nanAt = -1
		} else {
			s[nanAt] = float32(math.NaN())
		}
		s0, dp0 := append([]float32(nil), s...), append([]float32(nil), dp...)
		kern.bwdProbK(s, dp, lb, dl, words, rows, c, scale)
		for i := range s {
			row, j := i/TK, i%TK
			switch {
			case row >= rows:
				if math.Float32bits(s[i]) != math.Float32bits(s0[i]) || math.Float32bits(dp[i]) != math.Float32bits(dp0[i]) {
					t.Fatalf("row %d past %d changed", row, rows)
				}
			case words[row]&(1<<uint(j)) == 0:
				if math.Float32bits(s[i]) != 0 || math.Float32bits(dp[i]) != 0 {
					t.Fatalf("masked (%d, %d): p %v, ds %v, want +0", row, j, s[i], dp[i])
				}
			case i == nanAt:
				if !math.IsNaN(float64(s[i])) || !math.IsNaN(float64(dp[i])) {
					t.Fatalf("kept NaN score: p %v, ds %v", s[i], dp[i])
				}
			default:
				p := math.Exp2(float64(c)*float64(s0[i]) - float64(lb[row]))
				ds := p * float64(scale) * (float64(dp0[i]) - float64(dl[row]))
				if math.Abs(float64(s[i])-p) > 1e-6*p+1e-37 || math.Abs(float64(dp[i])-ds) > 1e-5*math.Abs(ds)+1e-30 {
					t.Fatalf("(%d, %d): p %v ds %v, want %v %v", row, j, s[i], dp[i], p, ds)
				}
			}
		}
	}
}

// TestBwdProbLarge: kept arguments c*s - lb above 0 (an lse below the
// row's scores, as a caller may pass) give 2^x up to the float32 range
// and +Inf from 128 up, for each kernel (AVX2 clamps its argument to 128
// before the exponent-field add, which would wrap above).
func TestBwdProbLarge(t *testing.T) { eachBwdKernels(t, testBwdProbLarge) }

func testBwdProbLarge(t *testing.T, kern *kernels) {
	xs := []float32{0.25, 3, 100.5, 126.9, 127.4, 127.6, 127.99, 128, 128.2, 200, 1e30}
	s, dp := make([]float32, TK), make([]float32, TK)
	for j := range s {
		s[j] = xs[j%len(xs)]
		dp[j] = 1
	}
	lb, dl, words := []float32{0}, []float32{0}, []uint64{^uint64(0)}
	kern.bwdProbK(s, dp, lb, dl, words, 1, 1, 1)
	for j, p := range s {
		x := float64(xs[j%len(xs)])
		want := math.Exp2(x)
		if want > math.MaxFloat32 {
			if !math.IsInf(float64(p), 1) || !math.IsInf(float64(dp[j]), 1) {
				t.Fatalf("x = %v: p %v, ds %v, want +Inf", x, p, dp[j])
			}
			continue
		}
		if math.Abs(float64(p)-want) > 1e-6*want {
			t.Fatalf("x = %v: p %v, want %v", x, p, want)
		}
	}
}

func randF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// BenchmarkGemm times the products of one (query tile, key tile) pair at
// D = 128 with each kernel and reports GFLOP/s (compare BenchmarkPeakFMA512
// and BenchmarkPeakFMA256).
func BenchmarkGemm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	a, bb, c := randF32(r, 128*128), randF32(r, 128*128), randF32(r, 128*128)
	for _, g := range []struct {
		name                        string
		m, n, k, sam, sak, ldb, ldc int
	}{
		{"S=QKt", TQ, TK, 128, 128, 1, TK, TK},
		{"dV=PtdO", TK, 128, TQ, 1, TK, 128, 128},
		{"dQ=dSK", TQ, 128, TK, TK, 1, 128, 128},
	} {
		b.Run(g.name, func(b *testing.B) {
			eachBwdKernels(b, func(b *testing.B, ks *kernels) {
				for b.Loop() {
					ks.gemmK(c, a, bb, g.m, g.n, g.k, g.sam, g.sak, g.ldb, g.ldc, true)
				}
				b.ReportMetric(2*float64(g.m*g.n*g.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		})
	}
}
