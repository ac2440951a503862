package cpu

import (
	"fmt"

	"github.com/attngen/attngen/runtime/mask"
)

// A mask reads one kind of run-time data (mask.Mask.UsesDocs): document
// ids, or for a tree mask (mask.UsesTree) a parent array. Both are one
// int32 per position, n shared by every batch or Batch*n (one row per
// batch), and index into a pooled mask.Docs per row; n is SeqK, or with
// positions (Args.QPos, KPos) one past the last query or key position.

// dataErr is the error a mask's data problems wrap, and what the data is
// called in messages.
func dataErr(m mask.Mask) (error, string) {
	if mask.UsesTree(m) {
		return ErrTree, "parent entries"
	}
	return ErrDocument, "document ids"
}

// checkDataLen checks the length of a mask's data against the shape: n
// positions a row.
func checkDataLen(m mask.Mask, s Shape, n int, data []int32) error {
	if all, ok := mul(s.Batch, n); !ok || len(data) != n && len(data) != all {
		e, what := dataErr(m)
		if n != s.SeqK {
			return fmt.Errorf("%w: %d %s; the positions need %d (shared by every batch) or Batch*%d = %d (one row per batch)", e, len(data), what, n, n, all)
		}
		return fmt.Errorf("%w: %d %s; the shape needs SeqK = %d (shared by every batch) or Batch*SeqK = %d (one row per batch)", e, len(data), what, s.SeqK, all)
	}
	return nil
}

// resetData indexes the data rows of a call into docs (pooled: each
// mask.Docs keeps its buffers) and returns it.
func resetData(docs []mask.Docs, m mask.Mask, s Shape, n int, data []int32) ([]mask.Docs, error) {
	docs = docs[:0]
	if !m.UsesDocs() {
		return docs, nil
	}
	tree := mask.UsesTree(m)
	rows := docsLen(s, n, data) / n
	for b := 0; b < rows; b++ {
		if b == cap(docs) {
			docs = append(docs, mask.Docs{})
		}
		docs = docs[:b+1]
		row := data[b*n : (b+1)*n]
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

// Head parameters (mask.HeadParams): a mask may read run-time integers
// with one value per query head, window sizes or sink counts that differ
// between heads. A call gets them parameter-major (Args.HeadParams: entry
// k holds HeadsQ values of parameter k), checks them (checkHeads), copies
// them head-major into its own buffer (so later writes to the caller's
// slices change nothing), and computes query head h of data row dr with a
// mask.Docs view carrying that row's data and h's values (setHeads):
// views[dr*HeadsQ + h].

// checkHeads checks head parameter values against the mask and the shape:
// for a mask with n head parameters, entries 0 .. n-1 hold HeadsQ values
// each (or one, for every head), within the parameter's range, and the
// entries past n are nil; a
// mask without head parameters takes none.
func checkHeads(m mask.Mask, s Shape, hp *[mask.MaxHeadParams][]int32) error {
	params := mask.HeadParams(m)
	for k, vals := range hp {
		if k >= len(params) {
			if vals != nil {
				if len(params) == 0 {
					return fmt.Errorf("%w: %d values given for head parameter %d, but the mask has no head parameters (HeadParams must be all nil)", ErrHeadParam, len(vals), k)
				}
				return fmt.Errorf("%w: %d values given for head parameter %d, but the mask has %d head parameters (entries past them must be nil)", ErrHeadParam, len(vals), k, len(params))
			}
			continue
		}
		p := params[k]
		if len(vals) != s.HeadsQ && len(vals) != 1 {
			return fmt.Errorf("%w: head parameter %s has %d values; the shape needs one per query head, HeadsQ = %d (or one for every head)", ErrHeadParam, p.Name, len(vals), s.HeadsQ)
		}
		for h, v := range vals {
			if int(v) < p.Min || int(v) > p.Max {
				return fmt.Errorf("%w: head parameter %s of query head %d is %d, outside [%d, %d]", ErrHeadParam, p.Name, h, v, p.Min, p.Max)
			}
		}
	}
	return nil
}

// headValues copies the checked values of n head parameters into vals,
// head-major (vals[h*n + k] is parameter k at query head h), reusing its
// memory.
func headValues(vals []int32, hp *[mask.MaxHeadParams][]int32, n, headsQ int) []int32 {
	vals = grow(vals, n*headsQ)
	for k := 0; k < n; k++ {
		if len(hp[k]) == 1 { // one value for every head
			for h := 0; h < headsQ; h++ {
				vals[h*n+k] = hp[k][0]
			}
			continue
		}
		for h, v := range hp[k][:headsQ] {
			vals[h*n+k] = v
		}
	}
	return vals
}

// setHeads fills views (pooled) with one mask.Docs view per (data row,
// query head): the row's data (docs[dr], or none when docs is empty) and
// the head's n values from vals (headValues). It returns views empty when
// n is 0.
func setHeads(views, docs []mask.Docs, vals []int32, n, headsQ int) []mask.Docs {
	if n == 0 {
		return views[:0]
	}
	rows := max(len(docs), 1)
	views = grow(views, rows*headsQ)
	for dr := 0; dr < rows; dr++ {
		var src *mask.Docs
		if len(docs) > 0 {
			src = &docs[dr]
		}
		for h := 0; h < headsQ; h++ {
			views[dr*headsQ+h].SetHead(src, vals[h*n:(h+1)*n])
		}
	}
	return views
}

// sameHeads reports whether query heads h1 and h2 have the same values of
// every head parameter (always true without head parameters), so that
// they keep the same pairs.
func sameHeads(vals []int32, n, h1, h2 int) bool {
	for k := 0; k < n; k++ {
		if vals[h1*n+k] != vals[h2*n+k] {
			return false
		}
	}
	return true
}
