package gen

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// randomDocs returns non-decreasing ids for n positions.
func randomDocs(r *rand.Rand, n int) *mask.Docs {
	ids := make([]int32, n)
	for k := 1; k < n; k++ {
		ids[k] = ids[k-1]
		if r.IntN(6) == 0 {
			ids[k]++
		}
	}
	d, _ := mask.NewDocs(ids)
	return d
}

// randomPattern draws a random pattern, with documents one time in four.
func randomPattern(r *rand.Rand, n int) spec.Pattern {
	p := spectest.Pattern(r, n, 3)
	if r.IntN(4) == 0 {
		p.Mask = spec.Intersect(spec.Document(), p.Mask)
	}
	return p
}

// TestEveryPrimitiveLowered: every primitive op of spec has a lowering
// (pred, hull, class), and its predicate agrees with spec's meaning.
func TestEveryPrimitiveLowered(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	for op := spec.Op(0); op < spec.NumOps; op++ {
		if op.Combinator() {
			continue
		}
		if _, ok := primitives[op]; !ok {
			t.Errorf("mask op %s has no lowering in gen", op)
			continue
		}
		for iter := 0; iter < 20; iter++ {
			pat := spec.Pattern{Mask: spectest.Of(r, op, 40), Causal: r.IntN(2) == 0}
			pred := LowerPred(pat)
			var docs *mask.Docs
			if pred.UsesDocs() {
				docs = randomDocs(r, 50)
			}
			for i := 0; i < 50; i++ {
				for j := 0; j < 50; j++ {
					if evalPred(pred, i, j, docs) != pat.AtDocs(i, j, docs) {
						t.Fatalf("%v: pred(%d, %d) disagrees with spec\n%s", pat, i, j, pred)
					}
				}
			}
		}
	}
}

// TestWordMatchesPred: the keep-word program is the predicate bit-sliced,
// lane for lane, on random masks with and without documents; and it exists
// (no per-lane fallback) for every example and every random mask.
func TestWordMatchesPred(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	fallback := 0
	for iter := 0; iter < 400; iter++ {
		n := 1 + r.IntN(200)
		pat := randomPattern(r, n)
		pred := LowerPred(pat)
		word := LowerWord(pred)
		if word == nil {
			fallback++
			continue
		}
		var docs *mask.Docs
		if pred.UsesDocs() {
			docs = randomDocs(r, n)
		}
		for rep := 0; rep < 30; rep++ {
			i, k0 := r.IntN(n), 64*r.IntN((n+63)/64)
			var res [1]int64
			word.Eval([]int64{int64(i), int64(k0)}, docs, nil, res[:])
			for c := 0; c < 64 && k0+c < n; c++ {
				if got, want := res[0]>>uint(c)&1 != 0, evalPred(pred, i, k0+c, docs); got != want {
					t.Fatalf("%v: word(%d, %d) lane %d = %v, pred %v\n%s\n%s", pat, i, k0, c, got, want, pred, word)
				}
			}
		}
	}
	if fallback > 0 {
		t.Errorf("%d of 400 random masks have no keep-word program", fallback)
	}
}

// TestHullClassSound: on random masks and tiles, the hull never excludes
// a kept key and the class never calls a tile empty or full wrongly;
// brute force over every pair.
func TestHullClassSound(t *testing.T) {
	r := rand.New(rand.NewPCG(75, 76))
	for iter := 0; iter < 400; iter++ {
		n := 1 + r.IntN(160)
		pat := randomPattern(r, n)
		pred, hull, class := LowerPred(pat), LowerHull(pat), LowerClass(pat)
		var docs *mask.Docs
		if pred.UsesDocs() {
			docs = randomDocs(r, n)
		}
		for rep := 0; rep < 20; rep++ {
			q0 := r.IntN(n)
			q1 := q0 + r.IntN(min(n-q0, 40))
			x := r.IntN(n)
			var h [2]int64
			hull.Eval([]int64{int64(q0), int64(q1), int64(x)}, docs, nil, h[:])
			if h[0] < int64(x) {
				t.Fatalf("%v: hull(%d, %d, %d) next %d below x", pat, q0, q1, x, h[0])
			}
			for i := q0; i <= q1; i++ {
				for j := 0; j < n; j++ {
					if !evalPred(pred, i, j, docs) {
						continue
					}
					if j > int(h[1]) || (j >= x && j < int(h[0])) {
						t.Fatalf("%v: hull(%d, %d, %d) = %v excludes kept (%d, %d)\n%s", pat, q0, q1, x, h, i, j, hull)
					}
				}
			}
			k0 := r.IntN(n)
			k1 := k0 + r.IntN(min(n-k0, 40))
			var c [1]int64
			class.Eval([]int64{int64(q0), int64(q1), int64(k0), int64(k1)}, docs, nil, c[:])
			kept, total := countKept(q0, q1, k0, k1, func(i, j int) bool { return evalPred(pred, i, j, docs) })
			switch {
			case mask.Class(c[0]) == mask.Empty && kept > 0, mask.Class(c[0]) == mask.Full && kept < total:
				t.Fatalf("%v: class of [%d,%d]x[%d,%d] is %v, %d of %d kept\n%s", pat, q0, q1, k0, k1, mask.Class(c[0]), kept, total, class)
			case !pat.Mask.Op.Combinator() && !pred.UsesDocs() && pat.ExactClass() && mask.Class(c[0]) == mask.Partial && (kept == 0 || kept == total):
				t.Fatalf("%v: primitive class of [%d,%d]x[%d,%d] is partial, %d of %d kept", pat, q0, q1, k0, k1, kept, total)
			}
		}
	}
}

// countKept counts the pairs of the tile [q0, q1] x [k0, k1] that keep
// keeps, and all of them.
func countKept(q0, q1, k0, k1 int, keep func(i, j int) bool) (kept, total int) {
	for i := q0; i <= q1; i++ {
		for j := k0; j <= k1; j++ {
			total++
			if keep(i, j) {
				kept++
			}
		}
	}
	return kept, total
}

// TestResidueProg: the residue program partitions every call's positions
// into its classes, each class's queries being its last members.
func TestResidueProg(t *testing.T) {
	p := ResidueProg()
	for st := 1; st <= 9; st++ {
		for sk := 1; sk <= 40; sk++ {
			for sq := 1; sq <= sk; sq++ {
				keys, queries := 0, 0
				for c := 0; c < st; c++ {
					var res [2]int64
					p.Eval([]int64{int64(c), int64(sq), int64(sk), int64(st)}, nil, nil, res[:])
					nq, nk := int(res[0]), int(res[1])
					wantK, wantQ := 0, 0
					for x := c; x < sk; x += st {
						wantK++
						if x >= sk-sq {
							wantQ++
						}
					}
					if nk != wantK || max(nq, 0) != wantQ {
						t.Fatalf("st %d sq %d sk %d class %d: (%d, %d), want (%d, %d)", st, sq, sk, c, nq, nk, wantQ, wantK)
					}
					if gq, gk := mask.Residue(c, sq, sk, st); gq != nq || gk != nk {
						t.Fatalf("runtime/mask.Residue disagrees with the program: (%d, %d) vs (%d, %d)", gq, gk, nq, nk)
					}
					keys += wantK
					queries += wantQ
				}
				if keys != sk || queries != sq {
					t.Fatalf("st %d sq %d sk %d: classes hold %d keys, %d queries", st, sq, sk, keys, queries)
				}
			}
		}
	}
}

// TestEveryOpRendersAndEvaluates: every IR op has an evaluation and a Go
// rendering (a forgotten op fails here; PTX checks its own in emit/ptx).
func TestEveryOpRendersAndEvaluates(t *testing.T) {
	ids, _ := mask.NewDocs([]int32{0, 0, 1, 1, 1, 2, 2, 2})
	docs := &mask.Docs{}
	docs.SetHead(ids, []int32{5, 6, 7, 8})
	var insts []Inst
	for op := IROp(0); op < NumIROps; op++ {
		in := Inst{Op: op, A: 0, B: 1, C: 2, Imm: 3}
		switch op {
		case IRArg:
			in.Imm = 1
		case IRWRange:
			in.Imm = 0
		case IRLoad: // every field
			for f := Field(0); f < NumFields; f++ {
				if f.Input() != InputHeadParams || f-FieldParam < 4 {
					insts = append(insts, Inst{Op: IRLoad, Imm: int64(f)})
				}
			}
			continue
		}
		insts = append(insts, in)
	}
	for _, in := range insts {
		op := in.Op
		p := &Prog{Name: "op", Args: []string{"a", "b", "c"}, Insts: []Inst{{Op: IRArg, Imm: 0}, {Op: IRArg, Imm: 1}, {Op: IRArg, Imm: 2}, in}, Results: []int{3}}
		if err := p.Check(); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		var res [1]int64
		p.Eval([]int64{1, 2, 3}, docs, nil, res[:])
		want := "int"
		if op.Word() {
			want = "uint64"
		}
		if _, err := GoBody(p, p.Args, "d", []string{want}); err != nil {
			t.Errorf("%s: %v", op, err)
		}
		back, err := ParseProg(p.String())
		if err != nil || back.String() != p.String() {
			t.Errorf("%s: text round trip: %v", op, err)
		}
	}
}
