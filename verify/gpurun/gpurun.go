// Package gpurun runs generated PTX kernels on a backend, the PTX
// interpreter (verify/ptx, no GPU needed) or a real GPU through the CUDA
// driver (package cuda): the forward as a verify.Run and the backward's
// two kernels as a verify.RunBackward, so that the same checks judge them
// as the CPU kernels. Inputs are rounded to the kernel's 16-bit element
// type on the way in; outputs are widened to float32 on the way out. The
// kernels of masks with head parameters get the call's values,
// verify.Shape.HeadParams, in their head_params buffer, and the kernels
// of masks with a score stage its values, verify.Shape.Score: the
// call-time soft-cap as the soft_cap scalar, the ALiBi slopes (the call's,
// or the mask's geometric ones from mask.AlibiSlopes) and the learned sink
// logits as device buffers; the backward returns the sink gradient
// (summed from the dq kernel's row terms by gpu.DSink). A forward Kernel
// holds its calls' q, k, v and output contiguous ([batch][heads][seq][D])
// on the device, or, by WithLayout, as BSHD or as views into one packed
// QKV buffer, read and written in place through the kernel's strides
// (the sm_90a kernel's tensor maps) with NaN in every gap.
package gpurun

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/verify"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// backend is the memory and launch interface both targets provide. A
// backend holds one module; entries are named by their PTX names.
type backend interface {
	alloc(bytes int) (uint64, error)
	writeU16(addr uint64, v []uint16) error
	writeU32(addr uint64, v []uint32) error
	writeF32(addr uint64, v []float32) error
	readU16(addr uint64, n int) ([]uint16, error)
	readF32(addr uint64, n int) ([]float32, error)
	// start launches entry fn: on a GPU without waiting for it (launches
	// run in order on one stream), under the interpreter to the end.
	start(fn string, l ptx.Launch, args []any) error
	// sync waits for every launch started.
	sync() error
	// timed runs work (which starts launches) and returns how long the
	// launches took (CUDA events on a GPU, the wall clock under the
	// interpreter), having waited for them.
	timed(work func() error) (time.Duration, error)
	// fill sets n bytes at addr to b.
	fill(addr uint64, n int, b byte) error
	// tensorMap encodes a tensor map into device memory and returns its
	// address (the sm_90a kernel takes tensor maps by address).
	tensorMap(m ptx.TensorMap) (uint64, error)
	reset()
}

// launch starts entry fn and waits for it.
func launch(b backend, fn string, l ptx.Launch, args []any) error {
	if err := b.start(fn, l, args); err != nil {
		return err
	}
	return b.sync()
}

// Kernel is a generated forward kernel bound to a backend, holding its
// calls' tensors in a layout (WithLayout; the default BHSD).
type Kernel struct {
	F      *ptx.Forward
	b      backend
	layout string
}

// Run returns the kernel as a verify.Run.
func (k *Kernel) Run() verify.Run {
	return func(out, lse, q, kk, v []float32, docs []int32, s verify.Shape) error {
		return k.run(out, lse, q, kk, v, docs, s)
	}
}

func (k *Kernel) run(out, lse, q, kk, v []float32, ids []int32, s verify.Shape) error {
	defer k.b.reset()
	c, err := k.prepare(out, lse, q, kk, v, ids, s)
	if err != nil {
		return err
	}
	if err := launch(k.b, k.F.Name, c.l, c.args); err != nil {
		return err
	}
	return k.results(c, out, lse)
}

// call is one prepared call: inputs on the device, output buffers
// allocated, the launch and its arguments.
type call struct {
	l        ptx.Launch
	args     []any
	oa, la   uint64     // out and lse
	nq, nl   int        // elements of the out and lse buffers
	pl       *placement // the tensors' layout, nil for the default (contiguous BHSD)
	dv       int
	fromElem func(uint16) float32
	wantsLSE bool
}

// rowArgs are the device addresses of a call's per-row lengths and
// positions (0: none), as ptx.Launch takes them.
type rowArgs struct{ lensQ, lensK, qpos, kpos uint64 }

// set puts the addresses into a launch.
func (r rowArgs) set(l *ptx.Launch) {
	l.SeqLensQ, l.SeqLensK, l.QPos, l.KPos = r.lensQ, r.lensK, r.qpos, r.kpos
}

// uploadRows writes a shape's per-row lengths (verify.Shape.SeqLensQ,
// SeqLensK) and positions (QPos, KPos; one entry for every row is
// widened to one per row) to the device for the kernels' seq_lens_q,
// seq_lens_k, q_pos and k_pos. Lengths must lie in 0..SeqQ (SeqK),
// positions at least 0 and each row's last position below 2^31.
func uploadRows(b backend, s verify.Shape) (rowArgs, error) {
	var r rowArgs
	put := func(what string, x []int32, lo, hi int, one bool) (uint64, error) {
		if x == nil {
			return 0, nil
		}
		if len(x) == 1 && one {
			x = slices.Repeat(x, s.Batch)
		}
		if len(x) != s.Batch {
			return 0, fmt.Errorf("gpurun: %s has %d entries, want batch = %d", what, len(x), s.Batch)
		}
		w := make([]uint32, len(x))
		for i, v := range x {
			if int(v) < lo || int(v) > hi {
				return 0, fmt.Errorf("gpurun: %s[%d] = %d, want %d to %d", what, i, v, lo, hi)
			}
			w[i] = uint32(v)
		}
		a, err := b.alloc(4 * len(w))
		if err != nil {
			return 0, err
		}
		return a, b.writeU32(a, w)
	}
	var err error
	if r.lensQ, err = put("SeqLensQ", s.SeqLensQ, 0, s.SeqQ, false); err != nil {
		return r, err
	}
	if r.lensK, err = put("SeqLensK", s.SeqLensK, 0, s.SeqK, false); err != nil {
		return r, err
	}
	if s.QPos == nil && s.KPos == nil {
		return r, nil
	}
	if _, err := reach(s); err != nil {
		return r, err
	}
	if r.qpos, err = put("QPos", s.QPos, 0, math.MaxInt32, true); err != nil {
		return r, err
	}
	r.kpos, err = put("KPos", s.KPos, 0, math.MaxInt32, true)
	return r, err
}

// reach is the number of positions the mask's run-time data must cover:
// SeqK without positions, else one past the last query or key position
// of any row. Rows whose positions would pass 2^31 - 1 are refused.
func reach(s verify.Shape) (int, error) {
	if s.QPos == nil && s.KPos == nil {
		return s.SeqK, nil
	}
	n := 0
	for b := 0; b < s.Batch; b++ {
		nq, nk, qp, kp := s.Row(b)
		if qp < 0 || kp < 0 || qp+nq > math.MaxInt32 || kp+nk > math.MaxInt32 {
			return 0, fmt.Errorf("gpurun: batch row %d: queries at %d, keys at %d: positions must lie in 0 to %d", b, qp, kp, math.MaxInt32-1)
		}
		n = max(n, qp+nq, kp+nk)
	}
	return n, nil
}

// prepare checks the shape, writes q, k and v (rounded to the element
// type) and the document arrays to the device and allocates out and lse.
func (k *Kernel) prepare(out, lse, q, kk, v []float32, ids []int32, s verify.Shape) (call, error) {
	if s.HeadDim != k.F.HeadDim {
		return call{}, fmt.Errorf("gpurun: head dim %d, kernel is for %d", s.HeadDim, k.F.HeadDim)
	}
	if dv := s.DV(); dv != k.F.HeadDimV && !(k.F.HeadDimV == 0 && dv == k.F.HeadDim) {
		return call{}, fmt.Errorf("gpurun: head dim of v %d, kernel is for %d", dv, k.F.HeadDimV)
	}
	nq, nkv, nl := s.Sizes()
	nv, nout := s.SizesV()
	if len(q) < nq || len(kk) < nkv || len(v) < nv || len(out) < nout || (lse != nil && len(lse) < nl) {
		return call{}, fmt.Errorf("gpurun: slices shorter than the shape")
	}
	l, err := k.F.Geometry(s.Batch, s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK, s.Scale)
	if err != nil {
		return call{}, err
	}
	toElem, fromElem := verify.BF16, verify.FromBF16
	if k.F.Elem == ptx.F16 {
		toElem, fromElem = verify.F16, verify.FromF16
	}
	var hs [][]uint16 // q, k and v in the element type
	for _, x := range [][]float32{q[:nq], kk[:nkv], v[:nv]} {
		h := make([]uint16, len(x))
		for i, f := range x {
			h[i] = toElem(f)
		}
		hs = append(hs, h)
	}
	var pl *placement
	if k.layout != "" && k.layout != BHSD {
		p, err := place(k.layout, s)
		if err != nil {
			return call{}, err
		}
		pl = &p
		hs = p.inputs(hs[0], hs[1], hs[2], s.HeadDim, s.DV())
		nout = p.ext[3]
		l.Layout = p.ly
	}
	var ptrs []uint64 // q, k and v, then out and lse
	for _, h := range hs {
		a, err := k.b.alloc(2 * len(h))
		if err != nil {
			return call{}, err
		}
		if err := k.b.writeU16(a, h); err != nil {
			return call{}, err
		}
		ptrs = append(ptrs, a)
	}
	if pl != nil && pl.packed {
		// q, k and v: views into the one buffer
		a := ptrs[0]
		ptrs = []uint64{a + 2*uint64(pl.off[0]), a + 2*uint64(pl.off[1]), a + 2*uint64(pl.off[2])}
	}
	oa, err := k.b.alloc(2 * nout)
	if err != nil {
		return call{}, err
	}
	if pl != nil {
		// the output's gaps: NaN, which results checks are still there
		if err := k.b.fill(oa, 2*nout, 0xff); err != nil {
			return call{}, err
		}
	}
	la, err := k.b.alloc(4 * nl)
	if err != nil {
		return call{}, err
	}
	ptrs = append(ptrs, oa, la)
	data, softCap, err := uploadData(k.b, k.F.Params, k.F.HeadParams, k.F.Score, ids, s)
	if err != nil {
		return call{}, err
	}
	l.SoftCap = softCap
	rows, err := uploadRows(k.b, s)
	if err != nil {
		return call{}, err
	}
	rows.set(&l)
	ptrs = append(ptrs, data...)
	if k.F.Target.Accel {
		// the sm_90a kernel takes out, lse, the mask data, then the
		// addresses of the tensor maps of q, k and v in place of theirs
		tms, err := k.F.TensorMapsWith(s.Batch, s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK, ptrs[0], ptrs[1], ptrs[2], l.Layout)
		if err != nil {
			return call{}, err
		}
		ptrs = ptrs[3:]
		for _, m := range tms {
			if !paramsHave(k.F.Params, m.Param) {
				return call{}, fmt.Errorf("gpurun: kernel %s has no parameter %s for the tensor map of %s", k.F.Name, m.Param, m.Tensor)
			}
			a, err := k.b.tensorMap(m)
			if err != nil {
				return call{}, fmt.Errorf("gpurun: tensor map of %s: %w", m.Tensor, err)
			}
			ptrs = append(ptrs, a)
		}
	}
	args, err := l.Args(ptrs...)
	if err != nil {
		return call{}, err
	}
	return call{l: l, args: args, oa: oa, la: la, nq: nout, nl: nl, pl: pl, dv: s.DV(), fromElem: fromElem, wantsLSE: lse != nil}, nil
}

// results reads out and lse back (widened to float32).
func (k *Kernel) results(c call, out, lse []float32) error {
	oh, err := k.b.readU16(c.oa, c.nq)
	if err != nil {
		return err
	}
	if c.pl != nil {
		if oh, err = c.pl.output(oh, c.dv); err != nil {
			return err
		}
	}
	for i, h := range oh {
		out[i] = c.fromElem(h)
	}
	if c.wantsLSE {
		lf, err := k.b.readF32(c.la, c.nl)
		if err != nil {
			return err
		}
		copy(lse, lf)
	}
	return nil
}

// Timing is what Bench measured: each timed launch, in order.
type Timing struct {
	Warmup int             // untimed launches before
	Times  []time.Duration // one per timed launch
}

// Median is the median of the timed launches (the mean of the two middle
// ones for an even count).
func (t Timing) Median() time.Duration {
	if len(t.Times) == 0 {
		return 0
	}
	x := slices.Clone(t.Times)
	slices.Sort(x)
	n := len(x)
	if n%2 == 1 {
		return x[n/2]
	}
	return (x[n/2-1] + x[n/2]) / 2
}

// Min is the fastest timed launch.
func (t Timing) Min() time.Duration {
	if len(t.Times) == 0 {
		return 0
	}
	return slices.Min(t.Times)
}

// Max is the slowest timed launch.
func (t Timing) Max() time.Duration {
	if len(t.Times) == 0 {
		return 0
	}
	return slices.Max(t.Times)
}

// Bench times the kernel on the given inputs (q, k, v rounded to its
// element type, as Run does; document ids for document kernels): it fills
// the output with NaN (all-ones bytes), launches warmup times untimed,
// then reps times, each launch timed on its own, and reads out and lse
// (nil: not read) as the last launch left them, so that the caller checks
// the output of the timed runs and a kernel that writes nothing shows as
// NaN.
func (k *Kernel) Bench(out, lse, q, kk, v []float32, ids []int32, s verify.Shape, warmup, reps int) (Timing, error) {
	if warmup < 0 || reps < 1 {
		return Timing{}, fmt.Errorf("gpurun: Bench: warmup %d, reps %d: want warmup >= 0 and reps >= 1", warmup, reps)
	}
	defer k.b.reset()
	c, err := k.prepare(out, lse, q, kk, v, ids, s)
	if err != nil {
		return Timing{}, err
	}
	if err := k.b.fill(c.oa, 2*c.nq, 0xff); err != nil {
		return Timing{}, err
	}
	if err := k.b.fill(c.la, 4*c.nl, 0xff); err != nil {
		return Timing{}, err
	}
	t := Timing{Warmup: warmup}
	for i := 0; i < warmup; i++ {
		if err := launch(k.b, k.F.Name, c.l, c.args); err != nil {
			return t, err
		}
	}
	for i := 0; i < reps; i++ {
		d, err := k.b.timed(func() error { return k.b.start(k.F.Name, c.l, c.args) })
		if err != nil {
			return t, err
		}
		t.Times = append(t.Times, d)
	}
	return t, k.results(c, out, lse)
}

// uploadData copies a call's run-time mask data to the device in the
// order the kernel's parameters name it: a tree's four arrays (from the
// parent array ids), or documents' three (the ids, their starts and ends);
// then, for a kernel of a mask with head parameters hps, the values of
// s.HeadParams (head-major, checked against the parameters' ranges); then
// the score stage's arrays (scoreArrays); nothing for kernels that take
// none of them. It returns the call-time soft-cap too (0 for none).
func uploadData(b backend, params []ptx.Param, hps []mask.HeadParam, st mask.Score, ids []int32, s verify.Shape) ([]uint64, float32, error) {
	if (s.QPos != nil || s.KPos != nil) && !paramsHave(params, gpu.QPosParam) {
		return nil, 0, fmt.Errorf("gpurun: the kernel takes no positions (residue layouts above head_dim 128 do not): run the call at the default alignment")
	}
	seqK, err := reach(s) // the positions the data covers
	if err != nil {
		return nil, 0, err
	}
	var arrays [][]uint32
	switch {
	case paramsHave(params, "tree_lo"):
		if len(ids) < seqK {
			return nil, 0, fmt.Errorf("gpurun: the kernel needs a parent array of %d entries (the call's positions), got %d", seqK, len(ids))
		}
		lo, off, anc, info, err := ptx.TreeArrays(ids[:seqK])
		if err != nil {
			return nil, 0, err
		}
		arrays = [][]uint32{words(lo), words(off), anc, words(info[:])}
	case paramsHave(params, "doc_id"):
		if len(ids) < seqK {
			return nil, 0, fmt.Errorf("gpurun: the kernel needs %d document ids (the call's positions), got %d", seqK, len(ids))
		}
		start, end, err := ptx.DocArrays(ids[:seqK])
		if err != nil {
			return nil, 0, err
		}
		arrays = [][]uint32{words(ids[:seqK]), words(start), words(end)}
	}
	switch takes := paramsHave(params, gpu.HeadParamsParam); {
	case takes:
		if err := gpu.CheckHeadParams(hps, s.HeadsQ, s.HeadParams); err != nil {
			return nil, 0, fmt.Errorf("gpurun: %w", err)
		}
		arrays = append(arrays, words(s.HeadParams))
	case len(s.HeadParams) > 0:
		return nil, 0, fmt.Errorf("gpurun: %d head parameter values for a kernel that takes none", len(s.HeadParams))
	}
	sa, softCap, err := scoreArrays(params, st, s)
	if err != nil {
		return nil, 0, err
	}
	arrays = append(arrays, sa...)
	var ptrs []uint64
	for _, u := range arrays {
		a, err := b.alloc(4 * len(u))
		if err != nil {
			return nil, 0, err
		}
		if err := b.writeU32(a, u); err != nil {
			return nil, 0, err
		}
		ptrs = append(ptrs, a)
	}
	return ptrs, softCap, nil
}

// scoreArrays are the score stage's values of a call for a kernel with
// parameters params of a mask with stage st, from s.Score: the ALiBi
// slopes (the call's when the mask takes them at call time, else the
// mask's geometric ones, mask.AlibiSlopes) and the learned sink logits,
// as f32 bits in the order the parameters name them, and the soft-cap
// when the kernel takes it at call time (0 otherwise).
func scoreArrays(params []ptx.Param, st mask.Score, s verify.Shape) ([][]uint32, float32, error) {
	switch {
	case !st.Active() && s.Score != nil:
		return nil, 0, fmt.Errorf("gpurun: score values (%v) for a kernel without a score stage", s.Score)
	case !st.Active():
		return nil, 0, nil
	case s.Score == nil:
		return nil, 0, fmt.Errorf("gpurun: the kernel's mask has a score stage and the shape no values (verify.Shape.Score)")
	}
	softCap, slopes, sinks := s.Score.Float32()
	bits := func(x []float32) []uint32 {
		u := make([]uint32, len(x))
		for i, v := range x {
			u[i] = math.Float32bits(v)
		}
		return u
	}
	var arrays [][]uint32
	if paramsHave(params, gpu.SlopesParam) {
		if !st.SlopesAtCall {
			slopes = nil
			for _, v := range mask.AlibiSlopes(s.HeadsQ) {
				slopes = append(slopes, float32(v))
			}
		}
		if len(slopes) != s.HeadsQ {
			return nil, 0, fmt.Errorf("gpurun: %d ALiBi slopes, the kernel takes one per query head (%d)", len(slopes), s.HeadsQ)
		}
		arrays = append(arrays, bits(slopes))
	}
	if paramsHave(params, gpu.SinksParam) {
		if len(sinks) != s.HeadsQ {
			return nil, 0, fmt.Errorf("gpurun: %d sink logits, the kernel takes one per query head (%d)", len(sinks), s.HeadsQ)
		}
		arrays = append(arrays, bits(sinks))
	}
	if !paramsHave(params, gpu.SoftCapParam) {
		softCap = 0
	} else if !(softCap > 0) {
		return nil, 0, fmt.Errorf("gpurun: the kernel takes its soft-cap at call time and the shape gives none")
	}
	return arrays, softCap, nil
}

func words(x []int32) []uint32 {
	u := make([]uint32, len(x))
	for i, v := range x {
		u[i] = uint32(v)
	}
	return u
}

func paramsHave(ps []ptx.Param, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// Interp binds a kernel to a fresh PTX interpreter device per call.
func Interp(f *ptx.Forward) (*Kernel, error) {
	b, err := newInterp(f.Name, f.PTX)
	if err != nil {
		return nil, err
	}
	return &Kernel{F: f, b: b}, nil
}

func newInterp(name, text string) (*interpBackend, error) {
	mod, err := ptxi.Parse(name+".ptx", text)
	if err != nil {
		return nil, fmt.Errorf("interpreter cannot parse %s: %w", name, err)
	}
	return &interpBackend{mod: mod}, nil
}

type interpBackend struct {
	mod *ptxi.Module
	dev *ptxi.Device
}

func (b *interpBackend) d() *ptxi.Device {
	if b.dev == nil {
		b.dev = ptxi.NewDevice()
	}
	return b.dev
}
func (b *interpBackend) reset()                                    { b.dev = nil }
func (b *interpBackend) alloc(n int) (uint64, error)               { return b.d().Alloc(n) }
func (b *interpBackend) writeU16(a uint64, v []uint16) error       { return b.d().WriteU16(a, v) }
func (b *interpBackend) writeU32(a uint64, v []uint32) error       { return b.d().WriteU32(a, v) }
func (b *interpBackend) writeF32(a uint64, v []float32) error      { return b.d().WriteF32(a, v) }
func (b *interpBackend) readU16(a uint64, n int) ([]uint16, error) { return b.d().ReadU16(a, n) }
func (b *interpBackend) readF32(a uint64, n int) ([]float32, error) {
	return b.d().ReadF32(a, n)
}
func (b *interpBackend) start(fn string, l ptx.Launch, args []any) error {
	_, err := b.d().Launch(b.mod, fn, l.Grid, l.Block, l.DynShared, args...)
	return err
}
func (b *interpBackend) sync() error { return nil }
func (b *interpBackend) timed(work func() error) (time.Duration, error) {
	t0 := time.Now()
	err := work()
	return time.Since(t0), err
}
func (b *interpBackend) tensorMap(m ptx.TensorMap) (uint64, error) {
	sw, ok := map[int]ptxi.Swizzle{0: ptxi.SwizzleNone, 32: ptxi.Swizzle32B, 64: ptxi.Swizzle64B, 128: ptxi.Swizzle128B}[m.Swizzle]
	if !ok {
		return 0, fmt.Errorf("gpurun: swizzle of %d bytes", m.Swizzle)
	}
	return b.d().NewTensorMap(ptxi.TensorMap{Global: m.Global, ElemSize: m.ElemSize, Dims: m.Dims[:], Strides: m.Strides[:], Box: m.Box[:], Swizzle: sw})
}
func (b *interpBackend) fill(a uint64, n int, x byte) error {
	h := make([]uint16, n/2)
	for i := range h {
		h[i] = uint16(x) | uint16(x)<<8
	}
	return b.d().WriteU16(a, h)
}

// GPU binds a kernel to a real GPU: the module is loaded once (the JIT log
// is part of any error) and dynamic shared memory above 48 KiB is allowed.
// A kernel whose target the device cannot run (gpu.CanRun: sm_80 PTX on
// compute capability 8.0 and later, sm_90a only on 9.0) is refused before
// anything is loaded. Which kernel to bind is the caller's choice (Pick).
func GPU(ctx *cuda.Context, f *ptx.Forward) (*Kernel, error) {
	if err := deviceRuns(ctx, f.Target.Arch()); err != nil {
		return nil, err
	}
	b, err := newGPU(ctx, f.PTX, map[string]int{f.Name: f.DynShared})
	if err != nil {
		return nil, err
	}
	return &Kernel{F: f, b: b}, nil
}

// deviceRuns refuses a target the context's device cannot run
// (gpu.CanRun), naming the device.
func deviceRuns(ctx *cuda.Context, target string) error {
	dev := ctx.Device()
	if dev == nil {
		return fmt.Errorf("gpurun: no device (a nil or released context)")
	}
	if err := gpu.CanRun(target, dev.Major, dev.Minor); err != nil {
		return fmt.Errorf("gpurun: %s: %w", dev, err)
	}
	return nil
}

// newGPU loads a module and its entries (name: dynamic shared memory
// bytes), allowing those above 48 KiB their dynamic shared memory.
func newGPU(ctx *cuda.Context, text string, entries map[string]int) (*gpuBackend, error) {
	mod, err := ctx.LoadModule([]byte(text))
	if err != nil {
		return nil, err
	}
	b := &gpuBackend{ctx: ctx, fns: map[string]*cuda.Function{}}
	for name, dyn := range entries {
		fn, err := mod.Function(name)
		if err != nil {
			return nil, err
		}
		if dyn > 48*1024 {
			if err := fn.SetMaxDynamicSharedMemory(dyn); err != nil {
				return nil, err
			}
		}
		b.fns[name] = fn
	}
	return b, nil
}

type gpuBackend struct {
	ctx  *cuda.Context
	fns  map[string]*cuda.Function
	bufs []*cuda.Buffer
}

func (b *gpuBackend) reset() {
	for _, x := range b.bufs {
		x.Free()
	}
	b.bufs = nil
}

func (b *gpuBackend) buf(a uint64) *cuda.Buffer {
	for _, x := range b.bufs {
		if uint64(x.Ptr()) == a {
			return x
		}
	}
	return nil
}

func (b *gpuBackend) alloc(n int) (uint64, error) {
	x, err := b.ctx.Alloc(max(n, 4))
	if err != nil {
		return 0, err
	}
	b.bufs = append(b.bufs, x)
	return uint64(x.Ptr()), nil
}
func (b *gpuBackend) writeU16(a uint64, v []uint16) error { return b.buf(a).WriteUint16(v) }
func (b *gpuBackend) writeU32(a uint64, v []uint32) error {
	h := make([]uint16, 2*len(v))
	for i, x := range v {
		h[2*i], h[2*i+1] = uint16(x), uint16(x>>16)
	}
	return b.buf(a).WriteUint16(h)
}
func (b *gpuBackend) writeF32(a uint64, v []float32) error { return b.buf(a).WriteFloat32(v) }
func (b *gpuBackend) readU16(a uint64, n int) ([]uint16, error) {
	h := make([]uint16, n)
	return h, b.buf(a).ReadUint16(h)
}
func (b *gpuBackend) readF32(a uint64, n int) ([]float32, error) {
	f := make([]float32, n)
	return f, b.buf(a).ReadFloat32(f)
}
func (b *gpuBackend) sync() error { return b.ctx.Synchronize() }

// start launches without waiting; device addresses become cuda.DevicePtr.
func (b *gpuBackend) start(name string, l ptx.Launch, args []any) error {
	fn := b.fns[name]
	if fn == nil {
		return fmt.Errorf("gpurun: the module has no loaded entry %q", name)
	}
	if l.Persistent {
		// the persistent kernel: as many CTAs as the device runs at once
		// (gpu.Kernel.ResidentGrid), each looping over its work items
		dev := b.ctx.Device()
		if dev == nil {
			return fmt.Errorf("gpurun: no device for the persistent grid of %s", name)
		}
		l.Grid = [3]int{max(1, min(l.Grid[0], dev.SMs*gpu.PersistentCTAsPerSM)), 1, 1}
	}
	u3 := func(x [3]int) [3]uint32 { return [3]uint32{uint32(x[0]), uint32(x[1]), uint32(x[2])} }
	conv := make([]any, len(args))
	for i, a := range args {
		if p, ok := a.(uint64); ok {
			conv[i] = cuda.DevicePtr(p)
		} else {
			conv[i] = a
		}
	}
	return cuda.Launch(fn, u3(l.Grid), u3(l.Block), uint32(l.DynShared), conv...)
}

func (b *gpuBackend) timed(work func() error) (time.Duration, error) {
	return b.ctx.Time(work)
}
func (b *gpuBackend) fill(a uint64, n int, x byte) error { return b.buf(a).Memset(x) }

// tensorMap encodes the map (cuTensorMapEncodeTiled) and copies its 128
// bytes to device memory, where the kernel reads it by address.
func (b *gpuBackend) tensorMap(m ptx.TensorMap) (uint64, error) {
	sw, ok := map[int]cuda.TensorMapSwizzle{0: cuda.TensorMapSwizzleNone, 32: cuda.TensorMapSwizzle32B, 64: cuda.TensorMapSwizzle64B, 128: cuda.TensorMapSwizzle128B}[m.Swizzle]
	if !ok || m.ElemSize != 2 {
		return 0, fmt.Errorf("gpurun: tensor map with %d-byte elements and a %d-byte swizzle: want 2 and 0, 32, 64 or 128", m.ElemSize, m.Swizzle)
	}
	tm, err := b.ctx.EncodeTensorMapTiled(cuda.TensorMapTiled{
		DataType: cuda.TensorMapUint16, Global: cuda.DevicePtr(m.Global),
		Dims: m.Dims[:], Strides: m.Strides[:], Box: m.Box[:], Swizzle: sw,
	})
	if err != nil {
		return 0, err
	}
	a, err := b.alloc(len(tm))
	if err != nil {
		return 0, err
	}
	h := make([]uint16, len(tm)/2)
	for i := range h {
		h[i] = uint16(tm[2*i]) | uint16(tm[2*i+1])<<8
	}
	return a, b.writeU16(a, h)
}
