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

// TestKeysNotLong: the complement of strided keys over long rows (where
// listing it position by position would be slow) is exactly the keys At
// drops, for nested strides, bounded taps and step-1 runs together.
func TestKeysNotLong(t *testing.T) {
	masks := []*spec.Mask{
		spec.Not(spec.Dilated(3, 0)),
		spec.Not(spec.Union(spec.Dilated(6, 0), spec.Dilated(10, 0), spec.Window(50))),
		spec.Not(spec.Union(spec.Dilated(63, 0), spec.Dilated(64, 0), spec.Dilated(65, 0))),
		spec.Not(spec.Union(spec.Dilated(2, 0), spec.Dilated(4099, 0))),
		spec.Not(spec.Union(spec.Dilated(5000, 0), spec.Dilated(5001, 0), spec.Dilated(7, 300))),
		spec.Intersect(spec.Dilated(4, 0), spec.Not(spec.Union(spec.Dilated(6, 0), spec.KeySet(100, 20000, 10, 3)))),
		spec.Not(spec.Not(spec.Union(spec.Dilated(9, 0), spec.Block(1000)))),
	}
	const n = 60000
	seen := make([]bool, n)
	var buf []spec.Prog
	for _, m := range masks {
		for _, causal := range []bool{true, false} {
			p := spec.Pattern{Mask: m, Causal: causal}
			for _, i := range []int{0, 1, 4097, 30011, n - 1} {
				clear(seen)
				buf = p.Keys(buf[:0], i, n)
				for _, g := range buf {
					if g.Step < 1 || g.Lo < 0 || g.Hi >= n {
						t.Fatalf("%v row %d: bad progression %+v", p, i, g)
					}
					for j := g.Lo; j <= g.Hi; j += g.Step {
						seen[j] = true
					}
				}
				for j := 0; j < n; j++ {
					if seen[j] != p.At(i, j) {
						t.Fatalf("%v row %d key %d: Keys says %v, At says %v (%d progressions)", p, i, j, seen[j], p.At(i, j), len(buf))
					}
				}
			}
		}
	}
}
