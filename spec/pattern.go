package spec

import "fmt"

// Pattern is what one attention layer evaluates: a normalized mask and the
// causal flag ANDed into it. Positions are absolute (see Row).
type Pattern struct {
	Mask   *Mask
	Causal bool
}

// String renders the pattern, causal flag first.
func (p Pattern) String() string {
	return fmt.Sprintf("causal: %v, mask: %s", p.Causal, p.Mask)
}

// Row maps query row r of a call with sq queries and sk keys to its absolute
// position: the causal diagonal is aligned bottom-right.
func Row(r, sq, sk int) int { return r + sk - sq }

// At reports whether query position i may attend to key position j. A mask
// with document evaluates as if the whole sequence were one document; use
// AtDocs for packed sequences.
func (p Pattern) At(i, j int) bool { return p.Mask.eval(i, j, p.Causal, true) }

// AtDocs evaluates the mask on a packed sequence. Positional patterns use
// document-local positions (i - start(i)); a pair in different documents is
// never kept when the mask has document (the parser only accepts document as
// the mask itself or an operand of a top-level intersect).
func (p Pattern) AtDocs(i, j int, d *Docs) bool {
	if d == nil || !p.Mask.HasDocument() {
		return p.At(i, j)
	}
	if d.ids[i] != d.ids[j] {
		return false
	}
	s := int(d.start[i])
	return p.Mask.eval(i-s, j-s, p.Causal, true)
}

// Period is the mask's period in positions (see Mask.Period); the causal
// flag is shift-invariant and does not change it.
func (p Pattern) Period() (int, bool) { return p.Mask.Period() }

// Docs holds the document ids of a packed sequence, one per absolute
// position; ids are non-decreasing, so each document is one run.
type Docs struct {
	ids        []int32
	start, end []int32
}

// NewDocs checks ids (non-decreasing) and indexes document starts.
func NewDocs(ids []int32) (*Docs, error) {
	d := &Docs{}
	return d, d.Reset(ids)
}

// Reset re-indexes d for new ids, reusing its memory.
func (d *Docs) Reset(ids []int32) error {
	d.ids = ids
	if cap(d.start) < len(ids) {
		d.start, d.end = make([]int32, len(ids)), make([]int32, len(ids))
	}
	d.start, d.end = d.start[:len(ids)], d.end[:len(ids)]
	for k := range ids {
		switch {
		case k == 0 || ids[k] != ids[k-1]:
			if k > 0 && ids[k] < ids[k-1] {
				return fmt.Errorf("document ids must be non-decreasing (packed sequences): ids[%d] = %d after ids[%d] = %d", k, ids[k], k-1, ids[k-1])
			}
			d.start[k] = int32(k)
		default:
			d.start[k] = d.start[k-1]
		}
	}
	for k := len(ids) - 1; k >= 0; k-- {
		if k == len(ids)-1 || ids[k+1] != ids[k] {
			d.end[k] = int32(k)
		} else {
			d.end[k] = d.end[k+1]
		}
	}
	return nil
}

// Len is the number of positions the ids cover.
func (d *Docs) Len() int { return len(d.ids) }

// ID returns the document id at position i.
func (d *Docs) ID(i int) int32 { return d.ids[i] }

// Start returns the first position of i's document.
func (d *Docs) Start(i int) int { return int(d.start[i]) }

// End returns the last position of i's document.
func (d *Docs) End(i int) int { return int(d.end[i]) }
