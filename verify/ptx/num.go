package ptx

import (
	"math"
	"math/big"
)

// canonNaN is the NaN an NVIDIA GPU returns from f32 arithmetic (and from
// rcp, ex2 and mma), as the goldens show.
const canonNaN = 0x7fffffff

func f32of(v uint64) float32 { return math.Float32frombits(uint32(v)) }

// bitsOf returns the register bits of an f32 result, with NaNs canonical.
func bitsOf(f float32) uint64 {
	if f != f {
		return canonNaN
	}
	return uint64(math.Float32bits(f))
}

// ftz flushes a subnormal f32 to a zero of the same sign.
func ftz(f float32) float32 {
	b := math.Float32bits(f)
	if b&0x7f800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return f
}

// fmaF32 is a*b+c rounded once to float32 (round to nearest even).
//
// The product of two float32 values is exact in float64. The sum p+c is
// computed in float64 together with its exact rounding error (Knuth's
// TwoSum), and the float64 sum is then moved to round-to-odd: when the sum is
// inexact and its last bit is even, it steps one float64 ulp towards the
// exact value. A round-to-odd result with at least two more bits than the
// target rounds correctly to the target (Boldo and Melquiond, "Emulation of
// FMA and correctly rounded sums: proved algorithms using rounding to odd",
// IEEE TC 2008), so the final float32 conversion rounds p+c exactly once,
// subnormal results included.
func fmaF32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	fc := float64(c)
	s := p + fc
	if math.IsInf(s, 0) || math.IsNaN(s) || math.IsInf(p, 0) || math.IsInf(fc, 0) {
		return float32(s)
	}
	bb := s - p
	e := (p - (s - bb)) + (fc - bb)
	if e != 0 {
		u := math.Float64bits(s)
		if u&1 == 0 {
			if (e > 0) == (s > 0) {
				u++
			} else {
				u--
			}
			s = math.Float64frombits(u)
		}
	}
	return float32(s)
}

// f32ToBF16 converts with round to nearest even; every NaN becomes 0x7fff
// (what the H200 returns for cvt.rn.bf16x2.f32).
func f32ToBF16(u uint32) uint16 {
	if u&0x7fffffff > 0x7f800000 {
		return 0x7fff
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// f32ToF16 converts to IEEE binary16 with round to nearest even, overflow to
// infinity, gradual underflow; every NaN becomes 0x7fff (as on the H200).
func f32ToF16(x uint32) uint16 {
	sign := uint16(x>>16) & 0x8000
	e := int(x>>23) & 0xff
	m := x & 0x7fffff
	if e == 0xff {
		if m != 0 {
			return 0x7fff
		}
		return sign | 0x7c00
	}
	if e == 0 { // zero or f32 subnormal: far below half the smallest f16
		return sign
	}
	exp := e - 127 + 15
	if exp >= 31 {
		return sign | 0x7c00
	}
	mant := m | 0x800000
	shift := 13
	if exp <= 0 {
		shift = 14 - exp
		if shift > 25 {
			return sign
		}
	}
	h := mant >> shift
	rem := mant & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || rem == half && h&1 == 1 {
		h++
	}
	if exp > 0 {
		return sign | uint16(uint32(exp-1)<<10+h) // h carries the implicit bit (and any rounding carry)
	}
	return sign | uint16(h)
}

// bf16ToF32 widens exactly (NaN payloads kept: it is a shift).
func bf16ToF32(h uint16) uint32 { return uint32(h) << 16 }

// f16ToF32 widens exactly; NaN becomes the canonical NaN.
func f16ToF32(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1f
	m := uint32(h & 0x3ff)
	switch {
	case e == 0x1f && m != 0:
		return canonNaN
	case e == 0x1f:
		return sign | 0x7f800000
	case e == 0 && m == 0:
		return sign
	case e == 0:
		// subnormal: normalize
		e = 1
		for m&0x400 == 0 {
			m <<= 1
			e--
		}
		m &= 0x3ff
	}
	return sign | (e+127-15)<<23 | m<<13
}

// ex2Approx models ex2.approx.f32 (and .ftz): the correctly rounded 2^x,
// with subnormal inputs and outputs flushed to zero under .ftz. The H200
// differs from it by at most 2 ulp (see golden_test.go for the measured
// distribution); the hardware algorithm (a table-driven MUFU.EX2) is not
// reproduced bit for bit.
func ex2Approx(x float32, ftzMode bool) float32 {
	if ftzMode {
		x = ftz(x)
	}
	switch {
	case x != x:
		return x
	case math.IsInf(float64(x), 1):
		return x
	case math.IsInf(float64(x), -1):
		return 0
	}
	r := float32(math.Exp2(float64(x)))
	if ftzMode {
		r = ftz(r)
	}
	return r
}

// lg2Approx models lg2.approx.f32 (and .ftz) as the correctly rounded
// log2(x): NaN for negative x and NaN, -inf for zero (and, under .ftz, for
// subnormals), +inf for +inf. No golden pins it: the PTX ISA documents the
// hardware's only as an approximation with a maximum absolute error of
// about 2^-22, so kernels must not depend on more.
func lg2Approx(x float32, ftzMode bool) float32 {
	if ftzMode {
		x = ftz(x)
	}
	switch {
	case x != x || x < 0:
		return float32(math.NaN())
	case x == 0:
		return float32(math.Inf(-1))
	}
	return float32(math.Log2(float64(x)))
}

// rcpApproxFtz models rcp.approx.ftz.f32: the correctly rounded 1/x with
// subnormal inputs and outputs flushed. The H200 differs by at most 1 ulp.
func rcpApproxFtz(x float32) float32 {
	return ftz(1 / ftz(x))
}

// intToF32 converts an integer (given as its 64-bit value and signedness)
// with the rounding mode rnd.
func intToF32(v uint64, signed bool, rnd uint8) float32 {
	if rnd == rndRN {
		if signed {
			return float32(int64(v))
		}
		return float32(v)
	}
	f := new(big.Float).SetPrec(24)
	switch rnd {
	case rndRZ:
		f.SetMode(big.ToZero)
	case rndRM:
		f.SetMode(big.ToNegativeInf)
	case rndRP:
		f.SetMode(big.ToPositiveInf)
	}
	if signed {
		f.SetInt64(int64(v))
	} else {
		f.SetUint64(v)
	}
	r, _ := f.Float32()
	return r
}

// f32ToInt converts with integer rounding rnd and saturation to the
// destination range; NaN converts to 0 (PTX semantics).
func f32ToInt(x float32, t dtype, rnd uint8) uint64 {
	if x != x {
		return 0
	}
	f := float64(x)
	switch rnd {
	case rndRN:
		f = math.RoundToEven(f)
	case rndRZ:
		f = math.Trunc(f)
	case rndRM:
		f = math.Floor(f)
	case rndRP:
		f = math.Ceil(f)
	}
	bitsN := uint(t.size() * 8)
	if t.signed() {
		lo := -math.Ldexp(1, int(bitsN)-1)
		hi := math.Ldexp(1, int(bitsN)-1)
		switch {
		case f <= lo:
			return uint64(int64(-1) << (bitsN - 1))
		case f >= hi:
			return uint64(1)<<(bitsN-1) - 1
		}
		return uint64(int64(f))
	}
	hi := math.Ldexp(1, int(bitsN))
	switch {
	case f <= 0:
		return 0
	case f >= hi:
		if bitsN == 64 {
			return math.MaxUint64
		}
		return 1<<bitsN - 1
	}
	return uint64(f)
}

// minF32 and maxF32 follow PTX: a NaN operand yields the other operand (both
// NaN: the canonical NaN), and -0 orders below +0.
func minF32(a, b float32) float32 {
	switch {
	case a != a:
		return b
	case b != b:
		return a
	case a == b:
		if math.Signbit(float64(a)) {
			return a
		}
		return b
	case a < b:
		return a
	}
	return b
}

func maxF32(a, b float32) float32 {
	switch {
	case a != a:
		return b
	case b != b:
		return a
	case a == b:
		if math.Signbit(float64(a)) {
			return b
		}
		return a
	case a > b:
		return a
	}
	return b
}

// rzF32 rounds a float64 toward zero to float32 (overflow gives the largest
// finite value, as round-toward-zero does).
func rzF32(x float64) float32 {
	f := float32(x)
	if math.Abs(float64(f)) > math.Abs(x) {
		f = math.Nextafter32(f, 0)
	}
	return f
}
