package ptx

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/gen"
)

// TestInterpPrograms renders each plan program the kernel uses (the key
// hull, also with x bound to 0 as the kernel binds it, the tile class and
// the partial-tile predicate) for the example masks and random ones, runs
// them under the interpreter on random arguments (and random head
// parameter values) and compares them with Prog.Eval.
func TestInterpPrograms(t *testing.T) {
	const cases = 512
	masks := append(exampleMasks(t), randomMasks(7, 24)...)
	masks = append(masks, randomDocMasks(8, 6)...)
	ids := docIDs(600)
	for _, mk := range masks {
		t.Run(mk.name, func(t *testing.T) {
			p := compilePattern(t, SM80, mk.name, mk.p, 64)
			var docs []int32
			switch {
			case p.UsesTree():
				docs = treeParents(len(ids), 4)
			case p.Pred.UsesDocs() || p.Hull.UsesDocs() || p.Class.UsesDocs():
				docs = ids
			}
			rng := rand.New(rand.NewPCG(3, uint64(len(mk.name))))
			pos := func(n int) int { return min(n, len(ids)-1) }
			var hull, hull0, class, pred [][]int64
			for c := 0; c < cases; c++ {
				q0 := pos(rng.IntN(450))
				q1 := pos(q0 + rng.IntN(70))
				k0 := pos(rng.IntN(q1 + 40))
				k1 := pos(k0 + rng.IntN(70))
				x := pos(rng.IntN(q1 + 100))
				hull = append(hull, []int64{int64(q0), int64(q1), int64(x)})
				hull0 = append(hull0, []int64{int64(q0), int64(q1), 0})
				class = append(class, []int64{int64(q0), int64(q1), int64(k0), int64(k1)})
				pred = append(pred, []int64{int64(q0), int64(k0)}, []int64{int64(q1), int64(k1)})
			}
			bad := checkPlanProg(t, p, p.Hull, nil, docs, hull, rng)
			bad += checkPlanProg(t, p, p.Hull, map[int]int64{2: 0}, docs, hull0, rng)
			bad += checkPlanProg(t, p, p.Class, nil, docs, class, rng)
			bad += checkPlanProg(t, p, p.Pred, nil, docs, pred, rng)
			if bad > 0 {
				t.Logf("%s: %d mismatches\n%s\n%s\n%s", mk.p, bad, p.Hull, p.Class, p.Pred)
			}
		})
	}
}

// TestInterpResidue renders gen.ResidueProg with the stride bound as an
// immediate and compares it with Prog.Eval (the kernels split a residue
// class at each row's lengths and positions, residueSegment, which is
// this program's split at the default alignment; the ragged and
// positions tests hold it to the reference).
func TestInterpResidue(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, st := range []int64{1, 2, 3, 5, 8, 48, 100} {
		var cases [][]int64
		for c := 0; c < 256; c++ {
			sk := int64(1 + rng.IntN(2000))
			sq := 1 + rng.Int64N(sk)
			cases = append(cases, []int64{rng.Int64N(st), sq, sk, st})
		}
		checkProg(t, gen.ResidueProg(), map[int]int64{3: st}, nil, cases)
	}
}
