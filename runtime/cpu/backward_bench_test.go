package cpu

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// BenchmarkBackward times Backward on one thread (GOMAXPROCS 1), fp32, B=1
// H=8 D=128 S=4096, causal and a 1024-key window, for the AVX-512 and the
// AVX2 kernels and the pure-Go per-pair backward, and reports effective
// GFLOP/s (2.5 x 4*B*H*D*kept_pairs), the fraction (pct_peak) of the
// one-thread FMA peak of the variant's vector width (zmm for AVX-512, ymm
// for AVX2: peakLoopOf; the widest for pure Go) measured in the same
// sub-benchmark, just before, and the ratio of the backward's time to the
// forward's (bwd/fwd: the same variant's forward, Auto's for pure Go,
// timed in the same benchmark, the best of 5). The pure-Go backward takes
// tens of seconds a call: run it with -benchtime=1x.
func BenchmarkBackward(b *testing.B) {
	const B, H, D, S = 1, 8, 128, 4096
	r := rand.New(rand.NewPCG(5, 6))
	s := Shape{Batch: B, HeadsQ: H, HeadsKV: H, SeqQ: S, SeqK: S, HeadDim: D}
	n := B * H * S * D
	q, k, v, dout := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for _, x := range [][]float32{q, k, v, dout} {
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
	}
	out, lse := make([]float32, n), make([]float32, B*H*S)
	dq, dk, dv := make([]float32, n), make([]float32, n), make([]float32, n)
	for _, m := range []struct {
		name string
		w    window
	}{{"causal", window{1 << 30}}, {"window1024", window{1024}}} {
		kept := 0
		for i := 0; i < S; i++ {
			kept += min(i+1, m.w.size)
		}
		flops := 2.5 * 4 * float64(B*H*D) * float64(kept)
		for _, vr := range []Variant{AVX512, AVX2, PureGo} {
			if _, ok := tileFor(vr); !ok {
				continue
			}
			b.Run(m.name+"/"+vr.String(), func(b *testing.B) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
				loop, perIter := peakLoopOf(vr)
				peak := peakGFLOPS(loop, perIter, 1, 300*time.Millisecond)
				fv := vr
				if vr == PureGo {
					fv = Auto
				}
				fwd := time.Duration(1 << 62)
				for range 5 {
					t0 := time.Now()
					if err := Forward(m.w, fv, out, lse, q, k, v, nil, s); err != nil {
						b.Fatal(err)
					}
					fwd = min(fwd, time.Since(t0))
				}
				b.ResetTimer()
				for b.Loop() {
					if err := Backward(m.w, vr, dq, dk, dv, dout, q, k, v, out, lse, nil, s); err != nil {
						b.Fatal(err)
					}
				}
				per := b.Elapsed().Seconds() / float64(b.N)
				g := flops / per / 1e9
				b.ReportMetric(g, "GFLOP/s")
				b.ReportMetric(100*g/peak, "pct_peak")
				b.ReportMetric(peak, "peak_GFLOP/s")
				b.ReportMetric(per/fwd.Seconds(), "bwd/fwd")
			})
		}
	}
}
