package ptx

import (
	"fmt"

	"github.com/attngen/attngen/runtime/mask"
)

// TreeArrays returns the arrays a tree kernel reads for a parent array
// (one entry per key position, or with q_pos and k_pos per position a
// batch row reaches, shared by every batch element and head; see
// mask.Docs.ResetTree): lo[i] is TreeLo(i); each position past the
// leading chain (chain+r) has a row of r/32+1 words at anc[off[i]], bit c
// set when position chain+c is i or an ancestor of i; info is the chain's
// length, the least lo of a position past it (the sequence length when
// there is none) and the largest chain position that is an ancestor of a
// position past it (-1 when none). A parent array that ResetTree refuses
// is an error.
func TreeArrays(parent []int32) (lo, off []int32, anc []uint32, info [3]int32, err error) {
	d, err := mask.NewTree(parent)
	if err != nil {
		return nil, nil, nil, info, fmt.Errorf("ptx: %v", err)
	}
	n := len(parent)
	chain := d.TreeChain()
	lo, off = make([]int32, n), make([]int32, n)
	words := 0
	for i := range n {
		lo[i] = int32(d.TreeLo(i))
		if i >= chain {
			off[i] = int32(words)
			words += (i-chain)/32 + 1
		}
	}
	anc = make([]uint32, max(words, 1)) // one word at least: chain rows read word 0
	for i := chain; i < n; i++ {
		r := i - chain
		for w := 0; w <= r/32; w += 2 {
			bits := d.TreeWord(i, chain+32*w)
			anc[int(off[i])+w] = uint32(bits)
			if w+1 <= r/32 {
				anc[int(off[i])+w+1] = uint32(bits >> 32)
			}
		}
	}
	minLo := d.TreeMinLo()
	if minLo == mask.Inf {
		minLo = n
	}
	return lo, off, anc, [3]int32{int32(chain), int32(minLo), int32(d.TreeMaxTop())}, nil
}
