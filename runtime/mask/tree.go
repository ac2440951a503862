package mask

import (
	"fmt"
	"math/bits"
)

// MaxTreeNodes is the most positions a parent array may have after its
// leading chain (the positions whose ancestor sets are stored as bitsets).
// A speculative-decoding tree has tens to hundreds of nodes.
const MaxTreeNodes = 16384

// tree is the indexed parent array of a tree mask (see ResetTree).
type tree struct {
	parent []int32
	chain  int     // positions [0, chain) form the chain 0 <- 1 <- ... <- chain-1
	top    []int32 // per node p = chain+r: its largest ancestor-or-self below chain, or -1
	lo     []int32 // per position: the largest t with [0, t] all ancestors-or-self (-1 if 0 is not)
	off    []int32 // per node r: the first word of its bitset row in anc
	anc    []uint64
	minLo  int // the least lo of a node (Inf without nodes)
	maxTop int // the largest top of a node (-1 without nodes)
}

// NewTree checks a parent array and indexes it (see ResetTree).
func NewTree(parent []int32) (*Docs, error) {
	d := &Docs{}
	return d, d.ResetTree(parent)
}

// ResetTree makes d the run-time data of a tree mask, reusing its memory:
// parent[p] is the parent position of position p, -1 for a root, and a
// parent precedes its child (-1 <= parent[p] < p), so cycles cannot occur.
// Position i keeps key j when j is i or an ancestor of i.
//
// The longest leading run with parent[p] == p-1 (the committed prefix, a
// chain) is kept in closed form: its positions keep every key up to
// themselves. Each later position (a node) stores its ancestors at or past
// the chain's end as a bitset, rows growing with the node (n*n/128 words
// for n nodes, at most MaxTreeNodes nodes), and its deepest ancestor in the
// chain.
func (d *Docs) ResetTree(parent []int32) error {
	d.ids = nil
	d.start, d.end = d.start[:0], d.end[:0]
	d.isTree = false
	t := &d.tr
	for p, a := range parent {
		if a < -1 || int(a) >= p {
			if p == 0 {
				return fmt.Errorf("parent[0] = %d; position 0 has no earlier position, so it is a root (want -1)", a)
			}
			return fmt.Errorf("parent[%d] = %d; a parent must precede its child (want -1 for a root, or 0 to %d)", p, a, p-1)
		}
	}
	n := len(parent)
	chain := 0
	for chain < n && int(parent[chain]) == chain-1 {
		chain++
	}
	nodes := n - chain
	if nodes > MaxTreeNodes {
		return fmt.Errorf("%d positions after the leading chain (it ends at position %d, whose parent is %d); at most %d are supported", nodes, chain, parent[chain], MaxTreeNodes)
	}
	t.parent, t.chain = parent, chain
	t.top = grow32(t.top, nodes)
	t.lo = grow32(t.lo, n)
	t.off = grow32(t.off, nodes)
	words := 0
	for r := range nodes {
		t.off[r] = int32(words)
		words += r/64 + 1
	}
	if cap(t.anc) < words {
		t.anc = make([]uint64, words)
	}
	t.anc = t.anc[:words]
	clear(t.anc)
	t.minLo, t.maxTop = Inf, -1
	for p := range n {
		a := int(parent[p])
		lo := -1
		if a >= 0 {
			lo = int(t.lo[a])
		}
		if lo == p-1 {
			lo = p
		}
		t.lo[p] = int32(lo)
		if p < chain {
			continue
		}
		r := p - chain
		row := t.anc[t.off[r] : int(t.off[r])+r/64+1]
		top := a
		if a >= chain {
			pr := a - chain
			copy(row, t.anc[t.off[pr]:int(t.off[pr])+pr/64+1])
			top = int(t.top[pr])
		}
		row[r/64] |= 1 << uint(r%64)
		t.top[r] = int32(top)
		t.minLo, t.maxTop = min(t.minLo, lo), max(t.maxTop, top)
	}
	d.isTree = true
	return nil
}

func grow32(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	return b[:n]
}

// IsTree reports whether d holds a parent array (ResetTree) rather than
// document ids.
func (d *Docs) IsTree() bool { return d != nil && d.isTree }

// Parents returns the parent array d was indexed from (nil for document
// ids).
func (d *Docs) Parents() []int32 {
	if !d.isTree {
		return nil
	}
	return d.tr.parent
}

// TreeAnc reports whether key j is query i or one of its ancestors.
// Positions outside the parent array keep nothing. Without a parent array
// (d nil, or holding document ids) every position is the parent of the
// next, one chain: j is kept when 0 <= j <= i. The other Tree methods
// answer for that chain too.
func (d *Docs) TreeAnc(i, j int) bool {
	if !d.IsTree() {
		return 0 <= j && j <= i
	}
	t := &d.tr
	if j < 0 || j > i || i >= len(t.parent) {
		return false
	}
	if i < t.chain {
		return true
	}
	r := i - t.chain
	if j <= int(t.top[r]) {
		return true
	}
	if j < t.chain {
		return false
	}
	c := j - t.chain
	return t.anc[int(t.off[r])+c/64]>>uint(c%64)&1 != 0
}

// TreeWord returns the keep word of query i against keys k0 .. k0+63 under
// the tree: bit c is TreeAnc(i, k0+c).
func (d *Docs) TreeWord(i, k0 int) uint64 {
	if !d.IsTree() {
		return Lanes(-k0, i-k0)
	}
	t := &d.tr
	if i < 0 || i >= len(t.parent) {
		return 0
	}
	if i < t.chain {
		return Lanes(-k0, i-k0)
	}
	r := i - t.chain
	w := Lanes(-k0, int(t.top[r])-k0)
	// bits of the row from node index s = k0 - chain on
	s := k0 - t.chain
	if s > r || s <= -64 {
		return w
	}
	row := t.anc[t.off[r] : int(t.off[r])+r/64+1]
	if s < 0 {
		return w | row[0]<<uint(-s)
	}
	x, sh := s/64, uint(s%64)
	v := row[x] >> sh
	if sh != 0 && x+1 < len(row) {
		v |= row[x+1] << (64 - sh)
	}
	return w | v
}

// TreeLo returns the largest t such that position i keeps every key
// 0 .. t (-1 when it does not keep key 0).
func (d *Docs) TreeLo(i int) int {
	if !d.IsTree() {
		return i
	}
	return int(d.tr.lo[i])
}

// TreeChain returns the length of the parent array's leading chain: the
// positions 0 .. TreeChain()-1 keep every key up to themselves.
func (d *Docs) TreeChain() int {
	if !d.IsTree() {
		return Inf
	}
	return d.tr.chain
}

// TreeMinLo returns the least TreeLo of a position past the chain (Inf
// when there is none).
func (d *Docs) TreeMinLo() int {
	if !d.IsTree() {
		return Inf
	}
	return d.tr.minLo
}

// TreeMaxTop returns the largest chain position that is an ancestor of a
// position past the chain (-1 when there is none).
func (d *Docs) TreeMaxTop() int {
	if !d.IsTree() {
		return -1
	}
	return d.tr.maxTop
}

// TreeInfo returns TreeChain (k = 0), TreeMinLo (1) or TreeMaxTop (2): the
// per-call values a compiled tree mask classifies tiles with.
func (d *Docs) TreeInfo(k int) int {
	switch k {
	case 0:
		return d.TreeChain()
	case 1:
		return d.TreeMinLo()
	}
	return d.TreeMaxTop()
}

// TreeDepth returns the number of ancestors of i (its own position
// excluded); for tests and pictures.
func (d *Docs) TreeDepth(i int) int {
	if !d.IsTree() {
		return i
	}
	t := &d.tr
	if i < t.chain {
		return i
	}
	r := i - t.chain
	n := int(t.top[r]) + 1
	for _, w := range t.anc[t.off[r] : int(t.off[r])+r/64+1] {
		n += bits.OnesCount64(w)
	}
	return n - 1
}
