package gen

import (
	"fmt"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// primitive is how one spec primitive is lowered into the plan's programs.
// This table is the only place in attngen, besides spec's own definition,
// that knows what a primitive means: every target renders the programs.
type primitive struct {
	// pred: is the pair (i, j) kept (positions local to the document)?
	pred func(b *builder, m *spec.Mask, causal bool, i, j int) int
	// hull: next >= x is at most the smallest kept key >= x of any query
	// in [q0, q1], last is at least every kept key; none: next > last.
	hull func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (next, last int)
	// class: the tile [q0, q1] x [k0, k1] (with the causal flag folded in)
	// as a mask.Class value, exact for a primitive.
	class func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int
	// qhull, the query hull of keys [k0, k1], the transpose of hull: next
	// >= x is at most the smallest query >= x that keeps some key of
	// [k0, k1], last is at least every such query; none: next > last (for
	// the exact ones: every primitive but neighborhood). With the causal
	// flag x is at least k0 already (LowerQHull); a primitive folds in
	// whatever else the flag excludes.
	qhull func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (next, last int)
}

// primitives covers every spec op that is not a combinator; a test checks
// that none is missing.
var primitives = map[spec.Op]primitive{
	spec.OpFull: everything,
	spec.OpWindow: {
		pred: func(b *builder, m *spec.Mask, causal bool, i, j int) int {
			d := b.sub(i, j)
			return b.and(b.le(d, b.field(m.LeftRef, m.Left, 0)), b.le(b.neg(m.RightRef, m.Right), d))
		},
		hull: func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (int, int) {
			return b.max(x, b.plus(q0, -1, m.LeftRef, m.Left)), b.plus(q1, 1, m.RightRef, m.Right)
		},
		class: func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
			if m.LeftRef.Set() || m.RightRef.Set() {
				return b.classDistV(causal, q0, q1, k0, k1, b.neg(m.RightRef, m.Right), b.field(m.LeftRef, m.Left, 0))
			}
			return b.classDist(causal, q0, q1, k0, k1, int64(-m.Right), int64(m.Left), 1)
		},
		qhull: func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (int, int) {
			// key j is kept by rows j-Right .. j+Left: the rows of [k0, k1]
			// are [k0-Right, k1+Left], every one of them; causal keeps
			// [k0, k1+Left] (row i >= k0 keeps min(i, k1)), and x >= k0
			last := b.plus(k1, 1, m.LeftRef, m.Left)
			if causal {
				return x, last
			}
			return b.max(x, b.plus(k0, -1, m.RightRef, m.Right)), last
		},
	},
	spec.OpBlock: {
		// Blocks start at Offset + k*Size: every position is shifted by
		// -(Offset mod Size) (floored division keeps it exact for the
		// negative shifted positions), which moves them to multiples of
		// Size; no offset shifts nothing.
		pred: func(b *builder, m *spec.Mask, causal bool, i, j int) int {
			sh, s := blockShift(m), int64(m.Size)
			return b.eq(b.divC(b.shift(i, sh), s), b.divC(b.shift(j, sh), s))
		},
		hull: func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (int, int) {
			sh, s := blockShift(m), int64(m.Size)
			first := b.shift(b.mulC(b.divC(b.shift(q0, sh), s), s), -sh)
			return b.max(x, first), b.shift(b.addC(b.mulC(b.divC(b.shift(q1, sh), s), s), s-1), -sh)
		},
		class: func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
			sh, s := blockShift(m), int64(m.Size)
			q0, q1, k0, k1 = b.shift(q0, sh), b.shift(q1, sh), b.shift(k0, sh), b.shift(k1, sh)
			bq0, bq1, bk0, bk1 := b.divC(q0, s), b.divC(q1, s), b.divC(k0, s), b.divC(k1, s)
			nlo, nhi := b.max(bq0, bk0), b.min(bq1, bk1)
			empty := b.lt(nhi, nlo)
			same := b.ands(b.eq(bq0, bq1), b.eq(bk0, bk1), b.eq(bq0, bk0))
			if !causal {
				return b.class(empty, same)
			}
			// Within block n the kept pairs need some j <= i: the smallest
			// key of the block's part of the tile must not exceed its largest
			// query.
			ok := func(n int) int {
				nb := b.mulC(n, s)
				return b.le(b.max(nb, k0), b.min(b.addC(nb, s-1), q1))
			}
			some := b.or(b.or(b.le(b.konst(2), b.sub(nhi, nlo)), ok(nlo)), ok(nhi))
			return b.class(b.or(empty, b.not(some)), b.and(same, b.le(k1, q0)))
		},
		qhull: func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (int, int) {
			// symmetric: the rows of k0's block through the end of k1's;
			// causal keeps [k0, end of k1's block] (row i > k1 of k1's block
			// keeps k1), and x >= k0
			sh, s := blockShift(m), int64(m.Size)
			last := b.shift(b.addC(b.mulC(b.divC(b.shift(k1, sh), s), s), s-1), -sh)
			if causal {
				return x, last
			}
			first := b.shift(b.mulC(b.divC(b.shift(k0, sh), s), s), -sh)
			return b.max(x, first), last
		},
	},
	spec.OpBridge: {
		pred: func(b *builder, m *spec.Mask, causal bool, i, j int) int {
			phase := b.modC(i, int64(m.Block))
			beta := b.sub(i, phase)
			r := b.ands(b.lt(phase, b.konst(int64(m.Targets))), b.lt(j, beta), b.le(b.addC(beta, int64(-m.Sources)), j))
			if m.MaxDistance > 0 {
				r = b.and(r, b.le(b.sub(i, j), b.konst(int64(m.MaxDistance))))
			}
			return r
		},
		hull: func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (int, int) {
			// Rows of block n >= 1 with phase < targets see keys
			// [n*bl - sources, n*bl - 1]; the first block whose sources end
			// at or after x gives next.
			bl := int64(m.Block)
			nlo := b.max(b.konst(1), b.ceilDivC(b.addC(q0, 1-int64(m.Targets)), bl))
			nhi := b.divC(q1, bl)
			n := b.max(nlo, b.addC(b.divC(x, bl), 1))
			nb := b.mulC(n, bl)
			lo := b.addC(nb, -int64(m.Sources))
			if m.MaxDistance > 0 {
				lo = b.max(lo, b.addC(b.max(nb, q0), -int64(m.MaxDistance)))
			}
			next := b.sel(b.lt(nhi, n), b.konst(Inf), b.max(x, lo))
			last := b.sel(b.lt(nhi, nlo), b.konst(-Inf), b.addC(b.mulC(nhi, bl), -1))
			return next, last
		},
		class: func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
			bl, t, s, md := int64(m.Block), int64(m.Targets), int64(m.Sources), int64(m.MaxDistance)
			// Blocks whose active rows meet [q0, q1] and whose sources meet [k0, k1].
			nlo := b.max(b.max(b.konst(1), b.ceilDivC(b.addC(q0, 1-t), bl)), b.ceilDivC(b.addC(k0, 1), bl))
			nhi := b.min(b.divC(q1, bl), b.divC(b.addC(k1, s), bl))
			empty := b.lt(nhi, nlo)
			if md > 0 {
				// Smallest distance reachable in block n: first active row
				// minus last source. Blocks strictly inside [nlo, nhi] reach 1.
				f := func(n int) int {
					nb := b.mulC(n, bl)
					return b.le(b.sub(b.max(nb, q0), b.min(b.addC(nb, -1), k1)), b.konst(md))
				}
				some := b.or(b.or(b.le(b.konst(2), b.sub(nhi, nlo)), f(nlo)), f(nhi))
				empty = b.or(empty, b.not(some))
			}
			n := b.divC(q0, bl)
			nb := b.mulC(n, bl)
			full := b.ands(b.le(b.konst(1), n), b.eq(b.divC(q1, bl), n), b.lt(b.sub(q1, nb), b.konst(t)),
				b.le(b.addC(nb, -s), k0), b.le(k1, b.addC(nb, -1)))
			if md > 0 {
				full = b.and(full, b.le(b.sub(q1, k0), b.konst(md)))
			}
			return b.class(empty, full)
		},
		qhull: func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (int, int) {
			// Block n sends keys [n*bl - sources, n*bl - 1] to its rows of
			// phase below targets: blocks nlo..nhi reach [k0, k1]. With a
			// max distance md, row n*bl + p reaches back to n*bl + p - md,
			// so only phases below md see the block's keys, only rows up
			// to k1 + md reach k1, and the last block is the one whose
			// first row does (n*bl <= k1 + min(sources, md)). Every row so
			// described keeps some key of [k0, k1]; keys precede their
			// rows' blocks, so the causal flag removes none.
			bl, t, s, md := int64(m.Block), int64(m.Targets), int64(m.Sources), int64(m.MaxDistance)
			if md > 0 {
				t, s = min(t, md), min(s, md)
			}
			nlo := b.ceilDivC(b.addC(k0, 1), bl)
			nhi := b.divC(b.addC(k1, s), bl)
			// the first block whose rows of phase < t reach x
			n := b.max(nlo, b.ceilDivC(b.addC(x, 1-t), bl))
			next := b.sel(b.lt(nhi, n), b.konst(Inf), b.max(x, b.mulC(n, bl)))
			last := b.sel(b.lt(nhi, nlo), b.konst(-Inf), b.addC(b.mulC(nhi, bl), t-1))
			if md > 0 {
				last = b.min(last, b.addC(k1, md))
			}
			return next, last
		},
	},
	spec.OpDilated: {
		pred: func(b *builder, m *spec.Mask, causal bool, i, j int) int {
			d := b.sub(i, j)
			r := b.eq(b.modC(d, int64(m.Stride)), b.konst(0))
			if reach, ok := dilatedReach(m); ok {
				r = b.ands(r, b.le(d, b.konst(reach)), b.le(b.konst(-reach), d))
			}
			return r
		},
		hull: func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (int, int) {
			// Keys i - k*stride for the allowed shifts k: the largest shift
			// whose keys still reach x gives next.
			st := int64(m.Stride)
			k := b.divC(b.sub(q1, x), st)
			kmin := int64(-Inf)
			if _, ok := dilatedReach(m); ok {
				k = b.min(k, b.konst(int64(m.Size-1)))
				kmin = -int64(m.Size - 1)
			}
			if causal {
				kmin = 0
			}
			next := b.max(x, b.sub(q0, b.mulC(k, st)))
			last := b.konst(Inf)
			if kmin > -Inf {
				next = b.sel(b.lt(k, b.konst(kmin)), b.konst(Inf), next)
				last = b.addC(q1, -kmin*st)
			}
			return next, last
		},
		class: func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
			lo, hi := int64(-Inf), int64(Inf)
			if reach, ok := dilatedReach(m); ok {
				lo, hi = -reach, reach
			}
			return b.classDist(causal, q0, q1, k0, k1, lo, hi, int64(m.Stride))
		},
		qhull: func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (int, int) {
			// Rows j + k*stride for keys j in [k0, k1] and the allowed
			// shifts k: the rows of [k0 - reach, k1 + reach] (causal: from
			// k0, where x is already) whose residue (i - k0) mod stride is
			// at most k1 - k0 (each has a key of its class near enough),
			// every one of them. next is the first such row from
			// y = max(x, k0 - reach).
			st := int64(m.Stride)
			y, last := x, b.konst(Inf)
			if reach, ok := dilatedReach(m); ok {
				last = b.addC(k1, reach)
				if !causal {
					y = b.max(x, b.addC(k0, -reach))
				}
			}
			if st == 1 {
				return y, last
			}
			r := b.modC(b.sub(y, k0), st)
			return b.sel(b.le(r, b.sub(k1, k0)), y, b.addC(b.sub(y, r), st)), last
		},
	},
	spec.OpGlobal: {
		// Tokens may be a head parameter, and 0 at some heads (no sinks):
		// then no key is kept and every form below says so.
		pred: func(b *builder, m *spec.Mask, causal bool, i, j int) int {
			return b.lt(j, b.field(m.TokensRef, m.Tokens, 0))
		},
		hull: func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (int, int) {
			// no kept key at or past x once x is past the tokens: next > last,
			// so that a union's hull jumps from the tokens to its other keys
			g := b.field(m.TokensRef, m.Tokens, -1)
			return b.sel(b.le(x, g), x, b.konst(Inf)), g
		},
		class: func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
			g := b.field(m.TokensRef, m.Tokens, -1)
			empty, full := b.lt(g, k0), b.le(k1, g)
			if causal {
				empty, full = b.or(empty, b.lt(q1, k0)), b.and(full, b.le(k1, q0))
			}
			return b.class(empty, full)
		},
		qhull: func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (int, int) {
			// every row, when k0 is a token (causal: every row from k0,
			// which keeps k0, and x >= k0)
			some := b.le(k0, b.field(m.TokensRef, m.Tokens, -1))
			return b.sel(some, x, b.konst(Inf)), b.sel(some, b.konst(Inf), b.konst(-Inf))
		},
	},
	spec.OpQueries: {
		pred: func(b *builder, m *spec.Mask, causal bool, i, j int) int {
			return b.inSet(m, i)
		},
		hull: func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (int, int) {
			// every key, when a row of [q0, q1] is in the set
			none := b.setNone(m, q0, q1)
			return b.sel(none, b.konst(Inf), x), b.sel(none, b.konst(-Inf), b.konst(Inf))
		},
		class: func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
			empty, full := b.setNone(m, q0, q1), b.covers(m, q0, q1)
			if causal {
				// the last row of the set must reach k0
				empty, full = b.or(empty, b.lt(b.setLast(m, q1), k0)), b.and(full, b.le(k1, q0))
			}
			return b.class(empty, full)
		},
		qhull: func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (int, int) {
			// the rows of the set, whatever the keys (causal: those from
			// k0, which keep k0, and x >= k0)
			next := b.setNext(m, x)
			if m.Below == 0 {
				return next, b.konst(Inf)
			}
			last := b.konst(setLastConst(m))
			return b.sel(b.setNone(m, x, last), b.konst(Inf), next), last
		},
	},
	spec.OpKeys: {
		pred: func(b *builder, m *spec.Mask, causal bool, i, j int) int {
			return b.inSet(m, j)
		},
		hull: func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (int, int) {
			// the first key of the set at or after x, and below (not the
			// set's last position: no key is past it)
			next := b.setNext(m, x)
			if m.Below == 0 {
				return next, b.konst(Inf)
			}
			last := b.konst(int64(m.Below - 1))
			return b.sel(b.setNone(m, x, last), b.konst(Inf), next), last
		},
		class: func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
			hi := k1
			full := b.covers(m, k0, k1)
			if causal {
				hi, full = b.min(hi, q1), b.and(full, b.le(k1, q0))
			}
			return b.class(b.setNone(m, k0, hi), full)
		},
		qhull: func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (int, int) {
			// every row, when [k0, k1] holds a key of the set; causal: the
			// rows from that first key on
			none := b.setNone(m, k0, k1)
			next := x
			if causal {
				next = b.max(x, b.setNext(m, k0))
			}
			return b.sel(none, b.konst(Inf), next), b.sel(none, b.konst(-Inf), b.konst(Inf))
		},
	},
	// document keeps every pair inside one document; the document split
	// itself is lowered once for the whole mask (LowerPred, LowerHull,
	// LowerClass).
	spec.OpDocument: everything,
	// NATTEN over a grid: gen/natten.go
	spec.OpNeighborhood: neighborhood,
	// tree: j is i or an ancestor of i in the parent array given at run
	// time (mask.Docs.ResetTree); ancestors never follow i, so the causal
	// flag changes nothing.
	spec.OpTree: {
		pred: func(b *builder, m *spec.Mask, causal bool, i, j int) int {
			return b.emit(Inst{Op: IRTreeAnc, A: i, B: j})
		},
		hull: func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (int, int) {
			return x, q1
		},
		// a key is kept only by itself and its descendants, which follow
		// it; which ones is run-time data, so the hull is [k0, Inf)
		qhull: func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (int, int) {
			return b.max(x, k0), b.konst(Inf)
		},
		// The leading chain's rows are causal attention, exactly. Past it,
		// query i keeps every key up to TreeLo(i) (at least the least of
		// them, treeinfo 1), and no chain key past its deepest chain
		// ancestor (at most treeinfo 2); keys past the chain are partial
		// (the runtime's keep words decide). Sound, as spec.ClassifyDocs.
		class: func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
			chain := b.load(FieldTreeInfo+0, 0)
			minLo := b.load(FieldTreeInfo+1, 0)
			maxTop := b.load(FieldTreeInfo+2, 0)
			q0c := b.lt(q0, chain)
			lo := b.min(minLo, b.sel(q0c, q0, b.konst(Inf)))
			top := b.max(maxTop, b.sel(q0c, b.addC(chain, -1), b.konst(-1)))
			empty := b.or(b.lt(q1, k0), b.and(b.lt(k1, chain), b.lt(top, k0)))
			tree := b.class(empty, b.le(k1, lo))
			return b.sel(b.lt(q1, chain), everything.class(b, nil, true, q0, q1, k0, k1), tree)
		},
	},
}

// field is the value of a mask field that may be a head parameter, plus
// add: the constant c + add, or the parameter read at run time (an IRLoad of FieldParam+k)
// plus its Ref's Add and add.
func (b *builder) field(r spec.Ref, c int, add int64) int {
	if !r.Set() {
		return b.konst(int64(c) + add)
	}
	return b.shift(b.load(FieldParam+Field(r.Param-1), 0), int64(r.Add)+add)
}

// plus is x + sign*field (sign 1 or -1): addC for a constant.
func (b *builder) plus(x int, sign int64, r spec.Ref, c int) int {
	if !r.Set() {
		return b.addC(x, sign*int64(c))
	}
	if sign > 0 {
		return b.add(x, b.field(r, c, 0))
	}
	return b.sub(x, b.field(r, c, 0))
}

// neg is -field.
func (b *builder) neg(r spec.Ref, c int) int {
	if !r.Set() {
		return b.konst(-int64(c))
	}
	return b.sub(b.konst(0), b.field(r, c, 0))
}

// shift is x + c, and x itself (no instruction) for c = 0.
func (b *builder) shift(x int, c int64) int {
	if c == 0 {
		return x
	}
	return b.addC(x, c)
}

// blockShift is the shift -(Offset mod Size) that moves a block mask's
// block starts to multiples of Size.
func blockShift(m *spec.Mask) int64 {
	return -int64(m.Offset % m.Size)
}

// dilatedReach is the largest distance |i - j| a dilated mask keeps,
// (Size-1)*Stride, and whether it bounds anything. Positions of a call are
// below Inf (mask.Inf: Shape checks keep them there), so no two are Inf or
// more apart: a reach of Inf or more excludes no pair, and the mask is
// lowered as the unbounded one (Size 0). This is exact for every legal
// position, on every target, and keeps every constant of the programs in
// [-Inf, Inf] (the parser allows Size and Stride up to 2^31-1, whose
// product is near 2^62); below Inf the reach is kept as it is.
func dilatedReach(m *spec.Mask) (int64, bool) {
	if m.Size <= 0 {
		return 0, false
	}
	taps, st := int64(m.Size-1), int64(max(m.Stride, 1))
	if taps > (Inf-1)/st { // (Size-1)*Stride >= Inf, without overflow
		return 0, false
	}
	return taps * st, true
}

// inSet is whether position x is in the set of a queries or keys mask.
func (b *builder) inSet(m *spec.Mask, x int) int {
	r := b.konst(1)
	if m.Lo > 0 {
		r = b.and(r, b.le(b.konst(int64(m.Lo)), x))
	}
	if m.Below > 0 {
		r = b.and(r, b.lt(x, b.konst(int64(m.Below))))
	}
	if m.Stride > 1 {
		r = b.and(r, b.eq(b.modC(x, int64(m.Stride)), b.konst(int64(m.Phase))))
	}
	return r
}

// setNone is whether no position of a queries or keys set lies in
// [lo, hi] (hi may be Inf). It compares the distance to the set's first
// position at or after lo with hi - lo, so that no value leaves
// [-Inf, Inf] even when lo or hi are constants.
func (b *builder) setNone(m *spec.Mask, lo, hi int) int {
	if m.Lo > 0 {
		lo = b.max(lo, b.konst(int64(m.Lo)))
	}
	if m.Below > 0 {
		hi = b.min(hi, b.konst(int64(m.Below-1)))
	}
	if m.Stride == 1 {
		return b.lt(hi, lo)
	}
	off := b.modC(b.sub(b.konst(int64(m.Phase)), lo), int64(m.Stride))
	return b.lt(b.sub(hi, lo), off)
}

// setLast is the last position of the set at or before hi, for hi below
// Inf (below the set's first position when there is none).
func (b *builder) setLast(m *spec.Mask, hi int) int {
	if m.Below > 0 {
		hi = b.min(hi, b.konst(int64(m.Below-1)))
	}
	if m.Stride == 1 {
		return hi
	}
	return b.sub(hi, b.modC(b.addC(hi, -int64(m.Phase)), int64(m.Stride)))
}

// setLastConst is the largest position of a queries or keys set with a
// bound (Below > 0); below m.Lo when the set is empty.
func setLastConst(m *spec.Mask) int64 {
	hi := m.Below - 1
	return int64(hi - mask.FloorMod(hi-m.Phase, m.Stride))
}

// setNext is at least x and at most the set's first position at or after
// x (ignoring below): that position, except within a stride of Inf, where
// the residue is found from Inf - stride so that constants stay below Inf
// (no position of a call is there; the bound is still sound).
func (b *builder) setNext(m *spec.Mask, x int) int {
	lo := x
	if m.Lo > 0 {
		lo = b.max(lo, b.konst(int64(m.Lo)))
	}
	if m.Stride == 1 {
		return lo
	}
	st := int64(m.Stride)
	c := b.min(lo, b.konst(Inf-st))
	return b.max(lo, b.add(c, b.modC(b.sub(b.konst(int64(m.Phase)), c), st)))
}

// covers is whether every position of [lo, hi] is in the set.
func (b *builder) covers(m *spec.Mask, lo, hi int) int {
	r := b.konst(1)
	if m.Lo > 0 {
		r = b.and(r, b.le(b.konst(int64(m.Lo)), lo))
	}
	if m.Below > 0 {
		r = b.and(r, b.lt(hi, b.konst(int64(m.Below))))
	}
	if m.Stride > 1 {
		r = b.ands(r, b.eq(lo, hi), b.eq(b.modC(lo, int64(m.Stride)), b.konst(int64(m.Phase))))
	}
	return r
}

// everything keeps every pair (with the causal flag folded in).
var everything = primitive{
	pred: func(b *builder, m *spec.Mask, causal bool, i, j int) int { return b.konst(1) },
	hull: func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (int, int) { return x, b.konst(Inf) },
	class: func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
		if !causal {
			return b.konst(int64(mask.Full))
		}
		return b.classDist(causal, q0, q1, k0, k1, 0, Inf, 1)
	},
	// every row (causal: from k0, where x is already)
	qhull: func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (int, int) { return x, b.konst(Inf) },
}

// classDist classifies a tile against the distances d = i - j in [lo, hi]
// (with causal: lo >= 0) with d mod step == 0. Every distance in
// [q0-k1, q1-k0] occurs in the tile, so the answer is exact. Unbounded
// sides are Inf or -Inf and are not compared.
func (b *builder) classDist(causal bool, q0, q1, k0, k1 int, lo, hi, step int64) int {
	if causal {
		lo = max(lo, 0)
	}
	a, c := b.sub(q0, k1), b.sub(q1, k0)
	x, y := a, c
	if lo > -Inf {
		x = b.max(a, b.konst(lo))
	}
	if hi < Inf {
		y = b.min(c, b.konst(hi))
	}
	empty := b.lt(y, x)
	if step > 1 {
		// no multiple of step in [x, y]
		empty = b.or(empty, b.lt(y, b.mulC(b.ceilDivC(x, step), step)))
	}
	full := b.konst(1)
	if lo > -Inf {
		full = b.and(full, b.le(b.konst(lo), a))
	}
	if hi < Inf {
		full = b.and(full, b.le(c, b.konst(hi)))
	}
	if step > 1 {
		// full only when the tile has one distance, a multiple of step
		full = b.ands(full, b.eq(a, c), b.eq(b.modC(a, step), b.konst(0)))
	}
	return b.class(empty, full)
}

// classDistV is classDist for step 1 with both bounds values of the
// program (head parameters): distances d = i - j in [lo, hi], with causal
// also d >= 0.
func (b *builder) classDistV(causal bool, q0, q1, k0, k1, lo, hi int) int {
	if causal {
		lo = b.max(lo, b.konst(0))
	}
	a, c := b.sub(q0, k1), b.sub(q1, k0)
	empty := b.lt(b.min(c, hi), b.max(a, lo))
	full := b.and(b.le(lo, a), b.le(c, hi))
	return b.class(empty, full)
}

// lower* walk the mask tree; combinators are handled here, primitives by
// the table.
func (b *builder) lowerPred(m *spec.Mask, causal bool, i, j int) int {
	switch m.Op {
	case spec.OpNot:
		// the causal flag is ANDed once, by LowerPred
		return b.not(b.lowerPred(m.Args[0], causal, i, j))
	case spec.OpUnion, spec.OpIntersect:
		r := b.lowerPred(m.Args[0], causal, i, j)
		for _, a := range m.Args[1:] {
			x := b.lowerPred(a, causal, i, j)
			if m.Op == spec.OpUnion {
				r = b.or(r, x)
			} else {
				r = b.and(r, x)
			}
		}
		return r
	}
	return primitiveOf(m).pred(b, m, causal, i, j)
}

// combineHull is a combinator's hull (key or query hull) from its
// operands' (one): what an operand of not drops can be anywhere, so
// everything from x; a union takes the smallest next and the largest
// last; an intersection the largest next and the smallest last (every
// operand must keep the pair: one below any operand's next is not kept).
func (b *builder) combineHull(m *spec.Mask, x int, one func(a *spec.Mask) (int, int)) (next, last int) {
	if m.Op == spec.OpNot {
		return x, b.konst(Inf)
	}
	next, last = one(m.Args[0])
	for _, a := range m.Args[1:] {
		n, l := one(a)
		if m.Op == spec.OpUnion {
			next, last = b.min(next, n), b.max(last, l)
		} else {
			next, last = b.max(next, n), b.min(last, l)
		}
	}
	return next, last
}

func (b *builder) lowerHull(m *spec.Mask, causal bool, q0, q1, x int) (next, last int) {
	if m.Op.Combinator() {
		return b.combineHull(m, x, func(a *spec.Mask) (int, int) { return b.lowerHull(a, causal, q0, q1, x) })
	}
	return primitiveOf(m).hull(b, m, causal, q0, q1, x)
}

func (b *builder) lowerQHull(m *spec.Mask, causal bool, k0, k1, x int) (next, last int) {
	if m.Op.Combinator() {
		return b.combineHull(m, x, func(a *spec.Mask) (int, int) { return b.lowerQHull(a, causal, k0, k1, x) })
	}
	if q := primitiveOf(m).qhull; q != nil {
		return q(b, m, causal, k0, k1, x)
	}
	// sound for a primitive without a query hull (TestQHullPrimitives
	// fails for it): every row from x
	return x, b.konst(Inf)
}

func (b *builder) lowerClass(m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
	switch m.Op {
	case spec.OpNot:
		// spec's rule: the operand's class without the causal flag,
		// Empty and Full swapped (2 - c), capped by the causal class
		c := b.sub(b.konst(int64(mask.Full)), b.lowerClass(m.Args[0], false, q0, q1, k0, k1))
		if causal {
			c = b.min(c, everything.class(b, nil, true, q0, q1, k0, k1))
		}
		return c
	case spec.OpUnion, spec.OpIntersect:
		c := b.lowerClass(m.Args[0], causal, q0, q1, k0, k1)
		for _, a := range m.Args[1:] {
			x := b.lowerClass(a, causal, q0, q1, k0, k1)
			if m.Op == spec.OpUnion {
				c = b.max(c, x)
			} else {
				c = b.min(c, x)
			}
		}
		return c
	}
	return primitiveOf(m).class(b, m, causal, q0, q1, k0, k1)
}

func primitiveOf(m *spec.Mask) primitive {
	p, ok := primitives[m.Op]
	if !ok {
		panic(fmt.Sprintf("BUG: gen has no lowering for mask op %s", m.Op))
	}
	return p
}

// LowerPred compiles a pattern into the partial-tile predicate
// pred(i, j) -> keep, on positions of the plan's layout. With document
// ids, positional patterns use document-local positions and pairs in
// different documents are not kept.
func LowerPred(p spec.Pattern) *Prog {
	b := newBuilder("pred", "i", "j")
	i, j := b.arg(0), b.arg(1)
	li, lj, same := i, j, b.konst(1)
	if p.Mask.HasDocument() {
		same = b.eq(b.load(FieldDocID, i), b.load(FieldDocID, j))
		ds := b.load(FieldDocStart, i)
		li, lj = b.sub(i, ds), b.sub(j, ds)
	}
	r := b.and(same, b.lowerPred(p.Mask, p.Causal, li, lj))
	if p.Causal {
		r = b.and(b.le(j, i), r)
	}
	return b.done(r)
}

// LowerHull compiles the key hull hull(q0, q1, x) -> (next, last) of
// query positions [q0, q1] (see mask.Mask.Hull).
func LowerHull(p spec.Pattern) *Prog {
	b := newBuilder("hull", "q0", "q1", "x")
	q0, q1, x := b.arg(0), b.arg(1), b.arg(2)
	var next, last int
	if p.Mask.HasDocument() {
		// from the start of q0's document to q1, or to the end of q1's
		// document without causality
		next = b.max(x, b.load(FieldDocStart, q0))
		last = q1
		if !p.Causal {
			last = b.load(FieldDocEnd, q1)
		}
	} else {
		next, last = b.lowerHull(p.Mask, p.Causal, q0, q1, x)
		if p.Causal {
			last = b.min(last, q1)
		}
	}
	return b.done(next, last)
}

// LowerQHull compiles the query hull qhull(k0, k1, x) -> (next, last) of
// key positions [k0, k1], the key hull transposed, on positions of the
// plan's layout: next is at least x and at most the smallest query
// position >= x that keeps some key of [k0, k1]; last is at least every
// query position that keeps one. Each primitive's bound is exact (next is
// that smallest query, last the largest, and next > last when no query
// at or past x keeps a key; a queries or keys set's next within a stride
// of Inf is only sound, see setNext) except neighborhood's, a rectangle
// of grid cells as its key hull. Unions take the smallest next and the
// largest last of their operands, intersections the largest next and the
// smallest last, and a complement's rows are every row from x: sound, but
// next may be at most last with no such query (as for LowerHull). The
// causal flag (j <= i) starts the rows at k0. With document ids the rows
// lie in [start of k0's document, end of k1's document] (causal: from
// k0), as LowerHull bounds keys by documents only. A backward pass walks a
// key tile's query tiles with it (Plan.VisitColumn).
func LowerQHull(p spec.Pattern) *Prog {
	b := newBuilder("qhull", "k0", "k1", "x")
	k0, k1, x := b.arg(0), b.arg(1), b.arg(2)
	if p.Causal {
		x = b.max(x, k0)
	}
	var next, last int
	if p.Mask.HasDocument() {
		next = x
		if !p.Causal {
			next = b.max(x, b.load(FieldDocStart, k0))
		}
		last = b.load(FieldDocEnd, k1)
	} else {
		next, last = b.lowerQHull(p.Mask, p.Causal, k0, k1, x)
	}
	return b.done(next, last)
}

// LowerClass compiles the tile class class(q0, q1, k0, k1) -> mask.Class.
// Each primitive is exact; a union takes the largest class of its operands
// and an intersection the smallest, which is sound but may answer Partial
// for an empty or full tile (the runtime refines Partial tiles exactly
// from their keep words). With documents, a tile inside one document is
// classified in document-local positions, a tile whose query and key
// documents are disjoint is empty, any other is partial.
func LowerClass(p spec.Pattern) *Prog {
	b := newBuilder("class", "q0", "q1", "k0", "k1")
	q0, q1, k0, k1 := b.arg(0), b.arg(1), b.arg(2), b.arg(3)
	if !p.Mask.HasDocument() {
		return b.done(b.lowerClass(p.Mask, p.Causal, q0, q1, k0, k1))
	}
	id := func(x int) int { return b.load(FieldDocID, x) }
	iq0, iq1, ik0, ik1 := id(q0), id(q1), id(k0), id(k1)
	empty := b.or(b.lt(iq1, ik0), b.lt(ik1, iq0))
	if p.Causal {
		empty = b.or(empty, b.lt(q1, k0))
	}
	same := b.ands(b.eq(iq0, iq1), b.eq(ik0, ik1), b.eq(iq0, ik0))
	s := b.load(FieldDocStart, q0)
	local := b.lowerClass(p.Mask, p.Causal, b.sub(q0, s), b.sub(q1, s), b.sub(k0, s), b.sub(k1, s))
	c := b.sel(same, local, b.konst(1))
	return b.done(b.sel(empty, b.konst(0), c))
}
