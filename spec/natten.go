package spec

// Neighbourhood attention (NATTEN) over a grid of tokens.
//
// Token i of the sequence is the grid cell (i / W, i mod W) of an H x W grid
// (row-major); tokens at or past H*W are outside the grid and neither keep
// nor are kept. A query keeps a key when each axis keeps it: along an axis
// of extent L with kernel K, dilation D (K*D <= L) and n = K/2,
//
//   - the positions of the axis split into D groups by residue g = y mod D,
//     group g holding g, g+D, ..., Lg = ceil((L-g)/D) positions; query y is
//     position p = y / D of its group, and keeps only keys of its group;
//   - not causal: it keeps the K consecutive group positions starting at
//     s = clamp(p - n, 0, Lg - K): centred on itself, shifted inwards at the
//     edges, so that it always has exactly K neighbours along the axis;
//   - causal: it keeps group positions p-K+1 .. p (fewer at the start: the
//     window is not shifted).
//
// This is NATTEN's get_window_start/get_window_end (natten_commons.cuh) and
// its Flex mask; gen's external test re-implements NATTEN's code and
// compares.

// axis is one axis of a neighborhood mask.
type axis struct {
	L, K, D int
	Causal  bool
}

func (m *Mask) axis(k int) axis {
	return axis{m.Grid[k], m.Kernel[k], m.Dilation[k], m.AxisCausal[k]}
}

// keeps is the axis' predicate in NATTEN's group coordinates, for
// 0 <= y, x < L.
func (a axis) keeps(y, x int) bool {
	if mod(x-y, a.D) != 0 {
		return false
	}
	p, q := y/a.D, x/a.D
	if a.Causal {
		return p-a.K+1 <= q && q <= p
	}
	lg := (a.L-1-y%a.D)/a.D + 1
	s := max(0, min(p-a.K/2, lg-a.K))
	return s <= q && q <= s+a.K-1
}

// window is the first and last key of query y (0 <= y < L): y keeps lo,
// lo+D, ..., hi. The same window as keeps, in absolute positions.
func (a axis) window(y int) (lo, hi int) {
	g := y % a.D
	if a.Causal {
		return max(y-(a.K-1)*a.D, g), y
	}
	last := a.L - 1 - (a.L-1-g)%a.D // the group's last position
	lo = max(g, min(y-a.K/2*a.D, last-(a.K-1)*a.D))
	return lo, lo + (a.K-1)*a.D
}

// hasMultiple reports whether [lo, hi] holds a multiple of d.
func hasMultiple(lo, hi, d int) bool { return lo <= hi && ceilDiv(lo, d)*d <= hi }

// class classifies queries [y0, y1] against keys [x0, x1] along the axis
// (both within [0, L-1], non-empty), exactly. Causal: the distances y - x in
// [0, (K-1)D] that are multiples of D. Not causal, empty: the queries split
// into three zones, each exact by the distances it covers: y < nD (the
// window starts at the group's start: keys x of y's group with x < KD),
// nD <= y <= L-1-nD (centred: |y - x| <= nD), y >= L-nD (the window ends at
// the group's end: keys x >= L-KD); the zones are disjoint since KD <= L.
// Not causal, full: with D = 1 the windows slide monotonically, so every
// query keeps every key iff the last query's window starts at or before x0
// and the first's ends at or after x1; with D > 1 two queries or two keys
// in a row lie in different groups, so only a single kept pair is full.
func (a axis) class(y0, y1, x0, x1 int) Class {
	K, D := a.K, a.D
	if a.Causal {
		return classifyDist(y0, y1, x0, x1, 0, (K-1)*D, D)
	}
	nd := K / 2 * D
	some := false
	if y0 < nd { // start zone
		b, e := min(y1, nd-1), min(x1, K*D-1)
		some = x0 <= e && hasMultiple(x0-b, e-y0, D)
	}
	if lo, hi := max(y0, nd), min(y1, a.L-1-nd); lo <= hi {
		some = some || classifyDist(lo, hi, x0, x1, -nd, nd, D) != Empty
	}
	if y1 >= a.L-nd { // end zone
		lo, c := max(y0, a.L-nd), max(x0, a.L-K*D)
		some = some || c <= x1 && hasMultiple(c-y1, x1-lo, D)
	}
	switch {
	case !some:
		return Empty
	case D == 1:
		if lo, _ := a.window(y1); lo <= x0 {
			if _, hi := a.window(y0); hi >= x1 {
				return FullT
			}
		}
	case y0 == y1 && x0 == x1:
		return FullT
	}
	return Partial
}

// neighbors is the mask at (i, j).
func (m *Mask) neighbors(i, j int) bool {
	w, n := m.Grid[1], m.Grid[0]*m.Grid[1]
	if i < 0 || j < 0 || i >= n || j >= n {
		return false
	}
	return m.axis(0).keeps(i/w, j/w) && m.axis(1).keeps(i%w, j%w)
}

// gridPiece is a rectangle of grid cells: rows R0..R1, columns C0..C1.
type gridPiece struct{ R0, R1, C0, C1 int }

// gridPieces splits positions [lo, hi] of the grid (0 <= lo <= hi < H*W)
// into at most three rectangles: the rest of lo's row, the rows between,
// and the start of hi's row.
func gridPieces(dst []gridPiece, lo, hi, w int) []gridPiece {
	r0, r1 := lo/w, hi/w
	if r0 == r1 {
		return append(dst, gridPiece{r0, r0, lo % w, hi % w})
	}
	dst = append(dst, gridPiece{r0, r0, lo % w, w - 1})
	if r1-r0 >= 2 {
		dst = append(dst, gridPiece{r0 + 1, r1 - 1, 0, w - 1})
	}
	return append(dst, gridPiece{r1, r1, 0, hi % w})
}

// classifyNeighborhood classifies a tile exactly: its queries and keys
// inside the grid are each at most three rectangles of cells, and between
// two rectangles the kept pairs are the product of what the row axis keeps
// and what the column axis keeps, so the pair is empty when either axis is
// and full when both are.
func classifyNeighborhood(q0, q1, k0, k1 int, m *Mask) Class {
	n := m.Grid[0] * m.Grid[1]
	if q0 >= n || k0 >= n {
		return Empty
	}
	var qb, kb [3]gridPiece
	qs := gridPieces(qb[:0], q0, min(q1, n-1), m.Grid[1])
	ks := gridPieces(kb[:0], k0, min(k1, n-1), m.Grid[1])
	rows, cols := m.axis(0), m.axis(1)
	some, all := false, q1 < n && k1 < n
	for _, q := range qs {
		for _, k := range ks {
			c := min(rows.class(q.R0, q.R1, k.R0, k.R1), cols.class(q.C0, q.C1, k.C0, k.C1))
			some = some || c != Empty
			all = all && c == FullT
		}
	}
	switch {
	case !some:
		return Empty
	case all:
		return FullT
	}
	return Partial
}

// neighborhoodKeys appends the keys of row i: one progression (step: the
// column dilation) per key row, or a single one when the window is one
// column (step W times the row dilation) or whole rows without gaps.
func (m *Mask) neighborhoodKeys(dst []Prog, i int, r Prog) []Prog {
	w, n := m.Grid[1], m.Grid[0]*m.Grid[1]
	if i < 0 || i >= n {
		return dst
	}
	rlo, rhi := m.axis(0).window(i / w)
	clo, chi := m.axis(1).window(i % w)
	add := func(g Prog) {
		if g = intersectProg(g, r); g.Lo <= g.Hi {
			dst = append(dst, g)
		}
	}
	switch {
	case clo == chi:
		add(Prog{rlo*w + clo, rhi*w + clo, w * m.Dilation[0]})
	case clo == 0 && chi == w-1 && m.Dilation[1] == 1 && m.Dilation[0] == 1:
		add(Prog{rlo * w, rhi*w + w - 1, 1})
	default:
		for row := rlo; row <= rhi; row += m.Dilation[0] {
			add(Prog{row*w + clo, row*w + chi, m.Dilation[1]})
		}
	}
	return dst
}

// bothCausal reports whether a neighborhood is causal along both axes:
// then every key it keeps precedes its query (j <= i), so the causal flag
// changes nothing.
func (m *Mask) bothCausal() bool { return m.AxisCausal[0] && m.AxisCausal[1] }

// ExactClass reports whether Classify is exact for this pattern when its
// mask is a single primitive. It is, except for a neighborhood that is not
// causal along both axes under the causal flag (the parser takes it only
// with causal: true written out: NATTEN cut at the diagonal of the
// flattened sequence), which is classified
// soundly as the neighbourhood's class capped by causality's.
func (p Pattern) ExactClass() bool {
	return !(p.Causal && p.Mask.Op == OpNeighborhood && !p.Mask.bothCausal())
}
