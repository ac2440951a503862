package spec_test

import (
	"testing"

	"github.com/attngen/attngen/spec"
)

// TestKeysHugeStrides: intersections of dilated masks whose strides have a
// least common multiple past int64 still give valid progressions that
// cover exactly the keys At keeps (the step used to wrap negative).
func TestKeysHugeStrides(t *testing.T) {
	strides := []int{3, 64, 1 << 30, 536870911, 536870913, 2147483647}
	var buf []spec.Prog
	n := 300
	seen := make([]bool, n)
	for _, a := range strides {
		for _, b := range strides {
			for _, c := range strides {
				p := spec.Pattern{Mask: spec.Intersect(spec.Dilated(a, 0), spec.Dilated(b, 0), spec.Dilated(c, 0))}
				for _, i := range []int{0, 6, 191, n - 1} {
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
							t.Fatalf("%v row %d key %d: Keys says %v, At says %v (progs %+v)", p, i, j, seen[j], p.At(i, j), buf)
						}
					}
				}
			}
		}
	}
}
