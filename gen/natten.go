package gen

import (
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// The neighborhood primitive (NATTEN over an H x W grid; spec/natten.go
// holds the meaning). Token i is the cell (i / W, i mod W); tokens at or
// past H*W are outside the grid.

// natAxis is one axis of a neighborhood: extent L, kernel K, dilation D.
type natAxis struct {
	L, K, D int64
	Causal  bool
}

func natAxes(m *spec.Mask) (rows, cols natAxis) {
	ax := func(a int) natAxis {
		return natAxis{int64(m.Grid[a]), int64(m.Kernel[a]), int64(m.Dilation[a]), m.AxisCausal[a]}
	}
	return ax(0), ax(1)
}

// modD is y mod D, with no instruction for D = 1.
func (b *builder) modD(y int, d int64) int {
	if d == 1 {
		return b.konst(0)
	}
	return b.modC(y, d)
}

// natWindow is query y's first and last key along the axis (y in
// [0, L-1]): causal, from y-(K-1)D (not below y's group start) to y; not
// causal, lo = clamp(y - nD, g, last - (K-1)D) with g = y mod D and last
// the group's last position, to lo + (K-1)D.
func (b *builder) natWindow(a natAxis, y int) (lo, hi int) {
	g := b.modD(y, a.D)
	span := (a.K - 1) * a.D
	if a.Causal {
		return b.max(b.addC(y, -span), g), y
	}
	last := b.sub(b.konst(a.L-1), b.modD(b.sub(b.konst(a.L-1), g), a.D))
	lo = b.max(g, b.min(b.addC(y, -a.K/2*a.D), b.addC(last, -span)))
	return lo, b.addC(lo, span)
}

// natBound bounds the keys of queries [y0, y1] along the axis: every
// window lies in [lo, hi]. Causal: [y0 - (K-1)D, y1]. Not causal: a window
// starts at min(y - nD, last - (K-1)D) or later, and last >= L - D; it ends
// at max(y + nD, g + (K-1)D) or earlier, and g <= min(y, D-1).
func (b *builder) natBound(a natAxis, y0, y1 int) (lo, hi int) {
	span := (a.K - 1) * a.D
	if a.Causal {
		return b.max(b.konst(0), b.addC(y0, -span)), y1
	}
	nd := a.K / 2 * a.D
	lo = b.max(b.konst(0), b.min(b.addC(y0, -nd), b.konst(a.L-a.K*a.D)))
	hi = b.min(b.konst(a.L-1), b.max(b.addC(y1, nd), b.addC(b.min(y1, b.konst(a.D-1)), span)))
	return lo, hi
}

// hasMultiple is whether [lo, hi] holds a multiple of d.
func (b *builder) hasMultiple(lo, hi int, d int64) int {
	r := b.le(lo, hi)
	if d > 1 {
		r = b.and(r, b.le(b.mulC(b.ceilDivC(lo, d), d), hi))
	}
	return r
}

// natClass classifies queries [y0, y1] against keys [x0, x1] along the
// axis, exactly, as spec's axis.class: causal by the distances; not
// causal, empty by three zones of queries (window at the group's start,
// centred, at the group's end), full by the sliding windows (D = 1) or a
// single pair (D > 1).
func (b *builder) natClass(a natAxis, y0, y1, x0, x1 int) int {
	K, D := a.K, a.D
	if a.Causal {
		return b.classDist(false, y0, y1, x0, x1, 0, (K-1)*D, D)
	}
	nd := K / 2 * D
	e := b.min(x1, b.konst(K*D-1))
	start := b.ands(b.lt(y0, b.konst(nd)), b.le(x0, e), b.hasMultiple(b.sub(x0, b.min(y1, b.konst(nd-1))), b.sub(e, y0), D))
	lo, hi := b.max(y0, b.konst(nd)), b.min(y1, b.konst(a.L-1-nd))
	mid := b.and(b.le(lo, hi), b.lt(b.konst(int64(mask.Empty)), b.classDist(false, lo, hi, x0, x1, -nd, nd, D)))
	c := b.max(x0, b.konst(a.L-K*D))
	end := b.ands(b.le(b.konst(a.L-nd), y1), b.le(c, x1), b.hasMultiple(b.sub(c, y1), b.sub(x1, b.max(y0, b.konst(a.L-nd))), D))
	some := b.or(b.or(start, mid), end)
	var full int
	if D == 1 {
		first, _ := b.natWindow(a, y1)
		_, last := b.natWindow(a, y0)
		full = b.and(b.le(first, x0), b.le(x1, last))
	} else {
		full = b.and(b.eq(y0, y1), b.eq(x0, x1))
	}
	return b.class(b.not(some), full)
}

// natPieces splits grid positions [lo, hi] (hi < H*W) into three
// rectangles of cells, rows [R0, R1] x columns [C0, C1], each with a
// condition saying whether it exists: the rest of lo's row (always), the
// rows between, the start of hi's row.
func (b *builder) natPieces(lo, hi int, w int64) (p [3][4]int, exists [3]int) {
	r0, r1 := b.divC(lo, w), b.divC(hi, w)
	c0, c1 := b.modD(lo, w), b.modD(hi, w)
	single := b.eq(r0, r1)
	p[0] = [4]int{r0, r0, c0, b.sel(single, c1, b.konst(w-1))}
	p[1] = [4]int{b.addC(r0, 1), b.addC(r1, -1), b.konst(0), b.konst(w - 1)}
	p[2] = [4]int{r1, r1, b.konst(0), c1}
	return p, [3]int{b.konst(1), b.le(b.addC(r0, 2), r1), b.lt(r0, r1)}
}

// natRect is next, the first cell at or after x of the rectangle of rows
// [r0, r1] x columns [c0, c1] of a grid of width w (r1 < H), and last, its
// last cell; none: (Inf, -Inf).
func (b *builder) natRect(w int64, r0, r1, c0, c1, x, none int) (next, last int) {
	xr := b.divC(x, w)
	xc := b.sub(x, b.mulC(xr, w))
	before := b.lt(xr, r0)
	rr := b.min(b.max(xr, r0), b.addC(r1, 1)) // at most H: rr*W + C0 < 2^31
	cand := b.sel(b.or(before, b.le(xc, c0)), b.add(b.mulC(rr, w), c0), x)
	nr := b.min(b.addC(rr, 1), b.addC(r1, 1))
	past := b.and(b.not(before), b.lt(c1, xc))
	inf := b.konst(Inf)
	next = b.sel(past, b.sel(b.le(nr, r1), b.add(b.mulC(nr, w), c0), inf), b.sel(b.le(rr, r1), cand, inf))
	last = b.add(b.mulC(r1, w), c1)
	return b.sel(none, inf, next), b.sel(none, b.konst(-Inf), last)
}

// natQBound bounds the queries whose windows along the axis meet keys
// [x0, x1] (0 <= x0 <= x1 <= L-1): every such query lies in [lo, hi].
// Causal: key x is in the windows of queries x .. x+(K-1)D. Not causal,
// with span = (K-1)D and n = K/2: query y's window ends at
// max(g + span, min(y - nD + span, last)) (g = y mod D, last the group's
// last position, at least L-D), so it reaches x only if y >= x - (span -
// nD) or x <= g + span <= D-1 + span; it starts at max(g, min(y - nD,
// last - span)), at or before x only if y <= x + nD or x >= last - span
// >= L-D-span.
func (b *builder) natQBound(a natAxis, x0, x1 int) (lo, hi int) {
	span := (a.K - 1) * a.D
	if a.Causal {
		return x0, b.min(b.konst(a.L-1), b.addC(x1, span))
	}
	nd := a.K / 2 * a.D
	lo = b.sel(b.le(x0, b.konst(a.D-1+span)), b.konst(0), b.addC(x0, -(span-nd)))
	hi = b.sel(b.lt(x1, b.konst(a.L-a.D-span)), b.addC(x1, nd), b.konst(a.L-1))
	return lo, hi
}

var neighborhood = primitive{
	pred: func(b *builder, m *spec.Mask, causal bool, i, j int) int {
		rows, cols := natAxes(m)
		w, n := cols.L, rows.L*cols.L
		in := b.ands(b.lt(i, b.konst(n)), b.le(b.konst(0), j), b.lt(j, b.konst(n)))
		r, c := b.divC(i, w), b.modD(i, w)
		rlo, rhi := b.natWindow(rows, r)
		clo, chi := b.natWindow(cols, c)
		// key row in [rlo, rhi] and of r's group: (j - gW) mod (W*Dh) < W
		rj := b.divC(j, w)
		keep := b.ands(in, b.le(rlo, rj), b.le(rj, rhi))
		if rows.D > 1 {
			g := b.mulC(b.modC(r, rows.D), w)
			keep = b.and(keep, b.le(b.modC(b.sub(j, g), w*rows.D), b.konst(w-1)))
		}
		// key column in [clo, chi] (both in [0, W-1]) and of c's group:
		// m = (j - clo) mod W is the column minus clo there
		mc := b.modD(b.sub(j, clo), w)
		keep = b.and(keep, b.le(mc, b.sub(chi, clo)))
		if cols.D > 1 {
			keep = b.and(keep, b.eq(b.modC(mc, cols.D), b.konst(0)))
		}
		return keep
	},
	hull: func(b *builder, m *spec.Mask, causal bool, q0, q1, x int) (int, int) {
		// The keys of queries [q0, q1] lie in rows [R0, R1] and columns
		// [C0, C1] (the queries' columns when they share a row, else all):
		// next is the first such cell at or after x.
		return b.natHull(m, q0, q1, x, b.natBound)
	},
	class: func(b *builder, m *spec.Mask, causal bool, q0, q1, k0, k1 int) int {
		// spec's classifyNeighborhood: between a rectangle of queries and
		// one of keys the kept pairs are the product of the axes' pairs
		rows, cols := natAxes(m)
		w, n := cols.L, rows.L*cols.L
		nk := b.konst(n)
		qp, qe := b.natPieces(q0, b.min(q1, b.konst(n-1)), w)
		kp, ke := b.natPieces(k0, b.min(k1, b.konst(n-1)), w)
		some, all := b.konst(0), b.and(b.lt(q1, nk), b.lt(k1, nk))
		for a := range 3 {
			for c := range 3 {
				q, k := qp[a], kp[c]
				cl := b.min(b.natClass(rows, q[0], q[1], k[0], k[1]), b.natClass(cols, q[2], q[3], k[2], k[3]))
				both := b.and(qe[a], ke[c])
				some = b.or(some, b.and(both, b.lt(b.konst(int64(mask.Empty)), cl)))
				all = b.and(all, b.or(b.not(both), b.eq(cl, b.konst(int64(mask.Full)))))
			}
		}
		cl := b.class(b.ands(b.not(some)), all)
		cl = b.sel(b.or(b.le(nk, q0), b.le(nk, k0)), b.konst(int64(mask.Empty)), cl)
		if causal && !(m.AxisCausal[0] && m.AxisCausal[1]) {
			// sound, not exact (spec.Pattern.ExactClass)
			cl = b.min(cl, everything.class(b, nil, true, q0, q1, k0, k1))
		}
		return cl
	},
	qhull: func(b *builder, m *spec.Mask, causal bool, k0, k1, x int) (int, int) {
		// The queries that keep keys [k0, k1] lie in rows [R0, R1] and
		// columns [C0, C1] (natQBound of the keys' rows, and of the keys'
		// columns when they share a row, else of all columns): next is the
		// first such cell at or after x. Sound, not exact, as the key hull.
		return b.natHull(m, k0, k1, x, b.natQBound)
	},
}

// natHull is the key hull of tokens [a0, a1] (bound: natBound) or their
// query hull (bound: natQBound): the tokens' rows, and their columns when
// they share a row (else every column), bounded per axis, as the
// rectangle natRect walks from x; none when a0 is past the grid.
func (b *builder) natHull(m *spec.Mask, a0, a1, x int, bound func(a natAxis, y0, y1 int) (lo, hi int)) (next, last int) {
	rows, cols := natAxes(m)
	w, n := cols.L, rows.L*cols.L
	none := b.le(b.konst(n), a0)
	a1 = b.min(a1, b.konst(n-1))
	ra0, ra1 := b.divC(a0, w), b.divC(a1, w)
	single := b.eq(ra0, ra1)
	r0, r1 := bound(rows, ra0, ra1)
	c0, c1 := bound(cols, b.sel(single, b.modD(a0, w), b.konst(0)), b.sel(single, b.modD(a1, w), b.konst(w-1)))
	return b.natRect(w, r0, r1, c0, c1, x, none)
}
