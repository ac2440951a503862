package cpu

import (
	"fmt"

	"github.com/attngen/attngen/runtime/mask"
)

// A mask reads one kind of run-time data (mask.Mask.UsesDocs): document
// ids, or for a tree mask (mask.UsesTree) a parent array. Both are one
// int32 per key position, SeqK shared by every batch or Batch*SeqK (one
// row per batch), and index into a pooled mask.Docs per row.

// dataErr is the error a mask's data problems wrap, and what the data is
// called in messages.
func dataErr(m mask.Mask) (error, string) {
	if mask.UsesTree(m) {
		return ErrTree, "parent entries"
	}
	return ErrDocument, "document ids"
}

// checkDataLen checks the length of a mask's data against the shape.
func checkDataLen(m mask.Mask, s Shape, data []int32) error {
	if n, ok := mul(s.Batch, s.SeqK); !ok || len(data) != s.SeqK && len(data) != n {
		e, what := dataErr(m)
		return fmt.Errorf("%w: %d %s; the shape needs SeqK = %d (shared by every batch) or Batch*SeqK = %d (one row per batch)", e, len(data), what, s.SeqK, n)
	}
	return nil
}

// resetData indexes the data rows of a call into docs (pooled: each
// mask.Docs keeps its buffers) and returns it.
func resetData(docs []mask.Docs, m mask.Mask, s Shape, data []int32) ([]mask.Docs, error) {
	docs = docs[:0]
	if !m.UsesDocs() {
		return docs, nil
	}
	tree := mask.UsesTree(m)
	rows := docsLen(s, data) / s.SeqK
	for b := 0; b < rows; b++ {
		if b == cap(docs) {
			docs = append(docs, mask.Docs{})
		}
		docs = docs[:b+1]
		row := data[b*s.SeqK : (b+1)*s.SeqK]
		var err error
		if tree {
			err = docs[b].ResetTree(row)
		} else {
			err = docs[b].Reset(row)
		}
		if err != nil {
			e, _ := dataErr(m)
			if rows > 1 {
				return docs, fmt.Errorf("%w: batch %d: %v", e, b, err)
			}
			return docs, fmt.Errorf("%w: %v", e, err)
		}
	}
	return docs, nil
}
