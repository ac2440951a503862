package mask

//go:generate go run ../../gen/cmd/genmask

// Segment is one independent attention problem of a layout: queries
// [0, SeqQ) and keys [0, SeqK) of the segment, bottom-right aligned, whose
// positions map back to absolute positions Offset + Stride*x. The identity
// layout has one segment with Stride 1.
type Segment struct {
	SeqQ, SeqK     int
	Offset, Stride int
}

// Abs maps a segment position to its absolute position.
func (s Segment) Abs(x int) int { return s.Offset + s.Stride*x }

// Segments appends the segments of a call with sq queries and sk keys
// (sq <= sk) under a layout of the given stride (1: identity); classes
// without queries are left out.
func Segments(dst []Segment, sq, sk, stride int) []Segment {
	st := max(stride, 1)
	for c := 0; c < st && c < sk; c++ {
		if nq, nk := Residue(c, sq, sk, st); nq > 0 {
			dst = append(dst, Segment{SeqQ: nq, SeqK: nk, Offset: c, Stride: st})
		}
	}
	return dst
}

// MaxQueries is the most queries any segment of a call holds: the query
// tiles of a GPU grid.
func MaxQueries(sq, sk, stride int) int {
	st, most := max(stride, 1), 0
	for c := 0; c < st && c < sk; c++ {
		nq, _ := Residue(c, sq, sk, st)
		most = max(most, nq)
	}
	return most
}
