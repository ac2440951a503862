package cpu

import "math"

// widenRow writes the float32 values of the 16-bit elements src (BF16 or
// F16 bits) into dst; both conversions are exact. It runs
// k's kernel where it has one.
func (k *kernels) widenRow(dst []float32, src []uint16, elem Elem) {
	dst = dst[:len(src)]
	if k.widenK(dst, src, elem) {
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

// transposeTile transposes a whole tile of 64 key rows (pitch floats
// apart), times scale, with k's kernel where it has one, else in Go.
func (k *kernels) transposeTile(kt, src []float32, pitch, d int, scale float32) {
	if !k.transposeK(kt, src, pitch, d, scale) {
		transposeGo(kt, src, pitch, d, scale)
	}
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

// narrowRow writes x*inv for every x of src into dst, rounded to elem
// (BF16 or F16): each element is the float32 product rounded once more, to
// nearest, ties to even. It runs
// k's kernel where it has one.
func (k *kernels) narrowRow(dst []uint16, src []float32, inv float32, elem Elem) {
	dst = dst[:len(src)]
	if k.narrowK(dst, src, inv, elem) {
		return
	}
	if elem == BF16 {
		for i, x := range src {
			dst[i] = f32toBF16(x * inv)
		}
		return
	}
	for i, x := range src {
		dst[i] = f32toF16(x * inv)
	}
}

// f32toBF16 rounds a float32 to bfloat16 bits: to nearest, ties to even
// (values past the largest bfloat16 by half an ulp or more become
// infinities); a NaN keeps its sign and the high bits of its payload and
// comes out quiet.
func f32toBF16(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// f32toF16 rounds a float32 to IEEE half-precision bits: to nearest, ties
// to even, through the subnormals (steps of 2^-24); magnitudes from 65520
// (the largest half, 65504, plus half an ulp) on become infinities, and a
// NaN keeps its sign and the high bits of its payload and comes out quiet.
func f32toF16(x float32) uint16 {
	u := math.Float32bits(x)
	sign := uint16(u>>16) & 0x8000
	a := u & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return sign | 0x7e00 | uint16(a>>13)&0x3ff
	case a >= 0x477ff000: // 65520 and above, infinities
		return sign | 0x7c00
	case a >= 0x38800000: // 2^-14 and above: normal
		a -= 112 << 23 // rebias the exponent from 127 to 15
		a += 0xfff + (a>>13)&1
		return sign | uint16(a>>13)
	case a < 0x33000000: // below 2^-25 (2^-25 itself ties to 0)
		return sign
	}
	// Subnormal halves: m * 2^(e-150) in steps of 2^-24 is m >> (126-e).
	e := a >> 23
	m := a&0x7fffff | 0x800000
	shift := 126 - e // 14 to 24
	h := m >> shift
	rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
	if rem > half || rem == half && h&1 == 1 {
		h++
	}
	return sign | uint16(h)
}
