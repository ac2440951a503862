package verify

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// renderPatterns are fixed patterns that exercise every path of Density:
// step-1 runs only, one strided progression overlapping runs, and several
// strided progressions in one row.
func renderPatterns() []spec.Pattern {
	return []spec.Pattern{
		{Mask: spec.Union(spec.Block(16), spec.Bridge(16, 4, 4, 0)), Causal: true},
		{Mask: spec.Union(spec.Global(3), spec.Window(20)), Causal: true},
		{Mask: spec.Union(spec.Window(6), spec.Dilated(6, 0)), Causal: true},
		{Mask: spec.Union(spec.Dilated(3, 0), spec.Dilated(5, 4), spec.Window(2)), Causal: false},
		{Mask: spec.Intersect(spec.Dilated(2, 0), spec.WindowLR(9, 7)), Causal: false},
		{Mask: spec.Dilated(8, 0), Causal: true},
		{Mask: spec.Full(), Causal: false},
	}
}

func bruteDensity(p spec.Pattern, n, cell int) []int64 {
	nc := (n + cell - 1) / cell
	kept := make([]int64, nc*nc)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if p.At(i, j) {
				kept[(i/cell)*nc+j/cell]++
			}
		}
	}
	return kept
}

func TestDensityExact(t *testing.T) {
	check := func(p spec.Pattern, n, cell int) {
		t.Helper()
		d := Density(p, n, cell)
		want := bruteDensity(p, n, cell)
		for k := range want {
			if d.Kept[k] != want[k] {
				t.Fatalf("%v n=%d cell=%d: cell (%d, %d) kept %d, brute force %d",
					p, n, cell, k/d.Cells, k%d.Cells, d.Kept[k], want[k])
			}
		}
		if got, kp := d.Total(), KeptPairs(p, n, n); got != kp {
			t.Fatalf("%v n=%d cell=%d: total %d, KeptPairs %d", p, n, cell, got, kp)
		}
	}
	for _, p := range renderPatterns() {
		for _, c := range []struct{ n, cell int }{{64, 1}, {64, 4}, {61, 7}, {50, 64}, {97, 16}} {
			check(p, c.n, c.cell)
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	for iter := 0; iter < 300; iter++ {
		p := spectest.Pattern(r, 40, 2)
		n := 1 + r.IntN(70)
		check(p, n, 1+r.IntN(12))
	}
}

func TestClassifyGrid(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for iter := 0; iter < 200; iter++ {
		p := spectest.Pattern(r, 40, 2)
		n := 1 + r.IntN(90)
		tile := 1 + r.IntN(12)
		cell := 1 + r.IntN(20)
		if r.IntN(2) == 0 {
			cell = tile * (1 + r.IntN(3))
		}
		g := ClassifyGrid(p, n, tile, cell)
		nt := (n + tile - 1) / tile
		var count [3]int64
		bits := make([]uint8, g.Cells*g.Cells)
		for qt := 0; qt < nt; qt++ {
			for kt := 0; kt < nt; kt++ {
				q0, q1 := qt*tile, min(n, qt*tile+tile)-1
				k0, k1 := kt*tile, min(n, kt*tile+tile)-1
				cl := p.Classify(q0, q1, k0, k1)
				count[cl]++
				for rc := q0 / cell; rc <= q1/cell; rc++ {
					for cc := k0 / cell; cc <= k1/cell; cc++ {
						bits[rc*g.Cells+cc] |= 1 << cl
					}
				}
			}
		}
		if g.Count != count || g.Tiles != nt {
			t.Fatalf("%v n=%d tile=%d: counts %v of %d tiles, want %v of %d", p, n, tile, g.Count, g.Tiles, count, nt)
		}
		if !bytes.Equal(g.Bits, bits) {
			t.Fatalf("%v n=%d tile=%d cell=%d: cell class bits differ", p, n, tile, cell)
		}
	}
}

func TestCellClassAggregates(t *testing.T) {
	// Blocks of 8 under tiles of 4: cells of 8 x 8 positions hold 2 x 2 tiles.
	p := spec.Pattern{Mask: spec.Block(8), Causal: true}
	g := ClassifyGrid(p, 32, 4, 8)
	if cl, mixed := g.CellClass(0, 0); cl != spec.Partial || mixed {
		t.Errorf("diagonal cell: %v mixed=%v, want partial", cl, mixed)
	}
	if cl, _ := g.CellClass(1, 0); cl != spec.Empty {
		t.Errorf("below-diagonal cell of block mask: %v, want empty", cl)
	}
	// Tiles of 4, cells of 8, blocks of 4, non-causal: the diagonal cell holds
	// two full tiles and two empty ones.
	q := spec.Pattern{Mask: spec.Block(4), Causal: false}
	h := ClassifyGrid(q, 32, 4, 8)
	if cl, mixed := h.CellClass(1, 1); cl != spec.Partial || !mixed {
		t.Errorf("mixed cell: %v mixed=%v, want partial mixed", cl, mixed)
	}
	var b strings.Builder
	if err := h.WriteText(&b, 1); err != nil {
		t.Fatal(err)
	}
	want := "+----+\n|:...|\n|.:..|\n|..:.|\n|...:|\n+----+\n"
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestDensityText(t *testing.T) {
	p := spec.Pattern{Mask: spec.Full(), Causal: true}
	var b strings.Builder
	if err := Density(p, 8, 4).WriteText(&b, 1); err != nil {
		t.Fatal(err)
	}
	// 4 x 4 diagonal cells keep 10 of 16 pairs (more than 2/3 is 11).
	want := "+--+\n|" + ShadeMid + ShadeNone + "|\n|" + ShadeAll + ShadeMid + "|\n+--+\n"
	if b.String() != want {
		t.Errorf("text:\n%q\nwant:\n%q", b.String(), want)
	}
}

func TestMaskImages(t *testing.T) {
	opt := MaskImageOptions{Name: "t<&>", Notes: []string{"a note"}}
	ps := renderPatterns()
	for _, p := range []spec.Pattern{ps[0], ps[3], ps[5]} {
		for _, n := range []int{5, 1500} {
			tile := min(n, 64)
			var a, b bytes.Buffer
			if err := WriteMaskPNG(&a, p, n, tile, opt); err != nil {
				t.Fatal(err)
			}
			if err := WriteMaskPNG(&b, p, n, tile, opt); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("%v n=%d: PNG not deterministic", p, n)
			}
			img, err := png.Decode(&a)
			if err != nil {
				t.Fatal(err)
			}
			if s := img.Bounds().Size(); s.X > 1200 || s.Y > 1200 || s.X < 600 {
				t.Errorf("%v n=%d: PNG %v", p, n, s)
			}
			a.Reset()
			if err := WriteMaskSVG(&a, p, n, tile, opt); err != nil {
				t.Fatal(err)
			}
			if c := strings.Count(a.String(), "<rect"); c > maxSVGRects+20 {
				t.Errorf("%v n=%d: %d rectangles in the SVG", p, n, c)
			}
			dec := xml.NewDecoder(&a)
			for {
				if _, err := dec.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("%v n=%d: SVG: %v", p, n, err)
				}
			}
		}
	}
}
