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
