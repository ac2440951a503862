package spec_test

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// bruteClass counts kept pairs of the tile one by one.
func bruteClass(p spec.Pattern, q0, q1, k0, k1 int) spec.Class {
	kept := 0
	for i := q0; i <= q1; i++ {
		for j := k0; j <= k1; j++ {
			if p.At(i, j) {
				kept++
			}
		}
	}
	switch kept {
	case 0:
		return spec.Empty
	case (q1 - q0 + 1) * (k1 - k0 + 1):
		return spec.FullT
	}
	return spec.Partial
}

func randomTile(r *rand.Rand, n int) (q0, q1, k0, k1 int) {
	tq, tk := 1+r.IntN(24), 1+r.IntN(24)
	if r.IntN(4) == 0 {
		tq, tk = 1, 1
	}
	q0, k0 = r.IntN(n), r.IntN(n)
	return q0, q0 + tq - 1, k0, k0 + tk - 1
}

// TestClassifySingleExact: every primitive, with and without causal, is
// classified exactly (soundly where ExactClass says so: a neighborhood not
// causal along both axes under the causal flag).
func TestClassifySingleExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 20000; iter++ {
		p := spec.Pattern{Mask: spectest.Primitive(r, 40), Causal: r.IntN(2) == 0}
		q0, q1, k0, k1 := randomTile(r, 80)
		got, want := p.Classify(q0, q1, k0, k1), bruteClass(p, q0, q1, k0, k1)
		if got != want && (p.ExactClass() || got != spec.Partial) {
			t.Fatalf("%v tile q[%d,%d] k[%d,%d]: Classify = %v, brute force = %v", p, q0, q1, k0, k1, got, want)
		}
	}
}

// TestClassifySound: nested combinations never claim empty or full wrongly;
// the test reports how often they answer partial for an empty or full tile.
func TestClassifySound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var total, loose, looseEmpty, looseFull int
	for iter := 0; iter < 20000; iter++ {
		p := spectest.Pattern(r, 40, 3)
		q0, q1, k0, k1 := randomTile(r, 80)
		got, want := p.Classify(q0, q1, k0, k1), bruteClass(p, q0, q1, k0, k1)
		total++
		if got == want {
			continue
		}
		if got != spec.Partial {
			t.Fatalf("%v tile q[%d,%d] k[%d,%d]: Classify = %v, brute force = %v", p, q0, q1, k0, k1, got, want)
		}
		loose++
		if want == spec.Empty {
			looseEmpty++
		} else {
			looseFull++
		}
	}
	t.Logf("combinations: %d tiles, %d (%.2f%%) classified partial although %d empty and %d full",
		total, loose, 100*float64(loose)/float64(total), looseEmpty, looseFull)
}

// TestClassifyNotExact: not of a primitive is classified exactly without
// the causal flag, and under it whenever the operand's tile (taken without
// the flag) is empty or full, as docs/language.md says; it is sound always.
func TestClassifyNotExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	loose := 0
	for iter := 0; iter < 20000; iter++ {
		op := spectest.Primitive(r, 40)
		p := spec.Pattern{Mask: spec.Not(op), Causal: r.IntN(2) == 0}
		q0, q1, k0, k1 := randomTile(r, 80)
		got, want := p.Classify(q0, q1, k0, k1), bruteClass(p, q0, q1, k0, k1)
		if got == want {
			continue
		}
		inner := spec.Pattern{Mask: op}.Classify(q0, q1, k0, k1)
		if got != spec.Partial || !p.Causal || inner != spec.Partial {
			t.Fatalf("%v tile q[%d,%d] k[%d,%d]: Classify = %v, brute force = %v (operand without causal: %v)", p, q0, q1, k0, k1, got, want, inner)
		}
		loose++
	}
	t.Logf("not of a primitive: %d of 20000 tiles partial although empty or full (causal, partial operand)", loose)
}
