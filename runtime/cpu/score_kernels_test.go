package cpu

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

// TestTanhKernels measures each variant's vector tanh (the score stage's,
// run alone by the kernels' tanh field) as TestTanh32 measures tanh32: a
// dense sweep of both signs and Gaussian values within 2.5 ulp of
// math.Tanh, and the special values exact (0 and -0 with their sign, +-1
// at +-Inf and +-60, NaN for NaN).
func TestTanhKernels(t *testing.T) {
	eachKernels(t, func(k *kernels) bool { return k.tanh != nil }, func(t *testing.T, k *kernels) {
		negZero, inf := float32(math.Copysign(0, -1)), float32(math.Inf(1))
		exact := []struct{ x, want float32 }{{0, 0}, {negZero, negZero}, {inf, 1}, {-inf, -1}, {60, 1}, {-60, -1}}
		xs := []float32{float32(math.NaN()), -float32(math.NaN())}
		for _, c := range exact {
			xs = append(xs, c.x)
		}
		nSpecial := len(xs)
		// Around the threshold between the halves and where e underflows.
		for _, x := range []float32{tanhSmall, 44} {
			for i, y := 0, x; i < 64; i++ {
				xs = append(xs, y, -y)
				y = math.Nextafter32(y, 0)
			}
		}
		for x := float32(1e-30); x < 50; x = x*1.0001 + 1e-38 {
			xs = append(xs, x, -x)
		}
		r := rand.New(rand.NewPCG(1, 1))
		for n := 0; n < 1<<20; n++ {
			xs = append(xs, float32(r.NormFloat64()*3))
		}
		xs = xs[:len(xs)/k.lanes*k.lanes]
		ys := make([]float32, len(xs))
		k.tanh(&ys[0], &xs[0], len(xs))
		for i := 0; i < 2; i++ {
			if ys[i] == ys[i] {
				t.Errorf("tanh(%g) = %g, want NaN", xs[i], ys[i])
			}
		}
		for i, c := range exact {
			if got := ys[2+i]; math.Float32bits(got) != math.Float32bits(c.want) {
				t.Errorf("tanh(%g) = %g, want %g", c.x, got, c.want)
			}
		}
		worst, at := 0.0, float32(0)
		for i, x := range xs[nSpecial:] {
			if e := ulpErr(ys[nSpecial+i], math.Tanh(float64(x))); e > worst {
				worst, at = e, x
			}
		}
		t.Logf("worst %.2f ulp at %g over %d values", worst, at, len(xs))
		if worst > 2.5 {
			t.Errorf("%.2f ulp at %g, want at most 2.5", worst, at)
		}
	})
}

// The score kernels (tileScore, decodeScore) are checked against atRef
// with the score stage in float64 (scoreRef: cap*tanh(s*invCap) with the
// scoreTile's float32 cap and invCap, then slope*d with d exact). The
// kernels compute it in float32, so each modified score may be off by
// scoreErr: the tanh (2.5 ulp, TestTanhKernels), the roundings of
// s*invCap and of the product by cap, the conversion of d and the
// multiply-add, each bounded with a factor 2 to spare. A row's maximum is
// then within the largest bound B over its kept keys, and each p within a
// factor 2^(b + B), so o and l are held to atTol + e^(2 Bc) - 1 (about
// atTol + 2 Bc), Bc the largest B of the row over the tiles so far (alpha
// carries the earlier ones). With Gaussian inputs the scores themselves are rounded: there
// tileScoreGo is the yardstick, as atStepF32 is in TestTileAsm, and the
// kernel may add 4 times its error. Rows at distances of 2^30 get bounds
// of about 2^7 and are checked for NaN and untouched state only; the
// distances that decide the test are the small ones on top of large
// positions, where a rounding of the positions before the subtraction
// would show.

// scoreFlagSets are the combinations of flags every test runs.
var scoreFlagSets = []uint32{scoreCap, scoreAlibi, scoreAlibi | scoreAbs, scoreCap | scoreAlibi, scoreCap | scoreAlibi | scoreAbs}

// scoreRef is the score stage in float64.
func scoreRef(sc *scoreTile, r, c int, s float64) float64 {
	if sc.flags&scoreCap != 0 {
		s = float64(sc.cap) * math.Tanh(s*float64(sc.invCap))
	}
	if sc.flags&scoreAlibi != 0 {
		d := float64(sc.cols[c]) - float64(sc.rows[r])
		if sc.flags&scoreAbs != 0 {
			s -= float64(sc.slope[r]) * math.Abs(d)
		} else {
			s += float64(sc.slope[r]) * d
		}
	}
	return s
}

// scoreErr bounds the float32 kernels' error in the score stage of one
// score s (exact).
func scoreErr(sc *scoreTile, r, c int, s float64) float64 {
	const u = 0x1p-24
	b := 0.0
	if sc.flags&scoreCap != 0 {
		t := math.Abs(math.Tanh(s * float64(sc.invCap)))
		b = 2 * float64(sc.cap) * (t*(2.5*2*u+3*u) + 0x1p-126)
	}
	if sc.flags&scoreAlibi != 0 {
		d := math.Abs(float64(sc.cols[c]) - float64(sc.rows[r]))
		b += 2 * (float64(sc.slope[r])*d + math.Abs(scoreRef(sc, r, c, s))) * 2 * u
	}
	return b
}

// scoreBounds returns, for each row, the largest scoreErr over the keys
// the row keeps in tile t.
func scoreBounds(q []float32, t *atTile, d int, sc *scoreTile) (b [TQ]float64) {
	for r := 0; r < TQ; r++ {
		for c := 0; c < TK; c++ {
			if !atKept(t.mask, r, c) {
				continue
			}
			dot := 0.0
			for k := 0; k < d; k++ {
				dot += float64(q[r*d+k]) * float64(t.kt[k*TK+c])
			}
			b[r] = math.Max(b[r], scoreErr(sc, r, c, dot))
		}
	}
	return b
}

// rowErrs is atRef.errs row by row.
func (ref *atRef) rowErrs(st *atState) (eo, el, em [TQ]float64, err error) {
	d := ref.d
	for r := 0; r < TQ; r++ {
		if !ref.touched[r] {
			for j := 0; j < d; j++ {
				if math.Float32bits(st.o[r*d+j]) != math.Float32bits(ref.initO[r*d+j]) {
					return eo, el, em, fmt.Errorf("untouched row %d: o[%d] = %v, was %v", r, j, st.o[r*d+j], ref.initO[r*d+j])
				}
			}
			if math.Float32bits(st.m[r]) != math.Float32bits(ref.initM[r]) || math.Float32bits(st.l[r]) != math.Float32bits(ref.initL[r]) {
				return eo, el, em, fmt.Errorf("untouched row %d: m, l = %v, %v, was %v, %v", r, st.m[r], st.l[r], ref.initM[r], ref.initL[r])
			}
			continue
		}
		if math.IsNaN(float64(st.m[r])) || math.IsNaN(float64(st.l[r])) || math.IsInf(float64(st.l[r]), 0) {
			return eo, el, em, fmt.Errorf("row %d: m, l = %v, %v", r, st.m[r], st.l[r])
		}
		em[r] = math.Abs(float64(st.m[r]) - ref.m[r])
		el[r] = math.Abs(float64(st.l[r])-ref.l[r]) / ref.l[r]
		for j := 0; j < d; j++ {
			x := float64(st.o[r*d+j])
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return eo, el, em, fmt.Errorf("row %d: o[%d] = %v", r, j, x)
			}
			eo[r] = math.Max(eo[r], math.Abs(x-ref.o[r*d+j])/math.Max(ref.oabs[r*d+j], 1e-300))
		}
	}
	return eo, el, em, nil
}

// newScoreTile makes the score parameters of one query tile: flags, a cap
// between 2 and 80 and slopes between 0.001 and 1 (log-uniform, log2
// units), and the rows' positions: consecutive from a base within 2^29 of
// 0, or scattered.
func newScoreTile(rng *rand.Rand, flags uint32) *scoreTile {
	sc := &scoreTile{flags: flags}
	sc.cap = float32(2 * math.Pow(40, rng.Float64()))
	sc.invCap = 1 / sc.cap
	base := int32(rng.Int64N(1<<30) - 1<<29)
	scatter := rng.IntN(4) == 0
	for r := range sc.slope {
		sc.slope[r] = float32(0.001 * math.Pow(1000, rng.Float64()))
		sc.rows[r] = base + int32(r)
		if scatter {
			sc.rows[r] = base + int32(rng.IntN(1000)-500)
		}
	}
	return sc
}

// setCols sets the key positions of a key tile: near the rows (distances
// within a few hundred, both signs), far from them (up to 2^30 away) or
// scattered over 2^31; the padding after them gets random values, which
// no kernel may use.
func setCols(rng *rand.Rand, sc *scoreTile) {
	base := sc.rows[0]
	switch rng.IntN(4) {
	case 0, 1: // near: the distances that decide the test
		base += int32(rng.IntN(400) - 200)
		for c := 0; c < TK; c++ {
			sc.cols[c] = base + int32(c)
		}
	case 2: // far
		base += int32(rng.Int64N(1<<31) - 1<<30)
		for c := 0; c < TK; c++ {
			sc.cols[c] = base + int32(c)
		}
	default: // scattered, independent of the rows
		for c := 0; c < TK; c++ {
			sc.cols[c] = int32(rng.Int64N(1<<31) - 1<<30)
		}
	}
	if rng.IntN(3) == 0 { // in no particular order
		rng.Shuffle(TK, func(i, j int) { sc.cols[i], sc.cols[j] = sc.cols[j], sc.cols[i] })
	}
	// The padding: int32 bits of NaN and random positions.
	p := (*[TK + 16]int32)(unsafe.Pointer(&sc.cols))
	for c := TK; c < len(p); c++ {
		p[c] = int32(rng.Uint32())
	}
}

// poisonMasked writes NaN and infinities into what a tile's mask lets no
// kernel use: the kt columns of the keys no row keeps, and the v rows of
// the keys outside the whole multiples of 4 keys around every kept key
// (emit/avo's tile kernels run P V over the keys from a row block's first
// kept key to its last, in steps of 4). With wholePV (pvWholeBlocks) v is
// poisoned only in a tile that keeps no key.
func poisonMasked(rng *rand.Rand, t *atTile, d int, wholePV bool) {
	if t.mask == nil {
		return
	}
	var all uint64
	for _, w := range t.mask {
		all |= w
	}
	bad := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	lo, hi := TK, 0
	if all != 0 {
		lo = bits.TrailingZeros64(all) &^ 3
		hi = (TK - bits.LeadingZeros64(all) + 3) &^ 3
		if wholePV {
			lo, hi = 0, TK
		}
	}
	for c := 0; c < TK; c++ {
		if all>>uint(c)&1 == 0 {
			x := bad[rng.IntN(len(bad))]
			for k := 0; k < d; k++ {
				t.kt[k*TK+c] = x
			}
		}
		if c < lo || c >= hi {
			for k := 0; k < d; k++ {
				t.v[c*d+k] = bad[rng.IntN(len(bad))]
			}
		}
	}
}

// pvWholeBlocks reports whether kern's masked tile kernels run P V over
// every key of a row block that keeps one (NEON's, emit/neon) rather than
// over the kept keys' range (emit/avo's): they multiply the p = 0 of the
// keys outside it by their value rows, which the tile ABI allows (the
// driver zeroes non-finite value rows first), so no value row of a tile
// that keeps a key may be poisoned for them.
func pvWholeBlocks(kern *kernels) bool {
	k, ok := kernelsOf(NEON)
	return ok && k == kern
}

// scoreCase is one sequence of tiles for the score kernels.
type scoreCase struct {
	name  string
	grid  bool
	scale float32
	sd    float64
	masks []string // tile masks (atGen.tile); "rows" for a decode step of n rows
	prior bool
}

// scoreRunner runs one tile of a sequence through the kernel under test.
type scoreRunner func(q []float32, t *atTile, st *atState, sc *scoreTile)

// scoreScenario runs c's tiles with the score parameters sc (new key
// positions for each tile) through run, and checks the state after each
// against the reference and the bounds above; n is the rows a decode step
// runs (mask kind "rows"); prep, if not nil, changes each tile first (to
// what a 16-bit decode kernel reads); wholePV is poisonMasked's.
func scoreScenario(t *testing.T, g *atGen, c scoreCase, sc *scoreTile, n int, prep func(*atTile), wholePV bool, run scoreRunner) {
	t.Helper()
	d := g.d
	q := g.q()
	st := newAtState(d)
	if c.prior {
		pre := g.tile("full")
		ref := newAtRef(st, d)
		ref.step(q, pre)
		for r := 6; r < TQ; r++ {
			st.m[r], st.l[r] = float32(ref.m[r]), float32(ref.l[r])
			for j := 0; j < d; j++ {
				st.o[r*d+j] = float32(ref.o[r*d+j])
			}
		}
	}
	poisonUntouched(st, d, g.rng)
	ref := newAtRef(st, d)
	ref.score = func(r, c int, s float64) float64 { return scoreRef(sc, r, c, s) }
	yard := st.clone()
	var bc [TQ]float64
	for i, mk := range c.masks {
		var tile *atTile
		if mk == "rows" {
			tile = g.tile("full")
			tile.mask = make([]uint64, TQ)
			for r := 0; r < n; r++ {
				tile.mask[r] = ^uint64(0)
			}
		} else {
			tile = g.tile(mk)
		}
		if prep != nil {
			prep(tile)
		}
		setCols(g.rng, sc)
		b := scoreBounds(q, tile, d, sc)
		for r := range bc {
			bc[r] = math.Max(bc[r], b[r])
		}
		if !c.grid {
			tileScoreGo(q, tile.kt, tile.v, yard.s, yard.o, yard.m, yard.l, tile.mask, square(d), sc)
		}
		if mk != "rows" {
			poisonMasked(g.rng, tile, d, wholePV)
		}
		before := st.clone()
		for j := range st.s {
			st.s[j] = float32(math.NaN())
		}
		run(q, tile, st, sc)
		if err := atUnkept(before, st, tile.mask, d); err != nil {
			t.Fatalf("tile %d (%s): %v", i, mk, err)
		}
		ref.step(q, tile)
		eo, el, em, err := ref.rowErrs(st)
		if err != nil {
			t.Fatalf("tile %d (%s): %v", i, mk, err)
		}
		var yo, ym float64 // the yardstick's errors (Gaussian scores)
		if !c.grid {
			fo, fl, fm, err := ref.rowErrs(yard)
			if err != nil {
				t.Fatalf("tile %d (%s): tileScoreGo: %v", i, mk, err)
			}
			for r := range fo {
				yo = math.Max(yo, math.Max(fo[r], math.Max(fl[r], math.Ln2*fm[r])))
				ym = math.Max(ym, fm[r])
			}
			yo, ym = 4*yo+1e-6, 4*ym+1e-6
		}
		for r := 0; r < TQ; r++ {
			tol := atTol + math.Expm1(2*bc[r]) + yo
			if em[r] > bc[r]+ym || el[r] > tol || eo[r] > tol {
				t.Fatalf("tile %d (%s) row %d: errors m %.3g (bound %.3g), l %.3g, o %.3g (bound %.3g); row at %d, slope %g, cap %g",
					i, mk, r, em[r], bc[r]+ym, el[r], eo[r], tol, sc.rows[r], sc.slope[r], sc.cap)
			}
		}
	}
}

// TestTileScoreAsm checks every variant's tile kernel with the score
// stage (tileScore, PureGo's tileScoreGo included) for each combination of
// flags on sequences of full, partial, empty and sparse tiles, exact and
// Gaussian scores, with the masked keys' kt columns and v rows poisoned
// (the v rows a kernel may read, pvWholeBlocks, only where nothing is kept).
func TestTileScoreAsm(t *testing.T) {
	cases := []scoreCase{
		{"full", true, 1, 0, []string{"full", "full"}, false},
		{"partial", true, 1, 0, []string{"partial", "dense", "empty"}, false},
		{"successive", true, 1, 0, []string{"partial", "full", "dense", "empty", "full"}, true},
		{"large", true, 8, 0, []string{"full", "partial", "dense"}, false},
		{"sparse", true, 1, 0, []string{"zeroblocks", "zerochunks", "single", "blockdiag", "blockdiag8", "causal", "bottom"}, true},
		{"gaussian", false, 0, 6, []string{"full", "partial", "dense"}, false},
		{"gaussian-large", false, 0, 60, []string{"partial", "full", "causal"}, true},
	}
	eachKernels(t, func(k *kernels) bool { return k.tileScore != nil }, func(t *testing.T, kern *kernels) {
		for _, d := range squareTestDims(kern) {
			run := func(q []float32, tl *atTile, st *atState, sc *scoreTile) {
				kern.tileScore(q, tl.kt, tl.v, st.s, st.o, st.m, st.l, tl.mask, square(d), sc)
			}
			for ci, c := range cases {
				for _, flags := range scoreFlagSets {
					t.Run(fmt.Sprintf("D%d/%s/%d", d, c.name, flags), func(t *testing.T) {
						for seed := uint64(0); seed < 2; seed++ {
							rng := rand.New(rand.NewPCG(seed, uint64(ci*1000+int(flags)*10+d)))
							g := &atGen{rng: rng, d: d, grid: c.grid, scale: c.scale, sd: c.sd}
							scoreScenario(t, g, c, newScoreTile(rng, flags), TQ, nil, pvWholeBlocks(kern), run)
						}
					})
				}
			}
		}
	})
}

// TestDecodeScoreAsm checks each decode kernel with the score stage
// (every element type, head dimension and row count) the same way, on
// whole tiles of n rows.
func TestDecodeScoreAsm(t *testing.T) {
	cases := []scoreCase{
		{"one", true, 1, 0, []string{"rows"}, false},
		{"successive", true, 1, 0, []string{"rows", "rows", "rows"}, true},
		{"large", true, 8, 0, []string{"rows", "rows"}, false},
		{"gaussian", false, 0, 6, []string{"rows", "rows"}, true},
		{"gaussian-large", false, 0, 60, []string{"rows", "rows"}, false},
	}
	eachKernels(t, func(k *kernels) bool { return k.hasDecodeScore(square(64)) }, func(t *testing.T, kern *kernels) {
		for _, elem := range []Elem{F32, BF16, F16} {
			for _, d := range squareTestDims(kern) {
				for _, n := range []int{1, 2, 4, 8} {
					for ci, c := range cases {
						for _, flags := range scoreFlagSets {
							rng := rand.New(rand.NewPCG(uint64(elem), uint64(ci*100000+n*1000+d*10+int(flags))))
							g := &atGen{rng: rng, d: d, grid: c.grid, scale: c.scale, sd: c.sd}
							name := fmt.Sprintf("%s/D%d/R%d/%s/%d", elem, d, n, c.name, flags)
							t.Run(name, func(t *testing.T) {
								prep := func(tl *atTile) { roundTile16(tl, elem) }
								scoreScenario(t, g, c, newScoreTile(rng, flags), n, prep, false, func(q []float32, tl *atTile, st *atState, sc *scoreTile) {
									decodeAt(kern, g.rng, st, elem, d, n, q, tl, sc)
								})
							})
						}
					}
				}
			}
		}
	})
}

// TestScoreKernelsNoStage: flags that ask for no score stage (0, or
// scoreAbs without scoreAlibi) give the plain kernels' results bit for bit,
// and scoreCap|scoreAbs gives scoreCap's, in the full and the masked copy
// of the tile kernels and in every decode kernel.
func TestScoreKernelsNoStage(t *testing.T) {
	same := func(a, b *atState) bool {
		for _, p := range [][2][]float32{{a.o, b.o}, {a.m, b.m}, {a.l, b.l}} {
			for i := range p[0] {
				if math.Float32bits(p[0][i]) != math.Float32bits(p[1][i]) {
					return false
				}
			}
		}
		return true
	}
	cases := []struct{ flags, like uint32 }{{0, 0}, {scoreAbs, 0}, {scoreCap | scoreAbs, scoreCap}, {scoreAbs | 8, 0}}
	eachKernels(t, func(k *kernels) bool { return k.tileScore != nil && k.hasDecodeScore(square(64)) }, func(t *testing.T, kern *kernels) {
		rng := rand.New(rand.NewPCG(3, 3))
		for _, d := range squareTestDims(kern) {
			g := &atGen{rng: rng, d: d, sd: 6}
			q := g.q()
			for _, mk := range []string{"full", "partial"} {
				tile := g.tile(mk)
				for _, c := range cases {
					sc := newScoreTile(rng, c.flags)
					setCols(rng, sc)
					like := *sc
					like.flags = c.like
					a, b := newAtState(d), newAtState(d)
					kern.tileScore(q, tile.kt, tile.v, a.s, a.o, a.m, a.l, tile.mask, square(d), sc)
					if c.like == 0 {
						kern.tile(q, tile.kt, tile.v, b.s, b.o, b.m, b.l, tile.mask, square(d))
					} else {
						kern.tileScore(q, tile.kt, tile.v, b.s, b.o, b.m, b.l, tile.mask, square(d), &like)
					}
					if !same(a, b) {
						t.Errorf("D=%d %s tile, flags %#x: not flags %#x's results", d, mk, c.flags, c.like)
					}
				}
			}
			for _, elem := range []Elem{F32, BF16, F16} {
				for _, n := range []int{1, 2, 4, 8} {
					for _, c := range cases {
						sc := newScoreTile(rng, c.flags)
						setCols(rng, sc)
						like := *sc
						like.flags = c.like
						tile := g.tile("full")
						a, b := newAtState(d), newAtState(d)
						seed := rng.Uint64()
						decodeAt(kern, rand.New(rand.NewPCG(seed, 0)), a, elem, d, n, q, tile, sc)
						if c.like == 0 {
							decodeAt(kern, rand.New(rand.NewPCG(seed, 0)), b, elem, d, n, q, tile, nil)
						} else {
							decodeAt(kern, rand.New(rand.NewPCG(seed, 0)), b, elem, d, n, q, tile, &like)
						}
						if !same(a, b) {
							t.Errorf("%s D=%d rows %d, flags %#x: not flags %#x's results", elem, d, n, c.flags, c.like)
						}
					}
				}
			}
		}
	})
}

// TestScoreBwdKernels checks each variant's backward score kernel
// (scoreBwd) for every combination of flags against the float64 stage:
// s' = stage(c*S) within scoreErr plus the rounding of c*S, dt = 1 -
// tanh^2 within 2^-20 (dt = 0 and s' = +-cap for infinite S, dt = 0 and s'
// NaN for NaN), rows past rows and, without the cap, all of dt untouched.
func TestScoreBwdKernels(t *testing.T) {
	eachKernels(t, func(k *kernels) bool { return k.scoreBwd != nil }, func(t *testing.T, kern *kernels) {
		rng := rand.New(rand.NewPCG(5, 5))
		for _, flags := range append([]uint32{0}, scoreFlagSets...) {
			for _, rows := range []int{0, 1, 17, TQ} {
				for seed := 0; seed < 4; seed++ {
					sc := newScoreTile(rng, flags)
					setCols(rng, sc)
					c := float32(0.05 + 0.5*rng.Float64())
					s, dt := make([]float32, TQ*TK), make([]float32, TQ*TK)
					for i := range s {
						s[i] = float32(rng.NormFloat64() * float64(sc.cap) / float64(c))
						dt[i] = -7
					}
					s[3], s[TK+5], s[2*TK+7] = float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())
					in := append([]float32(nil), s...)
					if !kern.scoreBwdK(s, dt, rows, c, sc) {
						t.Fatal("no scoreBwd")
					}
					for r := 0; r < TQ; r++ {
						for col := 0; col < TK; col++ {
							i := r*TK + col
							x := float64(c * in[i]) // c*S, rounded as the kernel's product
							got, gd := float64(s[i]), float64(dt[i])
							if r >= rows {
								if math.Float32bits(s[i]) != math.Float32bits(in[i]) || gd != -7 {
									t.Fatalf("flags %d rows %d: row %d changed: s %v (was %v), dt %v", flags, rows, r, got, in[i], gd)
								}
								continue
							}
							if flags&scoreCap == 0 {
								if gd != -7 {
									t.Fatalf("flags %d: dt[%d] = %v written without the cap", flags, i, gd)
								}
							} else {
								th := math.Tanh(x * float64(sc.invCap))
								want := 1 - th*th
								if math.IsNaN(x) {
									want = 0
								}
								if !(math.Abs(gd-want) <= 0x1p-20 && gd >= 0 && gd <= 1) { // NaN fails
									t.Fatalf("flags %d r %d c %d: dt = %v, want %v (S = %v)", flags, r, col, gd, want, in[i])
								}
							}
							want := scoreRef(sc, r, col, x)
							if math.IsNaN(x) {
								if !math.IsNaN(got) {
									t.Fatalf("flags %d r %d c %d: s' = %v for NaN", flags, r, col, got)
								}
								continue
							}
							if math.IsInf(x, 0) && flags&scoreCap == 0 {
								if got != want {
									t.Fatalf("flags %d r %d c %d: s' = %v, want %v", flags, r, col, got, want)
								}
								continue
							}
							bound := scoreErr(sc, r, col, x)
							if !math.IsInf(x, 0) {
								bound += math.Abs(x) * 0x1p-23
							}
							if !(math.Abs(got-want) <= bound) {
								t.Fatalf("flags %d r %d c %d: s' = %v, want %v (bound %.3g)", flags, r, col, got, want, bound)
							}
						}
					}
				}
			}
		}
	})
}

// scoreBenchKinds are the score stages the benchmarks compare with the
// plain kernel.
var scoreBenchKinds = []struct {
	name  string
	flags uint32
}{{"cap", scoreCap}, {"alibi", scoreAlibi}, {"both", scoreCap | scoreAlibi}}

// benchScoreKinds times run(nil) (the plain kernel) and run(sc) for each
// of scoreBenchKinds in rounds, one batch of calls of each in turn, and
// reports the fastest batch of each, in ns per call (plain-ns, cap-ns, ...),
// and the overhead over the plain kernel in percent (cap-%, ...). Taking
// turns and the minimum keep the comparison fair on a busy machine.
func benchScoreKinds(b *testing.B, rng *rand.Rand, run func(sc *scoreTile)) {
	const batch = 64
	scs := []*scoreTile{nil}
	for _, k := range scoreBenchKinds {
		sc := newScoreTile(rng, k.flags)
		for j := range sc.cols {
			sc.cols[j] = sc.rows[0] - 100 + int32(j)
		}
		scs = append(scs, sc)
	}
	best := make([]time.Duration, len(scs))
	for i := range best {
		best[i] = time.Hour
	}
	for b.Loop() {
		for i, sc := range scs {
			t0 := time.Now()
			for j := 0; j < batch; j++ {
				run(sc)
			}
			best[i] = min(best[i], time.Since(t0))
		}
	}
	ns := func(i int) float64 { return float64(best[i].Nanoseconds()) / batch }
	b.ReportMetric(ns(0), "plain-ns")
	for i, k := range scoreBenchKinds {
		b.ReportMetric(ns(i+1), k.name+"-ns")
		b.ReportMetric(100*(ns(i+1)/ns(0)-1), k.name+"-%")
	}
}

// BenchmarkTileScore times each assembly variant's tile kernel on a full
// tile, plain (tile) and with the score stage (tileScore) for
// soft-capping, ALiBi and both (benchScoreKinds: ns per tile).
func BenchmarkTileScore(b *testing.B) {
	eachKernels(b, func(k *kernels) bool { return k.tileScore != nil && k != goKernels }, func(b *testing.B, kern *kernels) {
		for _, d := range []int{64, 128} {
			b.Run(fmt.Sprintf("D%d", d), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				g := &atGen{rng: rng, d: d, sd: 6}
				q, tile := g.q(), g.tile("full")
				st := newAtState(d)
				benchScoreKinds(b, rng, func(sc *scoreTile) {
					if sc == nil {
						kern.tile(q, tile.kt, tile.v, st.s, st.o, st.m, st.l, nil, square(d))
					} else {
						kern.tileScore(q, tile.kt, tile.v, st.s, st.o, st.m, st.l, nil, square(d), sc)
					}
				})
			})
		}
	})
}

// BenchmarkDecodeScoreKernel times the float32 decode kernels of D = 128
// with 1 and 4 rows on one key tile in cache (BenchmarkDecodeKernel's
// setting), plain and with the score stage (benchScoreKinds: ns per tile).
func BenchmarkDecodeScoreKernel(b *testing.B) {
	eachKernels(b, func(k *kernels) bool { return k.hasDecodeScore(square(64)) }, func(b *testing.B, kern *kernels) {
		const d = 128
		rng := rand.New(rand.NewPCG(1, 1))
		k, v, q := atFloats(TK*d), atFloats(TK*d), atFloats(TQ*d)
		for _, x := range [][]float32{k, v, q} {
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 0.1)
			}
		}
		var off decodeOffsets
		for j := range off {
			off[j] = 4 * (j % TK) * d
		}
		kb, vb := unsafe.Pointer(&k[0]), unsafe.Pointer(&v[0])
		for _, n := range []int{1, 4} {
			b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
				st := newAtState(d)
				benchScoreKinds(b, rng, func(sc *scoreTile) {
					if sc == nil {
						kern.decodeRun(F32, q, kb, vb, &off, st.o, st.m, st.l, n, square(d))
					} else {
						kern.decodeScoreRun(F32, q, kb, vb, &off, st.o, st.m, st.l, n, square(d), sc)
					}
				})
			})
		}
	})
}
