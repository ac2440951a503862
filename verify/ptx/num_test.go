package ptx

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactFMA is a*b+c rounded once to float32 through big.Float.
func exactFMA(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
	f, _ := x.Float32() // nearest even, subnormals included
	if f == 0 && x.Sign() == 0 {
		// exact zero: IEEE sign rules
		return float32(float64(a)*float64(b) + float64(c))
	}
	return f
}

func TestFmaF32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func() float32 {
		switch r.IntN(4) {
		case 0: // arbitrary bits
			for {
				f := math.Float32frombits(r.Uint32())
				if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
					return f
				}
			}
		case 1: // small integers: many exact ties
			return float32(r.IntN(1<<12) - 1<<11)
		case 2: // tiny: subnormal products and sums
			return float32(math.Ldexp(r.Float64()-0.5, -60-r.IntN(20)))
		}
		return float32(r.NormFloat64())
	}
	naive := 0
	for i := 0; i < 200000; i++ {
		a, b, c := rnd(), rnd(), rnd()
		if r.IntN(3) == 0 {
			// c close to -a*b: massive cancellation
			c = -float32(float64(a) * float64(b))
		}
		got, want := fmaF32(a, b, c), exactFMA(a, b, c)
		if math.IsInf(float64(want), 0) && math.IsInf(float64(got), 0) && got == want {
			continue
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma(%g, %g, %g) = %g (%08x), want %g (%08x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
		if float32(math.FMA(float64(a), float64(b), float64(c))) != want {
			naive++
		}
	}
	// the 641 * 6700417 case: float64 rounding lands on a float32 midpoint
	a, b, c := float32(641), float32(6700417), float32(math.Ldexp(1, 56))
	if got, want := fmaF32(a, b, c), exactFMA(a, b, c); got != want || float32(math.FMA(float64(a), float64(b), float64(c))) == want {
		t.Errorf("double-rounding case: fmaF32 %g, exact %g", got, want)
	}
	t.Logf("naive float32(math.FMA) differed on %d of 200000 random cases", naive)
}

func TestHalfConversions(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		u := uint16(h)
		// bf16 -> f32 -> bf16 is the identity (NaNs become 0x7fff)
		w := bf16ToF32(u)
		back := f32ToBF16(w)
		if u&0x7fff > 0x7f80 {
			if back != 0x7fff {
				t.Fatalf("bf16 NaN %04x -> %04x", u, back)
			}
		} else if back != u {
			t.Fatalf("bf16 %04x -> %08x -> %04x", u, w, back)
		}
		// f16 -> f32 exact (checked against big.Float), and back
		f := f16ToF32(u)
		e := int(u>>10) & 0x1f
		m := int64(u & 0x3ff)
		switch {
		case e == 0x1f && m != 0:
			if f != canonNaN || f32ToF16(f) != 0x7fff {
				t.Fatalf("f16 NaN %04x -> %08x", u, f)
			}
			continue
		case e == 0x1f:
		default:
			var v float64
			if e == 0 {
				v = math.Ldexp(float64(m), -24)
			} else {
				v = math.Ldexp(float64(m|0x400), e-25)
			}
			if u&0x8000 != 0 {
				v = -v
			}
			if math.Float32frombits(f) != float32(v) || v == 0 && math.Signbit(v) != (f>>31 == 1) {
				t.Fatalf("f16 %04x -> %g, want %g", u, math.Float32frombits(f), v)
			}
		}
		if back := f32ToF16(f); back != u {
			t.Fatalf("f16 %04x -> %08x -> %04x", u, f, back)
		}
	}
}

func TestIntToF32(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	modes := map[uint8]big.RoundingMode{rndRN: big.ToNearestEven, rndRZ: big.ToZero, rndRM: big.ToNegativeInf, rndRP: big.ToPositiveInf}
	for i := 0; i < 20000; i++ {
		v := r.Uint64() >> r.IntN(64)
		signed := r.IntN(2) == 0
		for rnd, mode := range modes {
			f := new(big.Float).SetPrec(24).SetMode(mode)
			if signed {
				f.SetInt64(int64(v))
			} else {
				f.SetUint64(v)
			}
			want, _ := f.Float32()
			if got := intToF32(v, signed, rnd); got != want {
				t.Fatalf("intToF32(%#x, signed=%v, mode %v) = %g, want %g", v, signed, mode, got, want)
			}
		}
	}
}

func TestF32ToInt(t *testing.T) {
	for _, c := range []struct {
		x    float32
		t    dtype
		rnd  uint8
		want uint64
	}{
		{2.5, tS32, rndRN, 2},
		{-2.5, tS32, rndRN, math.MaxUint64 - 1},
		{-0.5, tS32, rndRM, math.MaxUint64},
		{3e9, tS32, rndRZ, math.MaxInt32},
		{-3e9, tS32, rndRZ, 0xffffffff80000000},
		{3e9, tU32, rndRZ, 3000000000},
		{5e9, tU32, rndRZ, math.MaxUint32},
		{float32(math.Inf(1)), tU64, rndRZ, math.MaxUint64},
		{float32(math.Inf(-1)), tS64, rndRZ, 1 << 63},
		{float32(math.NaN()), tS32, rndRN, 0},
		{70000, tS16, rndRZ, 0x7fff},
	} {
		if got := f32ToInt(c.x, c.t, c.rnd); got != c.want {
			t.Errorf("f32ToInt(%g, %v, %d) = %#x, want %#x", c.x, c.t, c.rnd, got, c.want)
		}
	}
}
