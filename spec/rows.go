package spec

import (
	"math/big"
	"slices"
)

// Prog is the arithmetic progression {Lo, Lo+Step, ..., <= Hi} of key
// positions; Step >= 1 and Lo <= Hi for a non-empty Prog.
type Prog struct{ Lo, Hi, Step int }

// Count is the number of positions in the progression.
func (g Prog) Count() int {
	if g.Lo > g.Hi {
		return 0
	}
	return (g.Hi-g.Lo)/g.Step + 1
}

// Clip returns the part of g within [lo, hi] (empty when Lo > Hi).
func (g Prog) Clip(lo, hi int) Prog { return intersectProg(g, Prog{lo, hi, 1}) }

// Keys appends to dst the key positions j in [0, n) that query position i may
// attend, as progressions (which may overlap), treating the sequence as one
// document (a tree as one chain) unless p.Data holds the mask's run-time
// data. Its cost depends on the mask's size (and a tree row's depth), not
// on n.
func (p Pattern) Keys(dst []Prog, i, n int) []Prog {
	hi := n - 1
	if p.Causal {
		hi = min(hi, i)
	}
	d := p.Data
	if d != nil && !d.IsTree() && p.Mask.HasDocument() {
		// document-local positions, shifted back
		s := d.Start(i)
		start := len(dst)
		dst = p.Mask.keys(dst, i-s, Prog{0, min(hi, d.End(i)) - s, 1}, nil)
		for k := start; k < len(dst); k++ {
			dst[k].Lo += s
			dst[k].Hi += s
		}
		return dst
	}
	if !d.IsTree() || !p.Mask.HasTree() {
		d = nil
	}
	return p.Mask.keys(dst, i, Prog{0, hi, 1}, d)
}

// keys appends the progressions of row i within the range r; t is the
// parent array of a tree, or nil (one chain).
func (m *Mask) keys(dst []Prog, i int, r Prog, t *Docs) []Prog {
	add := func(g Prog) []Prog {
		if g = intersectProg(g, r); g.Lo <= g.Hi {
			dst = append(dst, g)
		}
		return dst
	}
	switch m.Op {
	case OpFull, OpDocument:
		return add(Prog{r.Lo, r.Hi, 1})
	case OpWindow:
		return add(Prog{i - m.Left, i + m.Right, 1})
	case OpBlock:
		beta := floorDiv(i-m.Offset, m.Size)*m.Size + m.Offset
		return add(Prog{beta, beta + m.Size - 1, 1})
	case OpBridge:
		beta := floorDiv(i, m.Block) * m.Block
		if i-beta >= m.Targets {
			return dst
		}
		lo := beta - m.Sources
		if m.MaxDistance > 0 {
			lo = max(lo, i-m.MaxDistance)
		}
		return add(Prog{lo, beta - 1, 1})
	case OpDilated:
		lo, hi := -inf, inf
		if m.Size > 0 {
			lo, hi = i-(m.Size-1)*m.Stride, i+(m.Size-1)*m.Stride
		}
		// Align lo to the residue of i.
		lo = max(lo, r.Lo-m.Stride)
		lo += mod(i-lo, m.Stride)
		return add(Prog{lo, hi, m.Stride})
	case OpGlobal:
		return add(Prog{0, m.Tokens - 1, 1})
	case OpQueries:
		if !m.inSet(i) {
			return dst
		}
		return add(Prog{r.Lo, r.Hi, 1})
	case OpKeys:
		hi := inf
		if m.Below > 0 {
			hi = m.Below - 1
		}
		return add(Prog{m.Lo + mod(m.Phase-m.Lo, m.Stride), hi, m.Stride})
	case OpNeighborhood:
		return m.neighborhoodKeys(dst, i, r)
	case OpTree:
		if t == nil {
			// without a parent array: one chain, every key up to i
			return add(Prog{0, i, 1})
		}
		if i < 0 || i >= t.Len() {
			return dst
		}
		// every key up to TreeLo(i), then the other ancestors one by one,
		// in increasing order
		lo := t.TreeLo(i)
		dst = add(Prog{0, lo, 1})
		start := len(dst)
		par := t.Parents()
		for x := i; x > lo; x = int(par[x]) {
			dst = add(Prog{x, x, 1})
		}
		slices.Reverse(dst[start:])
		return dst
	case OpNot:
		// The operand's keys go after dst, their complement within r
		// after those, and the complement is moved down.
		start := len(dst)
		dst = m.Args[0].keys(dst, i, r, t)
		mid := len(dst)
		dst = complement(dst, start, r)
		n := copy(dst[start:], dst[mid:])
		return dst[:start+n]
	case OpUnion:
		for _, a := range m.Args {
			dst = a.keys(dst, i, r, t)
		}
		return dst
	case OpIntersect:
		// In dst's spare room: the running result at dst[start:mid], each
		// operand's progressions within it appended after, then moved down.
		start := len(dst)
		dst = append(dst, r)
		for _, a := range m.Args {
			mid := len(dst)
			for k := start; k < mid; k++ {
				dst = a.keys(dst, i, dst[k], t)
			}
			n := copy(dst[start:], dst[mid:])
			if dst = dst[:start+n]; n == 0 {
				break
			}
		}
		return dst
	}
	panic("BUG: unknown op " + m.Op.String())
}

// complement appends to dst the positions of r that none of the
// progressions dst[start:] holds (each of them a subset of r), as
// progressions.
func complement(dst []Prog, start int, r Prog) []Prog {
	return complementIn(dst, r, slices.Clone(dst[start:]))
}

// maxRuns bounds the work complementIn spends on one listing before it
// splits a piece by residue.
const maxRuns = 4096

// complementIn appends the positions of the progression u that no
// progression of ops (each a subset of u) holds. u is cut at every
// operand's ends; in each piece the same operands are active. A piece is
// listed as the runs between the positions its operands hold when they
// are few (or when even the densest operand is sparse); else it is split
// into the residue classes of the densest operand's step, its own class
// dropped, and each class is the universe of the same problem with the
// other operands. So the cost follows the strides of the operand (the
// period of the complement) or the count of positions it holds, whichever
// is smaller, not the sequence length.
func complementIn(dst []Prog, u Prog, ops []Prog) []Prog {
	if u.Lo > u.Hi {
		return dst
	}
	cuts := []int{u.Lo, u.Hi + 1}
	for k, g := range ops {
		g.Hi = g.Lo + (g.Hi-g.Lo)/g.Step*g.Step // last position held
		ops[k] = g
		cuts = append(cuts, g.Lo, g.Hi+1)
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var active []Prog
	for c := 0; c+1 < len(cuts); c++ {
		a, b := cuts[c], cuts[c+1]-1
		if a < u.Lo || b > u.Hi {
			continue
		}
		first := a + mod(u.Lo-a, u.Step) // u's first position in the piece
		if first > b {
			continue
		}
		active = active[:0]
		whole := false
		for _, g := range ops {
			if g.Lo <= a && b <= g.Hi {
				if g.Step == u.Step || g.Lo == g.Hi {
					whole = true
					break
				}
				active = append(active, g)
			}
		}
		if whole {
			continue
		}
		if len(active) == 0 {
			dst = append(dst, Prog{first, b, u.Step})
			continue
		}
		count, dense := 0, active[0]
		for _, g := range active {
			count += (b-first)/g.Step + 1
			if g.Step < dense.Step {
				dense = g
			}
		}
		classes := dense.Step / u.Step
		if count <= maxRuns || classes > maxRuns || count <= classes {
			dst = complementRuns(dst, active, first, b, u.Step)
			continue
		}
		for k := range classes {
			x := first + k*u.Step
			if mod(x-dense.Lo, dense.Step) == 0 {
				continue
			}
			v := Prog{x, b, dense.Step}
			var rest []Prog
			for _, g := range active {
				if h := intersectProg(g, v); h.Lo <= h.Hi {
					rest = append(rest, h)
				}
			}
			dst = complementIn(dst, v, rest)
		}
	}
	return dst
}

// complementRuns appends the runs of positions first, first+step, ... <=
// hi between the positions the progressions of active hold.
func complementRuns(dst []Prog, active []Prog, first, hi, step int) []Prog {
	var pts []int
	for _, g := range active {
		for x := first + mod(g.Lo-first, g.Step); x <= hi; x += g.Step {
			pts = append(pts, x)
		}
	}
	slices.Sort(pts)
	pts = slices.Compact(pts)
	x := first
	for _, p := range pts {
		if p > x {
			dst = append(dst, Prog{x, p - step, step})
		}
		x = p + step
	}
	if x <= hi {
		dst = append(dst, Prog{x, hi, step})
	}
	return dst
}

// intersectProg intersects two progressions (Chinese remainder theorem on
// the residues); the result is empty (Lo > Hi) when they share nothing.
func intersectProg(a, b Prog) Prog {
	lo, hi := max(a.Lo, b.Lo), min(a.Hi, b.Hi)
	empty := Prog{1, 0, 1}
	if lo > hi {
		return empty
	}
	if a.Step == 1 && b.Step == 1 {
		return Prog{lo, hi, 1}
	}
	g, x, _ := extGCD(a.Step, b.Step)
	diff := b.Lo - a.Lo
	if mod(diff, g) != 0 {
		return empty
	}
	// a.Lo + a.Step*k ≡ b.Lo (mod b.Step)  =>  k ≡ (diff/g) * x (mod b.Step/g)
	m2 := b.Step / g
	if a.Step > 1<<31 || m2 > 1<<31 || a.Step/g > (hi-lo)/b.Step {
		// Large steps (nested strides): the products below could overflow
		// int, and l > hi - lo leaves at most one common position.
		return intersectBig(a, b, lo, hi, g, x)
	}
	l := a.Step / g * b.Step
	k := mod(mod(diff/g, m2)*mod(x, m2), m2)
	x0 := a.Lo + a.Step*k // a solution; shift it to the first one >= lo
	first := x0 + ceilDiv(lo-x0, l)*l
	if first > hi {
		return empty
	}
	return Prog{first, hi, l}
}

// intersectBig is intersectProg's arithmetic in big integers: the first
// common position at or after lo, and the step lcm(a.Step, b.Step) when
// it fits between lo and hi (else the one position).
func intersectBig(a, b Prog, lo, hi, g, x int) Prog {
	bi := func(v int) *big.Int { return big.NewInt(int64(v)) }
	m2 := bi(b.Step / g)
	k := new(big.Int).Mul(bi((b.Lo-a.Lo)/g), bi(x))
	k.Mod(k, m2)
	l := new(big.Int).Mul(bi(a.Step/g), bi(b.Step))
	x0 := new(big.Int).Add(bi(a.Lo), new(big.Int).Mul(bi(a.Step), k))
	// first = x0 + ceil((lo - x0) / l) * l
	d := new(big.Int).Sub(bi(lo), x0)
	q := new(big.Int).Neg(new(big.Int).Div(new(big.Int).Neg(d), l)) // ceil: -floor(-d/l); Div floors for l > 0
	first := new(big.Int).Add(x0, new(big.Int).Mul(q, l))
	if first.Cmp(bi(hi)) > 0 {
		return Prog{1, 0, 1}
	}
	f := int(first.Int64())
	if l.Cmp(bi(hi-lo)) > 0 {
		return Prog{f, f, 1}
	}
	return Prog{f, hi, int(l.Int64())}
}

// extGCD returns g = gcd(a, b) and x, y with a*x + b*y = g.
func extGCD(a, b int) (g, x, y int) {
	if b == 0 {
		return a, 1, 0
	}
	g, x1, y1 := extGCD(b, a%b)
	return g, y1, x1 - (a/b)*y1
}

// CountKeys is the number of distinct positions in [lo, hi] covered by the
// progressions (which may overlap). Step-1 intervals are merged; one
// progression of larger step is counted by inclusion-exclusion against them;
// several fall back to marking positions.
func CountKeys(gs []Prog, lo, hi int) int {
	var ivsBuf, stridedBuf [16]Prog // no allocation for the usual few progressions
	ivs, strided := ivsBuf[:0], stridedBuf[:0]
	for _, g := range gs {
		if g = g.Clip(lo, hi); g.Lo > g.Hi {
			continue
		}
		if g.Step == 1 {
			ivs = append(ivs, g)
		} else {
			strided = append(strided, g)
		}
	}
	merged := MergeRuns(ivs)
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
	seen := make([]bool, hi-lo+1)
	count := 0
	mark := func(g Prog) {
		for j := g.Lo; j <= g.Hi; j += g.Step {
			if !seen[j-lo] {
				seen[j-lo] = true
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

// MergeRuns sorts step-1 progressions in place and merges overlapping or
// adjacent ones, returning the disjoint runs in order.
func MergeRuns(out []Prog) []Prog {
	if len(out) <= 1 {
		return out
	}
	slices.SortFunc(out, func(a, b Prog) int { return a.Lo - b.Lo })
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
