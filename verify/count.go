package verify

import (
	"slices"

	"github.com/attngen/attngen/spec"
)

// KeptPairs counts the (query, key) pairs the pattern keeps for sq queries
// and sk keys (bottom-right aligned), row by row from the mask's key
// progressions: the cost is proportional to sq times the progressions per
// row, never to sq*sk.
func KeptPairs(p spec.Pattern, sq, sk int) int64 {
	var buf []spec.Prog
	var kept int64
	for r := 0; r < sq; r++ {
		buf = p.Keys(buf[:0], spec.Row(r, sq, sk), sk)
		kept += int64(unionCount(buf, sk))
	}
	return kept
}

// unionCount is the number of distinct positions in [0, n) covered by the
// progressions. Step-1 intervals are merged; one progression of larger step
// is counted by inclusion-exclusion against them; several fall back to
// marking positions.
func unionCount(gs []spec.Prog, n int) int {
	var ivs []spec.Prog
	var strided []spec.Prog
	for _, g := range gs {
		if g.Lo > g.Hi {
			continue
		}
		if g.Step == 1 {
			ivs = append(ivs, g)
		} else {
			strided = append(strided, g)
		}
	}
	merged := mergeIntervals(ivs)
	total := 0
	for _, iv := range merged {
		total += iv.Hi - iv.Lo + 1
	}
	switch len(strided) {
	case 0:
		return total
	case 1:
		g := strided[0]
		total += g.Count()
		for _, iv := range merged {
			lo := max(iv.Lo, g.Lo)
			lo += ((g.Lo-lo)%g.Step + g.Step) % g.Step
			if hi := min(iv.Hi, g.Hi); lo <= hi {
				total -= (hi-lo)/g.Step + 1
			}
		}
		return total
	}
	seen := make([]bool, n)
	count := 0
	mark := func(g spec.Prog) {
		for j := g.Lo; j <= g.Hi; j += g.Step {
			if !seen[j] {
				seen[j] = true
				count++
			}
		}
	}
	for _, g := range merged {
		mark(g)
	}
	for _, g := range strided {
		mark(g)
	}
	return count
}

// mergeIntervals sorts step-1 progressions and merges overlapping or
// adjacent ones.
func mergeIntervals(ivs []spec.Prog) []spec.Prog {
	if len(ivs) <= 1 {
		return ivs
	}
	out := append([]spec.Prog(nil), ivs...)
	slices.SortFunc(out, func(a, b spec.Prog) int { return a.Lo - b.Lo })
	k := 0
	for _, iv := range out[1:] {
		if iv.Lo <= out[k].Hi+1 {
			out[k].Hi = max(out[k].Hi, iv.Hi)
		} else {
			k++
			out[k] = iv
		}
	}
	return out[:k+1]
}
