package gpurun

import (
	"fmt"
	"slices"
	"strings"

	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/verify"
)

// The layouts a forward Kernel can hold a call's q, k, v and output in
// on the device (WithLayout). The checks give and take contiguous BHSD
// tensors either way: a Kernel of another layout writes q, k and v into
// that layout (every element no row owns poisoned with NaN), passes its
// strides to the kernel (the stride parameters; the sm_90a kernel's
// tensor maps, gpu.Kernel.TensorMapsWith) and gathers the output back,
// failing the call when the kernel wrote an element outside the output's
// rows.
const (
	BHSD   = "bhsd"   // [batch][heads][seq][head_dim], contiguous: the default
	BSHD   = "bshd"   // [batch][seq][heads][head_dim] for every tensor
	Packed = "packed" // q, k and v as views into one fused QKV buffer [batch][seq][(heads_q + 2 heads_kv) head_dim], out BSHD; seq_q = seq_k, one head size
)

// Layouts lists the layout names WithLayout takes.
var Layouts = []string{BHSD, BSHD, Packed}

// WithLayout returns k holding its calls' tensors in the named layout
// (Layouts; "" is BHSD), on the same backend.
func (k *Kernel) WithLayout(name string) (*Kernel, error) {
	if name == "" {
		name = BHSD
	}
	if !slices.Contains(Layouts, name) {
		return nil, fmt.Errorf("gpurun: layout %q: want one of %s", name, strings.Join(Layouts, ", "))
	}
	c := *k
	c.layout = name
	return &c, nil
}

// Layout is the name of the layout k holds its calls' tensors in.
func (k *Kernel) Layout() string {
	if k.layout == "" {
		return BHSD
	}
	return k.layout
}

// placement is where a call's tensors lie in their device buffers: the
// strides (resolved), each tensor's offset in its buffer (elements) and
// the buffers' extents; q, k and v share one buffer when packed.
type placement struct {
	ly      gpu.Layout
	packed  bool
	off     [3]int // of q, k and v
	ext     [4]int // elements of the buffers of q, k, v and out (packed: q's holds all three)
	nq, nkv [3]int // (batch, heads, seq) of q and out, of k and v
}

// place returns the placement of shape s's tensors in layout name.
func place(name string, s verify.Shape) (placement, error) {
	d, dv := s.HeadDim, s.DV()
	p := placement{nq: [3]int{s.Batch, s.HeadsQ, s.SeqQ}, nkv: [3]int{s.Batch, s.HeadsKV, s.SeqK}}
	bshd := func(heads, seq, w int) gpu.Strides {
		return gpu.Strides{Batch: seq * heads * w, Head: w, Pos: heads * w}
	}
	switch name {
	case BHSD, "":
		p.ly = gpu.BHSD(s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK, d, dv)
	case BSHD:
		p.ly = gpu.Layout{Q: bshd(s.HeadsQ, s.SeqQ, d), K: bshd(s.HeadsKV, s.SeqK, d), V: bshd(s.HeadsKV, s.SeqK, dv), Out: bshd(s.HeadsQ, s.SeqQ, dv)}
	case Packed:
		if s.SeqQ != s.SeqK || dv != d {
			return p, fmt.Errorf("gpurun: the packed layout is one QKV projection's output: it needs seq_q = seq_k and one head size, got %d, %d and %d/%d", s.SeqQ, s.SeqK, d, dv)
		}
		w := (s.HeadsQ + 2*s.HeadsKV) * d
		in := gpu.Strides{Batch: s.SeqK * w, Head: d, Pos: w}
		p.ly = gpu.Layout{Q: in, K: in, V: in, Out: bshd(s.HeadsQ, s.SeqQ, dv)}
		p.packed, p.off = true, [3]int{0, s.HeadsQ * d, (s.HeadsQ + s.HeadsKV) * d}
	default:
		return p, fmt.Errorf("gpurun: layout %q: want one of %s", name, strings.Join(Layouts, ", "))
	}
	p.ext = [4]int{extent(p.ly.Q, p.nq, d), extent(p.ly.K, p.nkv, d), extent(p.ly.V, p.nkv, dv), extent(p.ly.Out, p.nq, dv)}
	if p.packed {
		p.ext[0] = s.Batch * s.SeqK * (s.HeadsQ + 2*s.HeadsKV) * d
	}
	return p, nil
}

// extent is one past the last element rows of n (batch, heads, positions)
// of w elements reach at strides x.
func extent(x gpu.Strides, n [3]int, w int) int {
	return (n[0]-1)*x.Batch + (n[1]-1)*x.Head + (n[2]-1)*x.Pos + w
}

// eachRow calls f with the offset of every row of n rows of a contiguous
// tensor and its offset at strides x.
func eachRow(x gpu.Strides, n [3]int, w int, f func(c, t int)) {
	for b := 0; b < n[0]; b++ {
		for h := 0; h < n[1]; h++ {
			for r := 0; r < n[2]; r++ {
				f(((b*n[1]+h)*n[2]+r)*w, b*x.Batch+h*x.Head+r*x.Pos)
			}
		}
	}
}

// nan16 poisons the elements no row owns: NaN in bf16 and f16 alike.
const nan16 = 0xffff

// inputs lays out q, k and v (16-bit, contiguous) at p's strides, every
// other element NaN: the buffers' contents, one for packed.
func (p placement) inputs(q, k, v []uint16, d, dv int) [][]uint16 {
	buf := func(n int) []uint16 {
		x := make([]uint16, n)
		for i := range x {
			x[i] = nan16
		}
		return x
	}
	put := func(dst []uint16, off int, x gpu.Strides, n [3]int, w int, src []uint16) {
		eachRow(x, n, w, func(c, t int) { copy(dst[off+t:off+t+w], src[c:c+w]) })
	}
	if p.packed {
		b := buf(p.ext[0])
		put(b, p.off[0], p.ly.Q, p.nq, d, q)
		put(b, p.off[1], p.ly.K, p.nkv, d, k)
		put(b, p.off[2], p.ly.V, p.nkv, dv, v)
		return [][]uint16{b}
	}
	bq, bk, bv := buf(p.ext[0]), buf(p.ext[1]), buf(p.ext[2])
	put(bq, 0, p.ly.Q, p.nq, d, q)
	put(bk, 0, p.ly.K, p.nkv, d, k)
	put(bv, 0, p.ly.V, p.nkv, dv, v)
	return [][]uint16{bq, bk, bv}
}

// output gathers the output's rows from its buffer (at p's strides) into
// contiguous rows, and fails when an element outside the rows is no
// longer the NaN it was filled with.
func (p placement) output(buf []uint16, dv int) ([]uint16, error) {
	own := make([]bool, len(buf))
	out := make([]uint16, p.nq[0]*p.nq[1]*p.nq[2]*dv)
	eachRow(p.ly.Out, p.nq, dv, func(c, t int) {
		copy(out[c:c+dv], buf[t:t+dv])
		for i := t; i < t+dv; i++ {
			own[i] = true
		}
	})
	for i, x := range buf {
		if !own[i] && x != nan16 {
			return nil, fmt.Errorf("gpurun: the kernel wrote element %d of the output buffer (%#x), outside every row of its layout", i, x)
		}
	}
	return out, nil
}
