package generated_test

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// BenchmarkForward times every generated package's Forward through its
// public API, per CPU target this machine runs (B=1 H=8 S=4096 at the
// package's head dimension; S=1024 under -short), reporting effective
// GFLOP/s (4*B*H*D*kept_pairs/s). Document masks are skipped: their cost
// depends on the ids. Compare runs of two commits with benchstat.
func BenchmarkForward(b *testing.B) {
	S, H := 4096, 8
	if testing.Short() {
		S = 1024
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range packages() {
		if p.docs {
			continue
		}
		s, err := spec.ParseFile(filepath.Join("../spec/examples", p.file))
		if err != nil {
			b.Fatal(err)
		}
		sh := verify.Shape{Batch: 1, HeadsQ: H, HeadsKV: H, SeqQ: S, SeqK: S, HeadDim: s.HeadDim}
		nq, nkv, nl := sh.Sizes()
		mk := func(n int) []float32 {
			x := make([]float32, n)
			for k := range x {
				x[k] = float32(r.NormFloat64())
			}
			return x
		}
		q, k, v, out, lse := mk(nq), mk(nkv), mk(nkv), make([]float32, nq), make([]float32, nl)
		flops := 4 * float64(H*s.HeadDim) * float64(verify.KeptPairs(s.Pattern(), S, S))
		for _, t := range cpu.Targets {
			if !p.supported(int(t.Variant)) || t.Variant == cpu.PureGo {
				continue
			}
			run := p.run(int(t.Variant))
			b.Run(strings.TrimSuffix(p.file, ".yaml")+"/"+t.Name, func(b *testing.B) {
				for b.Loop() {
					if err := run(out, lse, q, k, v, nil, sh); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
