package spec_test

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// TestKeysMatchAt: the progressions of each row cover exactly the keys At keeps.
func TestKeysMatchAt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var buf []spec.Prog
	for iter := 0; iter < 3000; iter++ {
		p := spectest.Pattern(r, 40, 3)
		n := 1 + r.IntN(70)
		seen := make([]bool, n)
		for i := 0; i < n; i++ {
			clear(seen)
			buf = p.Keys(buf[:0], i, n)
			for _, g := range buf {
				if g.Step < 1 || g.Lo < 0 || g.Hi >= n {
					t.Fatalf("%v row %d n %d: bad progression %+v", p, i, n, g)
				}
				for j := g.Lo; j <= g.Hi; j += g.Step {
					seen[j] = true
				}
			}
			for j := 0; j < n; j++ {
				if seen[j] != p.At(i, j) {
					t.Fatalf("%v row %d key %d: Keys says %v, At says %v (progs %+v)", p, i, j, seen[j], p.At(i, j), buf)
				}
			}
		}
	}
}

// TestRowBits: the keep words agree with At and AtDocs.
func TestRowBits(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	var buf []spec.Prog
	for iter := 0; iter < 2000; iter++ {
		p := spectest.Pattern(r, 60, 3)
		n := 1 + r.IntN(200)
		var docs *spec.Docs
		if r.IntN(3) == 0 {
			p.Mask = spec.Intersect(spec.Document(), p.Mask)
			ids := make([]int32, n)
			for k := 1; k < n; k++ {
				ids[k] = ids[k-1]
				if r.IntN(30) == 0 {
					ids[k]++
				}
			}
			docs, _ = spec.NewDocs(ids)
		}
		i := r.IntN(n)
		k0 := r.IntN(n)
		var w uint64
		w, buf = p.RowBits(buf, i, k0, n, docs)
		for c := 0; c < 64; c++ {
			j := k0 + c
			want := j < n && p.AtDocs(i, j, docs)
			if got := w>>uint(c)&1 == 1; got != want {
				t.Fatalf("%v n %d row %d k0 %d bit %d: %v, At %v", p, n, i, k0, c, got, want)
			}
		}
	}
}
