//go:build !amd64 || purego

package cpu

// hasBwdAsm: no backward kernels in this build.
func hasBwdAsm(Variant) bool { return false }

// gemmAsm is never called in this build.
func gemmAsm(c, a, b []float32, m, n, k, sam, sak, ldb, ldc int, acc bool) {
	panic("BUG: no backward kernels in this build")
}

// bwdProbAsm is never called in this build.
func bwdProbAsm(s, dp, lb, dl []float32, mask []uint64, rows int, c, scale float32) {
	panic("BUG: no backward kernels in this build")
}
