package spec

import (
	"fmt"

	"github.com/attngen/attngen/runtime/mask"
)

// Pattern is what one attention layer evaluates: a normalized mask and the
// causal flag ANDed into it. Positions are absolute (see Row).
type Pattern struct {
	Mask   *Mask
	Causal bool
	// Data, when not nil, is the run-time data of the mask (document ids
	// from NewDocs, or a parent array from NewTree) that At, Keys and
	// Classify then use, as AtDocs and ClassifyDocs do; nil: a document
	// mask is one document and a tree one chain.
	Data *Docs
	// Params are the head parameters the mask's Refs name (params.go);
	// empty when it takes none. Bind replaces them by one head's values.
	Params []HeadParam
	// Score is the spec's score section (Spec.Pattern sets it; the zero
	// value elsewhere): it never changes which pairs are kept, and is
	// carried so that checks of a spec's kernels know the call values
	// they must draw.
	Score Score
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
func (p Pattern) At(i, j int) bool {
	if p.Data != nil {
		return p.AtDocs(i, j, p.Data)
	}
	return p.Mask.eval(i, j, p.Causal, true, nil)
}

// AtDocs evaluates the mask on a packed sequence. Positional patterns use
// document-local positions (i - start(i)); a pair in different documents is
// never kept when the mask has document (the parser only accepts document as
// the mask itself or an operand of a top-level intersect).
//
// When d holds a parent array (NewTree) and the mask has tree, the tree
// part is evaluated on it: j is kept when it is i or an ancestor of i.
//
// A nil d means p.Data.
func (p Pattern) AtDocs(i, j int, d *Docs) bool {
	if d == nil {
		d = p.Data
	}
	if d.IsTree() && p.Mask.HasTree() {
		return p.Mask.eval(i, j, p.Causal, true, d)
	}
	if d == nil || d.IsTree() || !p.Mask.HasDocument() {
		return p.Mask.eval(i, j, p.Causal, true, nil)
	}
	if d.ID(i) != d.ID(j) {
		return false
	}
	s := d.Start(i)
	return p.Mask.eval(i-s, j-s, p.Causal, true, nil)
}

// Period is the mask's period in positions (see Mask.Period); the causal
// flag is shift-invariant and does not change it.
func (p Pattern) Period() (int, bool) { return p.Mask.Period() }

// Docs holds the document ids of a packed sequence (runtime/mask owns
// the type: generated code and the CPU driver index documents the same way).
type Docs = mask.Docs

// NewDocs checks ids (non-decreasing) and indexes document starts.
func NewDocs(ids []int32) (*Docs, error) { return mask.NewDocs(ids) }

// NewTree checks a parent array (each parent precedes its child, -1 for a
// root) and indexes its ancestors; the result is the data of a tree mask.
func NewTree(parent []int32) (*Docs, error) { return mask.NewTree(parent) }
