package gen

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// checkColumns compares the column-wise schedule of a call (Plan.Columns,
// exact classes, and mask.Columns.Build, the runtime's, with sound
// classes) with a brute-force count of every tile of every segment: key
// tile kt lists query tile qt exactly when the tile keeps a pair, in
// increasing order, Full exactly when it keeps every pair. docs nil: one
// document.
func checkColumns(t *testing.T, p *Plan, sq, sk int, docs *mask.Docs) {
	t.Helper()
	var words []uint64
	m := p.Mask()
	for _, seg := range p.Segments(sq, sk) {
		d := docs
		if d == nil {
			d = p.oneDoc(seg.SeqK)
		}
		keep := func(i, j int) bool {
			if docs != nil {
				return p.Source.AtDocs(seg.Abs(i), seg.Abs(j), docs)
			}
			return p.Source.At(seg.Abs(i), seg.Abs(j))
		}
		exact := p.Columns(seg, d)
		var rt mask.Columns
		rt.Build(m, seg.SeqQ, seg.SeqK, p.TileQ, p.TileK, d)
		off := seg.SeqK - seg.SeqQ
		nkt, nqt := (seg.SeqK+p.TileK-1)/p.TileK, p.QueryTiles(seg)
		if exact.KeyTiles() != nkt || rt.KeyTiles() != nkt {
			t.Fatalf("%s sq %d sk %d seg %+v: %d and %d key tiles, want %d", p.Name, sq, sk, seg, exact.KeyTiles(), rt.KeyTiles(), nkt)
		}
		for kt := 0; kt < nkt; kt++ {
			k0, k1 := kt*p.TileK, min(kt*p.TileK+p.TileK, seg.SeqK)-1
			got, loose := map[int]mask.Class{}, map[int]mask.Class{}
			for n, c := range exact.Of(kt) {
				if n > 0 && c.Q <= exact.Of(kt)[n-1].Q {
					t.Fatalf("%s sq %d sk %d: key tile %d: query tiles out of order %v", p.Name, sq, sk, kt, exact.Of(kt))
				}
				got[c.Q] = c.Class
			}
			for n, c := range rt.Of(kt) {
				if n > 0 && c.Q <= rt.Of(kt)[n-1].Q {
					t.Fatalf("%s sq %d sk %d: runtime columns of key tile %d out of order %v", p.Name, sq, sk, kt, rt.Of(kt))
				}
				loose[c.Q] = c.Class
			}
			for qt := 0; qt < nqt; qt++ {
				r0, r1 := qt*p.TileQ+off, min(qt*p.TileQ+p.TileQ, seg.SeqQ)-1+off
				kept, total := 0, 0
				for i := r0; i <= r1; i++ {
					for j := k0; j <= k1; j++ {
						total++
						if keep(i, j) {
							kept++
						}
					}
				}
				c, ok := got[qt]
				where := func() string {
					return p.Name + " " + p.Source.String()
				}
				switch {
				case kept > 0 && !ok:
					t.Fatalf("%s sq %d sk %d seg %+v: key tile %d, query tile %d keeps %d pairs, not listed", where(), sq, sk, seg, kt, qt, kept)
				case kept == 0 && ok:
					t.Fatalf("%s sq %d sk %d seg %+v: key tile %d lists empty query tile %d", where(), sq, sk, seg, kt, qt)
				case ok && (c == mask.Full) != (kept == total):
					t.Fatalf("%s sq %d sk %d seg %+v: key tile %d, query tile %d: class %v, %d of %d kept", where(), sq, sk, seg, kt, qt, c, kept, total)
				}
				lc, lok := loose[qt]
				switch {
				case kept > 0 && !lok:
					t.Fatalf("%s sq %d sk %d seg %+v: runtime columns: key tile %d, query tile %d keeps %d pairs, not listed", where(), sq, sk, seg, kt, qt, kept)
				case lok && lc == mask.Full && kept != total:
					t.Fatalf("%s sq %d sk %d seg %+v: runtime columns: key tile %d, query tile %d Full, %d of %d kept", where(), sq, sk, seg, kt, qt, kept, total)
				case lok && lc == mask.Partial:
					// refined, the runtime's class is the exact one
					if cap(words) < p.TileQ {
						words = make([]uint64, p.TileQ)
					}
					rc := mask.Refine(m, words[:p.TileQ], r0, r1, kt, seg.SeqK, p.TileK, d)
					if rc != c && !(rc == mask.Empty && !ok) {
						t.Fatalf("%s sq %d sk %d seg %+v: key tile %d, query tile %d refines to %v, exact %v", where(), sq, sk, seg, kt, qt, rc, c)
					}
				}
			}
		}
	}
}

func TestColumnsExamples(t *testing.T) {
	files, _ := filepath.Glob("../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	for _, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, tiles := range []Tiles{{"t16", 16, 16}, {"t32x16", 32, 16}, {"t8x24", 8, 24}, {"cpu", 48, 64}} {
			p, err := Compile(s, tiles, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range [][2]int{{1, 1}, {1, 300}, {77, 300}, {300, 300}, {513, 600}} {
				checkColumns(t, p, n[0], n[1], nil)
			}
		}
	}
}

func TestColumnsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for iter := 0; iter < 300; iter++ {
		pat := spectest.Pattern(r, 40, 3)
		if r.IntN(5) == 0 {
			pat = spec.Pattern{Mask: spec.Dilated(1+r.IntN(9), r.IntN(4)), Causal: r.IntN(3) != 0}
		}
		var docs *mask.Docs
		sk := 1 + r.IntN(120)
		if r.IntN(4) == 0 {
			pat.Mask = spec.Intersect(spec.Document(), pat.Mask)
			docs = randomDocs(r, sk)
		}
		s := &spec.Spec{Name: "random", Mask: pat.Mask, Causal: pat.Causal, HeadDim: 64}
		p, err := Compile(s, Tiles{"random", 1 + r.IntN(20), 1 + r.IntN(20)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkColumns(t, p, 1+r.IntN(sk), sk, docs)
	}
}
