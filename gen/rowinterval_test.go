package gen

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// checkRowInterval asserts, for a pattern RowIntervalOf accepts, that every
// row i of [0, n) keeps exactly the keys [next, last] of hull(i, i, 0)
// (clipped to [0, n)), by the lowered predicate; it returns a failure.
func checkRowInterval(pat spec.Pattern, n int, docs *mask.Docs) string {
	pred, hull := LowerPred(pat), LowerHull(pat)
	for i := 0; i < n; i++ {
		var h [2]int64
		hull.Eval([]int64{int64(i), int64(i), 0}, docs, nil, h[:])
		lo, hi := max(int(h[0]), 0), min(int(h[1]), n-1)
		for j := 0; j < n; j++ {
			if got, want := evalPred(pred, i, j, docs), lo <= j && j <= hi; got != want {
				return pat.String() + ": row interval does not match the predicate"
			}
		}
	}
	return ""
}

// TestRowInterval: masks whose rows are intervals (RowIntervalOf) keep,
// per row, exactly the keys between the ends of that row's key hull, by
// brute force over every example and random masks (documents with random
// ids among them); unions of disjoint windows are not intervals and are
// refused.
func TestRowInterval(t *testing.T) {
	r := rand.New(rand.NewPCG(201, 202))
	yes := 0
	for iter := 0; iter < 3000; iter++ {
		n := 1 + r.IntN(100)
		var pat spec.Pattern
		if iter%2 == 0 {
			pat = spec.Pattern{Mask: spectest.Primitive(r, n), Causal: r.IntN(2) == 0}
		} else {
			pat = spectest.Pattern(r, n, 2)
		}
		var docs *mask.Docs
		if r.IntN(4) == 0 && !pat.Mask.HasData() {
			pat.Mask = spec.Intersect(spec.Document(), pat.Mask)
			docs = randomDocs(r, n)
		}
		if !RowIntervalOf(pat) {
			continue
		}
		yes++
		if msg := checkRowInterval(pat, n, docs); msg != "" {
			t.Fatal(msg)
		}
	}
	if yes < 1000 {
		t.Fatalf("only %d of 3000 random masks are row intervals: the test has no teeth", yes)
	}
	t.Logf("%d random masks with interval rows checked", yes)
	files, _ := filepath.Glob("../spec/examples/*.yaml")
	ex := 0
	for _, file := range files {
		sp, err := spec.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if pat := sp.Pattern(); RowIntervalOf(pat) {
			ex++
			if msg := checkRowInterval(pat, 300, nil); msg != "" {
				t.Fatal(msg)
			}
		}
	}
	if ex < 5 {
		t.Fatalf("only %d examples have interval rows", ex)
	}
	two := spec.Pattern{Mask: spec.Union(spec.WindowLR(0, 0), spec.Global(1))}
	if RowIntervalOf(two) {
		t.Fatal("a union of a diagonal and a sink is no interval per row")
	}
	for _, op := range []*spec.Mask{spec.Not(spec.Window(3)), spec.KeySet(0, 0, 2, 0), spec.Dilated(2, 0), spec.Tree()} {
		if RowIntervalOf(spec.Pattern{Mask: op}) {
			t.Fatalf("%s: not an interval per row", op)
		}
	}
}
