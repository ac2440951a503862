//go:build !amd64 || purego

package cpu

// bwdKernelsOf: no backward kernels in this build.
func bwdKernelsOf(Variant) bwdKernels { return bwdNone }

// gemmAsm is never called in this build.
func gemmAsm(kern bwdKernels, c, a, b []float32, m, n, k, sam, sak, ldb, ldc int, acc bool) {
	panic("BUG: no backward kernels in this build")
}

// bwdProbAsm is never called in this build.
func bwdProbAsm(kern bwdKernels, s, dp, lb, dl []float32, mask []uint64, rows int, c, scale float32) {
	panic("BUG: no backward kernels in this build")
}
