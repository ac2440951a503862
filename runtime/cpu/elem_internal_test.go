package cpu

import (
	"math"
	"testing"
)

// TestWiden: every 16-bit pattern widens to the float32 it stands for, in
// the assembly (where the CPU has it) and in Go: bfloat16 is the high half
// of a float32; half precision is checked against its definition
// (normal, subnormal, infinity, NaN).
func TestWiden(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	for _, elem := range []Elem{BF16, F16} {
		asm, ref := make([]float32, len(src)), make([]float32, len(src))
		widen(asm, src, elem) // the assembly, where available
		for i, h := range src {
			if elem == BF16 {
				ref[i] = math.Float32frombits(uint32(h) << 16)
				continue
			}
			sign := 1.0
			if h&0x8000 != 0 {
				sign = -1
			}
			e, m := int(h>>10)&0x1f, float64(h&0x3ff)
			switch e {
			case 0:
				ref[i] = float32(sign * math.Ldexp(m, -24))
			case 31:
				ref[i] = float32(sign * math.Inf(1))
				if m != 0 {
					ref[i] = float32(math.NaN())
				}
			default:
				ref[i] = float32(sign * math.Ldexp(1+m/1024, e-15))
			}
		}
		goPath := make([]float32, len(src))
		for i := 0; i < len(src); i += 7 { // odd lengths take the Go path
			n := min(7, len(src)-i)
			widen(goPath[i:i+n], src[i:i+n], elem)
		}
		for i := range src {
			for _, got := range []float32{asm[i], goPath[i]} {
				if math.IsNaN(float64(ref[i])) {
					if !math.IsNaN(float64(got)) {
						t.Fatalf("%s %#04x: %v, want NaN", elem, i, got)
					}
					continue
				}
				if math.Float32bits(got) != math.Float32bits(ref[i]) {
					t.Fatalf("%s %#04x: %v, want %v", elem, i, got, ref[i])
				}
			}
		}
		if math.Float32bits(asm[0x7d00]) != math.Float32bits(goPath[0x7d00]) && elem == F16 {
			t.Errorf("f16 signaling NaN: assembly %#x, Go %#x", math.Float32bits(asm[0x7d00]), math.Float32bits(goPath[0x7d00]))
		}
	}
}
