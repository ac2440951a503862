package avo

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		n, most, unit int
		want          []int
	}{
		{64, 64, 4, []int{64}},
		{128, 64, 4, []int{64, 64}},
		{32, 64, 4, []int{32}},
		{80, 64, 4, []int{40, 40}},
		{96, 64, 4, []int{48, 48}},
		{192, 64, 4, []int{64, 64, 64}},
		{5, 4, 1, []int{3, 2}},
		{10, 4, 1, []int{4, 3, 3}},
		{12, 8, 1, []int{6, 6}},
		{1, 4, 1, []int{1}},
	} {
		got := split(c.n, c.most, c.unit)
		if !slices.Equal(got, c.want) {
			t.Errorf("split(%d, %d, %d) = %v, want %v", c.n, c.most, c.unit, got, c.want)
		}
	}
	if got := runs([]int{4, 3, 3}); !slices.Equal(got, []run{{4, 1}, {3, 2}}) {
		t.Errorf("runs: %v", got)
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{TileName(AVX512, Square(64)), "tileAVX512D64"},
		{TileName(AVX2, Dims{192, 128}), "tileAVX2D192V128"},
		{TileScoreName(AVX512, Dims{192, 128}), "tileScoreAVX512D192V128"},
		{DecodeName(AVX2, BF16, Square(80), 4), "decodeAVX2BF16D80R4"},
		{DecodeScoreName(AVX512, F16, Dims{192, 128}, 8), "decodeScoreAVX512F16D192V128R8"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

// TestDecodeShapes checks every decode kernel's blocking: the column
// chunks cover the o row, the row groups divide the rows, and the P V
// product's registers fit the ISA's.
func TestDecodeShapes(t *testing.T) {
	for _, isa := range ISAs {
		for _, d := range KernelDims {
			for _, r := range DecodeRows {
				s := decodeShapeOf(isa, d, r)
				sum := 0
				for _, c := range s.chunks {
					sum += c
				}
				if sum != d.V/isa.lanes() || s.nq != d.QK/isa.lanes() || r%s.rg != 0 ||
					s.rg*s.chunks[0]+s.rg+1 > isa.regs() {
					t.Errorf("%s %s R%d: %+v", isa, d, r, s)
				}
			}
		}
	}
}

// TestTable checks that the generated table parses and names every
// kernel of every ISA and dims.
func TestTable(t *testing.T) {
	src := Table(Options{})
	if _, err := parser.ParseFile(token.NewFileSet(), TableFile, src, 0); err != nil {
		t.Fatal(err)
	}
	for _, isa := range ISAs {
		if !bytes.Contains(src, []byte("\nvar "+DimsVar(isa)+" = []dimKernels{\n")) {
			t.Errorf("no %s", DimsVar(isa))
		}
		for _, d := range KernelDims {
			names := []string{fmt.Sprintf("dims: dims{%d, %d}, tile: %s, tileScore: %s", d.QK, d.V, TileName(isa, d), TileScoreName(isa, d))}
			for _, e := range Elems {
				for _, r := range DecodeRows {
					names = append(names, DecodeName(isa, e, d, r), DecodeScoreName(isa, e, d, r))
				}
			}
			for _, n := range names {
				if !bytes.Contains(src, []byte(n+",")) && !bytes.Contains(src, []byte(n+"}")) {
					t.Errorf("table lacks %s", n)
				}
			}
		}
	}
}
