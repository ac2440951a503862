package cpu

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// TestWiden: every 16-bit pattern widens to the float32 it stands for, in
// the assembly (where the CPU has it) and in Go: bfloat16 is the high half
// of a float32; half precision is checked against its definition
// (normal, subnormal, infinity, NaN).
func TestWiden(t *testing.T) { eachKernels(t, nil, testWiden) }

func testWiden(t *testing.T, kern *kernels) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	for _, elem := range []Elem{BF16, F16} {
		asm, ref := make([]float32, len(src)), make([]float32, len(src))
		kern.widenRow(asm, src, elem) // the kernel, where the variant has one
		if kern.widen[elem] != nil && !kern.widenK(asm, src, elem) {
			t.Fatalf("%s: the variant's widening kernel did not run", elem)
		}
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
			kern.widenRow(goPath[i:i+n], src[i:i+n], elem)
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

// format16 is a 16-bit format described by its positive values, for the
// float64 reference of the narrowing conversions: vals[i] is the value of
// bits i, for every finite pattern, and the last entry, the infinity, is
// put where the next binade would start (so that rounding past the largest
// finite value by half an ulp or more gives it, as IEEE 754 says).
type format16 struct {
	name string
	vals []float64
	to   func(float32) uint16 // the conversion under test
	from func(uint16) float32 // the (tested) widening
}

func newFormat16(name string, inf uint16, from func(uint16) float32, to func(float32) uint16) format16 {
	f := format16{name: name, to: to, from: from, vals: make([]float64, inf+1)}
	for i := range f.vals[:inf] {
		f.vals[i] = float64(from(uint16(i)))
	}
	// the largest finite value plus one ulp of its binade: 2^16, 2^128
	f.vals[inf] = 2*f.vals[inf-1] - f.vals[inf-2]
	return f
}

// ref rounds x to the nearest value of the format in float64 arithmetic:
// the two neighbours by binary search, the nearer one, on a tie the one
// with even bits; NaN gives NaN (reported as ok=false).
func (f format16) ref(x float32) (bits uint16, nan bool) {
	if x != x {
		return 0, true
	}
	a := math.Abs(float64(x))
	sign := uint16(0)
	if math.Signbit(float64(x)) {
		sign = 0x8000
	}
	n := len(f.vals)
	i := sort.SearchFloat64s(f.vals, a) // first value >= a
	switch {
	case i == n: // past the infinity's slot
		return sign | uint16(n-1), false
	case f.vals[i] == a:
		return sign | uint16(i), false
	}
	lo, hi := f.vals[i-1], f.vals[i]
	switch d0, d1 := a-lo, hi-a; {
	case d0 < d1:
		return sign | uint16(i-1), false
	case d1 < d0:
		return sign | uint16(i), false
	}
	if i%2 == 0 {
		return sign | uint16(i), false
	}
	return sign | uint16(i-1), false
}

// check compares the conversion with the reference on x.
func (f format16) check(t *testing.T, x float32) {
	t.Helper()
	got := f.to(x)
	want, nan := f.ref(x)
	if nan {
		// NaN stays NaN, quiet, with its sign.
		if !math.IsNaN(float64(f.from(got))) || got&0x8000 != uint16(math.Float32bits(x)>>16)&0x8000 {
			t.Fatalf("%s(%#08x NaN) = %#04x, want a quiet NaN of the same sign", f.name, math.Float32bits(x), got)
		}
		if q := map[string]uint16{"f16": 0x200, "bf16": 0x40}[f.name]; got&q == 0 {
			t.Fatalf("%s(%#08x NaN) = %#04x: not quiet", f.name, math.Float32bits(x), got)
		}
		return
	}
	if got != want {
		t.Fatalf("%s(%v = %#08x) = %#04x (%v), want %#04x (%v)", f.name, x, math.Float32bits(x), got, f.from(got), want, f.from(want))
	}
}

// TestNarrow: float32 to bf16 and f16 rounds to nearest, ties to even, as
// a float64 search of the format's values does: at every value of the
// format, its float32 neighbours, every midpoint between two consecutive
// values (the ties) and its neighbours, through the subnormals, at the
// overflow threshold, on NaN and infinities, and on 2^22 random float32
// patterns, with both signs.
func TestNarrow(t *testing.T) {
	formats := []format16{
		newFormat16("f16", 0x7c00, f16to32, f32toF16),
		newFormat16("bf16", 0x7f80, func(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }, f32toBF16),
	}
	up := func(x float32) float32 { return math.Nextafter32(x, float32(math.Inf(1))) }
	down := func(x float32) float32 { return math.Nextafter32(x, float32(math.Inf(-1))) }
	for _, f := range formats {
		both := func(x float32) {
			f.check(t, x)
			f.check(t, -x)
		}
		n := len(f.vals)
		for i := 0; i < n; i++ {
			x := float32(f.vals[i])
			if i == n-1 {
				x = f.from(uint16(i)) // the infinity itself
			}
			both(x)
			if i < n-1 {
				both(up(x))
			}
			if i > 0 {
				both(down(x))
				mid := float32((f.vals[i-1] + f.vals[i]) / 2) // exact in float32
				if float64(mid) != (f.vals[i-1]+f.vals[i])/2 {
					t.Fatalf("%s: midpoint of %d not exact", f.name, i)
				}
				both(mid)
				both(up(mid))
				both(down(mid))
			}
		}
		// past the infinity's slot, the largest float32, infinities, NaN
		// with payloads, quiet and signaling
		for _, b := range []uint32{0x7f7fffff, 0x7f800000, 0x7f800001, 0x7fc00000, 0x7fffffff, 0x7fa00000, 0x7f802000, 0x7f800100} {
			both(math.Float32frombits(b))
		}
		// 2^-26 to 2^-13 on a fine grid (the f16 subnormals and their edge)
		for x := float32(0x1p-26); x < 0x1p-13; x = math.Float32frombits(math.Float32bits(x) + 97) {
			both(x)
		}
		r := rand.New(rand.NewPCG(30, 31))
		for range 1 << 22 {
			f.check(t, math.Float32frombits(r.Uint32()))
		}
	}
	// A few values by hand.
	for _, c := range []struct {
		x         float32
		f16, bf16 uint16
	}{
		{1, 0x3c00, 0x3f80},
		{65504, 0x7bff, 0x4780},
		{65519.99, 0x7bff, 0x4780},
		{65520, 0x7c00, 0x4780},
		{0x1p-24, 0x0001, 0x3380},
		{0x1p-25, 0x0000, 0x3300}, // f16 tie between 0 and 2^-24: even
		{0x1.8p-25, 0x0001, 0x3340},
		{0x1.8p-24, 0x0002, 0x33c0},   // f16 tie between 1 and 2 (x 2^-24): even
		{0x1.ffcp-15, 0x0400, 0x3880}, // rounds up into the normals
		{float32(math.Copysign(0, -1)), 0x8000, 0x8000},
		{1 + 0x1p-11, 0x3c00, 0x3f80},   // f16 tie: even
		{1 + 3*0x1p-11, 0x3c02, 0x3f80}, // f16 tie: even
		{1 + 0x1p-8, 0x3c04, 0x3f80},    // bf16 tie: even
		{1 + 3*0x1p-8, 0x3c0c, 0x3f82},  // bf16 tie: even
		{-70000, 0xfc00, 0xc789},
	} {
		if g := f32toF16(c.x); g != c.f16 {
			t.Errorf("f16(%v) = %#04x, want %#04x", c.x, g, c.f16)
		}
		if g := f32toBF16(c.x); g != c.bf16 {
			t.Errorf("bf16(%v) = %#04x, want %#04x", c.x, g, c.bf16)
		}
	}
}

// TestNarrowRows: narrow (each variant's loops where it has them) gives,
// for every element, f32toBF16 or f32toF16 of the product, bit for bit:
// over every 16-bit value of each format as a float32, the midpoints
// between neighbours and one float32 ulp either side, NaNs with payloads,
// and random bit patterns, with a factor of 1 and a random one.
func TestNarrowRows(t *testing.T) { eachKernels(t, nil, testNarrowRows) }

func testNarrowRows(t *testing.T, kern *kernels) {
	r := rand.New(rand.NewPCG(26, 27))
	var xs []float32
	for h := 0; h < 1<<16; h++ {
		for _, x := range []float32{f16to32(uint16(h)), math.Float32frombits(uint32(h) << 16)} {
			next := math.Nextafter32(x, float32(math.Inf(1)))
			xs = append(xs, x, next, math.Nextafter32(x, float32(math.Inf(-1))), x+(next-x)/2)
		}
	}
	for _, b := range []uint32{0x7f800001, 0xffc00000, 0x7fa00001, 0x7f802000, 0x7f7fffff, 0x477ff000, 0x477fefff, 0x33000000, 0x33000001} {
		xs = append(xs, math.Float32frombits(b))
	}
	for i := 0; i < 1<<18; i++ {
		xs = append(xs, math.Float32frombits(r.Uint32()))
	}
	xs = xs[:len(xs)&^15]
	dst := make([]uint16, len(xs))
	for _, elem := range []Elem{BF16, F16} {
		for _, s := range []float32{1, float32(r.Float64() + 0.5)} {
			clear(dst)
			kern.narrowRow(dst, xs, s, elem)
			if kern.narrow[elem] != nil {
				clear(dst)
				if !kern.narrowK(dst, xs, s, elem) {
					t.Fatalf("%s: the variant's narrowing kernel did not run", elem)
				}
			}
			for i, x := range xs {
				want := f32toF16(x * s)
				if elem == BF16 {
					want = f32toBF16(x * s)
				}
				if dst[i] != want {
					t.Fatalf("%s: %v (bits %#x) times %v: %#04x, want %#04x", elem, x, math.Float32bits(x), s, dst[i], want)
				}
			}
		}
	}
}
