//go:build amd64 && !purego

package cpu

import xcpu "golang.org/x/sys/cpu"

// hasBwdAsm reports whether a variant has the AVX-512 backward kernels on
// this CPU (the other variants run the pure-Go backward).
func hasBwdAsm(v Variant) bool { return v == AVX512 && xcpu.X86.HasAVX512F }

// gemmAsm runs gemmAVX512: c[i*ldc+j] (+)= sum over l < k of
// a[i*sam+l*sak] * b[l*ldb+j] for i < m, j < n (a multiple of 64), adding
// when acc is set. It checks that every element it touches lies in the
// slices (a panic, not a memory error, for a bug of the caller).
func gemmAsm(c, a, b []float32, m, n, k, sam, sak, ldb, ldc int, acc bool) {
	if m <= 0 || n <= 0 {
		return
	}
	if n%64 != 0 || k < 0 || sam < 0 || sak < 0 || ldb < 0 || ldc < n {
		panic("BUG: gemmAsm arguments")
	}
	_ = c[(m-1)*ldc+n-1]
	if k == 0 {
		a, b = c, c
	} else {
		_, _ = a[(m-1)*sam+(k-1)*sak], b[(k-1)*ldb+n-1]
	}
	f := 0
	if acc {
		f = 1
	}
	gemmAVX512(&c[0], &a[0], &b[0], m, n, k, sam, sak, ldb, ldc, f)
}

// bwdProbAsm runs bwdProbAVX512 on the first rows rows of s and dp (TK
// floats a row).
func bwdProbAsm(s, dp, lb, dl []float32, mask []uint64, rows int, c, scale float32) {
	if rows <= 0 {
		return
	}
	_, _, _, _, _ = s[rows*TK-1], dp[rows*TK-1], lb[rows-1], dl[rows-1], mask[rows-1]
	bwdProbAVX512(&s[0], &dp[0], &lb[0], &dl[0], &mask[0], rows, c, scale)
}
