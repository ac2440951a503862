//go:build amd64 && !purego

package cpu

import xcpu "golang.org/x/sys/cpu"

// bwdKernelsOf returns the backward kernels of a variant on this CPU:
// bwdAVX512 (AVX-512 Foundation), bwdAVX2 (AVX2 and FMA3), or bwdNone (the
// pure-Go backward) for the other variants or when the CPU lacks them.
func bwdKernelsOf(v Variant) bwdKernels {
	switch {
	case v == AVX512 && xcpu.X86.HasAVX512F:
		return bwdAVX512
	case v == AVX2 && xcpu.X86.HasAVX2 && xcpu.X86.HasFMA:
		return bwdAVX2
	}
	return bwdNone
}

// gemmAsm runs gemmAVX512 or gemmAVX2 (by kern): c[i*ldc+j] (+)= sum over
// l < k of a[i*sam+l*sak] * b[l*ldb+j] for i < m, j < n (a multiple of
// 64), adding when acc is set. It checks that every element it touches
// lies in the slices (a panic, not a memory error, for a bug of the
// caller).
func gemmAsm(kern bwdKernels, c, a, b []float32, m, n, k, sam, sak, ldb, ldc int, acc bool) {
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
	switch kern {
	case bwdAVX512:
		gemmAVX512(&c[0], &a[0], &b[0], m, n, k, sam, sak, ldb, ldc, f)
	case bwdAVX2:
		gemmAVX2(&c[0], &a[0], &b[0], m, n, k, sam, sak, ldb, ldc, f)
	default:
		panic("BUG: gemmAsm without kernels")
	}
}

// bwdProbAsm runs bwdProbAVX512 or bwdProbAVX2 (by kern) on the first rows
// rows of s and dp (TK floats a row).
func bwdProbAsm(kern bwdKernels, s, dp, lb, dl []float32, mask []uint64, rows int, c, scale float32) {
	if rows <= 0 {
		return
	}
	_, _, _, _, _ = s[rows*TK-1], dp[rows*TK-1], lb[rows-1], dl[rows-1], mask[rows-1]
	switch kern {
	case bwdAVX512:
		bwdProbAVX512(&s[0], &dp[0], &lb[0], &dl[0], &mask[0], rows, c, scale)
	case bwdAVX2:
		bwdProbAVX2(&s[0], &dp[0], &lb[0], &dl[0], &mask[0], rows, c, scale)
	default:
		panic("BUG: bwdProbAsm without kernels")
	}
}
