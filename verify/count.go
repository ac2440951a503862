package verify

import "github.com/attngen/attngen/spec"

// KeptPairs counts the (query, key) pairs the pattern keeps for sq queries
// and sk keys (bottom-right aligned), row by row from the mask's key
// progressions: the cost is proportional to sq times the progressions per
// row, never to sq*sk.
func KeptPairs(p spec.Pattern, sq, sk int) int64 {
	var buf []spec.Prog
	var kept int64
	for r := 0; r < sq; r++ {
		buf = p.Keys(buf[:0], spec.Row(r, sq, sk), sk)
		kept += int64(spec.CountKeys(buf, 0, sk-1))
	}
	return kept
}
