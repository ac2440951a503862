package gen

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
	"github.com/attngen/attngen/verify"
)

// treePatterns are tree masks alone and under every combinator.
func treePatterns(r *rand.Rand, n int) []spec.Pattern {
	ps := []spec.Pattern{
		{Mask: spec.Tree(), Causal: true},
		{Mask: spec.Tree(), Causal: false},
		// a bidirectional committed prefix of 5 tokens with tree tokens after it
		{Mask: spec.Union(spec.Tree(), spec.KeySet(0, 5, 1, 0)), Causal: false},
		{Mask: spec.Intersect(spec.Tree(), spec.Window(9)), Causal: true},
		{Mask: spec.Union(spec.Tree(), spec.Global(2)), Causal: true},
		{Mask: spec.Not(spec.Tree()), Causal: true},
	}
	for range 6 {
		m := spectest.Mask(r, n, 2)
		switch r.IntN(3) {
		case 0:
			m = spec.Union(spec.Tree(), m)
		case 1:
			m = spec.Intersect(m, spec.Tree())
		default:
			m = spec.Union(spec.Intersect(spec.Tree(), m), spec.Not(spectest.Primitive(r, n)))
		}
		ps = append(ps, spec.Pattern{Mask: m, Causal: r.IntN(3) > 0})
	}
	return ps
}

// TestTreePrograms: on random parent arrays, the plan's predicate and keep
// words equal AtDocs pair by pair, its classes are sound against a
// brute-force count, and the hull never drops a kept key; tiles of the
// leading chain of a lone tree are classified exactly.
func TestTreePrograms(t *testing.T) {
	r := rand.New(rand.NewPCG(101, 102))
	for trial := range 40 {
		for _, pat := range treePatterns(r, 60) {
			p, err := Compile(&spec.Spec{Name: "t", Mask: pat.Mask, Causal: pat.Causal, HeadDim: 64}, Tiles{"t", 1 + r.IntN(12), 1 + r.IntN(12)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !p.UsesTree() || !p.Mask().UsesDocs() || !mask.UsesTree(p.Mask()) {
				t.Fatalf("%v: the plan does not read a parent array", pat)
			}
			n := 1 + r.IntN(100)
			par := spectest.Parents(r, n)
			d, err := spec.NewTree(par)
			if err != nil {
				t.Fatal(err)
			}
			m := p.Mask()
			for i := range n {
				for k0 := 0; k0 < n; k0 += 64 {
					w := m.Word(i, k0, n, d)
					for c := 0; c < 64 && k0+c < n; c++ {
						want := pat.AtDocs(i, k0+c, d)
						if got := evalPred(p.Pred, i, k0+c, d); got != want {
							t.Fatalf("trial %d %v parents %v: pred(%d, %d) = %v, want %v", trial, pat, par, i, k0+c, got, want)
						}
						if got := w>>uint(c)&1 != 0; got != want {
							t.Fatalf("trial %d %v parents %v: word(%d, %d) lane %d = %v, want %v", trial, pat, par, i, k0, c, got, want)
						}
					}
				}
			}
			for range 30 {
				q0, k0 := r.IntN(n), r.IntN(n)
				q1, k1 := q0+r.IntN(n-q0), k0+r.IntN(n-k0)
				kept, all := 0, (q1-q0+1)*(k1-k0+1)
				first, last := -1, -1
				for i := q0; i <= q1; i++ {
					for j := 0; j < n; j++ {
						if !pat.AtDocs(i, j, d) {
							continue
						}
						if j >= k0 && j <= k1 {
							kept++
						}
						if first < 0 || j < first {
							first = j
						}
						last = max(last, j)
					}
				}
				c := m.Class(q0, q1, k0, k1, d)
				if (c == mask.Empty && kept != 0) || (c == mask.Full && kept != all) {
					t.Fatalf("trial %d %v parents %v: class of [%d,%d]x[%d,%d] = %v, %d of %d kept", trial, pat, par, q0, q1, k0, k1, c, kept, all)
				}
				if sc := pat.ClassifyDocs(q0, q1, k0, k1, d); pat.Mask.Op == spec.OpTree && c != sc {
					t.Fatalf("trial %d %v: class %v, spec.ClassifyDocs %v", trial, pat, c, sc)
				}
				if first >= 0 {
					next, hi := m.Hull(q0, q1, 0, d)
					if next > first || hi < last {
						t.Fatalf("trial %d %v parents %v: hull of [%d,%d] = [%d,%d], keys kept %d..%d", trial, pat, par, q0, q1, next, hi, first, last)
					}
				}
			}
		}
	}
}

// TestCPUTree runs every supported variant on tree masks with random
// parent arrays (random prefix lengths, lengths not multiples of the
// tile, decoding shapes, a row of parents per batch) against the float64
// reference, and checks that the output rows depend on exactly the keys
// the tree keeps.
func TestCPUTree(t *testing.T) {
	r := rand.New(rand.NewPCG(103, 104))
	pats := treePatterns(r, 150)
	if testing.Short() {
		pats = pats[:6]
	}
	shapes := []verify.Shape{
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 1, SeqK: 1},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 29, SeqK: 161},
		{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 130, SeqK: 130},
		{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 3, SeqK: 77},
	}
	for _, v := range variants() {
		for _, d := range []int{64, 128} {
			for _, p := range pats {
				run := cpuRun(t, p, v, d)
				for _, s := range shapes {
					s.HeadDim = d
					if _, err := verify.CheckNumeric(p, run, s, r); err != nil {
						t.Fatalf("%s %v: %v", v, p, err)
					}
				}
				s := verify.Shape{Batch: 3, HeadsQ: 1, HeadsKV: 1, SeqQ: 40, SeqK: 99, HeadDim: d}
				if err := verify.CheckBatchDocs(p, run, s, r); err != nil {
					t.Fatalf("%s %v, a tree per batch: %v", v, p, err)
				}
			}
		}
		p := pats[0]
		s := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 20, SeqK: 70, HeadDim: 64}
		if err := verify.CheckDependencies(p, cpuRun(t, p, v, 64), s, r); err != nil {
			t.Fatalf("%s %v: %v", v, p, err)
		}
	}
}

// TestCPUTreeErrors: parent arrays of a wrong length, with a parent not
// before its child, or given to a mask without a tree are ErrTree, and
// document ids given to a tree mask are ErrDocument; never a panic.
func TestCPUTreeErrors(t *testing.T) {
	plan, err := Compile(&spec.Spec{Name: "t", Mask: spec.Tree(), Causal: true, HeadDim: 64}, CPUTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := plan.Mask()
	s := cpu.Shape{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 3, SeqK: 5, HeadDim: 64}
	mk := func(n int) []float32 { return make([]float32, n) }
	args := func(tree, docs []int32) cpu.Args {
		return cpu.Args{Q: mk(2 * 3 * 64), K: mk(2 * 5 * 64), V: mk(2 * 5 * 64), Out: mk(2 * 3 * 64), Tree: tree, Docs: docs, Shape: s}
	}
	for _, c := range []struct {
		tree, docs []int32
		want       error
	}{
		{nil, nil, cpu.ErrTree},
		{[]int32{-1, 0}, nil, cpu.ErrTree},
		{[]int32{-1, 0, 1, 3, 2}, nil, cpu.ErrTree},
		{[]int32{-1, 0, 1, 2, -2}, nil, cpu.ErrTree},
		{[]int32{-1, 0, 1, 2, 3, -1, 0, 1, 9, 0}, nil, cpu.ErrTree},
		{[]int32{-1, 0, 1, 2, 3}, []int32{0, 0, 0, 0, 0}, cpu.ErrDocument},
	} {
		err := cpu.ForwardArgs(m, cpu.PureGo, args(c.tree, c.docs))
		if !errors.Is(err, c.want) {
			t.Errorf("tree %v docs %v: %v, want %v", c.tree, c.docs, err, c.want)
		}
	}
	if err := cpu.ForwardArgs(m, cpu.PureGo, args([]int32{-1, 0, 1, 1, 0, -1, 0, 0, 2, 2}, nil)); err != nil {
		t.Errorf("a tree per batch: %v", err)
	}
	full, err := Compile(&spec.Spec{Name: "t", Mask: spec.Full(), Causal: true, HeadDim: 64}, CPUTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cpu.ForwardArgs(full.Mask(), cpu.PureGo, args([]int32{-1, 0, 1, 2, 3}, nil)); !errors.Is(err, cpu.ErrTree) {
		t.Errorf("a tree given to a mask without one: %v", err)
	}
}
