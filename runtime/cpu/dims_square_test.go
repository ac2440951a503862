package cpu

import "os"

// squareTestDims are the head dimensions d of testDims(k) with qk = v = d:
// the kernel tests written for one head dimension run these; the NEON
// kernels of other pairs are held to the square ones by
// TestNonSquareNEON. Under user-mode emulation (ATTNGEN_EMULATED, the
// arm64 run of .ci/run) the pure-Go kernel runs only D = 64 and 128: it is
// the same Go on every architecture, and the amd64 run checks it at every
// size natively (as heads_test.go's driver tests leave it to that run).
func squareTestDims(k *kernels) []int {
	if k == goKernels && os.Getenv("ATTNGEN_EMULATED") != "" {
		return []int{64, 128}
	}
	var ds []int
	for _, d := range testDims(k) {
		if d.qk == d.v {
			ds = append(ds, d.qk)
		}
	}
	return ds
}
