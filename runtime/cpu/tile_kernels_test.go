package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// These tests compare every assembly tile kernel against atRef, a float64
// implementation of the microkernel ABI written here from the package doc.
//
// Tolerances. Most cases use "grid" inputs: q = a/8 * 2^e and kt = b/8 with
// small integers a, b, so every score (a sum of at most 128 products that are
// multiples of 2^e/64 and below 2^14 of those units) is exact in float32 in
// any summation order. The kernel's m must then equal the reference bit for
// bit, and o and l differ only by the rounding of exp2 (1.3 ulp), of alpha
// and of the 64-term sums. The worst-case bound of a 64-term float32
// accumulation is about 64u = 3.8e-6 relative to the sum of magnitudes, so o
// is required within atTol = 1e-5 of the float64 result relative to
// sum p|v| (the same recurrence run on |v|), and l within 1e-5 relative.
// With general Gaussian inputs the score rounding dominates; there the
// kernel's error must be at most 4x that of a straightforward float32
// implementation (atStepF32) plus 1e-6, where for o and l that yardstick is
// the larger of its own o or l error and ln2 times its score error.
const atTol = 1e-5

type atVariant struct {
	name string
	d    int
	fn   func(q, kt, v, s, o, m, l *float32, mask *uint64)
	ok   bool
}

// atFloats returns n float32s starting on a 64-byte boundary.
func atFloats(n int) []float32 {
	buf := make([]float32, n+16)
	off := int((64 - uintptr(unsafe.Pointer(&buf[0]))%64) % 64 / 4)
	return buf[off : off+n : off+n]
}

// atTile is one key tile: kt and v, and the mask (nil: full tile).
type atTile struct {
	kt, v []float32
	mask  []uint64
}

// atState is the kernel's float32 running state plus its scratch.
type atState struct {
	o, m, l, s []float32
}

func newAtState(d int) *atState {
	st := &atState{o: atFloats(TQ * d), m: atFloats(TQ), l: atFloats(TQ), s: atFloats(TQ * TK)}
	for r := range st.m {
		st.m[r] = float32(math.Inf(-1))
	}
	return st
}

func (st *atState) clone() *atState {
	c := &atState{o: atFloats(len(st.o)), m: atFloats(TQ), l: atFloats(TQ), s: atFloats(TQ * TK)}
	copy(c.o, st.o)
	copy(c.m, st.m)
	copy(c.l, st.l)
	return c
}

// run calls the kernel with s poisoned by NaN.
func (st *atState) run(fn func(q, kt, v, s, o, m, l *float32, mask *uint64), q []float32, t *atTile) {
	nan := float32(math.NaN())
	for i := range st.s {
		st.s[i] = nan
	}
	var mp *uint64
	if t.mask != nil {
		mp = &t.mask[0]
	}
	fn(&q[0], &t.kt[0], &t.v[0], &st.s[0], &st.o[0], &st.m[0], &st.l[0], mp)
}

// atRef is the float64 reference state; oabs runs the same recurrence on
// |v| and scales the o error.
type atRef struct {
	d             int
	o, oabs, m, l []float64
	touched       []bool // some key kept in some tile so far
	initO         []float32
	initM, initL  []float32
	// score, if not nil, is the score stage applied to each kept score of
	// row r, key column c (the tests of the score kernels).
	score func(r, c int, s float64) float64
}

func newAtRef(st *atState, d int) *atRef {
	r := &atRef{d: d, o: make([]float64, TQ*d), oabs: make([]float64, TQ*d), m: make([]float64, TQ), l: make([]float64, TQ), touched: make([]bool, TQ)}
	for i := range r.o {
		r.o[i] = float64(st.o[i])
		r.oabs[i] = math.Abs(r.o[i])
	}
	for i := range r.m {
		r.m[i] = float64(st.m[i])
		r.l[i] = float64(st.l[i])
		r.touched[i] = !math.IsInf(r.m[i], -1)
	}
	r.initO = append([]float32(nil), st.o...)
	r.initM = append([]float32(nil), st.m...)
	r.initL = append([]float32(nil), st.l...)
	return r
}

func atKept(mask []uint64, r, c int) bool { return mask == nil || mask[r]>>uint(c)&1 != 0 }

// step applies one tile to the reference state, exactly as the ABI says.
func (ref *atRef) step(q []float32, t *atTile) {
	d := ref.d
	for r := 0; r < TQ; r++ {
		var sc [TK]float64
		mx := math.Inf(-1)
		for c := 0; c < TK; c++ {
			sc[c] = math.Inf(-1)
			if !atKept(t.mask, r, c) {
				continue
			}
			dot := 0.0
			for k := 0; k < d; k++ {
				dot += float64(q[r*d+k]) * float64(t.kt[k*TK+c])
			}
			if ref.score != nil {
				dot = ref.score(r, c, dot)
			}
			sc[c] = dot
			mx = math.Max(mx, dot)
		}
		mnew := math.Max(ref.m[r], mx)
		if math.IsInf(mnew, -1) {
			continue
		}
		ref.touched[r] = true
		alpha := 0.0
		if !math.IsInf(ref.m[r], -1) {
			alpha = math.Exp2(ref.m[r] - mnew)
		}
		ref.l[r] *= alpha
		for j := 0; j < d; j++ {
			ref.o[r*d+j] *= alpha
			ref.oabs[r*d+j] *= alpha
		}
		for c := 0; c < TK; c++ {
			if math.IsInf(sc[c], -1) {
				continue
			}
			p := math.Exp2(sc[c] - mnew)
			ref.l[r] += p
			for j := 0; j < d; j++ {
				vj := float64(t.v[c*d+j])
				ref.o[r*d+j] += p * vj
				ref.oabs[r*d+j] += p * math.Abs(vj)
			}
		}
		ref.m[r] = mnew
	}
}

// atStepF32 is a straightforward float32 implementation of one tile, the
// yardstick for inputs whose scores are not exact.
func atStepF32(st *atState, d int, q []float32, t *atTile) {
	for r := 0; r < TQ; r++ {
		var sc [TK]float32
		mx := float32(math.Inf(-1))
		for c := 0; c < TK; c++ {
			sc[c] = float32(math.Inf(-1))
			if !atKept(t.mask, r, c) {
				continue
			}
			var dot float32
			for k := 0; k < d; k++ {
				dot += float32(q[r*d+k] * t.kt[k*TK+c])
			}
			sc[c] = dot
			mx = max(mx, dot)
		}
		mnew := max(st.m[r], mx)
		if math.IsInf(float64(mnew), -1) {
			continue
		}
		var alpha float32
		if !math.IsInf(float64(st.m[r]), -1) {
			alpha = float32(math.Exp2(float64(st.m[r] - mnew)))
		}
		st.l[r] *= alpha
		for j := 0; j < d; j++ {
			st.o[r*d+j] *= alpha
		}
		for c := 0; c < TK; c++ {
			if math.IsInf(float64(sc[c]), -1) {
				continue
			}
			p := float32(math.Exp2(float64(sc[c] - mnew)))
			st.l[r] += p
			for j := 0; j < d; j++ {
				st.o[r*d+j] += float32(p * t.v[c*d+j])
			}
		}
		st.m[r] = mnew
	}
}

// atErr measures a float32 state against the reference: o relative to
// sum p|v|, l relative, m absolute (log2 units). Rows the reference never
// touched must be bit-for-bit what they were; NaN anywhere is an error.
func (ref *atRef) errs(st *atState) (eo, el, em float64, err error) {
	d := ref.d
	for r := 0; r < TQ; r++ {
		if !ref.touched[r] {
			for j := 0; j < d; j++ {
				if math.Float32bits(st.o[r*d+j]) != math.Float32bits(ref.initO[r*d+j]) {
					return 0, 0, 0, fmt.Errorf("untouched row %d: o[%d] = %v, was %v", r, j, st.o[r*d+j], ref.initO[r*d+j])
				}
			}
			if math.Float32bits(st.m[r]) != math.Float32bits(ref.initM[r]) || math.Float32bits(st.l[r]) != math.Float32bits(ref.initL[r]) {
				return 0, 0, 0, fmt.Errorf("untouched row %d: m, l = %v, %v, was %v, %v", r, st.m[r], st.l[r], ref.initM[r], ref.initL[r])
			}
			continue
		}
		if math.IsNaN(float64(st.m[r])) || math.IsNaN(float64(st.l[r])) {
			return 0, 0, 0, fmt.Errorf("row %d: m, l = %v, %v", r, st.m[r], st.l[r])
		}
		em = math.Max(em, math.Abs(float64(st.m[r])-ref.m[r]))
		el = math.Max(el, math.Abs(float64(st.l[r])-ref.l[r])/ref.l[r])
		for j := 0; j < d; j++ {
			x := float64(st.o[r*d+j])
			if math.IsNaN(x) {
				return 0, 0, 0, fmt.Errorf("row %d: o[%d] is NaN", r, j)
			}
			eo = math.Max(eo, math.Abs(x-ref.o[r*d+j])/math.Max(ref.oabs[r*d+j], 1e-300))
		}
	}
	return eo, el, em, nil
}

// atUnkept checks that the rows a tile's mask keeps nothing of (word 0)
// are bit for bit what they were, whether touched before or not.
func atUnkept(before, after *atState, mask []uint64, d int) error {
	if mask == nil {
		return nil
	}
	for r := 0; r < TQ; r++ {
		if mask[r] != 0 {
			continue
		}
		for j := 0; j < d; j++ {
			if math.Float32bits(after.o[r*d+j]) != math.Float32bits(before.o[r*d+j]) {
				return fmt.Errorf("row %d keeps no key: o[%d] = %v, was %v", r, j, after.o[r*d+j], before.o[r*d+j])
			}
		}
		if math.Float32bits(after.m[r]) != math.Float32bits(before.m[r]) || math.Float32bits(after.l[r]) != math.Float32bits(before.l[r]) {
			return fmt.Errorf("row %d keeps no key: m, l = %v, %v, was %v, %v", r, after.m[r], after.l[r], before.m[r], before.l[r])
		}
	}
	return nil
}

// atGen makes inputs. grid: exact scores (q = a/8 * scale, kt = b/8);
// otherwise Gaussian with scores of standard deviation about sd.
type atGen struct {
	rng   *rand.Rand
	d     int
	grid  bool
	scale float32 // grid: power of two multiplying q
	sd    float64 // Gaussian: score standard deviation
}

func (g *atGen) q() []float32 {
	q := atFloats(TQ * g.d)
	for i := range q {
		if g.grid {
			q[i] = float32(g.rng.IntN(33)-16) / 8 * g.scale
		} else {
			q[i] = float32(g.rng.NormFloat64() * g.sd / math.Sqrt(float64(g.d)))
		}
	}
	return q
}

// tile makes a key tile; maskKind: "full" (nil), "partial" (random bits,
// some rows empty), "empty" (all rows empty) or "dense" (random bits, no
// empty rows).
func (g *atGen) tile(maskKind string) *atTile {
	t := &atTile{kt: atFloats(g.d * TK), v: atFloats(TK * g.d)}
	for i := range t.kt {
		if g.grid {
			t.kt[i] = float32(g.rng.IntN(17)-8) / 8
		} else {
			t.kt[i] = float32(g.rng.NormFloat64())
		}
	}
	for i := range t.v {
		t.v[i] = float32(g.rng.Float64()*2 - 1)
	}
	switch maskKind {
	case "full":
	case "empty":
		t.mask = make([]uint64, TQ)
	case "partial", "dense":
		t.mask = make([]uint64, TQ)
		for r := range t.mask {
			t.mask[r] = g.rng.Uint64() & g.rng.Uint64() // about a quarter kept
			if r%5 == 0 {
				t.mask[r] = g.rng.Uint64()
			}
			if maskKind == "partial" && r%7 == 3 {
				t.mask[r] = 0
			}
			if maskKind == "dense" && t.mask[r] == 0 {
				t.mask[r] = 1 << uint(r)
			}
		}
		if maskKind == "partial" {
			t.mask[TQ-1] = 1 << 63 // one key only, the last column
			t.mask[TQ-2] = 1       // one key only, the first column
		}
	case "zeroblocks", "zerochunks", "single", "blockdiag", "blockdiag8", "causal", "bottom":
		t.mask = sparseMask(g.rng, maskKind)
	default:
		panic(maskKind)
	}
	return t
}

// sparseMask makes the masks that let the kernels skip work: whole row
// blocks (6 rows for AVX-512, 3 for AVX2) keeping nothing, columns no row of
// a block keeps, and narrow key ranges.
//
//	zeroblocks  random bits, but rows 0-5, 18-20, 30-35 and 45-47 keep nothing
//	zerochunks  random bits in columns 16-31 and 40-47 only, some rows empty
//	single      one random key per row, every fourth row empty
//	blockdiag   rows 12i..12i+11 keep columns 16i..16i+15
//	blockdiag8  rows 6i..6i+5 keep columns 8i+4..8i+11 (i < 7)
//	causal      row r keeps columns c <= r - 20 (the diagonal of a tile)
//	bottom      rows 0-15 keep columns c <= r + 48, rows 16-47 nothing (block 256:
//	            query rows 240-287 against keys 192-255)
func sparseMask(rng *rand.Rand, kind string) []uint64 {
	mask := make([]uint64, TQ)
	for r := range mask {
		switch kind {
		case "zeroblocks":
			if !(r < 6 || r >= 18 && r < 21 || r >= 30 && r < 36 || r >= 45) {
				mask[r] = rng.Uint64() & rng.Uint64()
			}
		case "zerochunks":
			if r%5 != 2 {
				mask[r] = rng.Uint64() & (0xffff<<16 | 0xff<<40)
			}
		case "single":
			if r%4 != 1 {
				mask[r] = 1 << rng.IntN(TK)
			}
		case "blockdiag":
			mask[r] = 0xffff << (16 * (r / 12))
		case "blockdiag8":
			if r/6 < 7 {
				mask[r] = 0xff << (8*(r/6) + 4)
			}
		case "causal":
			if r >= 20 {
				mask[r] = ^uint64(0) >> (TK - 1 - (r - 20))
			}
		case "bottom":
			if r < 16 {
				mask[r] = ^uint64(0) >> (TK - 1 - (r + 48))
			}
		}
	}
	return mask
}

// poisonUntouched fills o of rows with m = -Inf with arbitrary non-zero
// values: the kernel must leave them exactly as they are while no key has
// been kept, and then scale them by alpha = 0.
func poisonUntouched(st *atState, d int, rng *rand.Rand) {
	for r := 0; r < TQ; r++ {
		if math.IsInf(float64(st.m[r]), -1) {
			for j := 0; j < d; j++ {
				st.o[r*d+j] = float32(rng.Float64() + 0.5)
			}
		}
	}
}

// atScenario runs a sequence of tiles on one query tile and checks the
// state after every tile.
func atScenario(t *testing.T, v atVariant, g *atGen, masks []string, prior bool) {
	t.Helper()
	q := g.q()
	st := newAtState(v.d)
	if prior {
		// Prior state from a first tile, computed by the reference and
		// rounded; rows 0-5 stay at the initial state.
		pre := g.tile("full")
		ref := newAtRef(st, v.d)
		ref.step(q, pre)
		for r := 6; r < TQ; r++ {
			st.m[r] = float32(ref.m[r])
			st.l[r] = float32(ref.l[r])
			for j := 0; j < v.d; j++ {
				st.o[r*v.d+j] = float32(ref.o[r*v.d+j])
			}
		}
	}
	poisonUntouched(st, v.d, g.rng)
	ref := newAtRef(st, v.d)
	f32 := st.clone()
	for i, mk := range masks {
		tile := g.tile(mk)
		before := st.clone()
		st.run(v.fn, q, tile)
		if err := atUnkept(before, st, tile.mask, v.d); err != nil {
			t.Fatalf("tile %d (%s): %v", i, mk, err)
		}
		ref.step(q, tile)
		atStepF32(f32, v.d, q, tile)
		eo, el, em, err := ref.errs(st)
		if err != nil {
			t.Fatalf("tile %d (%s): %v", i, mk, err)
		}
		if g.grid {
			if em != 0 || el > atTol || eo > atTol {
				t.Fatalf("tile %d (%s): errors m %.3g (want 0), l %.3g, o %.3g (want <= %g)", i, mk, em, el, eo, atTol)
			}
			continue
		}
		fo, fl, fm, err := ref.errs(f32)
		if err != nil {
			t.Fatalf("tile %d (%s): float32 yardstick: %v", i, mk, err)
		}
		// A score error delta moves p by ln2*delta relatively, so o and l
		// are judged against the larger of the yardstick's own error and
		// ln2 times its score error (noisy when few keys dominate a row).
		fs := math.Ln2 * fm
		if eo > 4*max(fo, fs)+1e-6 || el > 4*max(fl, fs)+1e-6 || em > 4*fm+1e-6 {
			t.Fatalf("tile %d (%s): errors o %.3g l %.3g m %.3g; straightforward float32: %.3g %.3g %.3g", i, mk, eo, el, em, fo, fl, fm)
		}
	}
}

func TestTileAsm(t *testing.T) {
	cases := []struct {
		name  string
		grid  bool
		scale float32
		sd    float64
		masks []string
		prior bool
	}{
		{"full", true, 1, 0, []string{"full"}, false},
		{"partial", true, 1, 0, []string{"partial"}, false},
		{"empty-fresh", true, 1, 0, []string{"empty", "empty"}, false},
		{"empty-prior", true, 1, 0, []string{"empty"}, true},
		{"partial-prior", true, 1, 0, []string{"partial", "dense"}, true},
		{"successive", true, 1, 0, []string{"partial", "full", "dense", "empty", "full", "partial"}, false},
		{"large", true, 8, 0, []string{"full", "partial", "full", "dense"}, false},
		{"large-prior", true, 8, 0, []string{"partial", "empty", "full"}, true},
		{"gaussian", false, 0, 6, []string{"full", "partial", "full", "dense"}, false},
		{"gaussian-large", false, 0, 60, []string{"partial", "full", "dense", "full"}, true},
		{"sparse", true, 1, 0, []string{"zeroblocks", "zerochunks", "single", "blockdiag", "blockdiag8", "causal", "bottom"}, false},
		{"sparse-prior", true, 1, 0, []string{"bottom", "zerochunks", "causal", "single", "zeroblocks", "blockdiag8", "blockdiag"}, true},
		{"sparse-mixed", true, 8, 0, []string{"single", "full", "zeroblocks", "partial", "bottom", "full", "zerochunks"}, false},
		{"sparse-gaussian", false, 0, 6, []string{"blockdiag", "causal", "full", "zerochunks", "zeroblocks", "single"}, true},
	}
	for _, v := range atVariants() {
		t.Run(v.name, func(t *testing.T) {
			if !v.ok {
				t.Skipf("CPU lacks the instructions of %s", v.name)
			}
			for ci, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					for seed := uint64(0); seed < 3; seed++ {
						g := &atGen{rng: rand.New(rand.NewPCG(seed, uint64(ci))), d: v.d, grid: c.grid, scale: c.scale, sd: c.sd}
						atScenario(t, v, g, c.masks, c.prior)
					}
				})
			}
		})
	}
}

// TestTileAsmLargeScores checks that scores of magnitude up to about 100
// in log2 units and the resulting underflowing exponentials give no NaN or
// Inf, using exact scores and the strict tolerance.
func TestTileAsmLargeScores(t *testing.T) {
	for _, v := range atVariants() {
		t.Run(v.name, func(t *testing.T) {
			if !v.ok {
				t.Skipf("CPU lacks the instructions of %s", v.name)
			}
			g := &atGen{rng: rand.New(rand.NewPCG(7, 7)), d: v.d, grid: true, scale: 1}
			q := g.q()
			// Rows alternate between scores near +100 and near -100.
			for r := 0; r < TQ; r++ {
				for k := 0; k < v.d; k++ {
					q[r*v.d+k] = 0
				}
				sign := float32(1)
				if r%2 == 1 {
					sign = -1
				}
				q[r*v.d+r%v.d] = sign * 96
			}
			st := newAtState(v.d)
			ref := newAtRef(st, v.d)
			for i, mk := range []string{"full", "partial", "full"} {
				tile := g.tile(mk)
				for c := 0; c < TK; c++ { // one large key column
					for k := 0; k < v.d; k++ {
						if c%3 == 0 {
							tile.kt[k*TK+c] = 1
						}
					}
				}
				st.run(v.fn, q, tile)
				ref.step(q, tile)
				eo, el, em, err := ref.errs(st)
				if err != nil {
					t.Fatalf("tile %d: %v", i, err)
				}
				if em != 0 || el > atTol || eo > atTol {
					t.Fatalf("tile %d: errors m %.3g l %.3g o %.3g", i, em, el, eo)
				}
				for r := 0; r < TQ; r++ {
					if x := st.l[r]; math.IsInf(float64(x), 0) || math.IsNaN(float64(x)) {
						t.Fatalf("tile %d row %d: l = %v", i, r, x)
					}
				}
			}
		})
	}
}

// TestTileAsmExp2 looks inside: after a call s holds p = 2^(score - mnew)
// (0 for masked keys and for rows skipped as empty), so the accuracy of the
// kernel's exp2 can be read off directly. With exact scores the relative
// error must stay below 1.5e-7 (the polynomial's float32 evaluation reaches
// 7.9e-8); results below 2^-125 may be flushed to zero (the kernels never
// compute subnormals: they cost microcode assists on Intel cores).
func TestTileAsmExp2(t *testing.T) {
	for _, v := range atVariants() {
		t.Run(v.name, func(t *testing.T) {
			if !v.ok {
				t.Skipf("CPU lacks the instructions of %s", v.name)
			}
			worst := 0.0
			for seed := uint64(0); seed < 4; seed++ {
				g := &atGen{rng: rand.New(rand.NewPCG(seed, 99)), d: v.d, grid: true, scale: float32(int(1) << (2 * seed))}
				q := g.q()
				st := newAtState(v.d)
				tile := g.tile("partial")
				st.run(v.fn, q, tile)
				for r := 0; r < TQ; r++ {
					var dots [TK]float64
					mnew := math.Inf(-1)
					for c := 0; c < TK; c++ {
						dots[c] = math.Inf(-1)
						if atKept(tile.mask, r, c) {
							dots[c] = 0
							for k := 0; k < v.d; k++ {
								dots[c] += float64(q[r*v.d+k]) * float64(tile.kt[k*TK+c])
							}
							mnew = math.Max(mnew, dots[c])
						}
					}
					for c := 0; c < TK; c++ {
						got := float64(st.s[r*TK+c])
						want := 0.0
						if !math.IsInf(dots[c], -1) {
							want = math.Exp2(dots[c] - mnew)
						}
						if want == 0 {
							if got != 0 || math.Signbit(got) {
								t.Fatalf("seed %d row %d col %d: p = %v, want +0", seed, r, c, got)
							}
							continue
						}
						e := math.Abs(got - want)
						if want < 0x1p-125 {
							if e > 0x1p-125 {
								t.Fatalf("seed %d row %d col %d: p = %v, want %v", seed, r, c, got, want)
							}
							continue
						}
						worst = math.Max(worst, e/want)
					}
				}
			}
			if worst > 1.5e-7 {
				t.Fatalf("exp2 relative error %.3g, want <= 1.5e-7", worst)
			}
			t.Logf("exp2 worst relative error %.3g", worst)
		})
	}
}
