package spec_test

import (
	"fmt"
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

// TestBigBirdRandomBlocks: each non-global query block gets min(random,
// candidates) distinct key blocks, none global or in its window, in
// increasing order; the draw depends on the seed; global blocks get none.
func TestBigBirdRandomBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(99, 100))
	differ := 0
	for iter := 0; iter < 500; iter++ {
		bb := spec.BigBird{Block: 1 + r.IntN(8), Blocks: 1 + r.IntN(40), Window: 1 + 2*r.IntN(3), Random: r.IntN(6), Seed: r.Uint64N(1 << 31)}
		bb.Global = r.IntN(bb.Blocks/2 + 1)
		other := bb
		other.Seed++
		h := bb.Window / 2
		for q := range bb.Blocks {
			got := bb.RandomBlocks(q)
			global := q < bb.Global || q >= bb.Blocks-bb.Global
			cand := 0
			for c := bb.Global; c < bb.Blocks-bb.Global; c++ {
				if c < q-h || c > q+h {
					cand++
				}
			}
			if global {
				cand = 0
			}
			if len(got) != min(bb.Random, cand) {
				t.Fatalf("%+v block %d: %v, want %d blocks", bb, q, got, min(bb.Random, cand))
			}
			for k, c := range got {
				if k > 0 && c <= got[k-1] || c < bb.Global || c >= bb.Blocks-bb.Global || c >= q-h && c <= q+h {
					t.Fatalf("%+v block %d: %v", bb, q, got)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(other.RandomBlocks(q)) {
				differ++
			}
		}
	}
	if differ == 0 {
		t.Errorf("the seed never changes the random blocks")
	}
}
