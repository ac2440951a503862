package gpu

import (
	"fmt"
	"math"
)

// Strides are the element strides of one tensor's batch, head and
// position axes (runtime/cpu.Strides' meaning); the head_dim elements of a
// row are contiguous. The zero value stands for the default (BHSD).
type Strides struct{ Batch, Head, Pos int }

// Layout gives the element strides of q, k, v and the output. The
// backward's kernels take them for the tensors of the same shape: dout
// and the forward's output take Out's, dq Q's, dk K's and dv V's (the
// gradients are f32, so their byte offsets are twice those of the 16-bit
// inputs at the same strides); lse, delta and dsink rows stay contiguous
// [batch][heads_q][seq_q]. A zero Strides is the default.
type Layout struct{ Q, K, V, Out Strides }

// StrideParam is the kernel parameter (u32) of tensor t's element stride
// along axis ("batch", "head" or "pos"), e.g. stride_q_pos. Kernels take
// them after the shape scalars, three per tensor: the sm_80 forward and
// the backward's kernels those of q, k, v and o, the sm_90a forward o's
// (its q, k and v strides go into the tensor maps, one per axis:
// TensorMapsWith).
func StrideParam(t, axis string) string { return "stride_" + t + "_" + axis }

// BHSD is the default layout of a call: contiguous [batch][heads][seq][D]
// for q and k, [batch][heads][seq][dv] for v and the output (dv 0: d).
func BHSD(headsQ, headsKV, seqQ, seqK, d, dv int) Layout {
	if dv == 0 {
		dv = d
	}
	return Layout{
		Q:   Strides{headsQ * seqQ * d, seqQ * d, d},
		K:   Strides{headsKV * seqK * d, seqK * d, d},
		V:   Strides{headsKV * seqK * dv, seqK * dv, dv},
		Out: Strides{headsQ * seqQ * dv, seqQ * dv, dv},
	}
}

// Resolve returns l with every zero Strides replaced by BHSD's.
func (l Layout) Resolve(headsQ, headsKV, seqQ, seqK, d, dv int) Layout {
	def := BHSD(headsQ, headsKV, seqQ, seqK, d, dv)
	or := func(x, d Strides) Strides {
		if x == (Strides{}) {
			return d
		}
		return x
	}
	return Layout{or(l.Q, def.Q), or(l.K, def.K), or(l.V, def.V), or(l.Out, def.Out)}
}

// MaxStride bounds an element stride: the kernels take u32 strides and
// form a row's byte offset as a 32-bit product of the row's index (times
// the residue stride and the element size, 4 for the f32 gradients) with
// the pos stride, widened, so a pos stride times 4 times the residue
// stride must stay below 2^32.
const MaxStride = math.MaxUint32 / 4

// CheckLayout checks a resolved layout for a kernel with residue stride
// st: every stride at least 0 and pos strides at least the row (d or dv
// elements for the output, so its rows do not overlap), and each stride within
// what the kernels' 32-bit arithmetic takes (MaxStride, and 4*st*pos).
// Inputs may share rows (a stride of 0 broadcasts).
// It does not know the buffers' lengths: the caller allocates them to
// reach every row the strides address.
func CheckLayout(l Layout, st, d, dv int) error {
	if dv == 0 {
		dv = d
	}
	st = max(st, 1)
	for _, x := range []struct {
		what string
		s    Strides
		w    int
	}{{"q", l.Q, d}, {"k", l.K, d}, {"v", l.V, dv}, {"out", l.Out, dv}} {
		s := x.s
		switch {
		case s.Batch < 0 || s.Head < 0 || s.Pos < 0:
			return fmt.Errorf("gpu: %s strides %+v: a stride is negative", x.what, s)
		case s.Batch > MaxStride || s.Head > MaxStride || s.Pos > MaxStride/st:
			return fmt.Errorf("gpu: %s strides %+v: the kernels take element strides below %d (the pos stride below %d with residue stride %d)", x.what, s, MaxStride, MaxStride/st, st)
		case x.what == "out" && s.Pos < x.w:
			return fmt.Errorf("gpu: out strides %+v: the pos stride is below the row's %d elements (output rows would overlap)", s, x.w)
		}
	}
	return nil
}

// StrideArgs returns the values of a kernel's stride parameters
// (StrideParam) by name for layout l (resolved).
func (l Layout) StrideArgs() map[string]uint32 {
	m := map[string]uint32{}
	for _, x := range []struct {
		t string
		s Strides
	}{{"q", l.Q}, {"k", l.K}, {"v", l.V}, {"o", l.Out}} {
		m[StrideParam(x.t, "batch")] = uint32(x.s.Batch)
		m[StrideParam(x.t, "head")] = uint32(x.s.Head)
		m[StrideParam(x.t, "pos")] = uint32(x.s.Pos)
	}
	return m
}
