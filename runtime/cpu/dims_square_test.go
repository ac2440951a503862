package cpu

// squareTestDims are the head dimensions d of testDims(k) with qk = v = d:
// the kernel tests written for one head dimension run these; the NEON
// kernels of other pairs are held to the square ones by
// TestNonSquareNEON.
func squareTestDims(k *kernels) []int {
	var ds []int
	for _, d := range testDims(k) {
		if d.qk == d.v {
			ds = append(ds, d.qk)
		}
	}
	return ds
}
