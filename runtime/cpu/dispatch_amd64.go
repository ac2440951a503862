//go:build amd64 && !purego

package cpu

import (
	"math/bits"
	"unsafe"

	xcpu "golang.org/x/sys/cpu"
)

// tileAsm returns the assembly microkernel of a variant when the CPU has
// the instructions it needs (AVX-512 Foundation; AVX2 with FMA) and the
// operating system saves the registers (x/sys/cpu checks both).
func tileAsm(v Variant) (tileFunc, bool) {
	switch v {
	case AVX512:
		if !xcpu.X86.HasAVX512F {
			return nil, false
		}
		return tileAVX512, true
	case AVX2:
		if !xcpu.X86.HasAVX2 || !xcpu.X86.HasFMA {
			return nil, false
		}
		return tileAVX2, true
	}
	return nil, false
}

// The adapted kernels, made once so that dispatch allocates nothing.
var (
	tileAVX512 = asmTile(tileAVX512D64, tileAVX512D128)
	tileAVX2   = asmTile(tileAVX2D64, tileAVX2D128)
)

type asmFunc func(q, kt, v, s, o, m, l *float32, mask *uint64)

// asmTile adapts the pointer ABI of the assembly to tileFunc.
func asmTile(d64, d128 asmFunc) tileFunc {
	return func(q, kt, v, s, o, m, l []float32, mask []uint64, d int) {
		f := d64
		if d == 128 {
			f = d128
		}
		var mp *uint64
		if mask != nil {
			mp = &mask[0]
		}
		f(&q[0], &kt[0], &v[0], &s[0], &o[0], &m[0], &l[0], mp)
	}
}

// hasDecode reports whether a variant has decode kernels on this CPU.
func hasDecode(v Variant) bool { return v == AVX512 && xcpu.X86.HasAVX512F }

type decodeKernel func(q *float32, k, v *byte, off *int, o, m, l *float32)

// decodeKernels are the decode kernels by element type, head dimension (64,
// 128) and rows (1, 2, 4, 8).
var decodeKernels = [3][2][4]decodeKernel{
	F32: {
		{decodeAVX512F32D64R1, decodeAVX512F32D64R2, decodeAVX512F32D64R4, decodeAVX512F32D64R8},
		{decodeAVX512F32D128R1, decodeAVX512F32D128R2, decodeAVX512F32D128R4, decodeAVX512F32D128R8},
	},
	BF16: {
		{decodeAVX512BF16D64R1, decodeAVX512BF16D64R2, decodeAVX512BF16D64R4, decodeAVX512BF16D64R8},
		{decodeAVX512BF16D128R1, decodeAVX512BF16D128R2, decodeAVX512BF16D128R4, decodeAVX512BF16D128R8},
	},
	F16: {
		{decodeAVX512F16D64R1, decodeAVX512F16D64R2, decodeAVX512F16D64R4, decodeAVX512F16D64R8},
		{decodeAVX512F16D128R1, decodeAVX512F16D128R2, decodeAVX512F16D128R4, decodeAVX512F16D128R8},
	},
}

// decodeAsm runs the decode kernel of elem, d (64 or 128) and rows (1, 2, 4
// or 8) on k and v (the first elements of the caller's k and v; every
// offset in off must lie in them, with a whole row after it).
func decodeAsm(elem Elem, q []float32, k, v unsafe.Pointer, off *[TK]int, o, m, l []float32, rows, d int) {
	_, _, _, _ = q[rows*d-1], o[rows*d-1], m[rows-1], l[rows-1]
	f := decodeKernels[elem][d/128][bits.TrailingZeros(uint(rows))]
	f(&q[0], (*byte)(k), (*byte)(v), &off[0], &o[0], &m[0], &l[0])
}

// scaleRowAsm sets dst = src*s with AVX-512 when the CPU has it (len(src)
// a multiple of 16) and reports whether it did.
func scaleRowAsm(dst, src []float32, s float32) bool {
	n := len(src)
	if !xcpu.X86.HasAVX512F || n%16 != 0 || n == 0 || len(dst) < n {
		return false
	}
	scaleRowAVX512(&dst[0], &src[0], n, s)
	return true
}

// nonFiniteAsm is nonFiniteRows with AVX-512 when the CPU has it.
func nonFiniteAsm(v []float32, d int) (uint64, bool) {
	if !xcpu.X86.HasAVX512F || d%16 != 0 || len(v) < TK*d {
		return 0, false
	}
	return nonFiniteRowsAVX512(&v[0], d), true
}

// lseAsm sets dst[i] = (m[i] + log2(l[i])) * ln2 for the first n rows (of
// len(m) = len(l) <= len(dst), a multiple of 16; rows past n are computed
// too) with AVX-512 when the CPU has it, and reports whether it did.
func lseAsm(dst, m, l []float32, n int) bool {
	n = (n + 15) &^ 15
	if !xcpu.X86.HasAVX512F || n == 0 || n > len(m) || n > len(l) || n > len(dst) {
		return false
	}
	lseAVX512(&dst[0], &m[0], &l[0], n)
	return true
}

// narrowAsm writes dst = src*s rounded to elem (BF16 or F16) with AVX-512
// when the CPU has it (len(src) a multiple of 16) and reports whether it
// did; the result is f32toBF16 or f32toF16 of each product, bit for bit.
func narrowAsm(dst []uint16, src []float32, s float32, elem Elem) bool {
	n := len(src)
	if !xcpu.X86.HasAVX512F || n%16 != 0 || n == 0 || len(dst) < n {
		return false
	}
	if elem == BF16 {
		narrowBF16AVX512(&dst[0], &src[0], n, s)
	} else {
		narrowF16AVX512(&dst[0], &src[0], n, s)
	}
	return true
}

// transposeAsm transposes a whole key tile (64 rows, pitch floats apart),
// times scale, into kt with AVX-512 when the CPU has it, and reports
// whether it did.
func transposeAsm(kt, k []float32, pitch, d int, scale float32) bool {
	if !xcpu.X86.HasAVX512F || d%16 != 0 || len(kt) < d*TK || len(k) < (TK-1)*pitch+d {
		return false
	}
	transposeTileAVX512(&kt[0], &k[0], pitch, d, scale)
	return true
}

// widenAsm widens 16-bit elements with AVX-512 when the CPU has it (whole
// groups of 16; the rest in Go) and reports whether it did.
func widenAsm(dst []float32, src []uint16, elem Elem) bool {
	n := len(src) &^ 15
	if !xcpu.X86.HasAVX512F || n == 0 || n != len(src) {
		return false
	}
	if elem == BF16 {
		widenBF16AVX512(&dst[0], &src[0], n)
	} else {
		widenF16AVX512(&dst[0], &src[0], n)
	}
	return true
}
