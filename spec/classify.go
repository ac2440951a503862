package spec

import "github.com/attngen/attngen/runtime/mask"

// Class is the class of a tile of (query, key) pairs; runtime/mask owns
// the type so that every target reads the same values.
type Class = mask.Class

// The classes.
const (
	Empty   = mask.Empty   // no pair kept: never visited
	Partial = mask.Partial // some kept: the predicate is evaluated per element
	FullT   = mask.Full    // every pair kept: the predicate is never evaluated
)

// Classify classifies the tile of query positions [q0, q1] and key positions
// [k0, k1] (absolute, inclusive, non-negative, q0 <= q1, k0 <= k1) in time
// independent of the tile's size. It is sound: Empty and FullT are only
// returned when true. Each primitive (with the causal flag) is classified
// exactly; unions and intersections combine their operands' classes and can
// answer Partial for a tile that is in fact empty or full (see the package
// documentation). A document mask is classified as one document, like At.
//
// With p.Data set, Classify is ClassifyDocs on it.
func (p Pattern) Classify(q0, q1, k0, k1 int) Class {
	if p.Data != nil {
		return p.ClassifyDocs(q0, q1, k0, k1, p.Data)
	}
	return p.Mask.classify(q0, q1, k0, k1, p.Causal, nil)
}

// ClassifyDocs classifies a tile of a packed sequence with document ids d
// (as AtDocs). A tile whose queries and keys all lie in one document is
// classified exactly as above in document-local positions; a tile whose
// query documents and key documents are disjoint is Empty; any other tile of
// a document mask is Partial unless causality alone makes it Empty.
//
// With a parent array in d (NewTree), the tree is classified from it
// soundly: tiles of the leading chain exactly, tiles of later positions
// by the least and largest extent of their ancestors in the chain, and
// tiles of later keys Partial unless causality empties them.
//
// A nil d means p.Data.
func (p Pattern) ClassifyDocs(q0, q1, k0, k1 int, d *Docs) Class {
	if d == nil {
		d = p.Data
	}
	if d.IsTree() && p.Mask.HasTree() {
		return p.Mask.classify(q0, q1, k0, k1, p.Causal, d)
	}
	if d == nil || d.IsTree() || !p.Mask.HasDocument() {
		return p.Mask.classify(q0, q1, k0, k1, p.Causal, nil)
	}
	if p.Causal && k0 > q1 {
		return Empty
	}
	iq0, iq1, ik0, ik1 := d.ID(q0), d.ID(q1), d.ID(k0), d.ID(k1)
	if iq1 < ik0 || ik1 < iq0 {
		return Empty
	}
	if iq0 == iq1 && ik0 == ik1 && iq0 == ik0 {
		s := d.Start(q0)
		return p.Mask.classify(q0-s, q1-s, k0-s, k1-s, p.Causal, nil)
	}
	return Partial
}

// classifyDist classifies a tile against a set of allowed distances
// d = i - j in [lo, hi] with d mod step == 0 (step >= 1). Every distance in
// [q0-k1, q1-k0] occurs in the tile, so the answer is exact.
func classifyDist(q0, q1, k0, k1, lo, hi, step int) Class {
	a, b := q0-k1, q1-k0
	x, y := max(a, lo), min(b, hi)
	if x > y || (step > 1 && ceilDiv(x, step)*step > y) {
		return Empty
	}
	if a >= lo && b <= hi && (step == 1 || (a == b && mod(a, step) == 0)) {
		return FullT
	}
	return Partial
}

const inf = int(^uint(0) >> 2)

// classify classifies a tile; t is the parent array of a tree mask, or nil
// (a tree is then one chain).
func (m *Mask) classify(q0, q1, k0, k1 int, causal bool, t *Docs) Class {
	switch m.Op {
	case OpFull, OpDocument:
		if !causal {
			return FullT
		}
		return classifyDist(q0, q1, k0, k1, 0, inf, 1)
	case OpWindow:
		lo := -m.Right
		if causal {
			lo = 0
		}
		return classifyDist(q0, q1, k0, k1, lo, m.Left, 1)
	case OpDilated:
		lo, hi := -inf, inf
		if m.Size > 0 {
			hi = (m.Size - 1) * m.Stride
			lo = -hi
		}
		if causal {
			lo = 0
		}
		return classifyDist(q0, q1, k0, k1, lo, hi, m.Stride)
	case OpGlobal:
		g := m.Tokens
		if k0 > g-1 || (causal && k0 > q1) {
			return Empty
		}
		if k1 <= g-1 && (!causal || k1 <= q0) {
			return FullT
		}
		return Partial
	case OpQueries:
		return classifyQueries(q0, q1, k0, k1, m, causal)
	case OpKeys:
		return classifyKeys(q0, q1, k0, k1, m, causal)
	case OpTree:
		return classifyTree(q0, q1, k0, k1, t)
	case OpNeighborhood:
		c := classifyNeighborhood(q0, q1, k0, k1, m)
		if causal && !m.bothCausal() {
			// sound, not exact (see ExactClass)
			c = min(c, Full().classify(q0, q1, k0, k1, true, nil))
		}
		return c
	case OpNot:
		// The pairs kept are the causal ones the operand, taken without
		// the causal flag, drops: its full tiles become empty and its
		// empty tiles take the causal class (Empty < Partial < FullT, so
		// 2 - c swaps the ends). Exact when causal is false or the
		// operand's class is; a partial operand under causal is partial
		// unless causality alone empties the tile.
		c := 2 - m.Args[0].classify(q0, q1, k0, k1, false, t)
		if causal {
			c = min(c, Full().classify(q0, q1, k0, k1, true, nil))
		}
		return c
	case OpBlock:
		// shifting both sides by s = -Offset mod Size keeps causality and
		// moves the blocks to start at multiples of Size
		s := mod(-m.Offset, m.Size)
		return classifyBlock(q0+s, q1+s, k0+s, k1+s, m.Size, causal)
	case OpBridge:
		return classifyBridge(q0, q1, k0, k1, m)
	case OpUnion:
		all := Empty
		for _, a := range m.Args {
			c := a.classify(q0, q1, k0, k1, causal, t)
			if c == FullT {
				return FullT
			}
			all = max(all, c)
		}
		return all
	case OpIntersect:
		all := FullT
		for _, a := range m.Args {
			c := a.classify(q0, q1, k0, k1, causal, t)
			if c == Empty {
				return Empty
			}
			all = min(all, c)
		}
		return all
	}
	panic("BUG: unknown op " + m.Op.String())
}

// classifyBlock: pairs with floor(i/b) == floor(j/b) (and j <= i if causal).
func classifyBlock(q0, q1, k0, k1, b int, causal bool) Class {
	nlo := max(q0/b, k0/b)
	nhi := min(q1/b, k1/b)
	if nlo > nhi {
		return Empty
	}
	if !causal {
		// Some shared block exists; full iff every row and column share one block.
		if q0/b == q1/b && k0/b == k1/b && q0/b == k0/b {
			return FullT
		}
		return Partial
	}
	// Within block n the kept pairs need some j <= i: the smallest key of
	// the block's part of the tile must not exceed its largest query.
	ok := func(n int) bool { return max(n*b, k0) <= min(n*b+b-1, q1) }
	if !(nhi-nlo >= 2 || ok(nlo) || ok(nhi)) {
		return Empty
	}
	if q0/b == q1/b && k0/b == k1/b && q0/b == k0/b && k1 <= q0 {
		return FullT
	}
	return Partial
}

// classifyBridge: rows i of block n (n >= 1) with phase < t see keys
// [n*b - s, n*b - 1], and i - j <= md when md > 0.
func classifyBridge(q0, q1, k0, k1 int, m *Mask) Class {
	b, t, s, md := m.Block, m.Targets, m.Sources, m.MaxDistance
	// Blocks whose active rows meet [q0, q1] and whose sources meet [k0, k1].
	nlo := max(1, ceilDiv(q0-t+1, b), ceilDiv(k0+1, b))
	nhi := min(floorDiv(q1, b), floorDiv(k1+s, b))
	if nlo > nhi {
		return Empty
	}
	if md > 0 {
		// Smallest distance reachable in block n: first active row minus last
		// source. Blocks strictly inside [nlo, nhi] reach distance 1.
		f := func(n int) int { return max(n*b, q0) - min(n*b-1, k1) }
		if !(nhi-nlo >= 2 || f(nlo) <= md || f(nhi) <= md) {
			return Empty
		}
	}
	n := q0 / b
	if n >= 1 && q1/b == n && q1-n*b < t && k0 >= n*b-s && k1 <= n*b-1 && (md == 0 || q1-k0 <= md) {
		return FullT
	}
	return Partial
}

// setRange is the first and last position of a queries or keys set within
// [lo, hi] (first > last when there is none).
func setRange(m *Mask, lo, hi int) (first, last int) {
	lo = max(lo, m.Lo)
	if m.Below > 0 {
		hi = min(hi, m.Below-1)
	}
	return lo + mod(m.Phase-lo, m.Stride), hi - mod(hi-m.Phase, m.Stride)
}

// covers reports whether every position of [lo, hi] is in the set.
func covers(m *Mask, lo, hi int) bool {
	return m.Lo <= lo && (m.Below == 0 || hi < m.Below) && (m.Stride == 1 || lo == hi && m.inSet(lo))
}

// classifyQueries: rows i in the set keep every key (j <= i if causal).
func classifyQueries(q0, q1, k0, k1 int, m *Mask, causal bool) Class {
	first, last := setRange(m, q0, q1)
	if first > last || (causal && last < k0) {
		return Empty
	}
	if covers(m, q0, q1) && (!causal || k1 <= q0) {
		return FullT
	}
	return Partial
}

// classifyKeys: keys j in the set are kept by every row (i >= j if causal).
func classifyKeys(q0, q1, k0, k1 int, m *Mask, causal bool) Class {
	hi := k1
	if causal {
		hi = min(hi, q1)
	}
	if first, last := setRange(m, k0, hi); first > last {
		return Empty
	}
	if covers(m, k0, k1) && (!causal || k1 <= q0) {
		return FullT
	}
	return Partial
}

// classifyTree classifies a tile under a tree (ancestors are never after
// their descendant, so the causal flag changes nothing). Without a parent
// array the tree is one chain: causal attention. With one, query i keeps
// every key up to TreeLo(i), none of the chain past its deepest chain
// ancestor, and whichever nodes its ancestors are.
func classifyTree(q0, q1, k0, k1 int, t *Docs) Class {
	if t == nil || q1 < t.TreeChain() {
		return classifyDist(q0, q1, k0, k1, 0, inf, 1)
	}
	if k0 > q1 {
		return Empty
	}
	chain := t.TreeChain()
	lo, top := t.TreeMinLo(), t.TreeMaxTop()
	if q0 < chain {
		lo, top = min(lo, q0), max(top, chain-1)
	}
	switch {
	case k1 <= lo:
		return FullT
	case k1 < chain && k0 > top:
		return Empty
	}
	return Partial
}
