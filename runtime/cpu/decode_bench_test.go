package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
)

// window keeps keys i-size < j <= i.
type window struct{ size int }

func (window) Stride() int    { return 1 }
func (window) UsesDocs() bool { return false }
func (w window) Hull(q0, q1, x int, _ *mask.Docs) (int, int) {
	return max(x, q0-w.size+1, 0), q1
}
func (w window) Class(q0, q1, k0, k1 int, _ *mask.Docs) mask.Class {
	switch {
	case k0 > q1 || k1 <= q0-w.size:
		return mask.Empty
	case k1 <= q0 && k0 > q1-w.size:
		return mask.Full
	}
	return mask.Partial
}
func (w window) Word(i, k0, nk int, _ *mask.Docs) uint64 {
	var b uint64
	for c := 0; c < 64 && k0+c < nk; c++ {
		if j := k0 + c; j <= i && j > i-w.size {
			b |= 1 << c
		}
	}
	return b
}

// BenchmarkDecode times one decoding step (SeqQ 1, 8 query heads on 2
// key/value heads, D 128, fp32) with a causal mask (a window longer than
// the cache) and a 1024-key window, at several cache lengths, and reports
// the rate of reading the kept keys and values (GB/s, 1e9 bytes).
func BenchmarkDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sk := range []int{4096, 32768, 131072} {
		for _, m := range []struct {
			name string
			w    window
		}{{"causal", window{1 << 30}}, {"window1024", window{1024}}} {
			s := Shape{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: 1, SeqK: sk, HeadDim: 128}
			nq, nkv := 8*128, 2*sk*128
			q, k, v := make([]float32, nq), make([]float32, nkv), make([]float32, nkv)
			for _, x := range [][]float32{q, k, v} {
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
			}
			out := make([]float32, nq)
			kept := min(sk, m.w.size)
			bytes := float64(2 * 2 * kept * 128 * 4) // k and v rows of 2 kv heads
			b.Run(fmt.Sprintf("%s/seqk=%d", m.name, sk), func(b *testing.B) {
				for b.Loop() {
					if err := Forward(m.w, Auto, out, nil, q, k, v, nil, s); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				b.ReportMetric(float64(Workers()), "workers")
				b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
			})
		}
	}
}
