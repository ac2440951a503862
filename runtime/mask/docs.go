package mask

import "fmt"

// Docs holds the document ids of a packed sequence, one per position; ids
// are non-decreasing, so each document is one run of positions.
//
// A Docs may instead hold the parent array of a tree mask (NewTree,
// ResetTree): it is the run-time data of a compiled mask, whichever kind
// the mask reads.
//
// It also carries the head parameters of one query head (SetHead), for
// masks whose fields vary by head (HeadParams).
type Docs struct {
	ids        []int32
	start, end []int32
	isTree     bool
	tr         tree
	params     []int32
}

// SetHead makes d the run-time data of one query head: src's document ids
// or parent array (shared, not copied; nil: none) and the head's parameter
// values, params[k] for parameter k (kept, not copied). A Docs set this
// way is a view: Reset and ResetTree must not be called on it, since they
// would write into src's buffers.
func (d *Docs) SetHead(src *Docs, params []int32) {
	if src != nil {
		*d = *src
	} else {
		*d = Docs{}
	}
	d.params = params
}

// Param returns head parameter k of the head d was set for (SetHead).
func (d *Docs) Param(k int) int { return int(d.params[k]) }

// Params returns the head parameter values d was set with.
func (d *Docs) Params() []int32 { return d.params }

// NewDocs checks ids (non-decreasing) and indexes document starts and ends.
func NewDocs(ids []int32) (*Docs, error) {
	d := &Docs{}
	return d, d.Reset(ids)
}

// Reset re-indexes d for new ids, reusing its memory.
func (d *Docs) Reset(ids []int32) error {
	d.isTree = false
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

// Len is the number of positions the ids (or the parent array) cover.
func (d *Docs) Len() int {
	if d.isTree {
		return len(d.tr.parent)
	}
	return len(d.ids)
}

// IDs returns the document ids d was indexed from (nil for a parent
// array: see Parents).
func (d *Docs) IDs() []int32 {
	if d.isTree {
		return nil
	}
	return d.ids
}

// ID returns the document id at position i.
func (d *Docs) ID(i int) int32 { return d.ids[i] }

// Start returns the first position of i's document.
func (d *Docs) Start(i int) int { return int(d.start[i]) }

// End returns the last position of i's document.
func (d *Docs) End(i int) int { return int(d.end[i]) }
