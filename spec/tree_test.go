package spec_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// isAncestor is the tree relation by walking parents: j is i or an
// ancestor of i.
func isAncestor(p []int32, i, j int) bool {
	for x := i; x >= 0; x = int(p[x]) {
		if x == j {
			return true
		}
	}
	return false
}

// randomTreeMask puts tree somewhere in a random mask: alone, or as an
// operand of a union, intersection or complement with random primitives.
func randomTreeMask(r *rand.Rand, n int) *spec.Mask {
	switch r.IntN(5) {
	case 0:
		return spec.Tree()
	case 1:
		return spec.Union(spec.Tree(), spectest.Primitive(r, n))
	case 2:
		return spec.Intersect(spectest.Primitive(r, n), spec.Tree())
	case 3:
		return spec.Not(spec.Tree())
	}
	return spec.Union(spec.Intersect(spec.Tree(), spectest.Primitive(r, n)), spec.Not(spectest.Primitive(r, n)))
}

// TestTreeAtAndClassify checks AtDocs on a parent array against walking
// the parents, and ClassifyDocs against a brute-force count of every tile,
// for tree masks alone and under combinators, causal or not.
func TestTreeAtAndClassify(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		n := 1 + r.IntN(90)
		par := spectest.Parents(r, n)
		d, err := spec.NewTree(par)
		if err != nil {
			t.Fatal(err)
		}
		m := randomTreeMask(r, n)
		pat := spec.Pattern{Mask: m, Causal: r.IntN(3) > 0}
		// the same mask with the tree written out as the brute-force relation
		keep := func(i, j int) bool {
			if pat.Causal && j > i {
				return false
			}
			return evalWith(m, i, j, pat.Causal, par)
		}
		for i := range n {
			for j := range n {
				if got, want := pat.AtDocs(i, j, d), keep(i, j); got != want {
					t.Fatalf("trial %d: %s on parents %v: AtDocs(%d, %d) = %v, want %v", trial, pat, par, i, j, got, want)
				}
			}
		}
		for range 40 {
			q0, k0 := r.IntN(n), r.IntN(n)
			q1, k1 := q0+r.IntN(n-q0), k0+r.IntN(n-k0)
			kept, all := 0, (q1-q0+1)*(k1-k0+1)
			for i := q0; i <= q1; i++ {
				for j := k0; j <= k1; j++ {
					if keep(i, j) {
						kept++
					}
				}
			}
			c := pat.ClassifyDocs(q0, q1, k0, k1, d)
			if (c == spec.Empty && kept != 0) || (c == spec.FullT && kept != all) {
				t.Fatalf("trial %d: %s on parents %v: tile [%d,%d]x[%d,%d] classified %v, %d of %d kept", trial, pat, par, q0, q1, k0, k1, c, kept, all)
			}
			// the tree alone is exact on tiles of the chain
			if m.Op == spec.OpTree && q1 < d.TreeChain() {
				want := spec.Partial
				if kept == 0 {
					want = spec.Empty
				} else if kept == all {
					want = spec.FullT
				}
				if c != want {
					t.Fatalf("trial %d: chain tile [%d,%d]x[%d,%d] classified %v, want %v", trial, q0, q1, k0, k1, c, want)
				}
			}
		}
	}
}

// evalWith evaluates a mask with tree read from the parent array directly.
func evalWith(m *spec.Mask, i, j int, causal bool, par []int32) bool {
	if causal && j > i {
		return false
	}
	switch m.Op {
	case spec.OpTree:
		return j >= 0 && j <= i && isAncestor(par, i, j)
	case spec.OpUnion:
		for _, a := range m.Args {
			if evalWith(a, i, j, causal, par) {
				return true
			}
		}
		return false
	case spec.OpIntersect:
		for _, a := range m.Args {
			if !evalWith(a, i, j, causal, par) {
				return false
			}
		}
		return true
	case spec.OpNot:
		return !evalWith(m.Args[0], i, j, causal, par)
	}
	return spec.Pattern{Mask: m, Causal: causal}.At(i, j)
}

// TestTreeWithoutData: a tree without a parent array is one chain, which
// is causal attention, and At, Keys and Classify agree on it.
func TestTreeWithoutData(t *testing.T) {
	for _, causal := range []bool{true, false} {
		p := spec.Pattern{Mask: spec.Tree(), Causal: causal}
		c := spec.Pattern{Mask: spec.Full(), Causal: true}
		for i := range 20 {
			for j := range 20 {
				if p.At(i, j) != c.At(i, j) {
					t.Fatalf("causal %v: At(%d, %d) = %v", causal, i, j, p.At(i, j))
				}
			}
		}
		for q0 := range 12 {
			for k0 := range 12 {
				if a, b := p.Classify(q0, q0+3, k0, k0+2), c.Classify(q0, q0+3, k0, k0+2); a != b {
					t.Fatalf("causal %v: tile at %d, %d: %v, causal attention %v", causal, q0, k0, a, b)
				}
			}
		}
	}
}

func TestTreeParse(t *testing.T) {
	s, err := spec.Parse("t.yaml", []byte("name: t\nmask: {union: [{tree: {}}, {keys: {below: 4}}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Mask.HasTree() || s.Mask.HasDocument() || !s.Mask.HasData() || s.Mask.String() != "{union: [{tree: {}}, {keys: {below: 4}}]}" {
		t.Fatalf("parsed %s", s.Mask)
	}
	for _, c := range []struct{ src, want string }{
		{"name: t\nmask: {tree: {size: 3}}\n", "mask.tree: takes no parameters"},
		{"name: t\nmask: {intersect: [{document: {}}, {tree: {}}]}\n", "t.yaml:2:37: mask: tree and document cannot be combined"},
	} {
		_, err := spec.Parse("t.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
}

// TestPatternData: with Data set, At, Keys and Classify follow the run-time
// data: Keys lists exactly the keys AtDocs keeps, for tree masks on random
// parent arrays and document masks on random ids.
func TestPatternData(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 300 {
		n := 1 + r.IntN(80)
		var pat spec.Pattern
		var d *spec.Docs
		var err error
		if trial%2 == 0 {
			pat = spec.Pattern{Mask: randomTreeMask(r, n), Causal: r.IntN(3) > 0}
			d, err = spec.NewTree(spectest.Parents(r, n))
		} else {
			pat = spec.Pattern{Mask: spec.Intersect(spec.Document(), spectest.Mask(r, n, 2)), Causal: r.IntN(3) > 0}
			ids := make([]int32, n)
			for k := 1; k < n; k++ {
				ids[k] = ids[k-1] + int32(r.IntN(6)/5)
			}
			d, err = spec.NewDocs(ids)
		}
		if err != nil {
			t.Fatal(err)
		}
		withData := pat
		withData.Data = d
		var progs []spec.Prog
		for i := range n {
			keep := make([]bool, n)
			progs = withData.Keys(progs[:0], i, n)
			for _, g := range progs {
				for j := g.Lo; j <= g.Hi; j += g.Step {
					if j < 0 || j >= n {
						t.Fatalf("trial %d %v: Keys(%d) has %d, outside [0, %d)", trial, pat, i, j, n)
					}
					keep[j] = true
				}
			}
			for j := range n {
				want := pat.AtDocs(i, j, d)
				if keep[j] != want || withData.At(i, j) != want {
					t.Fatalf("trial %d %v: row %d key %d: Keys %v, At %v, AtDocs %v", trial, pat, i, j, keep[j], withData.At(i, j), want)
				}
			}
		}
		for range 20 {
			q0, k0 := r.IntN(n), r.IntN(n)
			q1, k1 := q0+r.IntN(n-q0), k0+r.IntN(n-k0)
			if a, b := withData.Classify(q0, q1, k0, k1), pat.ClassifyDocs(q0, q1, k0, k1, d); a != b {
				t.Fatalf("trial %d %v: Classify %v, ClassifyDocs %v", trial, pat, a, b)
			}
		}
	}
}
