package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The helpers here carry a tg prefix: other test files of the package are
// written separately.

// tgU is the float32 unit roundoff, 2^-24.
const tgU = 0x1p-24

// tgBufs holds one tile's inputs and one set of rows' state, laid out as
// the ABI in doc.go says.
type tgBufs struct {
	d        int
	q, kt, v []float32
	s, o     []float32
	m, l     []float32
}

func newTGBufs(d int) *tgBufs {
	b := &tgBufs{
		d:  d,
		q:  make([]float32, TQ*d),
		kt: make([]float32, d*TK),
		v:  make([]float32, TK*d),
		s:  make([]float32, TQ*TK),
		o:  make([]float32, TQ*d),
		m:  make([]float32, TQ),
		l:  make([]float32, TQ),
	}
	for r := range b.m {
		b.m[r] = float32(math.Inf(-1))
	}
	return b
}

// poisonS fills the scratch with NaN, so that a kernel reading scratch it
// has not written shows up in the results.
func (b *tgBufs) poisonS() {
	nan := float32(math.NaN())
	for i := range b.s {
		b.s[i] = nan
	}
}

// fill draws new q, kt and v. Scores q·k have a standard deviation of
// qscale*kscale*sqrt(d); values are uniform in [-1, 1).
func (b *tgBufs) fill(rng *rand.Rand, qscale, kscale float32) {
	for i := range b.q {
		b.q[i] = qscale * float32(rng.NormFloat64())
	}
	for i := range b.kt {
		b.kt[i] = kscale * float32(rng.NormFloat64())
	}
	for i := range b.v {
		b.v[i] = 2*rng.Float32() - 1
	}
}

func (b *tgBufs) call(mask []uint64) {
	tileGo(b.q, b.kt, b.v, b.s, b.o, b.m, b.l, mask, square(b.d))
}

// tgRef is the float64 reference's online-softmax state for TQ rows, plus
// what the error bounds need.
type tgRef struct {
	d    int
	o    [][]float64
	m, l []float64
	// sabs is, per row, the largest sum_d |q_d k_d| over the kept scores
	// seen so far: the scale of the float32 rounding error of a score.
	sabs []float64
	// vmax is, per row, the largest |v| over the kept keys seen so far.
	vmax []float64
	// calls counts, per row, the calls that kept at least one key.
	calls []int
	// maxScore is the largest |score| seen, kept or not.
	maxScore float64
}

func newTGRef(d int) *tgRef {
	st := &tgRef{
		d: d, o: make([][]float64, TQ), m: make([]float64, TQ), l: make([]float64, TQ),
		sabs: make([]float64, TQ), vmax: make([]float64, TQ), calls: make([]int, TQ),
	}
	for r := range st.o {
		st.o[r] = make([]float64, d)
		st.m[r] = math.Inf(-1)
	}
	return st
}

// tgRefTile is the ABI of doc.go written as plainly as possible, in
// float64 from the float32 inputs.
func tgRefTile(b *tgBufs, mask []uint64, st *tgRef) {
	d := b.d
	for r := range TQ {
		keep := ^uint64(0)
		if mask != nil {
			keep = mask[r]
		}
		var sc [TK]float64
		mnew := st.m[r]
		for c := range TK {
			var dot, abs float64
			for i := range d {
				x := float64(b.q[r*d+i]) * float64(b.kt[i*TK+c])
				dot += x
				abs += math.Abs(x)
			}
			st.maxScore = math.Max(st.maxScore, math.Abs(dot))
			sc[c] = math.Inf(-1)
			if keep>>uint(c)&1 == 0 {
				continue
			}
			sc[c] = dot
			mnew = math.Max(mnew, dot)
			st.sabs[r] = math.Max(st.sabs[r], abs)
			for i := range d {
				st.vmax[r] = math.Max(st.vmax[r], math.Abs(float64(b.v[c*d+i])))
			}
		}
		if math.IsInf(mnew, -1) {
			continue // no key kept yet: untouched
		}
		if keep != 0 {
			st.calls[r]++
		}
		alpha := 0.0
		if !math.IsInf(st.m[r], -1) {
			alpha = math.Exp2(st.m[r] - mnew)
		}
		st.l[r] *= alpha
		for i := range d {
			st.o[r][i] *= alpha
		}
		for c := range TK {
			if keep>>uint(c)&1 == 0 {
				continue
			}
			p := math.Exp2(sc[c] - mnew)
			st.l[r] += p
			for i := range d {
				st.o[r][i] += p * float64(b.v[c*d+i])
			}
		}
		st.m[r] = mnew
	}
}

// tgErrs collects the worst errors of comparisons: absolute, as fractions
// of their bounds, and the output error relative to the largest |v|.
type tgErrs struct {
	out, m, lse    float64
	outR, mR, lseR float64
	outV           float64
}

func (e *tgErrs) merge(f tgErrs) {
	e.out, e.m, e.lse = max(e.out, f.out), max(e.m, f.m), max(e.lse, f.lse)
	e.outR, e.mR, e.lseR = max(e.outR, f.outR), max(e.mR, f.mR), max(e.lseR, f.lseR)
	e.outV = max(e.outV, f.outV)
}

func (e tgErrs) String() string {
	return fmt.Sprintf("o/l %.3g (%.3f of bound, %.2g of max|v|), m %.3g (%.3f), lse %.3g (%.3f)",
		e.out, e.outR, e.outV, e.m, e.mR, e.lse, e.lseR)
}

// tgCompare checks the kernel's state against the reference's, row by row,
// and returns the worst errors. Rows the reference has not touched must be
// exactly -Inf, 0 and zeros.
//
// The bounds are worst-case bounds from the float32 error analysis of the
// kernel, with u = 2^-24:
//
//   - A score is a float32 sum of d float32 products (d <= 128), so its
//     error is at most eps = d*u*sum_d|q_d k_d| (the standard dot-product
//     bound; sabs holds the largest such sum of the row). m is the maximum
//     of such scores, so it is within eps of the exact maximum.
//   - Moving every score by at most eps scales each weight 2^(s-m) by a
//     factor within 2^(±eps). out = o/l is the weighted mean of the kept v
//     rows, so it moves by at most (2^(2 eps)-1)*max|v - out| < 3*eps*vmax.
//   - In each call p and alpha get a relative error below 4e-7 each from
//     exp2, and l and o are float32 sums of at most 64 products plus the
//     rescaled old value (66 roundings of u); o and l both err, so o/l
//     gets twice the sum over n calls: 2n(2*4e-7 + 66u) relative, times
//     vmax. Rounding s-m before exp2 costs ln2*u*|s-m| on a weight 2^(s-m),
//     at most 23u of l in total per call, counted twice as well.
//   - lse = m + log2(l) moves by at most eps from the scores, plus the
//     relative error of l divided by ln 2.
//
// The measured errors are one to three orders of magnitude below these
// bounds (the tests log the fractions), so the bounds only catch real
// mistakes: a dropped or extra key, a wrong alpha, a wrong maximum.
// tgTight adds an empirical bound for moderate scores.
func tgCompare(t *testing.T, what string, b *tgBufs, st *tgRef) tgErrs {
	t.Helper()
	var es tgErrs
	d := b.d
	for r := range TQ {
		km, kl := float64(b.m[r]), float64(b.l[r])
		if math.IsInf(st.m[r], -1) {
			if !math.IsInf(km, -1) || math.Float32bits(b.l[r]) != 0 {
				t.Fatalf("%s: row %d kept nothing yet but m = %v, l = %v", what, r, km, kl)
			}
			for i := range d {
				if math.Float32bits(b.o[r*d+i]) != 0 {
					t.Fatalf("%s: row %d kept nothing yet but o[%d] = %v", what, r, i, b.o[r*d+i])
				}
			}
			continue
		}
		n := float64(max(st.calls[r], 1))
		eps := float64(d) * tgU * st.sabs[r]
		relL := n * (2*4e-7 + 66*tgU + 23*tgU)
		boundOut := (3*eps + 2*relL) * st.vmax[r]
		boundM := eps + tgU*math.Abs(st.m[r])
		boundLse := eps + relL/math.Ln2 + tgU*math.Abs(st.m[r])
		if !(kl > 0) || math.IsInf(kl, 0) {
			t.Fatalf("%s: row %d: l = %v", what, r, kl)
		}
		em := math.Abs(km - st.m[r])
		if !(em <= boundM) {
			t.Fatalf("%s: row %d: m = %v, want %v (error %g > %g)", what, r, km, st.m[r], em, boundM)
		}
		es.m, es.mR = max(es.m, em), max(es.mR, em/boundM)
		lse := km + math.Log2(kl)
		want := st.m[r] + math.Log2(st.l[r])
		el := math.Abs(lse - want)
		if !(el <= boundLse) {
			t.Fatalf("%s: row %d: lse = %v, want %v (error %g > %g)", what, r, lse, want, el, boundLse)
		}
		es.lse, es.lseR = max(es.lse, el), max(es.lseR, el/boundLse)
		for i := range d {
			got := float64(b.o[r*d+i]) / kl
			want := st.o[r][i] / st.l[r]
			e := math.Abs(got - want)
			if !(e <= boundOut) {
				t.Fatalf("%s: row %d col %d: o/l = %v, want %v (error %g > %g)", what, r, i, got, want, e, boundOut)
			}
			es.out, es.outR = max(es.out, e), max(es.outR, e/boundOut)
			es.outV = max(es.outV, e/st.vmax[r])
		}
	}
	return es
}

// tgTight is an empirical bound on o/l errors relative to max|v| when the
// scores are moderate (|s| below about 10): there they measure below 4e-7,
// a few ulp, so 2e-6 leaves a factor of five and still catches a loss of
// precision (the worst-case bound above is 1e-4 for these inputs).
const tgTight = 2e-6

// tgMaskKinds names the masks the tests draw.
var tgMaskKinds = []string{"full", "random", "sparse", "dense", "causal", "band", "emptyrows", "allempty", "onekey"}

// tgMask draws a mask of the given kind; nil is the full tile.
func tgMask(rng *rand.Rand, kind string) []uint64 {
	if kind == "full" {
		return nil
	}
	mk := make([]uint64, TQ)
	switch kind {
	case "random":
		for r := range mk {
			mk[r] = rng.Uint64()
		}
	case "sparse":
		for r := range mk {
			mk[r] = rng.Uint64() & rng.Uint64() & rng.Uint64()
		}
	case "dense":
		for r := range mk {
			mk[r] = ^(rng.Uint64() & rng.Uint64() & rng.Uint64())
		}
	case "causal":
		// Row r keeps keys c <= r + off: a diagonal tile, with some rows
		// keeping nothing or everything depending on off.
		off := rng.IntN(TK+TQ) - TQ
		for r := range mk {
			n := min(max(r+off+1, 0), TK)
			if n == TK {
				mk[r] = ^uint64(0)
			} else {
				mk[r] = 1<<uint(n) - 1
			}
		}
	case "band":
		w := 1 + rng.IntN(TK)
		off := rng.IntN(TK)
		for r := range mk {
			for c := range TK {
				if x := c - r - off + TK/2; x >= 0 && x < w {
					mk[r] |= 1 << uint(c)
				}
			}
		}
	case "emptyrows":
		for r := range mk {
			switch rng.IntN(3) {
			case 0:
				mk[r] = 0
			case 1:
				mk[r] = ^uint64(0)
			default:
				mk[r] = rng.Uint64()
			}
		}
	case "allempty":
	case "onekey":
		// One key per row, often the last or the first.
		for r := range mk {
			switch rng.IntN(3) {
			case 0:
				mk[r] = 1 << 63
			case 1:
				mk[r] = 1
			default:
				mk[r] = 1 << uint(rng.IntN(TK))
			}
		}
	default:
		panic(kind)
	}
	return mk
}

// tgRun runs ncalls successive tiles of random data and masks (drawn from
// kinds) through tileGo and the reference, with NaN in the scratch before
// every call, checking the state after every call; it returns the worst
// errors.
func tgRun(t *testing.T, seed uint64, d, ncalls int, qscale, kscale float32, kinds []string) (tgErrs, *tgRef) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(d)))
	b := newTGBufs(d)
	st := newTGRef(d)
	var es tgErrs
	for i := range ncalls {
		b.fill(rng, qscale, kscale)
		kind := kinds[rng.IntN(len(kinds))]
		mask := tgMask(rng, kind)
		what := fmt.Sprintf("seed %d D=%d call %d (%s)", seed, d, i, kind)
		oldM, oldL, oldO := slices.Clone(b.m), slices.Clone(b.l), slices.Clone(b.o)
		oldQ, oldKt, oldV := slices.Clone(b.q), slices.Clone(b.kt), slices.Clone(b.v)
		b.poisonS()
		b.call(mask)
		tgRefTile(b, mask, st)
		if !slices.Equal(oldQ, b.q) || !slices.Equal(oldKt, b.kt) || !slices.Equal(oldV, b.v) {
			t.Fatalf("%s: tileGo wrote to q, kt or v", what)
		}
		// Rows that keep nothing must not change at all, whatever their
		// state.
		for r := range TQ {
			if mask == nil || mask[r] != 0 {
				continue
			}
			if math.Float32bits(b.m[r]) != math.Float32bits(oldM[r]) || math.Float32bits(b.l[r]) != math.Float32bits(oldL[r]) {
				t.Fatalf("%s: row %d keeps nothing but m, l changed from %v, %v to %v, %v", what, r, oldM[r], oldL[r], b.m[r], b.l[r])
			}
			for j := range d {
				if math.Float32bits(b.o[r*d+j]) != math.Float32bits(oldO[r*d+j]) {
					t.Fatalf("%s: row %d keeps nothing but o[%d] changed from %v to %v", what, r, j, oldO[r*d+j], b.o[r*d+j])
				}
			}
		}
		es.merge(tgCompare(t, what, b, st))
	}
	return es, st
}

func TestTileGoFull(t *testing.T) {
	for _, d := range []int{64, 128} {
		for _, n := range []int{1, 6} {
			es, _ := tgRun(t, uint64(n), d, n, 0.3, 0.3, []string{"full"})
			t.Logf("D=%d %d full tile(s): %v", d, n, es)
			if es.outV > tgTight {
				t.Errorf("D=%d: o/l error %g of max|v|, want <= %g", d, es.outV, tgTight)
			}
		}
	}
}

func TestTileGoMasks(t *testing.T) {
	for _, d := range []int{64, 128} {
		for _, kind := range tgMaskKinds {
			var es tgErrs
			for seed := range uint64(4) {
				e, _ := tgRun(t, 100+seed, d, 4, 0.3, 0.3, []string{kind})
				es.merge(e)
			}
			t.Logf("D=%d %-9s %v", d, kind, es)
			if es.outV > tgTight {
				t.Errorf("D=%d %s: o/l error %g of max|v|, want <= %g", d, kind, es.outV, tgTight)
			}
		}
	}
}

// TestTileGoEmptyRows checks rows that keep nothing: with fresh state they
// stay exactly -Inf, 0 and zeros, also in row pairs whose other row keeps
// keys; with prior state they do not change at all.
func TestTileGoEmptyRows(t *testing.T) {
	for _, d := range []int{64, 128} {
		rng := rand.New(rand.NewPCG(7, uint64(d)))
		b := newTGBufs(d)
		st := newTGRef(d)
		// Rows 0-2 keep nothing in either call (row 1 with a neighbour
		// that keeps keys in the second); row 3 keeps keys only in the
		// second call; rows 4 and 47 only in the first; the rest keep a
		// random half plus one key, then everything.
		mk1 := make([]uint64, TQ)
		mk2 := make([]uint64, TQ)
		for r := range TQ {
			mk1[r] = rng.Uint64() | 1<<uint(r%TK)
			mk2[r] = ^uint64(0)
		}
		mk1[0], mk1[1], mk1[2], mk1[3] = 0, 0, 0, 0
		mk2[0], mk2[1], mk2[2] = 0, 0, 0
		mk2[4], mk2[47] = 0, 0
		for i, mask := range [][]uint64{mk1, mk2} {
			b.fill(rng, 0.3, 0.3)
			b.poisonS()
			m4, l4, o4 := b.m[4], b.l[4], slices.Clone(b.o[4*d:5*d])
			m47, l47, o47 := b.m[47], b.l[47], slices.Clone(b.o[47*d:48*d])
			b.call(mask)
			tgRefTile(b, mask, st)
			tgCompare(t, fmt.Sprintf("D=%d call %d", d, i), b, st)
			for r := range 3 {
				if !math.IsInf(float64(b.m[r]), -1) || math.Float32bits(b.l[r]) != 0 {
					t.Fatalf("D=%d call %d: empty row %d has m = %v, l = %v", d, i, r, b.m[r], b.l[r])
				}
			}
			if i == 0 && !math.IsInf(float64(b.m[3]), -1) {
				t.Fatalf("D=%d: row 3 kept nothing but has m = %v", d, b.m[3])
			}
			if i == 1 {
				if b.m[4] != m4 || b.l[4] != l4 || b.m[47] != m47 || b.l[47] != l47 {
					t.Fatalf("D=%d: rows 4 and 47 keep nothing but their m, l changed", d)
				}
				if !slices.Equal(b.o[4*d:5*d], o4) || !slices.Equal(b.o[47*d:48*d], o47) {
					t.Fatalf("D=%d: rows 4 and 47 keep nothing but their o changed", d)
				}
				if math.IsInf(float64(b.m[3]), -1) {
					t.Fatalf("D=%d: row 3 kept keys but has no state", d)
				}
			}
		}
	}
}

// TestTileGoLargeScores uses scores up to about ±100 (in log2 units): most
// 2^(s-m) underflow, alpha underflows when the maximum jumps, and exp2's
// flush of results below 2^-126 is exercised.
func TestTileGoLargeScores(t *testing.T) {
	for _, d := range []int{64, 128} {
		var es tgErrs
		// q·k has a standard deviation of sc*sc*sqrt(d) = 22; products of
		// normals have heavy tails, so the largest of a tile's 3072 scores
		// are beyond ±100.
		sc := float32(math.Sqrt(22 / math.Sqrt(float64(d))))
		big := 0.0
		for seed := range uint64(6) {
			e, st := tgRun(t, 200+seed, d, 5, sc, sc, tgMaskKinds)
			es.merge(e)
			big = max(big, st.maxScore)
		}
		t.Logf("D=%d scores up to |%.0f|: %v", d, big, es)
		if big < 100 {
			t.Errorf("D=%d: largest |score| %g, want beyond 100", d, big)
		}
	}
}

// TestTileGoSeeds runs many seeds, each a few successive tiles of random
// mask kinds, at score scales from tiny to large, checking every call.
func TestTileGoSeeds(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 12
	}
	scales := []float32{0.05, 0.3, 1, 2}
	for _, d := range []int{64, 128} {
		var es tgErrs
		for seed := range uint64(seeds) {
			sc := scales[seed%uint64(len(scales))]
			e, _ := tgRun(t, 1000+seed, d, 3, sc, sc, tgMaskKinds)
			es.merge(e)
		}
		t.Logf("D=%d %d seeds: %v", d, seeds, es)
	}
}

// TestTileGoMaxJump checks the rescaling when a later tile's maximum is far
// above the earlier ones (alpha underflows to 0) and far below them (every
// p underflows, alpha = 1).
func TestTileGoMaxJump(t *testing.T) {
	for _, d := range []int{64, 128} {
		rng := rand.New(rand.NewPCG(9, uint64(d)))
		b := newTGBufs(d)
		st := newTGRef(d)
		for i, sc := range []float32{0.1, 3, 0.1, 3, 3, 0.1} {
			b.fill(rng, sc, sc)
			b.poisonS()
			b.call(nil)
			tgRefTile(b, nil, st)
			tgCompare(t, fmt.Sprintf("D=%d call %d", d, i), b, st)
		}
	}
}

// TestTileGoBounds passes buffers longer than the ABI's, with sentinels
// after the tile: tileGo must write only the tile.
func TestTileGoBounds(t *testing.T) {
	const pad = 16
	sentinel := float32(12345)
	for _, d := range []int{64, 128} {
		rng := rand.New(rand.NewPCG(13, uint64(d)))
		b := newTGBufs(d)
		b.fill(rng, 0.3, 0.3)
		grow := func(x []float32) []float32 {
			y := append(slices.Clone(x), make([]float32, pad)...)
			for i := len(x); i < len(y); i++ {
				y[i] = sentinel
			}
			return y
		}
		s, o, m, l := grow(b.s), grow(b.o), grow(b.m), grow(b.l)
		mask := tgMask(rng, "random")
		mask = append(mask, ^uint64(0), ^uint64(0))
		tileGo(grow(b.q), grow(b.kt), grow(b.v), s, o, m, l, mask, square(d))
		tileGo(grow(b.q), grow(b.kt), grow(b.v), s, o, m, l, nil, square(d))
		for _, x := range [][]float32{s, o, m, l} {
			for _, y := range x[len(x)-pad:] {
				if y != sentinel {
					t.Fatalf("D=%d: tileGo wrote past a buffer's tile", d)
				}
			}
		}
	}
}

func TestTileGoBadD(t *testing.T) {
	for _, d := range []int{0, 6, maxKernelDim + 4} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("tileGo with D = %d did not panic", d)
				}
			}()
			b := newTGBufs(max(d, 4))
			tileGo(b.q, b.kt, b.v, b.s, b.o, b.m, b.l, nil, square(d))
		}()
	}
}

// tileNaive is the straightforward scalar version of the kernel, the
// benchmarks' baseline: a dot product per kept score, the softmax, then one
// axpy per kept key into the output row.
func tileNaive(q, kt, v, s, o, m, l []float32, mask []uint64, d int) {
	negInf := float32(math.Inf(-1))
	for r := range TQ {
		mx := m[r]
		sr := s[r*TK : (r+1)*TK]
		for c := range TK {
			if mask != nil && mask[r]>>uint(c)&1 == 0 {
				sr[c] = negInf
				continue
			}
			var acc float32
			for i := range d {
				acc += q[r*d+i] * kt[i*TK+c]
			}
			sr[c] = acc
			if acc > mx {
				mx = acc
			}
		}
		if mx == negInf {
			continue
		}
		alpha := exp2(m[r] - mx)
		var sum float32
		for c := range TK {
			p := exp2(sr[c] - mx)
			sr[c] = p
			sum += p
		}
		l[r] = alpha*l[r] + sum
		m[r] = mx
		or := o[r*d : (r+1)*d]
		for i := range or {
			or[i] *= alpha
		}
		for c := range TK {
			p := sr[c]
			if p == 0 {
				continue
			}
			vr := v[c*d : (c+1)*d]
			for i := range or {
				or[i] += p * vr[i]
			}
		}
	}
}

// TestTileNaive keeps the benchmark baseline honest.
func TestTileNaive(t *testing.T) {
	for _, kind := range []string{"full", "causal", "emptyrows"} {
		rng := rand.New(rand.NewPCG(11, 0))
		b := newTGBufs(64)
		st := newTGRef(64)
		for i := range 3 {
			b.fill(rng, 0.3, 0.3)
			mask := tgMask(rng, kind)
			tileNaive(b.q, b.kt, b.v, b.s, b.o, b.m, b.l, mask, 64)
			tgRefTile(b, mask, st)
			tgCompare(t, fmt.Sprintf("naive %s call %d", kind, i), b, st)
		}
	}
}

// tgBench reports GFLOP/s counting 4*TQ*TK*D flops per call (the two
// matrix products of a full tile) whatever the mask skips, so "causal"
// reports the rate a causal attention would see on its diagonal tiles.
func tgBench(b *testing.B, f func(q, kt, v, s, o, m, l []float32, mask []uint64, d dims), d int, kind string) {
	rng := rand.New(rand.NewPCG(5, 6))
	tb := newTGBufs(d)
	tb.fill(rng, 0.3, 0.3)
	var mask []uint64
	if kind == "causal" {
		// The lower-left triangle, row r keeping keys c <= r: 38% of the
		// pairs, a diagonal tile of a causal mask.
		mask = make([]uint64, TQ)
		for r := range mask {
			mask[r] = 1<<uint(r+1) - 1
		}
	}
	for b.Loop() {
		// Start every call from fresh state so that nothing drifts.
		for r := range tb.m {
			tb.m[r] = float32(math.Inf(-1))
		}
		f(tb.q, tb.kt, tb.v, tb.s, tb.o, tb.m, tb.l, mask, square(d))
	}
	b.ReportMetric(4*TQ*TK*float64(d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkTileGoD64(b *testing.B) {
	b.Run("full", func(b *testing.B) { tgBench(b, tileGo, 64, "full") })
	b.Run("causal", func(b *testing.B) { tgBench(b, tileGo, 64, "causal") })
}

func BenchmarkTileGoD128(b *testing.B) {
	b.Run("full", func(b *testing.B) { tgBench(b, tileGo, 128, "full") })
	b.Run("causal", func(b *testing.B) { tgBench(b, tileGo, 128, "causal") })
}

// naiveDims is tileNaive in tileFunc's form.
func naiveDims(q, kt, v, s, o, m, l []float32, mask []uint64, d dims) {
	tileNaive(q, kt, v, s, o, m, l, mask, d.qk)
}

func BenchmarkTileNaiveD64(b *testing.B) {
	b.Run("full", func(b *testing.B) { tgBench(b, naiveDims, 64, "full") })
	b.Run("causal", func(b *testing.B) { tgBench(b, naiveDims, 64, "causal") })
}

func BenchmarkTileNaiveD128(b *testing.B) {
	b.Run("full", func(b *testing.B) { tgBench(b, naiveDims, 128, "full") })
	b.Run("causal", func(b *testing.B) { tgBench(b, naiveDims, 128, "causal") })
}
