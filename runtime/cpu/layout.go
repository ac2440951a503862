package cpu

import (
	"fmt"
	"math"
)

// Strides are the element strides of one tensor's batch, head and
// position axes; the head_dim elements of one row are always contiguous.
// The zero value stands for the tensor's default layout (Layout).
type Strides struct{ Batch, Head, Pos int }

// Layout gives the element strides of q, k, v and the output (Out or
// Out16; a backward's dq, dk and dv take those of q, k and v, and dout
// that of the output unless BackArgs says otherwise). A zero Strides is
// the default: contiguous [Batch, Heads, Seq, HeadDim], the layout every
// call had before strides existed. With a paged cache, K's and V's Batch
// stride is the stride between pages and Head and Pos are those inside a
// page (default [page][HeadsKV][PageSize][HeadDim]). Every layout gives
// the same bits as the default on the same values: the kernels read the
// same numbers, gathered where rows are not where a tile wants them.
//
// Strides are checked with overflow-safe arithmetic: every stride must be
// at least 0 and every element a call reads or writes must lie in its
// slice (ErrShort); the output's rows must not overlap each other or any
// input (ErrAlias).
type Layout struct{ Q, K, V, Out Strides }

// BHSD is the default layout of s, written out: [Batch, Heads, Seq,
// HeadDim] for every tensor; dv is the head dimension of v and the output
// (Args.HeadDimV; 0 means s.HeadDim), as for every layout below.
func BHSD(s Shape, dv int) Layout {
	dv = orDim(dv, s.HeadDim)
	return Layout{
		Q:   Strides{s.HeadsQ * s.SeqQ * s.HeadDim, s.SeqQ * s.HeadDim, s.HeadDim},
		K:   Strides{s.HeadsKV * s.SeqK * s.HeadDim, s.SeqK * s.HeadDim, s.HeadDim},
		V:   Strides{s.HeadsKV * s.SeqK * dv, s.SeqK * dv, dv},
		Out: Strides{s.HeadsQ * s.SeqQ * dv, s.SeqQ * dv, dv},
	}
}

// BSHD is the layout of FlashAttention, ggml and most inference engines:
// [Batch, Seq, Heads, HeadDim] for every tensor.
func BSHD(s Shape, dv int) Layout {
	dv = orDim(dv, s.HeadDim)
	return Layout{
		Q:   Strides{s.SeqQ * s.HeadsQ * s.HeadDim, s.HeadDim, s.HeadsQ * s.HeadDim},
		K:   Strides{s.SeqK * s.HeadsKV * s.HeadDim, s.HeadDim, s.HeadsKV * s.HeadDim},
		V:   Strides{s.SeqK * s.HeadsKV * dv, dv, s.HeadsKV * dv},
		Out: Strides{s.SeqQ * s.HeadsQ * dv, dv, s.HeadsQ * dv},
	}
}

// PagedBSHD is BSHD with a paged cache whose pages hold their positions'
// heads side by side, [page][PageSize][HeadsKV][HeadDim] (vLLM's layout):
// K's and V's Batch stride is the page's.
func PagedBSHD(s Shape, pageSize, dv int) Layout {
	l := BSHD(s, dv)
	dv = orDim(dv, s.HeadDim)
	l.K = Strides{pageSize * s.HeadsKV * s.HeadDim, s.HeadDim, s.HeadsKV * s.HeadDim}
	l.V = Strides{pageSize * s.HeadsKV * dv, dv, s.HeadsKV * dv}
	return l
}

// PackedQKV is the layout of a fused QKV projection's output: one buffer
// [Batch, Seq, (HeadsQ + 2 HeadsKV) * HeadDim] holding each position's
// query heads, then its key heads, then its value heads. Pass Q = buf, K =
// buf[HeadsQ*HeadDim:] and V = buf[(HeadsQ+HeadsKV)*HeadDim:]; the output
// is [Batch, Seq, HeadsQ, HeadDim] (BSHD). It needs SeqQ = SeqK and one
// head dimension.
func PackedQKV(s Shape) Layout {
	d := s.HeadDim
	w := (s.HeadsQ + 2*s.HeadsKV) * d
	in := Strides{s.SeqK * w, d, w}
	return Layout{Q: in, K: in, V: in, Out: BSHD(s, 0).Out}
}

// orDim is d, or def when d is 0.
func orDim(d, def int) int {
	if d == 0 {
		return def
	}
	return d
}

// orDefault returns x, or d when x is the zero Strides.
func (x Strides) orDefault(d Strides) Strides {
	if x == (Strides{}) {
		return d
	}
	return x
}

// resolve returns the layout with every zero Strides replaced by its
// default; with a paged cache (pageSize > 0) k's and v's are the pages'
// [page][HeadsKV][PageSize][HeadDim].
func (l Layout) resolve(s Shape, dv, pageSize int) Layout {
	d := BHSD(s, dv)
	if pageSize > 0 {
		d.K = Strides{s.HeadsKV * pageSize * s.HeadDim, pageSize * s.HeadDim, s.HeadDim}
		d.V = Strides{s.HeadsKV * pageSize * dv, pageSize * dv, dv}
	}
	return Layout{l.Q.orDefault(d.Q), l.K.orDefault(d.K), l.V.orDefault(d.V), l.Out.orDefault(d.Out)}
}

// extent returns one past the last element a tensor of n = (batches,
// heads, positions) rows of w elements with strides x reaches, or false
// when a stride is negative or the arithmetic overflows. A tensor with a
// zero count reaches nothing.
func (x Strides) extent(n [3]int, w int) (int, bool) {
	if x.Batch < 0 || x.Head < 0 || x.Pos < 0 || w < 0 {
		return 0, false
	}
	if n[0] == 0 || n[1] == 0 || n[2] == 0 || w == 0 {
		return 0, true
	}
	e := w
	for i, st := range [3]int{x.Batch, x.Head, x.Pos} {
		t, ok := mul(n[i]-1, st)
		if !ok || e > math.MaxInt-t {
			return 0, false
		}
		e += t
	}
	return e, true
}

// disjoint reports whether the rows of a tensor of n rows of w elements
// with strides x never share an element: with the axes of more than one
// row sorted by stride, each stride is at least the extent of the axes
// below it. Some layouts whose rows interleave without sharing are
// refused too; no layout that shares is accepted.
func (x Strides) disjoint(n [3]int, w int) bool {
	type axis struct{ stride, count int }
	var buf [3]axis
	ax := buf[:0]
	for i, st := range [3]int{x.Batch, x.Head, x.Pos} {
		if n[i] > 1 {
			ax = append(ax, axis{st, n[i]})
		}
	}
	for i := 1; i < len(ax); i++ { // sort by stride
		for j := i; j > 0 && ax[j].stride < ax[j-1].stride; j-- {
			ax[j], ax[j-1] = ax[j-1], ax[j]
		}
	}
	reach := w // one past the last element of the axes so far
	for _, a := range ax {
		if a.stride < reach {
			return false
		}
		t, ok := mul(a.count-1, a.stride)
		if !ok || t > math.MaxInt-w {
			return false
		}
		reach = t + w
	}
	return true
}

// checkStrides checks one tensor's strides against its slice length:
// what names it in errors.
func checkStrides(what string, x Strides, n [3]int, w, length int) (int, error) {
	e, ok := x.extent(n, w)
	if !ok {
		return 0, fmt.Errorf("%w: %s strides %+v: a stride is negative or the extent overflows", ErrShape, what, x)
	}
	if length < e {
		return 0, fmt.Errorf("%w: %s has %d elements, its shape and strides %+v reach %d", ErrShort, what, length, x, e)
	}
	return e, nil
}

// tokenDisjoint reports whether two tensors that share token rows never
// share an element: x and y have the same Batch and Pos strides, heads of
// w elements back to back (Head = w), batch rows of whole tokens (Batch a
// multiple of Pos, at least n positions apart), and y starts delta
// elements after x, with both tensors' heads of one token inside one Pos
// stride and their intervals there apart ([0, hx*w) and [delta, delta +
// hy*w)). This is a packed QKV buffer's q, k and v, or dq, dk and dv.
func tokenDisjoint(x, y Strides, hx, hy, n, w, delta int) bool {
	if delta < 0 {
		x, y, hx, hy, delta = y, x, hy, hx, -delta
	}
	return x.Batch == y.Batch && x.Pos == y.Pos && x.Head == w && y.Head == w && x.Pos > 0 &&
		x.Batch%x.Pos == 0 && x.Batch/x.Pos >= n && hx*w <= delta && delta+hy*w <= x.Pos
}
