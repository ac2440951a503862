package spec

import "slices"

// MaxRandomBlocks bounds the random blocks one bigbird draws in all
// (query blocks times random): each is a comparison in every kernel.
const MaxRandomBlocks = 512

// BigBird is the bigbird shorthand's parameters: blocks of Block
// positions, Blocks of them (the sequence is Block*Blocks positions),
// Window key blocks around each query block (odd), the first and last
// Global blocks global both ways, and Random key blocks per other query
// block drawn from Seed.
type BigBird struct {
	Block, Blocks, Window, Global, Random int
	Seed                                  uint64
}

// bigbirdMix is splitmix64's output function.
func bigbirdMix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// RandomBlocks returns, in increasing order, the random key blocks of
// query block q (Global <= q < Blocks-Global; none otherwise). The
// candidates are the blocks c with Global <= c < Blocks-Global and
// |c - q| > Window/2, in increasing order; draw k = 0, 1, ... (while k <
// Random and candidates remain) swaps candidate k with candidate k + x mod
// (m - k), where m is the number of candidates and x = mix(Seed *
// 0x9E3779B97F4A7C15 + q<<32 + k) with splitmix64's output function mix;
// the first min(Random, m) candidates are the blocks. The rule is fixed
// here so that a spec means the same mask everywhere and forever.
func (bb BigBird) RandomBlocks(q int) []int {
	g, h := bb.Global, bb.Window/2
	if q < g || q >= bb.Blocks-g {
		return nil
	}
	var cand []int
	for c := g; c < bb.Blocks-g; c++ {
		if c < q-h || c > q+h {
			cand = append(cand, c)
		}
	}
	m := len(cand)
	n := min(bb.Random, m)
	for k := range n {
		x := bigbirdMix(bb.Seed*0x9E3779B97F4A7C15 + uint64(q)<<32 + uint64(k))
		idx := k + int(x%uint64(m-k))
		cand[k], cand[idx] = cand[idx], cand[k]
	}
	out := cand[:n]
	slices.Sort(out)
	return out
}

// Mask is the shorthand's mask: the union of the sliding blocks (Window/2
// + 1 block masks of Window/2 + 1 blocks, offset by one block each: query
// block q sees key blocks q - Window/2 .. q + Window/2), the global
// blocks' keys and rows, and, for each query block, the keys of its random
// blocks; intersected with the queries and keys of the Block*Blocks
// positions, so that positions past them keep nothing.
func (bb BigBird) Mask() *Mask {
	b, n, h := bb.Block, bb.Block*bb.Blocks, bb.Window/2
	u := Union()
	for t := 0; t <= h; t++ {
		u.Args = append(u.Args, BlockAt((h+1)*b, t*b))
	}
	if g := bb.Global; g > 0 {
		u.Args = append(u.Args, KeySet(0, g*b, 1, 0), KeySet((bb.Blocks-g)*b, n, 1, 0),
			QuerySet(0, g*b, 1, 0), QuerySet((bb.Blocks-g)*b, n, 1, 0))
	}
	for q := range bb.Blocks {
		blocks := bb.RandomBlocks(q)
		if len(blocks) == 0 {
			continue
		}
		keys := Union()
		for k := 0; k < len(blocks); {
			e := k + 1
			for e < len(blocks) && blocks[e] == blocks[e-1]+1 {
				e++
			}
			keys.Args = append(keys.Args, KeySet(blocks[k]*b, (blocks[e-1]+1)*b, 1, 0))
			k = e
		}
		if len(keys.Args) == 1 {
			keys = keys.Args[0]
		}
		u.Args = append(u.Args, Intersect(QuerySet(q*b, (q+1)*b, 1, 0), keys))
	}
	return Intersect(u, QuerySet(0, n, 1, 0), KeySet(0, n, 1, 0))
}
