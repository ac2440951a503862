package verify

import (
	"math"

	"github.com/attngen/attngen/spec"
)

// F16 rounds a float32 to the nearest IEEE half-precision value (ties to
// even; overflow gives an infinity, NaN stays NaN) and returns its bits.
func F16(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	a := math.Abs(float64(x))
	switch {
	case math.IsNaN(float64(x)):
		return sign | 0x7e00
	case a >= 65520:
		return sign | 0x7c00
	case a < math.Ldexp(1, -25):
		return sign
	}
	// a = f * 2^fe with f in [0.5, 1): its binary exponent is fe-1, exactly.
	_, fe := math.Frexp(a)
	e := max(fe-1, -14)
	m := math.RoundToEven(math.Ldexp(a, 10-e))
	if m >= 2048 {
		m /= 2
		e++
	}
	if m < 1024 { // subnormal
		return sign | uint16(m)
	}
	return sign | uint16(e+15)<<10 | uint16(m-1024)
}

// FromF16 widens half-precision bits to float32 (exact).
func FromF16(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10)&0x1f, float64(h&0x3ff)
	switch e {
	case 0:
		return sign * float32(math.Ldexp(m, -24))
	case 31:
		if m != 0 {
			return float32(math.NaN())
		}
		return sign * float32(math.Inf(1))
	}
	return sign * float32(math.Ldexp(1+m/1024, e-15))
}

// RoundF16 rounds every element to the nearest half-precision value, in
// place.
func RoundF16(x []float32) {
	for k, v := range x {
		x[k] = FromF16(F16(v))
	}
}

// NaiveF16 is NaiveBF16 for half precision: the yardstick of GPU kernels
// with f16 inputs and outputs (probabilities and outputs rounded to f16).
func NaiveF16(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, out, lse []float32) error {
	return naiveRowsF16(p, docs, q, k, v, s, nil, out, lse)
}

func naiveRowsF16(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, rows []int, out, lse []float32) error {
	round := func(x float32) float32 { return FromF16(F16(x)) }
	return naive(p, docs, q, k, v, s, rows, out, lse, round, round)
}

// F16Kernel judges kernels with half-precision inputs and outputs against
// NaiveF16 on inputs rounded to f16, as BF16Kernel does for bfloat16; the
// floor is a few f16 ulps at the outputs' scale.
var F16Kernel = NumericOptions{Round: RoundF16, Naive: NaiveF16, NaiveRows: naiveRowsF16, Factor: 2, Floor: 3e-4}
