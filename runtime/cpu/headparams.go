package cpu

import "github.com/attngen/attngen/runtime/mask"

// SplitHeadParams turns head-major values (n per query head, for heads
// query heads: vals[h*n+k] is parameter k at head h, the layout the PTX
// kernels and verify.Shape take) into Args.HeadParams' layout, one slice
// of heads values per parameter. nil or empty vals give no values.
func SplitHeadParams(vals []int32, n, heads int) [mask.MaxHeadParams][]int32 {
	var hp [mask.MaxHeadParams][]int32
	if len(vals) == 0 {
		return hp
	}
	for k := 0; k < min(n, mask.MaxHeadParams); k++ {
		hp[k] = make([]int32, heads)
		for h := range hp[k] {
			hp[k][h] = vals[h*n+k]
		}
	}
	return hp
}
