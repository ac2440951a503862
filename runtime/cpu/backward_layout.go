package cpu

import (
	"fmt"
	"sync"

	"github.com/attngen/attngen/runtime/mask"
)

// bwdCopies are the pooled contiguous copies of a strided backward call.
type bwdCopies struct {
	q, k, v, out, dout, dq, dk, dv []float32
}

var bwdCopyPool = sync.Pool{New: func() any { return new(bwdCopies) }}

// backwardStrided runs a backward call whose tensors have strides: it
// checks every tensor's extent against its slice, the gradients' rows
// for overlaps with each other and with every input, gathers the inputs
// into contiguous buffers, runs the contiguous backward and scatters the
// gradients back.
func backwardStrided(m mask.Mask, variant Variant, a *BackArgs) error {
	s := a.Shape
	if err := s.checkDims(false); err != nil {
		return err
	}
	ls := a.Layout.resolve(s, 0, 0)
	d := s.HeadDim
	nq, nk := [3]int{s.Batch, s.HeadsQ, s.SeqQ}, [3]int{s.Batch, s.HeadsKV, s.SeqK}
	type tensor struct {
		name string
		x    []float32
		st   Strides
		n    [3]int
		out  bool
	}
	ts := [...]tensor{{"dq", a.DQ, ls.Q, nq, true}, {"dk", a.DK, ls.K, nk, true}, {"dv", a.DV, ls.V, nk, true},
		{"dout", a.DOut, ls.Out, nq, false}, {"q", a.Q, ls.Q, nq, false}, {"k", a.K, ls.K, nk, false},
		{"v", a.V, ls.V, nk, false}, {"out", a.Out, ls.Out, nq, false}}
	var spans [len(ts)]memSpan
	for i, t := range ts {
		e, err := checkStrides(t.name, t.st, t.n, d, len(t.x))
		if err != nil {
			return err
		}
		if t.out && !t.st.disjoint(t.n, d) {
			return fmt.Errorf("%w: %s strides %+v make rows of the gradient overlap", ErrAlias, t.name, t.st)
		}
		spans[i] = span(t.x[:e])
	}
	others := [...]memSpan{span(a.LSE), span(a.Docs), span(a.DSinks), span(a.Sinks), span(a.Slopes)}
	for i, t := range ts {
		if !t.out {
			continue
		}
		for j, u := range ts {
			if i == j || !spans[i].overlaps(spans[j]) {
				continue
			}
			// Gradients in one packed buffer share token rows, not elements.
			if u.out && spans[i].lo <= spans[j].lo {
				delta := int(spans[j].lo-spans[i].lo) / 4
				if tokenDisjoint(t.st, u.st, t.n[1], u.n[1], max(s.SeqQ, s.SeqK), d, delta) {
					continue
				}
			} else if u.out {
				continue // the pair is checked the other way round
			}
			return fmt.Errorf("%w: %s and %s share memory", ErrAlias, t.name, u.name)
		}
		for _, o := range others {
			if spans[i].overlaps(o) {
				return fmt.Errorf("%w: %s shares memory with lse, the document ids or the score values", ErrAlias, t.name)
			}
		}
	}
	sq, _ := mul(s.Batch, s.HeadsQ, s.SeqQ, d)
	sk, _ := mul(s.Batch, s.HeadsKV, s.SeqK, d)
	cp := bwdCopyPool.Get().(*bwdCopies)
	defer bwdCopyPool.Put(cp)
	cp.q, cp.dout, cp.out, cp.dq = grow(cp.q, sq), grow(cp.dout, sq), grow(cp.out, sq), grow(cp.dq, sq)
	cp.k, cp.v, cp.dk, cp.dv = grow(cp.k, sk), grow(cp.v, sk), grow(cp.dk, sk), grow(cp.dv, sk)
	gatherRows(cp.q, a.Q, nq, d, ls.Q)
	gatherRows(cp.k, a.K, nk, d, ls.K)
	gatherRows(cp.v, a.V, nk, d, ls.V)
	gatherRows(cp.out, a.Out, nq, d, ls.Out)
	gatherRows(cp.dout, a.DOut, nq, d, ls.Out)
	b := *a
	b.Layout = Layout{}
	b.Q, b.K, b.V, b.Out, b.DOut, b.DQ, b.DK, b.DV = cp.q, cp.k, cp.v, cp.out, cp.dout, cp.dq, cp.dk, cp.dv
	err := BackwardArgs(m, variant, b)
	if err == nil {
		scatterRows(a.DQ, cp.dq, nq, d, ls.Q)
		scatterRows(a.DK, cp.dk, nk, d, ls.K)
		scatterRows(a.DV, cp.dv, nk, d, ls.V)
	}
	cp.q, cp.k, cp.v, cp.out, cp.dout = cp.q[:0], cp.k[:0], cp.v[:0], cp.out[:0], cp.dout[:0]
	return err
}

// gatherRows copies a tensor of n rows of w elements with strides x into
// contiguous dst, and scatterRows the other way.
func gatherRows(dst, src []float32, n [3]int, w int, x Strides) {
	for b := 0; b < n[0]; b++ {
		for h := 0; h < n[1]; h++ {
			for p := 0; p < n[2]; p++ {
				copy(dst[((b*n[1]+h)*n[2]+p)*w:][:w], src[b*x.Batch+h*x.Head+p*x.Pos:][:w])
			}
		}
	}
}

func scatterRows(dst, src []float32, n [3]int, w int, x Strides) {
	for b := 0; b < n[0]; b++ {
		for h := 0; h < n[1]; h++ {
			for p := 0; p < n[2]; p++ {
				copy(dst[b*x.Batch+h*x.Head+p*x.Pos:][:w], src[((b*n[1]+h)*n[2]+p)*w:][:w])
			}
		}
	}
}
