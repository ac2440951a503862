//go:build amd64 && !purego

package cpu

import xcpu "golang.org/x/sys/cpu"

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
