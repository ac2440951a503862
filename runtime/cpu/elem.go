package cpu

import "math"

// widen writes the float32 values of the 16-bit elements src (BF16 or F16
// bits) into dst; both conversions are exact.
func widen(dst []float32, src []uint16, elem Elem) {
	dst = dst[:len(src)]
	if widenAsm(dst, src, elem) {
		return
	}
	if elem == BF16 {
		for i, h := range src {
			dst[i] = math.Float32frombits(uint32(h) << 16)
		}
		return
	}
	for i, h := range src {
		dst[i] = f16to32(h)
	}
}

// f16to32 widens IEEE half-precision bits to float32 (exact): normal
// numbers rebias the exponent, subnormals are m * 2^-24, infinities stay,
// NaN keep their payload and come out quiet.
func f16to32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e, m := uint32(h>>10)&0x1f, uint32(h&0x3ff)
	switch e {
	case 0x1f:
		if m != 0 {
			m |= 0x200 // a NaN comes out quiet, as VCVTPH2PS makes it
		}
		return math.Float32frombits(sign | 0x7f800000 | m<<13)
	case 0:
		f := float32(m) * 0x1p-24
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (e+112)<<23 | m<<13)
}

// transposeGo is the portable transpose of a whole tile of 64 key rows
// (pitch floats apart), times scale: kt[d][c] = scale*k[c*pitch+d].
func transposeGo(kt, k []float32, pitch, d int, scale float32) {
	for c := 0; c < TK; c++ {
		row := k[c*pitch : c*pitch+d]
		for i, x := range row {
			kt[i*TK+c] = scale * x
		}
	}
}
