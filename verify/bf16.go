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
	if err := checkInputs(s, len(q), len(k), len(v), docs); err != nil {
		return err
	}
	D, scale := s.HeadDim, float32(s.EffScale())
	group := s.HeadsQ / s.HeadsKV
	scores := make([]float32, s.SeqK)
	acc := make([]float32, D)
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsQ; h++ {
			kvBase := (b*s.HeadsKV + h/group) * s.SeqK * D
			for r := 0; r < s.SeqQ; r++ {
				row := (b*s.HeadsQ+h)*s.SeqQ + r
				qr := q[row*D : row*D+D]
				i := spec.Row(r, s.SeqQ, s.SeqK)
				m := float32(math.Inf(-1))
				for j := range scores {
					scores[j] = float32(math.Inf(-1))
					if !p.AtDocs(i, j, docs) {
						continue
					}
					var dot float32
					for d, x := range qr {
						dot += x * k[kvBase+j*D+d]
					}
					scores[j] = dot * scale
					m = max(m, scores[j])
				}
				o := out[row*D : row*D+D]
				if math.IsInf(float64(m), -1) {
					clear(o)
					if lse != nil {
						lse[row] = m
					}
					continue
				}
				clear(acc)
				var sum float32
				for j, sc := range scores {
					if math.IsInf(float64(sc), -1) {
						continue
					}
					w := float32(math.Exp(float64(sc - m)))
					sum += w
					wb := FromBF16(BF16(w))
					for d := range acc {
						acc[d] += wb * v[kvBase+j*D+d]
					}
				}
				for d := range o {
					o[d] = FromBF16(BF16(acc[d] / sum))
				}
				if lse != nil {
					lse[row] = m + float32(math.Log(float64(sum)))
				}
			}
		}
	}
	return nil
}
