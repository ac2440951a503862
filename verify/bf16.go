package verify

import (
	"math"

	"github.com/attngen/attngen/spec"
)

// BF16 rounds a float32 to the nearest bfloat16 (ties to even) and returns
// its bits; NaN stays NaN.
func BF16(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// FromBF16 widens bfloat16 bits to float32 (exact).
func FromBF16(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// RoundBF16 rounds every element to the nearest bfloat16 value, in place.
func RoundBF16(x []float32) {
	for k, v := range x {
		x[k] = FromBF16(BF16(v))
	}
}

// NaiveBF16 is a straightforward bfloat16 attention, the yardstick for GPU
// kernels with bf16 inputs and outputs: scores in float32 from the (bf16)
// inputs, softmax in float32, probabilities rounded to bf16 before the
// product with v (as tensor-core kernels do), accumulation in float32, and
// the output rounded to bf16. lse stays float32.
func NaiveBF16(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, out, lse []float32) error {
	return naiveRowsBF16(p, docs, q, k, v, s, nil, out, lse)
}

func naiveRowsBF16(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, rows []int, out, lse []float32) error {
	round := func(x float32) float32 { return FromBF16(BF16(x)) }
	return naive(p, docs, q, k, v, s, rows, out, lse, round, round)
}
