package gen

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/verify"
)

// TestBackwardPaths runs the gradient and non-finite checks on both
// schedules of the tiled backward, with the AVX-512 and the AVX2 kernels:
// one fused pass per kv head (chosen when there are at least as many kv
// heads, batches times segments, as threads: GOMAXPROCS 1) and two passes
// (GOMAXPROCS 64), with grouped heads, on every backward pattern.
func TestBackwardPaths(t *testing.T) {
	for _, v := range []cpu.Variant{cpu.AVX512, cpu.AVX2} {
		t.Run(v.String(), func(t *testing.T) {
			if !cpu.Supported(v) {
				t.Skipf("CPU lacks %s", v)
			}
			testBackwardPaths(t, v)
		})
	}
}

func testBackwardPaths(t *testing.T, v cpu.Variant) {
	r := rand.New(rand.NewPCG(71, 72))
	for _, procs := range []int{1, 64} {
		old := runtime.GOMAXPROCS(procs)
		for _, p := range backwardPatterns(r, 2) {
			for _, s := range []verify.Shape{
				{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 100, HeadDim: 64},
				{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 130, SeqK: 130, HeadDim: 128},
			} {
				fwd, bwd := cpuRun(t, p, v, s.HeadDim), cpuBackward(t, p, v, s.HeadDim)
				if err := verify.CheckGradNonFinite(p, fwd, bwd, s, r, 3); err != nil {
					t.Fatalf("GOMAXPROCS %d, %v: %v", procs, p, err)
				}
				if _, err := verify.CheckGrad(p, fwd, bwd, s, r); err != nil {
					t.Fatalf("GOMAXPROCS %d, %v: %v", procs, p, err)
				}
			}
		}
		runtime.GOMAXPROCS(old)
	}
}
