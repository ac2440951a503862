package verify_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
	"github.com/attngen/attngen/verify"
)

func causal(m *spec.Mask) spec.Pattern { return spec.Pattern{Mask: m, Causal: true} }

// stack repeats the schedule to depth L: layer k is sched[(k-1) mod len].
func stack(L int, sched ...spec.Pattern) []spec.Pattern {
	out := make([]spec.Pattern, L)
	for k := range out {
		out[k] = sched[k%len(sched)]
	}
	return out
}

func pbb(b, rq, rs int) *spec.Mask { return spec.Union(spec.Block(b), spec.Bridge(b, rq, rs, 0)) }

func analyze(t *testing.T, layers []spec.Pattern, n, maxDistance int, pairs ...verify.Pair) *verify.Coverage {
	t.Helper()
	c, err := verify.Analyze(layers, n, maxDistance, pairs...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkPeriodic checks a closed form want(l, d, phi) against the per-phase
// table of Analyze and against every target t >= d of a Reach with hop
// counts, for depths 1..L.
func checkPeriodic(t *testing.T, name string, layers []spec.Pattern, n int, want func(l, d, phi int) bool) *verify.Coverage {
	t.Helper()
	c := analyze(t, layers, n, n-1)
	if c.Period == 0 || c.PhaseDistance < 0 {
		t.Fatalf("%s: no per-phase table (period %d)", name, c.Period)
	}
	r, err := verify.NewReach(layers, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RecordHops(); err != nil {
		t.Fatal(err)
	}
	r.AdvanceTo(len(layers))
	for l := 1; l <= len(layers); l++ {
		for d := 0; d <= c.PhaseDistance; d++ {
			for phi := 0; phi < c.Period; phi++ {
				if got, w := c.Phase(l, d, phi), want(l, d, phi); got != w {
					t.Fatalf("%s: C_%d(d=%d, phi=%d) = %v, closed form says %v", name, l, d, phi, got, w)
				}
			}
		}
		for tt := 0; tt < n; tt++ {
			for d := 0; d <= tt; d++ {
				if got, w := r.Reachable(l, tt, tt-d), want(l, d, tt%c.Period); got != w {
					t.Fatalf("%s: depth %d target %d source %d: reachable %v, closed form says %v", name, l, tt, tt-d, got, w)
				}
			}
		}
	}
	return c
}

// TestReachBlock: block reaches d <= phi, and depth never helps; Cov_L(d)
// is max(0, b-d)/b.
func TestReachBlock(t *testing.T) {
	for _, b := range []int{4, 6, 8} {
		layers := stack(5, causal(spec.Block(b)))
		c := checkPeriodic(t, fmt.Sprintf("block %d", b), layers, 6*b, func(l, d, phi int) bool { return d <= phi })
		for l := 1; l <= 5; l++ {
			for d := 0; d <= c.PhaseDistance; d++ {
				if got, want := c.PhaseCoverage(l, d), float64(max(0, b-d))/float64(b); got != want {
					t.Errorf("block %d: Cov_%d(%d) = %v, want %v", b, l, d, got, want)
				}
			}
		}
	}
}

// TestReachWindow: L layers of window W reach d <= L*(W-1), at every phase.
func TestReachWindow(t *testing.T) {
	for _, w := range []int{1, 2, 3, 5} {
		layers := stack(5, causal(spec.Window(w)))
		checkPeriodic(t, fmt.Sprintf("window %d", w), layers, 40, func(l, d, phi int) bool { return d <= l*(w-1) })
	}
}

// TestReachBridgeOneLayer: one layer of block ∪ bridge(r_q, r_s) covers
// d <= phi or (phi < r_q and phi < d <= phi + r_s), for all r_q, r_s.
func TestReachBridgeOneLayer(t *testing.T) {
	for _, b := range []int{4, 6, 8} {
		for rq := 1; rq <= b; rq++ {
			for rs := 1; rs <= b; rs++ {
				checkPeriodic(t, fmt.Sprintf("b %d r_q %d r_s %d", b, rq, rs), stack(1, causal(pbb(b, rq, rs))), 5*b,
					func(l, d, phi int) bool { return d <= phi || (phi < rq && phi < d && d <= phi+rs) })
			}
		}
	}
}

// bridgeHops is MASKS.md's closed form for the hop count of pbb/se_bridge.
func bridgeHops(b, rq, rs, d, phi int) int {
	switch {
	case d == 0:
		return 0
	case d <= phi:
		return 1
	}
	ind := func(c bool) int {
		if c {
			return 1
		}
		return 0
	}
	c := (d - phi + b - 1) / b
	sigma := ((phi-d)%b + b) % b
	if rq+rs <= b {
		return ind(phi >= rq) + 1 + 2*(c-1) + ind(sigma < b-rs)
	}
	return ind(phi >= rq) + c + ind(sigma < b-rs)
}

// TestReachBridgeHops: the multi-layer hop counts of block ∪ bridge match
// the closed forms for b in {4, 6, 8}, all r_q, r_s, L <= 5, computed by the
// recursion.
func TestReachBridgeHops(t *testing.T) {
	const L = 5
	for _, b := range []int{4, 6, 8} {
		for rq := 1; rq <= b; rq++ {
			for rs := 1; rs <= b; rs++ {
				name := fmt.Sprintf("b %d r_q %d r_s %d", b, rq, rs)
				want := func(l, d, phi int) bool { return bridgeHops(b, rq, rs, d, phi) <= l }
				c := checkPeriodic(t, name, stack(L, causal(pbb(b, rq, rs))), 8*b, want)
				if c.PhaseDistance < (L+1)*b {
					t.Fatalf("%s: table too short (%d)", name, c.PhaseDistance)
				}
				for d := 0; d <= c.PhaseDistance; d++ {
					for phi := 0; phi < b; phi++ {
						w := bridgeHops(b, rq, rs, d, phi)
						if w > L {
							w = verify.Unreached
						}
						if got := c.PhaseHops(d, phi); got != w {
							t.Fatalf("%s: h(d=%d, phi=%d) = %d, closed form says %d", name, d, phi, got, w)
						}
					}
				}
			}
		}
	}
}

// TestReachIncomparable: MASKS.md's worked example, b = 8 pbb r = 2 against
// window{5}, one layer: exactly the listed (d, phi) pairs differ.
func TestReachIncomparable(t *testing.T) {
	p := analyze(t, stack(1, causal(pbb(8, 2, 2))), 64, 40)
	w := analyze(t, stack(1, causal(spec.Window(5))), 64, 40)
	var winOnly, pbbOnly [][2]int
	for d := 0; d <= 40; d++ {
		for phi := 0; phi < 8; phi++ {
			a, b := p.Phase(1, d, phi), w.Phase(1, d, phi)
			if b && !a {
				winOnly = append(winOnly, [2]int{d, phi})
			}
			if a && !b {
				pbbOnly = append(pbbOnly, [2]int{d, phi})
			}
		}
	}
	wantWin := [][2]int{{3, 0}, {3, 2}, {4, 0}, {4, 1}, {4, 2}, {4, 3}}
	wantPbb := [][2]int{{5, 5}, {5, 6}, {5, 7}, {6, 6}, {6, 7}, {7, 7}}
	if fmt.Sprint(winOnly) != fmt.Sprint(wantWin) {
		t.Errorf("window covers, pbb does not: %v, want %v", winOnly, wantWin)
	}
	if fmt.Sprint(pbbOnly) != fmt.Sprint(wantPbb) {
		t.Errorf("pbb covers, window does not: %v, want %v", pbbOnly, wantPbb)
	}
}

// TestReachOrder: a heterogeneous schedule depends on the order: block under
// window reaches sources that window under block does not, and conversely.
func TestReachOrder(t *testing.T) {
	block, window := causal(spec.Block(4)), causal(spec.Window(3))
	bw, err := verify.NewReach([]spec.Pattern{block, window}, 16) // block nearest the input
	if err != nil {
		t.Fatal(err)
	}
	wb, err := verify.NewReach([]spec.Pattern{window, block}, 16)
	if err != nil {
		t.Fatal(err)
	}
	bw.AdvanceTo(2)
	wb.AdvanceTo(2)
	// Target 8 (phase 0): the window reaches 6, whose block prefix holds 4.
	if !bw.Reachable(2, 8, 4) || wb.Reachable(2, 8, 4) {
		t.Errorf("source 4 of target 8: block then window %v (want true), window then block %v (want false)",
			bw.Reachable(2, 8, 4), wb.Reachable(2, 8, 4))
	}
	// Target 11 (phase 3): the block reaches 8, whose window holds 6.
	if bw.Reachable(2, 11, 6) || !wb.Reachable(2, 11, 6) {
		t.Errorf("source 6 of target 11: block then window %v (want false), window then block %v (want true)",
			bw.Reachable(2, 11, 6), wb.Reachable(2, 11, 6))
	}
	for name, pair := range map[string][2]spec.Pattern{"block, window": {block, window}, "window, block": {window, block}} {
		compareBrute(t, name, pair[:], 16)
	}
}

// compareBrute checks Reach (every generation, both held depths, recorded
// hop counts) and Analyze (counts, per-phase consistency) against the brute
// force recursion.
func compareBrute(t *testing.T, name string, layers []spec.Pattern, n int) {
	t.Helper()
	brute := verify.BruteReach(layers, n)
	r, err := verify.NewReach(layers, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RecordHops(); err != nil {
		t.Fatal(err)
	}
	check := func(l int) {
		for tt := 0; tt < n; tt++ {
			for s := 0; s < n; s++ {
				if got := r.Reachable(l, tt, s); got != brute[l][tt][s] {
					t.Fatalf("%s n %d: depth %d (model at %d) target %d source %d: model %v, brute force %v",
						name, n, l, r.Depth(), tt, s, got, brute[l][tt][s])
				}
			}
		}
	}
	var src []int
	for l := 0; l <= len(layers); l++ {
		if l > 0 && !r.Advance() {
			t.Fatalf("%s: Advance stopped at depth %d", name, r.Depth())
		}
		check(l)
		if l > 0 {
			check(l - 1)
		}
		for tt := 0; tt < n; tt++ {
			src = r.Sources(src[:0], tt)
			k := 0
			for s := 0; s < n; s++ {
				if brute[l][tt][s] {
					if k >= len(src) || src[k] != s {
						t.Fatalf("%s: depth %d target %d: Sources %v disagree at %d", name, l, tt, src, s)
					}
					k++
				}
			}
			if k != len(src) || r.Count(tt) != k {
				t.Fatalf("%s: depth %d target %d: Sources %v, Count %d, want %d members", name, l, tt, src, r.Count(tt), k)
			}
		}
	}
	if r.Advance() {
		t.Fatalf("%s: Advance past the last layer", name)
	}
	for l := 0; l <= len(layers); l++ { // hop counts answer for every depth
		check(l)
	}
	for tt := 0; tt < n; tt++ {
		for s := 0; s < n; s++ {
			want := verify.Unreached
			for l := len(layers); l >= 0; l-- {
				if brute[l][tt][s] {
					want = l
				}
			}
			if got := r.Hops(tt, s); got != want {
				t.Fatalf("%s: hops(%d, %d) = %d, brute force %d", name, tt, s, got, want)
			}
		}
	}

	maxD := n - 1
	pairs := []verify.Pair{{n - 1, 0}, {0, n - 1}, {n / 2, n / 3}}
	c := analyze(t, layers, n, maxD, pairs...)
	want := verify.BruteCounts(layers, n, maxD)
	for l := 1; l <= len(layers); l++ {
		for d := 0; d <= maxD; d++ {
			if c.Counts[l-1][d] != want[l-1][d] {
				t.Fatalf("%s n %d: count at depth %d distance %d: %d, brute force %d", name, n, l, d, c.Counts[l-1][d], want[l-1][d])
			}
		}
		if got := c.Marginal(l)[maxD]; got != float64(want[l-1][maxD])/float64(n-maxD) {
			t.Fatalf("%s: marginal at depth %d distance %d = %v", name, l, maxD, got)
		}
		// Per-phase tables are exact for every target t >= d.
		for d := 0; d <= c.PhaseDistance; d++ {
			for tt := d; tt < n; tt++ {
				if got := c.Phase(l, d, tt); got != brute[l][tt][tt-d] {
					t.Fatalf("%s n %d period %d: C_%d(%d, %d) = %v, but target %d: %v", name, n, c.Period, l, d, tt%c.Period, got, tt, brute[l][tt][tt-d])
				}
			}
		}
	}
	if c.Period > 0 {
		tab := c.PhaseCoverageTable()
		for l := 1; l <= len(layers); l++ {
			checkRules(t, name, c, l)
			for d := 0; d <= c.PhaseDistance; d++ {
				if tab[l-1][d] != c.PhaseCoverage(l, d) {
					t.Fatalf("%s: PhaseCoverageTable[%d][%d] = %v, PhaseCoverage %v", name, l-1, d, tab[l-1][d], c.PhaseCoverage(l, d))
				}
			}
		}
	}
	for k, p := range pairs {
		want := verify.Unreached
		for l := len(layers); l >= 0; l-- {
			if brute[l][p.Target][p.Source] {
				want = l
			}
		}
		if c.PairHops[k] != want {
			t.Fatalf("%s: pair %+v hops %d, brute force %d", name, p, c.PairHops[k], want)
		}
	}
	for d := 0; d <= maxD; d++ {
		lo, hi := verify.Unreached, verify.Unreached
		for l := len(layers); l >= 0; l-- {
			any, all := false, true
			for tt := d; tt < n; tt++ {
				any = any || brute[l][tt][tt-d]
				all = all && brute[l][tt][tt-d]
			}
			if any {
				lo = l
			}
			if all {
				hi = l
			}
		}
		if c.MinHops(d) != lo || c.MaxHops(d) != hi {
			t.Fatalf("%s: distance %d hops min %d max %d, brute force %d %d", name, d, c.MinHops(d), c.MaxHops(d), lo, hi)
		}
	}
}

// TestReachMatchesBrute: on random masks and schedules the model equals the
// brute force recursion exactly.
func TestReachMatchesBrute(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	iters := 400
	if testing.Short() {
		iters = 100
	}
	periodic := 0
	for it := 0; it < iters; it++ {
		n := 1 + r.IntN(60)
		sched := make([]spec.Pattern, 1+r.IntN(3))
		for k := range sched {
			sched[k] = spectest.Pattern(r, n, 2)
		}
		layers := stack(1+r.IntN(4), sched...)
		if _, ok := verify.StackPeriod(layers, n); ok {
			periodic++
		}
		compareBrute(t, fmt.Sprintf("iteration %d %v", it, layers), layers, n)
	}
	if periodic < iters/10 {
		t.Errorf("only %d of %d random stacks were periodic", periodic, iters)
	}
}

// TestReachLongRanges exercises the range-OR index (progressions spanning
// several chunks, the sparse table) on longer sequences.
func TestReachLongRanges(t *testing.T) {
	n := 257
	fixed := [][]spec.Pattern{
		{causal(spec.Window(200))},
		{causal(spec.Dilated(2, 0)), causal(spec.Window(3))},
		{causal(spec.Union(spec.Dilated(3, 60), spec.Block(100)))},
		{{Mask: spec.WindowLR(90, 70), Causal: false}},
		{causal(spec.Window(5)), causal(spec.Full())},
	}
	for k, layers := range fixed {
		compareBrute(t, fmt.Sprintf("fixed %d", k), stack(2, layers...), n)
	}
	if testing.Short() {
		return
	}
	r := rand.New(rand.NewPCG(3, 4))
	for it := 0; it < 4; it++ {
		layers := stack(2, spectest.Pattern(r, n, 2), spectest.Pattern(r, n, 2))
		compareBrute(t, fmt.Sprintf("random %d %v", it, layers), layers, n)
	}
}

func TestPhaseGroups(t *testing.T) {
	c := analyze(t, stack(1, causal(pbb(8, 2, 2))), 64, 20)
	g := c.PhaseGroups(1)
	// Phase 2 sees back to 0 through its block, as phase 0 does through the
	// bridge: equal rows, one group.
	if fmt.Sprint(g) != "[{[0 2] [0-2]} {[1 3] [0-3]} {[4] [0-4]} {[5] [0-5]} {[6] [0-6]} {[7] [0-7]}]" {
		t.Errorf("pbb groups: %v", g)
	}
	c = analyze(t, stack(3, causal(spec.Window(3))), 30, 20)
	if g := c.PhaseGroups(2); fmt.Sprint(g) != "[{[0] [0-4]}]" {
		t.Errorf("window groups at depth 2: %v", g)
	}
	// Phases with identical rows share a group.
	c = analyze(t, stack(1, causal(spec.Union(spec.Block(4), spec.Window(2)))), 64, 20)
	if g := c.PhaseGroups(1); fmt.Sprint(g) != "[{[0-1] [0-1]} {[2] [0-2]} {[3] [0-3]}]" {
		t.Errorf("block ∪ window groups: %v", g)
	}
	c = analyze(t, stack(1, causal(spec.Union(spec.Block(4), spec.Dilated(8, 0)))), 64, 20)
	if g := c.PhaseGroups(1); fmt.Sprint(g[0]) != "{[0] [0 8 16]}" {
		t.Errorf("block ∪ dilated groups: %v", g)
	}
	h := c.PhaseHopGroups()
	if fmt.Sprint(h[0]) != "{[0] [{0 0 0} {1 7 -1} {8 8 1} {9 15 -1} {16 16 1} {17 20 -1}]}" {
		t.Errorf("hop groups: %v", h)
	}
}

// checkRules checks that PhaseRules reproduce PhaseGroups exactly.
func checkRules(t *testing.T, name string, c *verify.Coverage, l int) {
	t.Helper()
	want := map[int]string{}
	for _, g := range c.PhaseGroups(l) {
		for _, ph := range g.Phases {
			for phi := ph.Lo; phi <= ph.Hi; phi++ {
				want[phi] = fmt.Sprint(g.Distances)
			}
		}
	}
	seen := 0
	for _, r := range c.PhaseRules(l) {
		for _, ph := range r.Phases {
			for phi := ph.Lo; phi <= ph.Hi; phi++ {
				var row []verify.Interval
				for _, sp := range r.Distances {
					row = append(row, verify.Interval{Lo: sp.Lo.At(phi), Hi: sp.Hi.At(phi)})
				}
				if got := fmt.Sprint(row); got != want[phi] {
					t.Fatalf("%s depth %d phase %d: rule %v gives %s, table %s", name, l, phi, r.Distances, got, want[phi])
				}
				seen++
			}
		}
	}
	if seen != c.Period {
		t.Fatalf("%s depth %d: rules cover %d phases of %d", name, l, seen, c.Period)
	}
}

func TestPhaseRules(t *testing.T) {
	for _, tc := range []struct {
		layers []spec.Pattern
		n, d   int
		want   string
	}{
		{stack(3, causal(spec.Block(8))), 64, 40, "[{[0-7] [0-phi]}]"},
		{stack(1, causal(pbb(8, 2, 2))), 64, 40, "[{[0-1] [0-(phi+2)]} {[2-7] [0-phi]}]"},
		{stack(4, causal(pbb(256, 32, 32))), 2048, 1023, "[{[0-31] [0-(phi+512)]} {[32-255] [0-(phi+288)]}]"},
		{stack(2, causal(spec.Window(5))), 64, 40, "[{[0] [0-8]}]"},
		{stack(1, causal(spec.Union(spec.Block(4), spec.Dilated(8, 0)))), 64, 40, "[{[0-3] [0-phi 8 16 24 32 40]}]"},
	} {
		c := analyze(t, tc.layers, tc.n, tc.d)
		got := fmt.Sprint(c.PhaseRules(len(tc.layers)))
		if got != tc.want {
			t.Errorf("%v: rules %s, want %s", tc.layers[0], got, tc.want)
		}
		checkRules(t, fmt.Sprint(tc.layers[0]), c, len(tc.layers))
	}
}

func TestCopyBound(t *testing.T) {
	c := analyze(t, stack(2, causal(spec.Block(4))), 16, 8, verify.Pair{Target: 9, Source: 3}, verify.Pair{Target: 9, Source: 8})
	b, err := verify.NewCopyBound(c.Pairs[0], 4, c.Layers, c.PairHops[0])
	if err != nil {
		t.Fatal(err)
	}
	if b.Reachable || b.Hops != verify.Unreached || b.MaxAccuracy != 0.25 || b.MinCrossEntropy != math.Log(4) {
		t.Errorf("unreachable pair: %+v", b)
	}
	b, _ = verify.NewCopyBound(c.Pairs[1], 4, c.Layers, c.PairHops[1])
	if !b.Reachable || b.Hops != 1 || b.MaxAccuracy != 1 || b.MinCrossEntropy != 0 {
		t.Errorf("reachable pair: %+v", b)
	}
	if _, err := verify.NewCopyBound(c.Pairs[0], 0, 2, 1); err == nil {
		t.Error("K = 0 accepted")
	}
}

func TestAnalyzeErrors(t *testing.T) {
	l := stack(1, causal(spec.Block(4)))
	for _, tc := range []struct {
		n, d  int
		pairs []verify.Pair
	}{{0, 0, nil}, {8, 8, nil}, {8, -1, nil}, {8, 2, []verify.Pair{{8, 0}}}, {8, 2, []verify.Pair{{0, -1}}}} {
		if _, err := verify.Analyze(l, tc.n, tc.d, tc.pairs...); err == nil {
			t.Errorf("Analyze(n %d, d %d, %v) accepted", tc.n, tc.d, tc.pairs)
		}
	}
	if _, err := verify.Analyze(nil, 8, 2); err == nil {
		t.Error("no layers accepted")
	}
}

// TestReachLarge runs S = 8192, L = 32 and logs the time (no timed
// assertion).
func TestReachLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large model skipped in -short")
	}
	const n, L = 8192, 32
	for _, tc := range []struct {
		name  string
		sched []spec.Pattern
	}{
		{"pbb{256,32}", []spec.Pattern{causal(pbb(256, 32, 32))}},
		{"strided{64}+window{1024}", []spec.Pattern{causal(spec.Union(spec.Window(64), spec.Dilated(64, 0))), causal(spec.Window(1024))}},
	} {
		start := time.Now()
		c := analyze(t, stack(L, tc.sched...), n, n-1)
		t.Logf("%s: S=%d L=%d max distance %d: %v (period %d)", tc.name, n, L, n-1, time.Since(start), c.Period)
		if c.Counts[L-1][0] != n {
			t.Fatalf("%s: distance 0 count %d", tc.name, c.Counts[L-1][0])
		}
	}
}

func BenchmarkReach8192(b *testing.B) {
	layers := stack(32, causal(pbb(256, 32, 32)))
	for b.Loop() {
		if _, err := verify.Analyze(layers, 8192, 8191); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReachTreeMatchesBrute: the reachability model on tree layers with
// their parent arrays (Pattern.Data), alone and stacked with random
// masks, equals the brute-force recursion; a tree alone never reaches
// past the ancestors, at any depth.
func TestReachTreeMatchesBrute(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 12))
	for it := range 60 {
		n := 1 + r.IntN(60)
		d, err := spec.NewTree(verify.RandomTree(r, n))
		if err != nil {
			t.Fatal(err)
		}
		tree := spec.Pattern{Mask: spec.Tree(), Causal: true, Data: d}
		mixed := spec.Pattern{Mask: spec.Union(spec.Tree(), spectest.Primitive(r, n)), Causal: r.IntN(2) == 0, Data: d}
		layers := stack(1+r.IntN(4), tree, mixed, spectest.Pattern(r, n, 2))
		compareBrute(t, fmt.Sprintf("iteration %d %v", it, layers), layers, n)
		alone := stack(3, tree)
		rc, err := verify.NewReach(alone, n)
		if err != nil {
			t.Fatal(err)
		}
		rc.AdvanceTo(3)
		for tt := range n {
			for s := range n {
				if rc.Reachable(3, tt, s) != d.TreeAnc(tt, s) {
					t.Fatalf("iteration %d: a tree of 3 layers: target %d source %d: %v, ancestor %v", it, tt, s, rc.Reachable(3, tt, s), d.TreeAnc(tt, s))
				}
			}
		}
	}
}
