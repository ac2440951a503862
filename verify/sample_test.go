package verify

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

// TestReferenceRows: the reference and the yardsticks on listed rows (on
// several goroutines) equal the full computation on those rows bit for bit
// and leave the others alone.
func TestReferenceRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	p := spec.Pattern{Mask: spec.Union(spec.Window(9), spec.Global(2)), Causal: true}
	s := Shape{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 50, SeqK: 70, HeadDim: 16}
	nq, nkv, nl := s.Sizes()
	q, k, v := randomSlice(r, nq, 1), randomSlice(r, nkv, 1), randomSlice(r, nkv, 1)
	rows := SampleRows(p, nil, s, 12, r)
	if err := checkRows(rows, nl); err != nil {
		t.Fatal(err)
	}
	ref, refLSE, err := Reference(p, nil, q, k, v, s)
	if err != nil {
		t.Fatal(err)
	}
	part, partLSE, err := ReferenceRows(p, nil, q, k, v, s, rows)
	if err != nil {
		t.Fatal(err)
	}
	naive, naiveLSE := make([]float32, nq), make([]float32, nl)
	if err := NaiveBF16(p, nil, q, k, v, s, naive, naiveLSE); err != nil {
		t.Fatal(err)
	}
	pn, pnLSE := make([]float32, nq), make([]float32, nl)
	if err := BF16Kernel.NaiveRows(p, nil, q, k, v, s, rows, pn, pnLSE); err != nil {
		t.Fatal(err)
	}
	D := s.HeadDim
	for row := 0; row < nl; row++ {
		listed := slices.Contains(rows, row)
		for d := 0; d < D; d++ {
			x := row*D + d
			if listed && (part[x] != ref[x] || pn[x] != naive[x]) {
				t.Fatalf("row %d dim %d: rows %v %v, full %v %v", row, d, part[x], pn[x], ref[x], naive[x])
			}
			if !listed && (part[x] != 0 || pn[x] != 0) {
				t.Fatalf("row %d not listed but written", row)
			}
		}
		if listed && (partLSE[row] != refLSE[row] || pnLSE[row] != naiveLSE[row]) {
			t.Fatalf("lse row %d differs", row)
		}
	}
	if _, _, err := ReferenceRows(p, nil, q, k, v, s, []int{3, 3}); err == nil {
		t.Fatal("a repeated row: no error")
	}
	if _, _, err := ReferenceRows(p, nil, q, k, v, s, []int{nl}); err == nil {
		t.Fatal("a row past the end: no error")
	}
}

// TestSampleRows: the first and last rows, fully masked rows and the rows
// at block edges are among the sample; at most n positions, sorted, for
// every head of a small shape and four of a large one.
func TestSampleRows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	p := spec.Pattern{Mask: spec.Bridge(16, 3, 5, 0), Causal: true}
	p2 := spec.Pattern{Mask: spec.Block(256), Causal: true}
	for _, tc := range []struct {
		p     spec.Pattern
		s     Shape
		heads int
		want  []int
	}{
		{p2, Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 1024, SeqK: 1024, HeadDim: 8}, 2, []int{0, 255, 256, 511, 512, 767, 768, 1023}},
		{p2, Shape{Batch: 4, HeadsQ: 16, HeadsKV: 16, SeqQ: 2048, SeqK: 2048, HeadDim: 8}, 4, []int{0, 255, 256, 1023, 1024, 2047}},
		{p2, Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1000, SeqK: 1030, HeadDim: 8}, 1, []int{0, 225, 226, 999}},
	} {
		n := 64
		rows := SampleRows(tc.p, nil, tc.s, n, r)
		if !slices.IsSorted(rows) {
			t.Fatal("rows not sorted")
		}
		if err := checkRows(rows, tc.s.Batch*tc.s.HeadsQ*tc.s.SeqQ); err != nil {
			t.Fatal(err)
		}
		if len(rows) != tc.heads*n {
			t.Fatalf("%v: %d rows, want %d heads x %d", tc.s, len(rows), tc.heads, n)
		}
		pos := map[int]int{}
		for _, x := range rows {
			pos[x%tc.s.SeqQ]++
		}
		for _, w := range tc.want {
			if pos[w] != tc.heads {
				t.Errorf("%v: row %d sampled for %d heads, want %d", tc.s, w, pos[w], tc.heads)
			}
		}
	}
	// a bridge whose target rows outside the bridge keep nothing
	s := Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1024, SeqK: 1024, HeadDim: 8}
	counts := keptCounts(p, nil, s)
	var masked []int
	for row, c := range counts {
		if c == 0 {
			masked = append(masked, row)
		}
	}
	if len(masked) < 32 {
		t.Fatalf("the test's mask has %d fully masked rows, want many", len(masked))
	}
	got := 0
	for _, x := range SampleRows(p, nil, s, 64, r) {
		if counts[x] == 0 {
			got++
		}
	}
	if got < 16 {
		t.Errorf("%d fully masked rows sampled, want a quarter of 64", got)
	}
	if all := SampleRows(p, nil, s, 0, r); len(all) != s.SeqQ {
		t.Errorf("n = 0: %d rows, want every row", len(all))
	}
}

// TestCheckNumericSampled: a kernel wrong on one row at a block edge fails
// the sampled check; the reference itself passes it.
func TestCheckNumericSampled(t *testing.T) {
	p := spec.Pattern{Mask: spec.Block(256), Causal: true}
	s := Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 1024, SeqK: 1024, HeadDim: 8}
	ref := func(bad int) Run {
		return func(out, lse, q, k, v []float32, docs []int32, s Shape) error {
			o, l, err := Reference(p, nil, q, k, v, s)
			if err != nil {
				return err
			}
			for x := range o {
				out[x] = float32(o[x])
			}
			for x := range l {
				lse[x] = float32(l[x])
			}
			if bad >= 0 {
				out[bad*s.HeadDim] += 0.5
			}
			return nil
		}
	}
	rep, err := CheckNumericSampled(p, ref(-1), s, rand.New(rand.NewPCG(1, 2)), FP32, 64)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 128 || !strings.Contains(rep.String(), "of 128 sampled rows") {
		t.Errorf("report %v: want 128 sampled rows", rep)
	}
	if _, err := CheckNumericSampled(p, ref(s.SeqQ+256), s, rand.New(rand.NewPCG(1, 2)), FP32, 64); err == nil || !strings.Contains(err.Error(), "error too large") {
		t.Errorf("a wrong row at a block edge (head 1, row 256): %v", err)
	}
}
