package cpu

import "math"

// Coefficients of the degree-6 polynomial approximating 2^f on
// [-0.5, 0.5] (Cephes exp2f; the truncation error is below 2e-9 relative,
// so float32 rounding in the Horner steps dominates).
const (
	exp2C1 = 6.931472028550421e-1
	exp2C2 = 2.402264791363012e-1
	exp2C3 = 5.550332471162809e-2
	exp2C4 = 9.618437357674640e-3
	exp2C5 = 1.339887440266574e-3
	exp2C6 = 1.535336188319500e-4
)

// exp2Round is 1.5*2^23: adding it to a float32 of magnitude below 2^22
// rounds to an integer (ties to even) held in the low mantissa bits.
const exp2Round = 0x1.8p23

// exp2 returns 2^x in float32 with a relative error of a few ulp for x in
// [-126, 128). Results that would be subnormal (x < -126) are flushed to 0,
// so the kernels never compute with subnormals; -Inf gives exactly 0,
// x >= 128 gives +Inf and NaN gives NaN.
//
// The kernels call exp2Core directly on their (non-positive) arguments.
func exp2(x float32) float32 {
	if !(x >= -126 && x < 127.5) {
		return exp2Slow(x)
	}
	return exp2Core(x)
}

// exp2Core is exp2 for x in [-126, 127.5), small enough to be inlined.
func exp2Core(x float32) float32 {
	// n = round(x), f = x - n in [-0.5, 0.5] (exact).
	t := x + exp2Round
	f := x - (t - exp2Round)
	p := ((((((exp2C6*f+exp2C5)*f+exp2C4)*f+exp2C3)*f+exp2C2)*f+exp2C1)*f + 1)
	// The low bits of t hold n; 2^n is (n+127)<<23 for n in [-126, 127].
	return p * math.Float32frombits((math.Float32bits(t)-(0x4B400000-127))<<23)
}

// exp2Slow handles the arguments outside the fast path: NaN, overflow, the
// top half-unit below overflow (where 2^round(x) = 2^128 is not a float32)
// and underflow.
func exp2Slow(x float32) float32 {
	switch {
	case x != x:
		return x
	case x >= 128:
		return float32(math.Inf(1))
	case x >= 127.5:
		return 2 * exp2(x-1)
	default: // x < -126, including -Inf
		return 0
	}
}
