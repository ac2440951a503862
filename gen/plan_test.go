package gen

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// checkSchedule compares the schedule of a call with a brute-force
// classification of every tile of every segment, and the predicate with the
// source mask on every pair of every partial tile.
func checkSchedule(t *testing.T, p *Plan, sq, sk int) {
	t.Helper()
	var refs []TileRef
	var keptInSegments int64
	for _, seg := range p.Segments(sq, sk) {
		docs := p.oneDoc(seg.SeqK) // one document, as At assumes
		off := seg.SeqK - seg.SeqQ
		nk := (seg.SeqK + p.TileK - 1) / p.TileK
		for qt := 0; qt < p.QueryTiles(seg); qt++ {
			refs = p.Visit(refs[:0], seg, qt, docs)
			got := map[int]mask.Class{}
			for n, r := range refs {
				if n > 0 && r.K <= refs[n-1].K {
					t.Fatalf("%s sq %d sk %d: key tiles out of order %v", p.Name, sq, sk, refs)
				}
				got[r.K] = r.Class
			}
			r0, r1 := qt*p.TileQ, min(qt*p.TileQ+p.TileQ, seg.SeqQ)-1
			for kt := 0; kt < nk; kt++ {
				k0, k1 := kt*p.TileK, min(kt*p.TileK+p.TileK, seg.SeqK)-1
				kept, total := 0, 0
				for r := r0; r <= r1; r++ {
					for j := k0; j <= k1; j++ {
						total++
						want := p.Source.At(seg.Abs(r+off), seg.Abs(j))
						if want {
							kept++
						}
						if c, ok := got[kt]; ok && c == mask.Partial {
							if evalPred(p.Pred, r+off, j, docs) != want {
								t.Fatalf("%s sq %d sk %d seg %+v: predicate at (%d, %d) says %v, mask %v\n%s", p.Name, sq, sk, seg, r+off, j, !want, want, p.Pred)
							}
						}
					}
				}
				keptInSegments += int64(kept)
				c, visited := got[kt]
				switch {
				case kept == 0 && visited:
					t.Fatalf("%s sq %d sk %d seg %+v q tile %d: empty key tile %d visited", p.Name, sq, sk, seg, qt, kt)
				case visited && c == mask.Partial && kept == total:
					t.Fatalf("%s sq %d sk %d seg %+v q tile %d: key tile %d marked partial, all %d kept", p.Name, sq, sk, seg, qt, kt, total)
				case kept > 0 && !visited:
					t.Fatalf("%s sq %d sk %d seg %+v q tile %d: key tile %d with %d kept pairs not visited", p.Name, sq, sk, seg, qt, kt, kept)
				case visited && c == mask.Full && kept != total:
					t.Fatalf("%s sq %d sk %d seg %+v q tile %d: key tile %d marked full, %d of %d kept", p.Name, sq, sk, seg, qt, kt, kept, total)
				}
			}
		}
	}
	// Every kept pair of the call lies in some segment.
	var kept int64
	for r := 0; r < sq; r++ {
		for j := 0; j < sk; j++ {
			if p.Source.At(r+sk-sq, j) {
				kept++
			}
		}
	}
	if kept != keptInSegments {
		t.Fatalf("%s sq %d sk %d: %d kept pairs, %d inside segments", p.Name, sq, sk, kept, keptInSegments)
	}
}

func TestScheduleExamples(t *testing.T) {
	files, _ := filepath.Glob("../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	for _, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, tiles := range []Tiles{{"t16", 16, 16}, {"t32x16", 32, 16}, {"t8x24", 8, 24}} {
			p, err := Compile(s, tiles, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range [][2]int{{1, 1}, {1, 300}, {77, 300}, {300, 300}, {513, 600}} {
				checkSchedule(t, p, n[0], n[1])
			}
		}
	}
}

func TestScheduleRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for iter := 0; iter < 300; iter++ {
		pat := spectest.Pattern(r, 40, 3)
		if r.IntN(5) == 0 {
			pat = spec.Pattern{Mask: spec.Dilated(1+r.IntN(9), r.IntN(4)), Causal: r.IntN(3) != 0}
		}
		s := &spec.Spec{Name: "random", Mask: pat.Mask, Causal: pat.Causal, HeadDim: 64}
		p, err := Compile(s, Tiles{"random", 1 + r.IntN(20), 1 + r.IntN(20)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sk := 1 + r.IntN(120)
		checkSchedule(t, p, 1+r.IntN(sk), sk)
	}
}

// TestPredicateDocuments checks the predicate against AtDocs on packed
// sequences.
func TestPredicateDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for iter := 0; iter < 300; iter++ {
		inner := spectest.Mask(r, 20, 2)
		pat := spec.Pattern{Mask: spec.Intersect(spec.Document(), inner), Causal: r.IntN(3) != 0}
		n := 1 + r.IntN(60)
		docs := randomDocs(r, n)
		pred := LowerPred(pat)
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if got, want := evalPred(pred, i, j, docs), pat.AtDocs(i, j, docs); got != want {
					t.Fatalf("%v docs %+v (%d,%d): predicate %v, mask %v\n%s", pat, docs, i, j, got, want, pred)
				}
			}
		}
	}
}

// evalPred evaluates pred(i, j).
func evalPred(p *Prog, i, j int, docs *mask.Docs) bool {
	var res [1]int64
	p.Eval([]int64{int64(i), int64(j)}, docs, nil, res[:])
	return res[0] != 0
}

// TestProgramText: every program of random plans prints and parses back
// unchanged; malformed text is refused.
func TestProgramText(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for iter := 0; iter < 200; iter++ {
		pat := spectest.Pattern(r, 30, 3)
		for _, prog := range []*Prog{LowerPred(pat), LowerHull(pat), LowerQHull(pat), LowerClass(pat), LowerWord(LowerPred(pat)), ResidueProg()} {
			if prog == nil {
				continue
			}
			back, err := ParseProg(prog.String())
			if err != nil {
				t.Fatalf("%v\n%s", err, prog)
			}
			if back.String() != prog.String() {
				t.Fatalf("round trip changed the program:\n%s\n%s", prog, back)
			}
		}
	}
	for _, bad := range []string{"", "p(i) -> v0\nv0 = arg 0\nv1 = add v0 v5\n", "p() -> v0\nv0 = const\n", "p(i) -> v0\nv0 = arg 0\nv1 = divc v0 0\n",
		"p(i) -> v1\nv0 = arg 0\n", "p(i) -> v0\nv0 = frob\n", "p(i) -> v0\nv0 = arg 1\n", "p(i) v0\nv0 = arg 0\n"} {
		if _, err := ParseProg(bad); err == nil {
			t.Errorf("ParseProg(%q): no error", bad)
		}
	}
}

// TestCompileRefusesHugeMask: a mask built in code past spec.MaxPrimitives
// (the parser refuses one in a file) is an error, not a plan whose
// kernels take minutes to write; one at the limit compiles.
func TestCompileRefusesHugeMask(t *testing.T) {
	for _, n := range []int{spec.MaxPrimitives, spec.MaxPrimitives + 1} {
		u := spec.Union()
		for k := range n {
			u.Args = append(u.Args, spec.Window(k+2))
		}
		s := &spec.Spec{Name: "huge", Mask: u, Causal: true, HeadDim: 64}
		_, err := Compile(s, Tiles{TargetName: "generic", Q: 64, K: 64}, nil)
		if n <= spec.MaxPrimitives && err != nil {
			t.Errorf("%d primitives: %v", n, err)
		}
		if n > spec.MaxPrimitives && (err == nil || !strings.Contains(err.Error(), "1025 primitives, at most 1024")) {
			t.Errorf("%d primitives: error %v, want the count and the limit", n, err)
		}
	}
}
