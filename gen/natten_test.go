package gen

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// TestNeighborhoodPrograms: on random neighborhood masks (dilated, causal
// per axis, grids of one row or column, positions past the grid, inside a
// document), the predicate equals spec pair by pair, the keep word equals
// the predicate lane by lane (and exists), the class equals spec's exact
// class on every tile tried, and the hull never excludes a kept key.
func TestNeighborhoodPrograms(t *testing.T) {
	r := rand.New(rand.NewPCG(95, 96))
	for iter := 0; iter < 600; iter++ {
		m := spectest.Of(r, spec.OpNeighborhood, 1+r.IntN(150))
		pat := spec.Pattern{Mask: m, Causal: r.IntN(3) == 0}
		n := m.Grid[0]*m.Grid[1] + r.IntN(8)
		pred, hull, class, word := LowerPred(pat), LowerHull(pat), LowerClass(pat), LowerWord(LowerPred(pat))
		if word == nil {
			t.Fatalf("%v: no keep-word program\n%s", pat, pred)
		}
		for i := range n {
			for k0 := 0; k0 < n; k0 += 64 {
				var res [1]int64
				word.Eval([]int64{int64(i), int64(k0)}, nil, nil, res[:])
				for c := 0; c < 64 && k0+c < n; c++ {
					j := k0 + c
					want := pat.At(i, j)
					if got := evalPred(pred, i, j, nil); got != want {
						t.Fatalf("%v: pred(%d, %d) = %v, spec %v\n%s", pat, i, j, got, want, pred)
					}
					if got := res[0]>>uint(c)&1 != 0; got != want {
						t.Fatalf("%v: word(%d, %d) lane %d = %v, spec %v\n%s", pat, i, k0, c, got, want, word)
					}
				}
			}
		}
		for range 40 {
			q0 := r.IntN(n)
			q1 := q0 + r.IntN(min(n-q0, 70))
			k0 := r.IntN(n)
			k1 := k0 + r.IntN(min(n-k0, 70))
			var c [1]int64
			class.Eval([]int64{int64(q0), int64(q1), int64(k0), int64(k1)}, nil, nil, c[:])
			if got, want := mask.Class(c[0]), pat.Classify(q0, q1, k0, k1); got != want {
				t.Fatalf("%v: class of [%d,%d]x[%d,%d] is %v, spec %v\n%s", pat, q0, q1, k0, k1, got, want, class)
			}
			x := r.IntN(n + 1)
			var h [2]int64
			hull.Eval([]int64{int64(q0), int64(q1), int64(x)}, nil, nil, h[:])
			if h[0] < int64(x) {
				t.Fatalf("%v: hull(%d, %d, %d) next %d below x", pat, q0, q1, x, h[0])
			}
			for i := q0; i <= q1; i++ {
				for j := 0; j < n; j++ {
					if pat.At(i, j) && (int64(j) > h[1] || j >= x && int64(j) < h[0]) {
						t.Fatalf("%v: hull(%d, %d, %d) = %v excludes kept (%d, %d)\n%s", pat, q0, q1, x, h, i, j, hull)
					}
				}
			}
		}
	}
}

// TestWordPeriod: comparisons of a lane residue ((±j + i) mod p against
// a row value, by lt, le and their flips) and residues of residues ((j +
// i) mod p mod s == row value) become wperiod words equal to the
// predicate lane by lane, for every sign, bound and period tried.
func TestWordPeriod(t *testing.T) {
	r := rand.New(rand.NewPCG(97, 98))
	for iter := 0; iter < 3000; iter++ {
		b := newBuilder("pred", "i", "j")
		i, j := b.arg(0), b.arg(1)
		p := int64(1 + r.IntN(90))
		lane := b.add(j, i)
		if r.IntN(2) == 0 {
			lane = b.sub(i, j)
		}
		m := b.modC(lane, p)
		s := b.addC(b.modC(i, 23), int64(r.IntN(int(p)+4)-10)) // row values in and out of range
		var res int
		switch r.IntN(5) {
		case 0:
			res = b.lt(m, s)
		case 1:
			res = b.le(m, s)
		case 2:
			res = b.lt(s, m)
		case 3:
			res = b.le(s, m)
		default:
			m = b.modC(b.add(j, i), p)
			res = b.eq(b.modC(m, int64(1+r.IntN(9))), b.modC(i, 7))
		}
		pred := b.done(res)
		word := LowerWord(pred)
		if word == nil {
			t.Fatalf("no keep-word program for\n%s", pred)
		}
		for range 20 {
			i, k0 := r.IntN(300), 64*r.IntN(5)
			var w [1]int64
			word.Eval([]int64{int64(i), int64(k0)}, nil, nil, w[:])
			for c := range 64 {
				if got, want := w[0]>>uint(c)&1 != 0, evalPred(pred, i, k0+c, nil); got != want {
					t.Fatalf("word(%d, %d) lane %d = %v, pred %v\n%s\n%s", i, k0, c, got, want, pred, word)
				}
			}
		}
	}
}
