package cpu

import "testing"

// TestTiledBackwardDims: the variants with tiled backward kernels run
// every multiple of 8 up to 256 for q/k and for v on them (padded to 64
// columns), not only multiples of 64; other sizes take the per-pair path.
func TestTiledBackwardDims(t *testing.T) {
	n := 0
	for _, tg := range Targets {
		kern, ok := kernelsOf(tg.Variant)
		if !ok || kern.gemm == nil || kern.bwdProb == nil {
			continue
		}
		n++
		for d := 8; d <= 256; d += 8 {
			for _, dv := range []int{8, 40, d, 256} {
				if !kern.tiledBackward(d, dv, false) {
					t.Errorf("%s: head sizes %d/%d take the per-pair backward", tg.Name, d, dv)
				}
			}
		}
		if kern.tiledBackward(12, 64, false) || kern.tiledBackward(64, 260, false) {
			t.Errorf("%s: a head size the tiled kernels cannot run is tiled", tg.Name)
		}
	}
	if n == 0 {
		t.Skip("no variant with tiled backward kernels in this build")
	}
}
