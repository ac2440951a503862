package spec

import "slices"

// Span is an inclusive interval of key positions.
type Span struct{ Lo, Hi int }

// KeySpans appends to dst sorted, disjoint intervals of key positions in
// [0, n) that contain every key some query position in [q0, q1] may attend
// (a superset, as tight as interval arithmetic per primitive allows). Its
// cost is proportional to the number of intervals returned, which is at most
// one per block or stride period the keys touch, so enumerating the key
// tiles inside the spans costs about the number of tiles a planner visits.
func (p Pattern) KeySpans(dst []Span, q0, q1, n int) []Span {
	hi := n - 1
	if p.Causal {
		hi = min(hi, q1)
	}
	start := len(dst)
	dst = p.Mask.spans(dst, q0, q1, p.Causal, hi)
	k := start
	for _, s := range dst[start:] {
		s.Lo, s.Hi = max(s.Lo, 0), min(s.Hi, hi)
		if s.Lo <= s.Hi {
			dst[k] = s
			k++
		}
	}
	merged := mergeSpans(dst[start:k])
	return dst[:start+len(merged)]
}

func mergeSpans(s []Span) []Span {
	if len(s) <= 1 {
		return s
	}
	slices.SortFunc(s, func(a, b Span) int { return a.Lo - b.Lo })
	k := 0
	for _, x := range s[1:] {
		if x.Lo <= s[k].Hi+1 {
			s[k].Hi = max(s[k].Hi, x.Hi)
		} else {
			k++
			s[k] = x
		}
	}
	return s[:k+1]
}

func (m *Mask) spans(dst []Span, q0, q1 int, causal bool, hiKey int) []Span {
	switch m.Op {
	case OpFull, OpDocument:
		return append(dst, Span{0, inf})
	case OpWindow:
		return append(dst, Span{q0 - m.Left, q1 + m.Right})
	case OpBlock:
		return append(dst, Span{floorDiv(q0, m.Size) * m.Size, floorDiv(q1, m.Size)*m.Size + m.Size - 1})
	case OpBridge:
		b := m.Block
		nlo := max(1, ceilDiv(q0-m.Targets+1, b))
		nhi := floorDiv(q1, b)
		if m.Sources == b && nlo <= nhi {
			return append(dst, Span{nlo*b - b, nhi*b - 1})
		}
		for n := nlo; n <= nhi; n++ {
			lo := n*b - m.Sources
			if m.MaxDistance > 0 {
				lo = max(lo, max(n*b, q0)-m.MaxDistance)
			}
			dst = append(dst, Span{lo, n*b - 1})
		}
		return dst
	case OpDilated:
		// Keys j = i - k*stride for the allowed k: rows [q0, q1] shifted by
		// k*stride. Shifts closer than the tile height merge into one span.
		st := m.Stride
		kmin, kmax := -inf, inf
		if m.Size > 0 {
			kmin, kmax = -(m.Size - 1), m.Size-1
		}
		if causal {
			kmin = 0
		}
		kmin = max(kmin, ceilDiv(q0-hiKey, st))
		kmax = min(kmax, floorDiv(q1, st))
		if kmin > kmax {
			return dst
		}
		if st <= q1-q0+1 {
			return append(dst, Span{q0 - kmax*st, q1 - kmin*st})
		}
		for k := kmax; k >= kmin; k-- {
			dst = append(dst, Span{q0 - k*st, q1 - k*st})
		}
		return dst
	case OpGlobal:
		return append(dst, Span{0, m.Tokens - 1})
	case OpUnion:
		for _, a := range m.Args {
			dst = a.spans(dst, q0, q1, causal, hiKey)
		}
		return dst
	case OpIntersect:
		// Everything happens in dst's spare room, so that a caller's buffer
		// serves every call: the running intersection at dst[start:mid],
		// the next operand's spans after it, their intersection after those,
		// then moved down to start.
		start := len(dst)
		dst = m.Args[0].spans(dst, q0, q1, causal, hiKey)
		dst = dst[:start+len(mergeSpans(dst[start:]))]
		for _, a := range m.Args[1:] {
			mid := len(dst)
			dst = a.spans(dst, q0, q1, causal, hiKey)
			end := mid + len(mergeSpans(dst[mid:]))
			dst = dst[:end]
			for x, y := start, mid; x < mid && y < end; {
				cx, oy := dst[x], dst[y]
				if lo, hi := max(cx.Lo, oy.Lo), min(cx.Hi, oy.Hi); lo <= hi {
					dst = append(dst, Span{lo, hi})
				}
				if cx.Hi < oy.Hi {
					x++
				} else {
					y++
				}
			}
			n := copy(dst[start:], dst[end:])
			dst = dst[:start+n]
		}
		return dst
	}
	panic("BUG: unknown op " + m.Op.String())
}
