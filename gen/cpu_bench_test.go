package gen

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// BenchmarkForward reports effective GFLOP/s and allocs/op of the CPU
// driver on the six benchmark masks (B=1 H=8 D=128 S=4096 under -bench;
// the -short run uses S=1024 to stay quick).
func BenchmarkForward(b *testing.B) {
	masks := []struct {
		name string
		p    spec.Pattern
	}{
		{"causal", spec.Pattern{Mask: spec.Full(), Causal: true}},
		{"window1024", spec.Pattern{Mask: spec.Window(1024), Causal: true}},
		{"block256", spec.Pattern{Mask: spec.Block(256), Causal: true}},
		{"bridge256r32", spec.Pattern{Mask: spec.Union(spec.Block(256), spec.Bridge(256, 32, 32, 0)), Causal: true}},
		{"dilated8", spec.Pattern{Mask: spec.Dilated(8, 0), Causal: true}},
		{"sink4+window1024", spec.Pattern{Mask: spec.Union(spec.Global(4), spec.Window(1024)), Causal: true}},
	}
	S, H, D := 4096, 8, 128
	if testing.Short() {
		S = 1024
	}
	r := rand.New(rand.NewPCG(1, 2))
	mk := func(n int) []float32 {
		x := make([]float32, n)
		for k := range x {
			x[k] = float32(r.NormFloat64())
		}
		return x
	}
	n := H * S * D
	q, k, v, out, lse := mk(n), mk(n), mk(n), make([]float32, n), make([]float32, H*S)
	s := cpu.Shape{Batch: 1, HeadsQ: H, HeadsKV: H, SeqQ: S, SeqK: S, HeadDim: D}
	for _, m := range masks {
		plan, err := Compile(&spec.Spec{Name: m.name, Mask: m.p.Mask, Causal: m.p.Causal, HeadDim: D}, CPUTarget, nil)
		if err != nil {
			b.Fatal(err)
		}
		km := plan.Mask()
		flops := 4 * float64(H*D) * float64(verify.KeptPairs(m.p, S, S))
		for _, variant := range []cpu.Variant{cpu.AVX512, cpu.AVX2, cpu.PureGo} {
			if !cpu.Supported(variant) {
				continue
			}
			b.Run(m.name+"/"+variant.String(), func(b *testing.B) {
				// Warm up workers and workspace, so allocs/op shows a steady call.
				if err := cpu.Forward(km, variant, out, lse, q, k, v, nil, s); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := cpu.Forward(km, variant, out, lse, q, k, v, nil, s); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
