// Package specmask adapts a spec.Pattern to the CPU driver's kernel.Mask:
// the key tiles a query tile visits come from the mask algebra's key spans
// and tile classes, and the keep bits of partial tiles from each row's key
// progressions. attngen runs kernels through it, and generated packages
// carry a copy of it (with the spec algebra and the kernel runtime) so that
// they run exactly the code tested here.
package specmask

import (
	"github.com/attngen/attngen/kernel"
	"github.com/attngen/attngen/spec"
)

// New returns the driver's view of a pattern. stride > 1 selects the
// residue layout, in which case p is the pattern inside one residue class.
func New(p spec.Pattern, stride int) kernel.Mask {
	return &mask{p: p, stride: max(stride, 1)}
}

type mask struct {
	p      spec.Pattern
	stride int
	docs   spec.Docs
	bound  bound
}

type bound struct {
	m    *mask
	docs *spec.Docs
}

func (m *mask) Stride() int    { return m.stride }
func (m *mask) UsesDocs() bool { return m.p.Mask.HasDocument() }

func (m *mask) Bind(docs []int32, seqK int) (kernel.Bound, error) {
	m.bound = bound{m: m}
	if docs != nil {
		if err := m.docs.Reset(docs[:seqK]); err != nil {
			return nil, err
		}
		m.bound.docs = &m.docs
	}
	return &m.bound, nil
}

func ref(k int, c spec.Class) kernel.TileRef { return kernel.TileRef{K: k, Full: c == spec.FullT} }

// Visit runs on several workers at once; its scratch lives on its stack.
func (b *bound) Visit(dst []kernel.TileRef, q0, q1, nk int) []kernel.TileRef {
	if b.docs == nil {
		var spans [16]spec.Span
		dst, _ = spec.VisitTiles(b.m.p, dst, q0, q1, nk, kernel.TK, spans[:0], ref)
		return dst
	}
	return spec.VisitTilesDocs(b.m.p, dst, q0, q1, nk, kernel.TK, b.docs, ref)
}

func (b *bound) Word(i, k0, nk int) uint64 {
	var buf [16]spec.Prog
	w, _ := b.m.p.RowBits(buf[:0], i, k0, nk, b.docs)
	return w
}
