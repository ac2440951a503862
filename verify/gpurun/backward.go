package gpurun

import (
	"fmt"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/verify"
)

// BackwardKernel is a generated backward pass (its dq kernel, then its
// dk/dv kernel, from one module) bound to a backend.
type BackwardKernel struct {
	B *ptx.Backward
	b backend
}

// InterpBackward binds a backward pass to a fresh PTX interpreter device
// per call.
func InterpBackward(bw *ptx.Backward) (*BackwardKernel, error) {
	if bw == nil {
		return nil, fmt.Errorf("gpurun: no backward kernels")
	}
	b, err := newInterp(bw.DQ, bw.PTX)
	if err != nil {
		return nil, err
	}
	return &BackwardKernel{B: bw, b: b}, nil
}

// GPUBackward binds a backward pass to a real GPU: the module is loaded
// once (the JIT log is part of any error) and each kernel above 48 KiB of
// dynamic shared memory is allowed its amount.
func GPUBackward(ctx *cuda.Context, bw *ptx.Backward) (*BackwardKernel, error) {
	if bw == nil {
		return nil, fmt.Errorf("gpurun: no backward kernels")
	}
	if err := deviceRuns(ctx, bw.Target.Arch()); err != nil {
		return nil, err
	}
	b, err := newGPU(ctx, bw.PTX, map[string]int{bw.DQ: bw.DQShared, bw.DKV: bw.DKVShared})
	if err != nil {
		return nil, err
	}
	return &BackwardKernel{B: bw, b: b}, nil
}

// Run returns the backward as a verify.RunBackward: q, k, v, out and dout
// are rounded to the element type, lse goes as float32 (natural log), and
// dq, dk and dv come back as float32. The gradient buffers and delta are
// filled with NaN on the device first, so that an element no kernel
// writes comes back NaN. With learned sinks dsink receives the sink
// gradients: the dq kernel's row terms (dsink_rows, filled with NaN
// first) summed in a fixed order (gpu.DSink).
func (k *BackwardKernel) Run() verify.RunBackward {
	return func(dq, dk, dv, dout, q, kk, v, out, lse []float32, ids []int32, s verify.Shape, dsink []float32) error {
		defer k.b.reset()
		c, err := k.prepare(dq, dk, dv, dout, q, kk, v, out, lse, ids, s)
		if err != nil {
			return err
		}
		if err := c.start(k); err != nil {
			return err
		}
		if err := k.b.sync(); err != nil {
			return err
		}
		if err := k.results(c, dq, dk, dv); err != nil {
			return err
		}
		return k.dsink(c, s, dsink)
	}
}

// dsink reads the dq kernel's sink gradient terms and sums them into
// dsink (nothing for a kernel without learned sinks, or a nil dsink).
func (k *BackwardKernel) dsink(c bwdCall, s verify.Shape, dsink []float32) error {
	if c.dsa == 0 || dsink == nil {
		return nil
	}
	_, _, nl := s.Sizes()
	rows, err := k.b.readF32(c.dsa, nl)
	if err != nil {
		return err
	}
	return gpu.DSink(dsink, rows, s.Batch, s.HeadsQ, s.SeqQ)
}

// Bench times the backward (both kernels, launched back to back) on the
// given inputs, rounded as Run rounds them: the gradients and delta are
// filled with NaN, the pair is launched warmup times untimed, then reps
// times, each pair timed on its own, and dq, dk and dv are read as the
// last launches left them (and dsink, with learned sinks, as Run gives
// it), so that the caller checks the gradients of the timed runs.
func (k *BackwardKernel) Bench(dq, dk, dv, dout, q, kk, v, out, lse []float32, ids []int32, s verify.Shape, dsink []float32, warmup, reps int) (Timing, error) {
	if warmup < 0 || reps < 1 {
		return Timing{}, fmt.Errorf("gpurun: Bench: warmup %d, reps %d: want warmup >= 0 and reps >= 1", warmup, reps)
	}
	defer k.b.reset()
	c, err := k.prepare(dq, dk, dv, dout, q, kk, v, out, lse, ids, s)
	if err != nil {
		return Timing{}, err
	}
	t := Timing{Warmup: warmup}
	for i := 0; i < warmup; i++ {
		if err := c.start(k); err != nil {
			return t, err
		}
	}
	if err := k.b.sync(); err != nil {
		return t, err
	}
	for i := 0; i < reps; i++ {
		d, err := k.b.timed(func() error { return c.start(k) })
		if err != nil {
			return t, err
		}
		t.Times = append(t.Times, d)
	}
	if err := k.results(c, dq, dk, dv); err != nil {
		return t, err
	}
	return t, k.dsink(c, s, dsink)
}

// bwdCall is one prepared backward call: inputs on the device, the
// gradients allocated, both launches with their arguments.
type bwdCall struct {
	l              ptx.BackwardLaunch
	dqArgs, kvArgs []any
	dqa, dka, dva  uint64
	dsa            uint64 // the dq kernel's sink gradient terms (0: none)
	nq, nkv, nv    int    // elements of q (dq), k (dk) and v (dv)
}

// start launches the dq kernel and then the dk/dv kernel.
func (c bwdCall) start(k *BackwardKernel) error {
	if err := k.b.start(k.B.DQ, c.l.DQ, c.dqArgs); err != nil {
		return fmt.Errorf("%s: %w", k.B.DQ, err)
	}
	if err := k.b.start(k.B.DKV, c.l.DKV, c.kvArgs); err != nil {
		return fmt.Errorf("%s: %w", k.B.DKV, err)
	}
	return nil
}

// prepare checks the shape and the slices, writes the inputs and the
// document arrays to the device, and allocates delta and the gradients
// (all filled with NaN).
func (k *BackwardKernel) prepare(dq, dk, dv, dout, q, kk, v, out, lse []float32, ids []int32, s verify.Shape) (bwdCall, error) {
	if err := s.Validate(); err != nil {
		return bwdCall{}, fmt.Errorf("gpurun: %w", err)
	}
	if s.HeadDim != k.B.HeadDim {
		return bwdCall{}, fmt.Errorf("gpurun: head dim %d, kernel is for %d", s.HeadDim, k.B.HeadDim)
	}
	if dv := s.DV(); dv != k.B.HeadDimV && !(k.B.HeadDimV == 0 && dv == k.B.HeadDim) {
		return bwdCall{}, fmt.Errorf("gpurun: head dim of v %d, kernel is for %d", dv, k.B.HeadDimV)
	}
	nq, nkv, nl := s.Sizes()
	nv, nout := s.SizesV()
	for _, x := range []struct {
		name    string
		n, want int
	}{{"q", len(q), nq}, {"k", len(kk), nkv}, {"v", len(v), nv}, {"out", len(out), nout}, {"dout", len(dout), nout},
		{"lse", len(lse), nl}, {"dq", len(dq), nq}, {"dk", len(dk), nkv}, {"dv", len(dv), nv}} {
		if x.n < x.want {
			return bwdCall{}, fmt.Errorf("gpurun: %s has %d elements, the shape needs %d", x.name, x.n, x.want)
		}
	}
	l, err := k.B.Geometry(s.Batch, s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK, s.Scale)
	if err != nil {
		return bwdCall{}, err
	}
	toElem := verify.BF16
	if k.B.Elem == ptx.F16 {
		toElem = verify.F16
	}
	put16 := func(x []float32) (uint64, error) {
		h := make([]uint16, len(x))
		for i, f := range x {
			h[i] = toElem(f)
		}
		a, err := k.b.alloc(2 * len(h))
		if err != nil {
			return 0, err
		}
		return a, k.b.writeU16(a, h)
	}
	nan := func(n int) (uint64, error) {
		a, err := k.b.alloc(4 * n)
		if err != nil {
			return 0, err
		}
		return a, k.b.fill(a, 4*n, 0xff)
	}
	var in [5]uint64 // q, k, v, out, dout
	for i, x := range [][]float32{q[:nq], kk[:nkv], v[:nv], out[:nout], dout[:nout]} {
		if in[i], err = put16(x); err != nil {
			return bwdCall{}, err
		}
	}
	la, err := k.b.alloc(4 * nl)
	if err != nil {
		return bwdCall{}, err
	}
	if err := k.b.writeF32(la, lse[:nl]); err != nil {
		return bwdCall{}, err
	}
	c := bwdCall{l: l, nq: nq, nkv: nkv, nv: nv}
	var delta uint64
	for _, x := range []struct {
		a *uint64
		n int
	}{{&delta, nl}, {&c.dqa, nq}, {&c.dka, nkv}, {&c.dva, nv}} {
		if *x.a, err = nan(x.n); err != nil {
			return bwdCall{}, err
		}
	}
	docs, softCap, err := uploadData(k.b, k.B.DQParams, k.B.HeadParams, k.B.Score, ids, s)
	if err != nil {
		return bwdCall{}, err
	}
	l.DQ.SoftCap, l.DKV.SoftCap = softCap, softCap
	rows, err := uploadRows(k.b, s)
	if err != nil {
		return bwdCall{}, err
	}
	rows.set(&l.DQ)
	rows.set(&l.DKV)
	qa, ka, va, oa, doa := in[0], in[1], in[2], in[3], in[4]
	ptrs := append(append([]uint64{qa, ka, va, oa, doa, la, delta}, docs...), c.dqa)
	if paramsHave(k.B.DQParams, gpu.DSinkRowsParam) {
		if c.dsa, err = nan(nl); err != nil {
			return bwdCall{}, err
		}
		ptrs = append(ptrs, c.dsa)
	}
	if c.dqArgs, err = l.Args(l.DQ, ptrs...); err != nil {
		return bwdCall{}, err
	}
	// the dk/dv kernel takes the mask's data without the sinks
	kvDocs, _, err := uploadData(k.b, k.B.DKVParams, k.B.HeadParams, k.B.Score, ids, s)
	if err != nil {
		return bwdCall{}, err
	}
	ptrs = append(append([]uint64{qa, ka, va, doa, la, delta}, kvDocs...), c.dka, c.dva)
	if c.kvArgs, err = l.Args(l.DKV, ptrs...); err != nil {
		return bwdCall{}, err
	}
	return c, nil
}

// results reads dq, dk and dv back.
func (k *BackwardKernel) results(c bwdCall, dq, dk, dv []float32) error {
	for _, x := range []struct {
		a   uint64
		n   int
		dst []float32
	}{{c.dqa, c.nq, dq}, {c.dka, c.nkv, dk}, {c.dva, c.nv, dv}} {
		f, err := k.b.readF32(x.a, x.n)
		if err != nil {
			return err
		}
		copy(x.dst, f)
	}
	return nil
}
