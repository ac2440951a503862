package verify_test

import (
	"math"
	"testing"

	"github.com/attngen/attngen/verify"
)

// TestF16Nearest: over a sweep of float32 bit patterns (every sign,
// exponent and a stride of mantissas, plus the neighbours of every f16
// value and of the halfway points between them), F16 gives the nearest
// half-precision value, ties to even, infinities past the largest finite
// value's halfway point and NaN for NaN.
func TestF16Nearest(t *testing.T) {
	check := func(x float32) {
		h := verify.F16(x)
		if x != x {
			if g := verify.FromF16(h); g == g {
				t.Fatalf("F16(NaN) = %#04x, not a NaN", h)
			}
			return
		}
		got := float64(verify.FromF16(h))
		xd := float64(x)
		if math.Abs(xd) >= 65520 {
			if !math.IsInf(got, 0) || math.Signbit(got) != math.Signbit(xd) {
				t.Fatalf("F16(%v) = %v, want an infinity of its sign", x, got)
			}
			return
		}
		if math.Signbit(got) != math.Signbit(xd) {
			t.Fatalf("F16(%v) = %v: sign lost", x, got)
		}
		d := math.Abs(got - xd)
		for _, n := range []uint16{h - 1, h + 1} {
			if n&0x7fff >= 0x7c00 || (n^h)&0x8000 != 0 {
				continue
			}
			dn := math.Abs(float64(verify.FromF16(n)) - xd)
			if dn < d || (dn == d && n&1 == 0) {
				t.Fatalf("F16(%v) = %#04x (%v), but %#04x (%v) is nearer or an even tie", x, h, got, n, verify.FromF16(n))
			}
		}
	}
	for b := uint64(0); b < 1<<32; b += 4099 {
		check(math.Float32frombits(uint32(b)))
	}
	for h := uint32(0); h < 0x7c00; h++ {
		for _, s := range []float32{1, -1} {
			v := s * verify.FromF16(uint16(h))
			w := s * verify.FromF16(uint16(h+1))
			mid := float32((float64(v) + float64(w)) / 2)
			for _, x := range []float32{v, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 2*mid)} {
				check(x)
			}
		}
	}
}
