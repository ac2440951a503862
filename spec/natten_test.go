package spec_test

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// randomNeighborhood is a random neighborhood pattern on a grid of about
// n cells, under the causal flag only when both axes are causal.
func randomNeighborhood(r *rand.Rand, n int) spec.Pattern {
	m := spectest.Of(r, spec.OpNeighborhood, n)
	return spec.Pattern{Mask: m, Causal: m.AxisCausal[0] && m.AxisCausal[1] && r.IntN(2) == 0}
}

// TestNeighborhoodClassExact: the class of every tile is the brute-force
// one, on random grids (dilated, causal per axis, tiles across rows and
// past the grid).
func TestNeighborhoodClassExact(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	for iter := 0; iter < 3000; iter++ {
		p := randomNeighborhood(r, 1+r.IntN(80))
		n := p.Mask.Grid[0]*p.Mask.Grid[1] + 4
		for range 30 {
			q0, q1, k0, k1 := randomTile(r, n)
			if got, want := p.Classify(q0, q1, k0, k1), bruteClass(p, q0, q1, k0, k1); got != want {
				t.Fatalf("%v tile q[%d,%d] k[%d,%d]: Classify = %v, brute force = %v", p, q0, q1, k0, k1, got, want)
			}
		}
	}
}

// TestNeighborhoodKeys: Keys lists exactly the keys At keeps, and a query
// of a grid without causal axes has exactly kh*kw of them (NATTEN shifts
// the window inwards at the edges); with causal axes, the kernel along
// them is cut at the start.
func TestNeighborhoodKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(93, 94))
	var keys []spec.Prog
	for iter := 0; iter < 1000; iter++ {
		p := randomNeighborhood(r, 1+r.IntN(120))
		m := p.Mask
		n := m.Grid[0]*m.Grid[1] + 3
		for i := range n {
			keys = p.Keys(keys[:0], i, n)
			var want []int
			for j := range n {
				if p.At(i, j) {
					want = append(want, j)
				}
			}
			if got := spec.CountKeys(keys, 0, n-1); got != len(want) {
				t.Fatalf("%v row %d: Keys %v count %d, At keeps %v", p, i, keys, got, want)
			}
			for _, j := range want {
				if spec.CountKeys(keys, j, j) != 1 {
					t.Fatalf("%v row %d: Keys %v miss %d", p, i, keys, j)
				}
			}
			if i >= m.Grid[0]*m.Grid[1] {
				if len(want) != 0 {
					t.Fatalf("%v row %d past the grid keeps %v", p, i, want)
				}
				continue
			}
			full := 1
			for a, y := range [2]int{i / m.Grid[1], i % m.Grid[1]} {
				k := m.Kernel[a]
				if m.AxisCausal[a] {
					k = min(k, y/m.Dilation[a]+1)
				}
				full *= k
			}
			if len(want) != full {
				t.Fatalf("%v row %d keeps %d keys, want %d", p, i, len(want), full)
			}
		}
	}
}
