package wgmmarec

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/attngen/attngen/verify"
)

// Swizzle widths in bytes (0: none), and their names in the files.
var swizzleNames = map[int]string{0: "none", 32: "32B", 64: "64B", 128: "128B"}

// descMode is the 2-bit swizzle field of a wgmma matrix descriptor (bits
// 62-63): 0 none, 1 128B, 2 64B, 3 32B.
var descMode = map[int]uint64{0: 0, 128: 1, 64: 2, 32: 3}

// desc builds a matrix descriptor from byte quantities (each a multiple of
// 16): start address, leading and stride dimension byte offsets, and the
// swizzle width. The base offset (bits 49-51) is 0.
func desc(start, lbo, sbo, swz int) uint64 {
	return uint64(start>>4)&0x3fff | (uint64(lbo>>4)&0x3fff)<<16 | (uint64(sbo>>4)&0x3fff)<<32 | descMode[swz]<<62
}

// layout is one operand's placement: rows (M for A, N for B) x 16 K
// elements of 16 bits, in one of the ISA's canonical layouts. Every byte of
// the operand's region is filled with an element value, so whatever the
// hardware reads inside the region is a recorded input.
type layout struct {
	mn       bool // MN-major
	swz      int  // 0, 32, 64 or 128
	lbo, sbo int  // bytes
	k0       int  // K-major swizzled: the first of the 16 K columns inside a row
	size     int  // bytes of the region, a multiple of 1024
}

// newLayout picks strides for an operand of rows x 16. alt chooses between
// two stride arrangements where the layout has a choice, so that the cases
// tell LBO from SBO; slice picks the K slice inside a K-major swizzled row
// (the instruction then reads columns 16*slice.. of a row of swz/2).
func newLayout(rows int, mn bool, swz int, alt bool, slice int) layout {
	l := layout{mn: mn, swz: swz}
	var extent int
	switch {
	case swz == 0 && !mn:
		// core matrices of 8 rows x 16 bytes; LBO between the two K halves,
		// SBO between groups of 8 rows
		if alt {
			l.lbo, l.sbo = 128, 256 // K halves adjacent, row groups 256 apart
		} else {
			l.lbo, l.sbo = rows/8*128, 128 // row groups adjacent, K halves far apart
		}
		extent = rows / 8 * 256
	case swz == 0 && mn:
		// core matrices of 8 K rows x 8 M/N elements; SBO between groups of 8
		// M/N elements, LBO between the two groups of 8 K
		if alt {
			l.lbo, l.sbo = 128, 256
		} else {
			l.lbo, l.sbo = rows/8*128, 128
		}
		extent = rows / 8 * 256
	case !mn:
		// rows swz bytes apart, atoms of 8 rows SBO apart; LBO unused (16)
		l.lbo, l.sbo = 16, 8*swz
		l.k0 = 16 * (slice % (swz / 32))
		extent = (rows + 7) / 8 * l.sbo
	default:
		// atoms of 8 K rows x swz bytes (swz/2 M/N elements); SBO between
		// the two K groups, LBO between groups of swz/2 M/N elements
		groups := (rows + swz/2 - 1) / (swz / 2)
		if alt {
			l.sbo, l.lbo = 8*swz, 16*swz // [M/N group][K group][K row]
		} else {
			l.lbo, l.sbo = 8*swz, groups*8*swz // [K group][M/N group][K row]
		}
		extent = groups * 16 * swz
	}
	l.size = (extent + 1023) / 1024 * 1024
	return l
}

// family is how a case's values are drawn.
type family string

const (
	famInt       family = "int"       // integers in -4..4 (accumulators -2..2): every product and sum exact
	famNormal    family = "normal"    // standard normal
	famSpread    family = "spread"    // normal times 2^e, e uniform in -20..20 (f16: -6..6)
	famBigC      family = "bigc"      // normal inputs, accumulators 4096x larger
	famSpecial   family = "special"   // normal, with inf, -inf, NaN and -0 sprinkled in
	famSubnormal family = "subnormal" // normal and subnormal inputs mixed
	famNegZero   family = "negzero"   // A all +0, B all -0: every product is -0
	famMixZero   family = "mixzero"   // A and B zeros of random sign; accumulators +-0
)

// elem draws one 16-bit input of the family (role 'a' or 'b').
func elem(r *rand.Rand, fam family, f16 bool, role byte) uint16 {
	conv := verify.BF16
	if f16 {
		conv = verify.F16
	}
	g := float32(r.NormFloat64())
	switch fam {
	case famInt:
		return conv(float32(r.IntN(9) - 4))
	case famSpread:
		lim := 20
		if f16 {
			lim = 6
		}
		return conv(g * float32(math.Ldexp(1, r.IntN(2*lim+1)-lim)))
	case famSpecial:
		switch r.IntN(64) {
		case 0:
			return conv(float32(math.Inf(1)))
		case 1:
			return conv(float32(math.Inf(-1)))
		case 2:
			return conv(float32(math.NaN()))
		case 3:
			return 0x8000
		}
	case famSubnormal:
		// A: subnormals and the smallest normals; B: large enough that
		// their products are ordinary f32 values
		if role == 'b' {
			if f16 {
				return conv(g * float32(math.Ldexp(1, r.IntN(11))))
			}
			return conv(g * float32(math.Ldexp(1, r.IntN(41))))
		}
		if r.IntN(2) == 0 {
			frac := uint16(1 + r.IntN(0x7f))
			if f16 {
				frac = uint16(1 + r.IntN(0x3ff))
			}
			return frac | uint16(r.IntN(2))<<15
		}
		if f16 {
			return conv(g * float32(math.Ldexp(1, -14)))
		}
		return conv(g * float32(math.Ldexp(1, -126)))
	case famNegZero:
		if role == 'a' {
			return 0
		}
		return 0x8000
	case famMixZero:
		return uint16(r.IntN(2)) << 15
	}
	return conv(g)
}

// accum draws one input accumulator (f32 bits).
func accum(r *rand.Rand, fam family, f16 bool) uint32 {
	g := float32(r.NormFloat64())
	switch fam {
	case famInt:
		return math.Float32bits(float32(r.IntN(5) - 2))
	case famBigC:
		return math.Float32bits(g * 4096)
	case famSpecial:
		switch r.IntN(64) {
		case 0:
			return math.Float32bits(float32(math.Inf(1)))
		case 1:
			return 0x7fc00000
		case 2:
			return 0x80000000
		}
	case famSubnormal:
		// the scale of the products (f32 subnormals among them for bf16)
		if r.IntN(4) == 0 {
			return uint32(r.IntN(1<<23)) | uint32(r.IntN(2))<<31
		}
		if f16 {
			return math.Float32bits(g * float32(math.Ldexp(1, -20)))
		}
		return math.Float32bits(g * float32(math.Ldexp(1, -110)))
	case famNegZero, famMixZero:
		return uint32(r.IntN(2)) << 31
	}
	return math.Float32bits(g)
}

// padTo is the shared memory every case fills (the image, then padding):
// enough that reading an operand with LBO and SBO swapped, or with the
// other stride arrangement, stays inside it for every case.
const padTo = 192 << 10

// spec is a case before it runs: its variant, layout choices and inputs.
type spec struct {
	name   string
	v      Variant
	swz    int
	fam    family
	scaleD bool
	alt    bool
	slice  int
	seed   uint64
}

// build draws a case's inputs.
func (s spec) build() *WgmmaCase {
	r := rand.New(rand.NewPCG(s.seed, 0x9e3779b97f4a7c15))
	f16 := s.v.Type == "f16"
	var la layout
	aDesc := s.v.A != ARegs
	if aDesc {
		la = newLayout(64, s.v.A == ADescMN, s.swz, s.alt, s.slice)
	}
	lb := newLayout(s.v.N, s.v.BMN, s.swz, !s.alt, s.slice+1)
	bAt := la.size
	size := (bAt + lb.size + 2047) / 2048 * 2048
	img := make([]byte, size)
	for off := 0; off < size; off += 2 {
		role := byte('b')
		if off < bAt {
			role = 'a'
		}
		binary.LittleEndian.PutUint16(img[off:], elem(r, s.fam, f16, role))
	}
	c := &WgmmaCase{
		Name: s.name, Type: s.v.Type, N: s.v.N, A: s.v.A, BMN: s.v.BMN, NegA: s.v.NegA, NegB: s.v.NegB,
		Swizzle: swizzleNames[s.swz], Family: string(s.fam),
		Image: make([]uint32, size/4), Fill: padTo,
	}
	if s.scaleD {
		c.ScaleD = 1
	}
	for i := range c.Image {
		c.Image[i] = binary.LittleEndian.Uint32(img[4*i:])
	}
	if aDesc {
		c.DescA = hex64(desc(2*la.k0, la.lbo, la.sbo, la.swz))
	} else {
		c.ARegs = make([]uint32, 128*4)
		for i := range c.ARegs {
			c.ARegs[i] = uint32(elem(r, s.fam, f16, 'a')) | uint32(elem(r, s.fam, f16, 'a'))<<16
		}
	}
	c.DescB = hex64(desc(bAt+2*lb.k0, lb.lbo, lb.sbo, lb.swz))
	c.C = make([]uint32, 128*s.v.N/2)
	for i := range c.C {
		c.C[i] = accum(r, s.fam, f16)
	}
	return c
}

func hex64(v uint64) string { return fmt.Sprintf("%#018x", v) }

// specs is the recorded case list (deterministic).
func specs() []spec {
	var out []spec
	seed := uint64(20261130)
	add := func(s spec) {
		seed++
		s.seed = seed
		a := map[string]string{ADescK: "A-K", ADescMN: "A-MN", ARegs: "A-regs"}[s.v.A]
		b := "B-K"
		if s.v.BMN {
			b = "B-MN"
		}
		neg := ""
		if s.v.NegA || s.v.NegB {
			neg = fmt.Sprintf(" scale-a %d scale-b %d", map[bool]int{false: 1, true: -1}[s.v.NegA], map[bool]int{false: 1, true: -1}[s.v.NegB])
		}
		sd := 0
		if s.scaleD {
			sd = 1
		}
		s.name = fmt.Sprintf("%s n%d %s %s swizzle %s %s scale-d %d%s", s.v.Type, s.v.N, a, b, swizzleNames[s.swz], s.fam, sd, neg)
		out = append(out, s)
	}
	// layouts: exact small-integer inputs, so a difference is a misread
	// element, not rounding
	// (at N = 256 A is the same 64 x 16 operand as at N = 64, so A-MN,
	// covered there, is left out to keep the file small)
	i := 0
	for _, n := range []int{64, 256} {
		for _, swz := range []int{0, 32, 64, 128} {
			for _, a := range []string{ADescK, ADescMN, ARegs} {
				if n == 256 && a == ADescMN {
					continue
				}
				for _, bmn := range []bool{false, true} {
					add(spec{v: Variant{Type: "bf16", N: n, A: a, BMN: bmn}, swz: swz, fam: famInt, scaleD: true, alt: i%2 == 1, slice: i / 2})
					i++
				}
			}
		}
	}
	for _, swz := range []int{0, 128} {
		for _, a := range []string{ADescK, ARegs} {
			for _, bmn := range []bool{false, true} {
				add(spec{v: Variant{Type: "bf16", N: 8, A: a, BMN: bmn}, swz: swz, fam: famInt, scaleD: true, alt: i%2 == 1, slice: i})
				i++
			}
		}
	}
	for _, swz := range []int{32, 128} {
		for _, a := range []string{ADescK, ADescMN, ARegs} {
			add(spec{v: Variant{Type: "f16", N: 64, A: a, BMN: i%2 == 0}, swz: swz, fam: famInt, scaleD: true, alt: i%2 == 1, slice: i})
			i++
		}
	}
	// numerics: the accumulation model, as the mma.sync goldens pinned it
	for _, typ := range []string{"bf16", "f16"} {
		for _, fam := range []family{famNormal, famSpread, famBigC, famSpecial, famSubnormal} {
			add(spec{v: Variant{Type: typ, N: 64, A: ADescK}, swz: 128, fam: fam, scaleD: true})
			add(spec{v: Variant{Type: typ, N: 64, A: ARegs, BMN: true}, swz: 64, fam: fam, scaleD: true, slice: 1})
		}
		// scale-d = 0: D = A*B, signed zeros (N = 32 to keep the file small)
		for _, fam := range []family{famNormal, famSpecial, famNegZero, famMixZero} {
			add(spec{v: Variant{Type: typ, N: 32, A: ADescK}, swz: 128, fam: fam, scaleD: false, slice: 2})
		}
		for _, fam := range []family{famNegZero, famMixZero} {
			add(spec{v: Variant{Type: typ, N: 32, A: ARegs}, swz: 128, fam: fam, scaleD: true, slice: 3})
		}
		// imm-scale-a/b = -1
		for j, neg := range [][2]bool{{true, false}, {false, true}, {true, true}} {
			for k, fam := range []family{famNormal, famSpecial} {
				a := ADescK
				if (j+k)%2 == 1 {
					a = ARegs
				}
				add(spec{v: Variant{Type: typ, N: 32, A: a, NegA: neg[0], NegB: neg[1]}, swz: 128, fam: fam, scaleD: true})
			}
		}
	}
	return out
}

// Variants lists the kernels the recorded cases use.
func Variants() []Variant {
	var vs []Variant
	seen := map[Variant]bool{}
	for _, s := range specs() {
		if !seen[s.v] {
			seen[s.v] = true
			vs = append(vs, s.v)
		}
	}
	return vs
}
