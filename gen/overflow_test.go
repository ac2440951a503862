package gen

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// extremePattern draws a pattern of extreme parameters (spectest.Extreme):
// every primitive in turn for the first iterations, then nested ones.
func extremePattern(r *rand.Rand, iter int) spec.Pattern {
	op := spec.Op(iter % int(spec.NumOps))
	m := spectest.ExtremeMask(r, 3)
	if iter < 8*int(spec.NumOps) && !op.Combinator() && op != spec.OpDocument {
		m = spectest.Extreme(r, op)
	}
	return spec.Pattern{Mask: m, Causal: r.IntN(2) == 0}
}

// TestLoweredConstantsFitS32: every constant of the plan's programs, and
// every immediate of mulc, divc and modc, lies in [-Inf, Inf] for every
// mask the parser can hold, so renderers with 32-bit integers (PTX) can
// state it. (Values computed from positions may still leave 32 bits; the
// PTX renderer widens those.)
func TestLoweredConstantsFitS32(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 82))
	for iter := 0; iter < 600; iter++ {
		pat := extremePattern(r, iter)
		s := &spec.Spec{Name: "x", Mask: pat.Mask, Causal: pat.Causal, HeadDim: 64}
		p, err := Compile(s, Tiles{TargetName: "t", Q: 64, K: 64}, nil)
		if err != nil {
			t.Fatalf("%v: %v", pat, err)
		}
		for _, prog := range []*Prog{p.Pred, p.Hull, p.QHull, p.Class, ResidueProg()} {
			for k, in := range prog.Insts {
				switch in.Op {
				case IRConst, IRMulC, IRDivC, IRModC:
					if in.Imm < -Inf || in.Imm > Inf {
						t.Fatalf("%v: %s v%d = %s %d is outside [-Inf, Inf]\n%s", pat, prog.Name, k, in.Op, in.Imm, prog)
					}
				}
			}
		}
	}
}

// bigPos draws a position of a call on the CPU (below Inf): near 0, near
// Inf or anywhere.
func bigPos(r *rand.Rand) int {
	switch r.IntN(3) {
	case 0:
		return r.IntN(100)
	case 1:
		return Inf - 1 - r.IntN(100)
	}
	return r.IntN(Inf)
}

// TestExtremeLoweringExact checks the programs of masks with extreme
// parameters on positions up to Inf-1 (the largest a CPU call has) against
// spec: the predicate equals At on random pairs, the hull of a few query
// rows bounds every key spec.Keys lists for them, and the class of small
// tiles is sound against At pair by pair (and exact for a primitive).
func TestExtremeLoweringExact(t *testing.T) {
	r := rand.New(rand.NewPCG(83, 84))
	var keys []spec.Prog
	for iter := 0; iter < 400; iter++ {
		pat := extremePattern(r, iter)
		pred, hull, class := LowerPred(pat), LowerHull(pat), LowerClass(pat)
		for rep := 0; rep < 50; rep++ {
			i, j := bigPos(r), bigPos(r)
			if rep%3 == 0 {
				j = min(max(i+r.IntN(200)-100, 0), Inf-1)
			}
			if evalPred(pred, i, j, nil) != pat.At(i, j) {
				t.Fatalf("%v: pred(%d, %d) disagrees with spec\n%s", pat, i, j, pred)
			}
		}
		for rep := 0; rep < 20; rep++ {
			q0 := bigPos(r)
			q1 := min(q0+r.IntN(4), Inf-1)
			x := bigPos(r)
			if rep%2 == 0 {
				x = 0
			}
			var h [2]int64
			hull.Eval([]int64{int64(q0), int64(q1), int64(x)}, nil, nil, h[:])
			if h[0] < int64(x) {
				t.Fatalf("%v: hull(%d, %d, %d) next %d below x", pat, q0, q1, x, h[0])
			}
			for i := q0; i <= q1; i++ {
				keys = pat.Keys(keys[:0], i, Inf)
				for _, g := range keys {
					if g.Count() == 0 {
						continue
					}
					// the first listed key at or past x (a one-key
					// progression has none past its Lo; spec's step can
					// overflow for nested huge strides, and is not used)
					first := g.Lo
					switch {
					case first >= x:
					case g.Lo == g.Hi:
						first = g.Hi + 1
					default:
						first = g.Lo + (x-g.Lo+g.Step-1)/g.Step*g.Step
					}
					if int64(g.Hi) > h[1] || first <= g.Hi && int64(first) < h[0] {
						t.Fatalf("%v: hull(%d, %d, %d) = %v excludes keys %v of row %d\n%s", pat, q0, q1, x, h, g, i, hull)
					}
				}
			}
			k0 := bigPos(r)
			if rep%2 == 0 {
				k0 = min(max(q0+r.IntN(20)-10, 0), Inf-1)
			}
			k1 := min(k0+r.IntN(6), Inf-1)
			var c [1]int64
			class.Eval([]int64{int64(q0), int64(q1), int64(k0), int64(k1)}, nil, nil, c[:])
			kept, total := 0, 0
			for i := q0; i <= q1; i++ {
				for j := k0; j <= k1; j++ {
					total++
					if pat.At(i, j) {
						kept++
					}
				}
			}
			got := mask.Class(c[0])
			switch {
			case got == mask.Empty && kept > 0, got == mask.Full && kept < total:
				t.Fatalf("%v: class of [%d,%d]x[%d,%d] is %v, %d of %d kept\n%s", pat, q0, q1, k0, k1, got, kept, total, class)
			case !pat.Mask.Op.Combinator() && pat.ExactClass() && got == mask.Partial && (kept == 0 || kept == total):
				t.Fatalf("%v: primitive class of [%d,%d]x[%d,%d] is partial, %d of %d kept\n%s", pat, q0, q1, k0, k1, kept, total, class)
			}
		}
	}
}

// TestDilatedReachBound: a dilated mask whose taps reach Inf or farther
// keeps the same pairs as the unbounded one for every pair of positions
// below Inf, so its programs are the unbounded mask's.
func TestDilatedReachBound(t *testing.T) {
	for _, c := range []struct{ stride, size int }{{math.MaxInt32, 2}, {math.MaxInt32, 3}, {3, math.MaxInt32}, {1 << 29, 5}, {2, 1<<30 + 1}} {
		for _, causal := range []bool{false, true} {
			bounded := spec.Pattern{Mask: spec.Dilated(c.stride, c.size), Causal: causal}
			free := spec.Pattern{Mask: spec.Dilated(c.stride, 0), Causal: causal}
			for _, pair := range [][2]*Prog{{LowerPred(bounded), LowerPred(free)}, {LowerHull(bounded), LowerHull(free)}, {LowerQHull(bounded), LowerQHull(free)}, {LowerClass(bounded), LowerClass(free)}} {
				if a, b := pair[0].String(), pair[1].String(); a != b {
					t.Errorf("%v: program differs from the unbounded mask's\n%s\n%s", bounded, a, b)
				}
			}
			for _, ij := range [][2]int{{0, Inf - 1}, {Inf - 1, 0}, {Inf - 1, Inf - 1 - c.stride}, {c.stride, 0}} {
				if bounded.At(ij[0], ij[1]) != free.At(ij[0], ij[1]) {
					t.Errorf("%v: At(%d, %d) differs from the unbounded mask's", bounded, ij[0], ij[1])
				}
			}
		}
	}
	// below the bound the distance limit stays
	p := LowerPred(spec.Pattern{Mask: spec.Dilated(1<<20, 1<<10)})
	if evalPred(p, 1<<30, 0, nil) || !evalPred(p, (1<<30)-(1<<20), 0, nil) {
		t.Errorf("dilated stride 2^20 size 2^10: the reach (2^30 - 2^20) is lost\n%s", p)
	}
}
