package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkBackwardHeadDims times Backward on one thread (GOMAXPROCS 1),
// fp32, B=1 H=4 S=1024 causal, at head sizes the tiled kernels run on
// padded rows (96, 40, and 192/128 split), for the AVX-512 and AVX2 tiled
// backward and the pure-Go per-pair backward, in effective GFLOP/s (2.5 x
// 2*B*H*(D+DV)*kept_pairs).
func BenchmarkBackwardHeadDims(b *testing.B) {
	const B, H, S = 1, 4, 1024
	for _, d := range [][2]int{{96, 96}, {40, 40}, {192, 128}} {
		D, DV := d[0], d[1]
		r := rand.New(rand.NewPCG(7, 8))
		s := Shape{Batch: B, HeadsQ: H, HeadsKV: H, SeqQ: S, SeqK: S, HeadDim: D}
		rnd := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			return x
		}
		q, k, v, dout := rnd(B*H*S*D), rnd(B*H*S*D), rnd(B*H*S*DV), rnd(B*H*S*DV)
		out, lse := make([]float32, B*H*S*DV), make([]float32, B*H*S)
		dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
		m := window{1 << 30}
		if err := ForwardArgs(m, Auto, Args{Q: q, K: k, V: v, Out: out, LSE: lse, Shape: s, HeadDimV: DV}); err != nil {
			b.Fatal(err)
		}
		kept := S * (S + 1) / 2
		flops := 2.5 * 2 * float64(B*H*(D+DV)) * float64(kept)
		for _, vr := range []Variant{AVX512, AVX2, PureGo} {
			if _, ok := tileFor(vr); !ok {
				continue
			}
			b.Run(fmt.Sprintf("D%d_%d/%s", D, DV, vr), func(b *testing.B) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
				a := BackArgs{DQ: dq, DK: dk, DV: dv, DOut: dout, Q: q, K: k, V: v, Out: out, LSE: lse, Shape: s, HeadDimV: DV}
				for b.Loop() {
					if err := BackwardArgs(m, vr, a); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(flops/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GFLOP/s")
			})
		}
	}
}
