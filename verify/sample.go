package verify

import (
	"math/rand/v2"
	"slices"

	"github.com/attngen/attngen/spec"
)

// sampleTile is the row tile whose edges SampleRows favours: the PTX
// kernel's 64 query rows, a multiple of the CPU kernels' row tiles.
const sampleTile = 64

// SampleRows picks at most n query rows of a shape (every row when n <= 0
// or n >= SeqQ) for checks that cannot afford the float64 reference on
// every row of a long sequence, and returns their lse indices
// ([batch][heads_q][seq_q], sorted) for every batch element and query head
// when there are at most four of them, else for the first, the last and
// two random ones. The rows are, in this order until n are taken: the first
// and the last; rows that keep no key (fully masked), up to a quarter of n;
// mask boundaries, where the number of kept keys changes its step from the
// row before (block, window and sink edges, document starts), each with the
// row before it, up to a quarter of n; rows at the edges of 64-row tiles,
// up to an eighth of n; then random rows. Each group larger than its share
// is thinned evenly over the sequence. docs may be nil for masks without
// documents.
func SampleRows(p spec.Pattern, docs *spec.Docs, s Shape, n int, r *rand.Rand) []int {
	sq := s.SeqQ
	var pos []int // query rows, 0 <= row < SeqQ
	if n <= 0 || n >= sq {
		pos = make([]int, sq)
		for i := range pos {
			pos[i] = i
		}
	} else {
		taken := map[int]bool{}
		take := func(rows []int, limit int) {
			var fresh []int
			for _, x := range rows {
				if x >= 0 && x < sq && !taken[x] {
					fresh = append(fresh, x)
				}
			}
			limit = min(limit, n-len(pos))
			if limit <= 0 {
				return
			}
			if len(fresh) > limit {
				thin := make([]int, limit)
				for k := range thin {
					thin[k] = fresh[k*len(fresh)/limit]
				}
				fresh = thin
			}
			for _, x := range fresh {
				if !taken[x] {
					taken[x] = true
					pos = append(pos, x)
				}
			}
		}
		take([]int{0, sq - 1}, n)
		counts := keptCounts(p, docs, s)
		var masked, edges, tiles []int
		for row := 0; row < sq; row++ {
			if counts[row] == 0 {
				masked = append(masked, row)
			}
			if row >= 2 && counts[row]-counts[row-1] != counts[row-1]-counts[row-2] {
				edges = append(edges, row-1, row)
			}
			if i := spec.Row(row, sq, s.SeqK); i%sampleTile == 0 || i%sampleTile == sampleTile-1 {
				tiles = append(tiles, row)
			}
		}
		take(masked, max(n/4, 1))
		take(edges, max(n/4, 2))
		take(tiles, max(n/8, 1))
		for len(pos) < n {
			take([]int{r.IntN(sq)}, 1)
		}
	}
	heads := s.Batch * s.HeadsQ
	bh := make([]int, 0, 4)
	if heads <= 4 {
		for x := 0; x < heads; x++ {
			bh = append(bh, x)
		}
	} else {
		bh = append(bh, 0, heads-1)
		for len(bh) < 4 {
			if x := r.IntN(heads); !slices.Contains(bh, x) {
				bh = append(bh, x)
			}
		}
	}
	rows := make([]int, 0, len(bh)*len(pos))
	for _, x := range bh {
		for _, row := range pos {
			rows = append(rows, x*sq+row)
		}
	}
	slices.Sort(rows)
	return rows
}

// keptCounts is the number of keys each query row keeps.
func keptCounts(p spec.Pattern, docs *spec.Docs, s Shape) []int {
	counts := make([]int, s.SeqQ)
	var progs []spec.Prog
	for row := range counts {
		i := spec.Row(row, s.SeqQ, s.SeqK)
		if docs != nil && p.Mask.HasData() {
			for j := 0; j < s.SeqK; j++ {
				if p.AtDocs(i, j, docs) {
					counts[row]++
				}
			}
			continue
		}
		progs = p.Keys(progs[:0], i, s.SeqK)
		for _, g := range progs {
			counts[row] += g.Count()
		}
	}
	return counts
}
