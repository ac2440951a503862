package gen

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// qhullExact reports whether the query hull of the pattern is exact (see
// LowerQHull): a single primitive other than neighborhood, without
// documents.
func qhullExact(p spec.Pattern) bool {
	op := p.Mask.Op
	return !op.Combinator() && op != spec.OpNeighborhood && op != spec.OpTree && !p.Mask.HasDocument()
}

// evalQHull evaluates qhull(k0, k1, x).
func evalQHull(p *Prog, k0, k1, x int, docs *mask.Docs) (next, last int) {
	var h [2]int64
	p.Eval([]int64{int64(k0), int64(k1), int64(x)}, docs, nil, h[:])
	return int(h[0]), int(h[1])
}

// checkQHull checks the query hull of pat (lowered, on the pattern's own
// positions) by brute force over keys [0, n) and queries [0, nq) (nq = n
// with documents, which cover n positions, else 2n): for random key ranges
// [k0, k1] it lists the queries that keep some key of the range (spec's
// AtDocs) and, for several x, asserts the contract: next >= x, next at
// most the first such query >= x, last at least every such query, and,
// for an exact hull (qhullExact), next the first such query (or, with none
// at or after x, next > last or past the queries tried) and last the
// largest (past the queries tried: a query that keeps a key, or, for an
// unbounded last, some such query within n+16 positions past them, which
// every unbounded primitive drawn has). It returns a failure message or
// "".
func checkQHull(r *rand.Rand, pat spec.Pattern, prog *Prog, n int, docs *mask.Docs, ranges int) string {
	nq := 2 * n
	if docs != nil {
		nq = n
	}
	exact := qhullExact(pat)
	keeps := make([]bool, nq)
	for rep := 0; rep < ranges; rep++ {
		k0 := r.IntN(n)
		k1 := k0 + r.IntN(min(n-k0, 48))
		if rep == 0 {
			k0, k1 = 0, n-1
		}
		lo, hi := -1, -1 // smallest and largest query that keeps a key of [k0, k1]
		for i := range nq {
			keeps[i] = false
			for j := k0; j <= k1; j++ {
				if pat.AtDocs(i, j, docs) {
					keeps[i] = true
					break
				}
			}
			if keeps[i] {
				if lo < 0 {
					lo = i
				}
				hi = i
			}
		}
		xs := []int{0, k0, max(k1-3, 0), r.IntN(nq), r.IntN(nq), nq - 1}
		if lo >= 0 {
			xs = append(xs, lo, lo+1, hi, hi+1)
		}
		for _, x := range xs {
			next, last := evalQHull(prog, k0, k1, x, docs)
			first := -1 // the first query at or after x that keeps a key
			for i := x; i < nq; i++ {
				if keeps[i] {
					first = i
					break
				}
			}
			where := func() string {
				return fmt.Sprintf("%v: qhull(%d, %d, %d) = (%d, %d); queries keeping keys of [%d, %d] among [0, %d): first %d, from x %d, last %d\n%s",
					pat, k0, k1, x, next, last, k0, k1, nq, lo, first, hi, prog)
			}
			switch {
			case next < x:
				return "next below x: " + where()
			case first >= 0 && next > first:
				return "next past a query that keeps a key: " + where()
			case hi >= 0 && last < hi:
				return "last below a query that keeps a key: " + where()
			case !exact:
			case first >= 0 && next != first:
				return "next not exact: " + where()
			case first < 0 && next <= last && next < nq:
				return "no query at or after x keeps a key, yet next <= last: " + where()
			case last < nq && hi >= 0 && last != hi:
				return "last not exact: " + where()
			case last >= nq && last < Inf && !keepsAny(pat, last, k0, k1):
				return "last past the queries tried keeps no key: " + where()
			case last >= Inf && !keepsFrom(pat, nq, nq+n+16, k0, k1):
				return "last unbounded, but no query past the queries tried keeps a key: " + where()
			}
		}
	}
	return ""
}

// keepsAny reports whether query i keeps some key of [k0, k1] (one
// document).
func keepsAny(pat spec.Pattern, i, k0, k1 int) bool {
	for j := k0; j <= k1; j++ {
		if pat.At(i, j) {
			return true
		}
	}
	return false
}

// keepsFrom reports whether some query of [i0, i1) keeps a key of [k0, k1].
func keepsFrom(pat spec.Pattern, i0, i1, k0, k1 int) bool {
	for i := i0; i < i1; i++ {
		if keepsAny(pat, i, k0, k1) {
			return true
		}
	}
	return false
}

// TestQHullPrimitives: the query hull of every primitive, with and
// without the causal flag, is sound and exact by brute force (sound only
// for neighborhood and tree, whose descendants are run-time data),
// including documents around it (not around tree, which refuses them).
func TestQHullPrimitives(t *testing.T) {
	r := rand.New(rand.NewPCG(101, 102))
	for op := spec.Op(0); op < spec.NumOps; op++ {
		if op.Combinator() {
			continue
		}
		if primitives[op].qhull == nil {
			t.Errorf("mask op %s has no query hull", op)
			continue
		}
		iters := 60
		if op == spec.OpNeighborhood {
			iters = 400 // the rectangle bound has the most cases
		}
		for iter := 0; iter < iters; iter++ {
			n := 1 + r.IntN(120)
			pat := spec.Pattern{Mask: spectest.Of(r, op, n), Causal: iter%2 == 0}
			var docs *mask.Docs
			if op == spec.OpDocument || iter%5 == 4 && op != spec.OpTree {
				pat.Mask = spec.Intersect(spec.Document(), pat.Mask)
				docs = randomDocs(r, n)
			}
			if msg := checkQHull(r, pat, LowerQHull(pat), n, docs, 8); msg != "" {
				t.Fatal(msg)
			}
		}
	}
}

// TestQHullRandom: the query hull of random masks (nested unions,
// intersections and complements, documents with random ids) never
// excludes a query that keeps a key; brute force.
func TestQHullRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(103, 104))
	for iter := 0; iter < 400; iter++ {
		n := 1 + r.IntN(120)
		pat := randomPattern(r, n)
		var docs *mask.Docs
		if pat.Mask.HasDocument() {
			docs = randomDocs(r, n)
		}
		if msg := checkQHull(r, pat, LowerQHull(pat), n, docs, 6); msg != "" {
			t.Fatal(msg)
		}
	}
}

// TestQHullPlans: the plan's query hull (segment positions of residue
// layouts included) on every example spec and on random dilated and
// random masks, against the plan's pattern by brute force.
func TestQHullPlans(t *testing.T) {
	r := rand.New(rand.NewPCG(105, 106))
	var specs []*spec.Spec
	files, _ := filepath.Glob("../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	for _, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, s)
	}
	for range 60 {
		pat := spectest.Pattern(r, 60, 3)
		if r.IntN(2) == 0 {
			pat = spec.Pattern{Mask: spec.Dilated(1+r.IntN(9), r.IntN(4)), Causal: r.IntN(3) != 0}
		}
		specs = append(specs, &spec.Spec{Name: "random", Mask: pat.Mask, Causal: pat.Causal, HeadDim: 64})
	}
	for _, s := range specs {
		for _, tiles := range []Tiles{{"t16", 16, 16}, {"t64", 64, 64}} {
			p, err := Compile(s, tiles, nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.QHull == nil || p.QHull.Name != "qhull" || !slices.Equal(p.QHull.Args, []string{"k0", "k1", "x"}) || len(p.QHull.Results) != 2 {
				t.Fatalf("%s: plan's query hull %v", s.Name, p.QHull)
			}
			for _, in := range p.QHull.Insts {
				if in.Op.Word() {
					t.Fatalf("%s: query hull uses word op %s\n%s", s.Name, in.Op, p.QHull)
				}
			}
			n := 1 + r.IntN(400)
			var docs *mask.Docs
			if p.QHull.UsesDocs() {
				docs = randomDocs(r, n)
			}
			docs = atMax(p, docs)
			if msg := checkQHull(r, p.Pattern, p.QHull, n, docs, 4); msg != "" {
				t.Fatalf("%s (%s layout): %s", s.Name, p.Layout.Kind, msg)
			}
		}
	}
}

// TestQHullExtreme checks the query hull of masks with extreme parameters
// on positions up to Inf-1: rows in [x, next) and past last keep no key of
// [k0, k1] (spec.Keys lists a row's keys), and for an exact hull the rows
// next and last keep one.
func TestQHullExtreme(t *testing.T) {
	r := rand.New(rand.NewPCG(107, 108))
	var keys []spec.Prog
	keeps := func(pat spec.Pattern, i, k0, k1 int) bool {
		keys = pat.Keys(keys[:0], i, Inf)
		for _, g := range keys {
			if g.Clip(k0, k1).Count() > 0 {
				return true
			}
		}
		return false
	}
	for iter := 0; iter < 400; iter++ {
		pat := extremePattern(r, iter)
		prog := LowerQHull(pat)
		exact := qhullExact(pat)
		for rep := 0; rep < 20; rep++ {
			k0 := bigPos(r)
			k1 := min(k0+r.IntN(6), Inf-1)
			x := bigPos(r)
			switch rep % 3 {
			case 0:
				x = 0
			case 1:
				x = min(max(k0+r.IntN(40)-20, 0), Inf-1)
			}
			next, last := evalQHull(prog, k0, k1, x, nil)
			where := func(what string, i int) string {
				return fmt.Sprintf("%v: qhull(%d, %d, %d) = (%d, %d): row %d %s\n%s", pat, k0, k1, x, next, last, i, what, prog)
			}
			if next < x {
				t.Fatalf("%v: qhull(%d, %d, %d) next %d below x", pat, k0, k1, x, next)
			}
			var rows []int
			for _, i := range []int{x, next - 1, x + r.IntN(max(min(next, Inf)-x, 1)), last + 1, last + 1 + r.IntN(100), Inf - 1} {
				if i >= x && i < next || i > last {
					rows = append(rows, i)
				}
			}
			for _, i := range rows {
				if i >= 0 && i < Inf && keeps(pat, i, k0, k1) {
					t.Fatal(where("keeps a key but is excluded", i))
				}
			}
			// a set's next is found from Inf - stride within a stride of
			// Inf (setNext): sound, not exact there
			set := pat.Mask.Op == spec.OpQueries || pat.Mask.Op == spec.OpKeys
			if exact && next <= last && !(set && max(next, k1) > Inf-pat.Mask.Stride) {
				for _, i := range []int{next, last} {
					if i < Inf && !keeps(pat, i, k0, k1) {
						t.Fatal(where("keeps no key, yet bounds the hull", i))
					}
				}
			}
		}
	}
}

// TestVisitColumn: for every example and random masks, tiles and call
// sizes (fewer queries than keys, lengths not multiples of the tiles,
// residue layouts, documents), the closed-form column walk lists every
// query tile of the exact column-wise schedule (Plan.Columns), in
// increasing order, never calling a tile Full that is not; for a single
// primitive with an exact hull and class it lists exactly those tiles and
// classifies no other.
func TestVisitColumn(t *testing.T) {
	r := rand.New(rand.NewPCG(109, 110))
	type call struct {
		s      *spec.Spec
		tiles  Tiles
		sq, sk int
		docs   bool
	}
	var calls []call
	files, _ := filepath.Glob("../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	for _, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, tiles := range []Tiles{{"t16", 16, 16}, {"t64", 64, 64}, {"t16x64", 16, 64}, {"t64x16", 64, 16}} {
			for _, n := range [][2]int{{1, 1}, {1, 300}, {77, 300}, {300, 300}, {513, 600}} {
				calls = append(calls, call{s, tiles, n[0], n[1], s.Mask.HasDocument()})
			}
		}
	}
	for iter := 0; iter < 500; iter++ {
		var pat spec.Pattern
		switch iter % 3 {
		case 0:
			pat = spectest.Pattern(r, 50, 3)
		case 1:
			pat = spec.Pattern{Mask: spectest.Primitive(r, 50), Causal: r.IntN(2) == 0}
		default:
			pat = spec.Pattern{Mask: spec.Dilated(1+r.IntN(9), r.IntN(4)), Causal: r.IntN(3) != 0}
		}
		docs := r.IntN(5) == 0
		if docs {
			pat.Mask = spec.Intersect(spec.Document(), pat.Mask)
		}
		tiles := Tiles{"random", 1 + r.IntN(20), 1 + r.IntN(20)}
		if r.IntN(3) == 0 {
			tiles = []Tiles{{"t16", 16, 16}, {"t64", 64, 64}, {"t16x64", 16, 64}}[r.IntN(3)]
		}
		sk := 1 + r.IntN(150)
		calls = append(calls, call{&spec.Spec{Name: "random", Mask: pat.Mask, Causal: pat.Causal, HeadDim: 64}, tiles, 1 + r.IntN(sk), sk, docs})
	}
	for _, c := range calls {
		p, err := Compile(c.s, c.tiles, nil)
		if err != nil {
			t.Fatal(err)
		}
		exact := qhullExact(p.Pattern) && p.Pattern.ExactClass()
		var docs *mask.Docs
		if c.docs {
			docs = randomDocs(r, c.sk)
		}
		var got []mask.ColTile
		for _, seg := range p.Segments(c.sq, c.sk) {
			d := docs
			if d == nil {
				d = p.oneDoc(seg.SeqK)
			}
			want := p.Columns(seg, d)
			for kt := 0; kt < want.KeyTiles(); kt++ {
				k0 := kt * p.TileK
				var tried int
				got, tried = p.visitColumn(got[:0], k0, min(k0+p.TileK, seg.SeqK)-1, seg.SeqK-seg.SeqQ, seg.SeqK, d)
				if pub := p.VisitColumn(nil, seg, kt, d); !slices.Equal(pub, got) {
					t.Fatalf("VisitColumn %v, visitColumn %v", pub, got)
				}
				where := func() string {
					return fmt.Sprintf("%s %v tiles %dx%d sq %d sk %d seg %+v key tile %d: visited %v, exact %v",
						c.s.Name, p.Pattern, p.TileQ, p.TileK, c.sq, c.sk, seg, kt, got, want.Of(kt))
				}
				at := map[int]mask.Class{}
				for n, g := range got {
					if n > 0 && g.Q <= got[n-1].Q || g.Q < 0 || g.Q >= p.QueryTiles(seg) {
						t.Fatal("query tiles out of order or range: " + where())
					}
					at[g.Q] = g.Class
				}
				for _, w := range want.Of(kt) {
					c, ok := at[w.Q]
					switch {
					case !ok:
						t.Fatalf("query tile %d keeps a pair, not visited: %s", w.Q, where())
					case c == mask.Full && w.Class != mask.Full:
						t.Fatalf("query tile %d called Full, exact %v: %s", w.Q, w.Class, where())
					}
				}
				if exact && (len(got) != len(want.Of(kt)) || tried != len(got)) {
					t.Fatalf("single primitive: %d tiles visited, %d classified, %d exact: %s\n%s", len(got), tried, len(want.Of(kt)), where(), p.QHull)
				}
			}
		}
	}
}
