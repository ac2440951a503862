// Package gpurun runs generated PTX forward kernels on a backend, the PTX
// interpreter (verify/ptx, no GPU needed) or a real GPU through the CUDA
// driver (package cuda), as a verify.Run so that the same checks judge
// them. Inputs are rounded to the kernel's 16-bit element type on the way
// in; outputs are widened to float32 on the way out.
package gpurun

import (
	"fmt"
	"math"
	"time"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/verify"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// backend is the memory and launch interface both targets provide.
type backend interface {
	alloc(bytes int) (uint64, error)
	writeU16(addr uint64, v []uint16) error
	writeU32(addr uint64, v []uint32) error
	readU16(addr uint64, n int) ([]uint16, error)
	readF32(addr uint64, n int) ([]float32, error)
	launch(l ptx.Launch, args []any) error
	reset()
}

// Kernel is a generated forward kernel bound to a backend.
type Kernel struct {
	F *ptx.Forward
	b backend
}

// Run returns the kernel as a verify.Run.
func (k *Kernel) Run() verify.Run {
	return func(out, lse, q, kk, v []float32, docs []int32, s verify.Shape) error {
		return k.run(out, lse, q, kk, v, docs, s)
	}
}

func (k *Kernel) run(out, lse, q, kk, v []float32, ids []int32, s verify.Shape) error {
	defer k.b.reset()
	if s.HeadDim != k.F.HeadDim {
		return fmt.Errorf("gpurun: head dim %d, kernel is for %d", s.HeadDim, k.F.HeadDim)
	}
	nq, nkv, nl := s.Sizes()
	if len(q) < nq || len(kk) < nkv || len(v) < nkv || len(out) < nq || (lse != nil && len(lse) < nl) {
		return fmt.Errorf("gpurun: slices shorter than the shape")
	}
	l, err := k.F.Geometry(s.Batch, s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK, s.Scale)
	if err != nil {
		return err
	}
	toElem, fromElem := verify.BF16, verify.FromBF16
	if k.F.Elem == ptx.F16 {
		toElem, fromElem = verify.F16, verify.FromF16
	}
	var ptrs []uint64
	for _, x := range [][]float32{q[:nq], kk[:nkv], v[:nkv]} {
		h := make([]uint16, len(x))
		for i, f := range x {
			h[i] = toElem(f)
		}
		a, err := k.b.alloc(2 * len(h))
		if err != nil {
			return err
		}
		if err := k.b.writeU16(a, h); err != nil {
			return err
		}
		ptrs = append(ptrs, a)
	}
	oa, err := k.b.alloc(2 * nq)
	if err != nil {
		return err
	}
	la, err := k.b.alloc(4 * nl)
	if err != nil {
		return err
	}
	ptrs = append(ptrs, oa, la)
	if hasDocs(k.F) {
		if len(ids) < s.SeqK {
			return fmt.Errorf("gpurun: the kernel needs %d document ids, got %d", s.SeqK, len(ids))
		}
		start, end, err := ptx.DocArrays(ids[:s.SeqK])
		if err != nil {
			return err
		}
		for _, arr := range [][]int32{ids[:s.SeqK], start, end} {
			u := make([]uint32, len(arr))
			for i, x := range arr {
				u[i] = uint32(x)
			}
			a, err := k.b.alloc(4 * len(u))
			if err != nil {
				return err
			}
			if err := k.b.writeU32(a, u); err != nil {
				return err
			}
			ptrs = append(ptrs, a)
		}
	}
	args, err := l.Args(ptrs...)
	if err != nil {
		return err
	}
	if err := k.b.launch(l, args); err != nil {
		return err
	}
	oh, err := k.b.readU16(oa, nq)
	if err != nil {
		return err
	}
	for i, h := range oh {
		out[i] = fromElem(h)
	}
	if lse != nil {
		lf, err := k.b.readF32(la, nl)
		if err != nil {
			return err
		}
		copy(lse, lf)
	}
	return nil
}

// hasDocs reports whether the kernel takes document-id arrays.
func hasDocs(f *ptx.Forward) bool {
	for _, p := range f.Params {
		if p.Name == "doc_id" {
			return true
		}
	}
	return false
}

// Interp binds a kernel to a fresh PTX interpreter device per call.
func Interp(f *ptx.Forward) (*Kernel, error) {
	mod, err := ptxi.Parse(f.Name+".ptx", f.PTX)
	if err != nil {
		return nil, fmt.Errorf("interpreter cannot parse %s: %w", f.Name, err)
	}
	return &Kernel{F: f, b: &interpBackend{mod: mod, name: f.Name}}, nil
}

type interpBackend struct {
	mod  *ptxi.Module
	name string
	dev  *ptxi.Device
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
func (b *interpBackend) readU16(a uint64, n int) ([]uint16, error) { return b.d().ReadU16(a, n) }
func (b *interpBackend) readF32(a uint64, n int) ([]float32, error) {
	return b.d().ReadF32(a, n)
}
func (b *interpBackend) launch(l ptx.Launch, args []any) error {
	_, err := b.d().Launch(b.mod, b.name, l.Grid, l.Block, l.DynShared, args...)
	return err
}

// GPU binds a kernel to a real GPU: the module is loaded once (the JIT log
// is part of any error) and dynamic shared memory above 48 KiB is allowed.
func GPU(ctx *cuda.Context, f *ptx.Forward) (*Kernel, error) {
	mod, err := ctx.LoadModule([]byte(f.PTX))
	if err != nil {
		return nil, err
	}
	fn, err := mod.Function(f.Name)
	if err != nil {
		return nil, err
	}
	if f.DynShared > 48*1024 {
		if err := fn.SetMaxDynamicSharedMemory(f.DynShared); err != nil {
			return nil, err
		}
	}
	return &Kernel{F: f, b: &gpuBackend{ctx: ctx, fn: fn}}, nil
}

type gpuBackend struct {
	ctx  *cuda.Context
	fn   *cuda.Function
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
func (b *gpuBackend) readU16(a uint64, n int) ([]uint16, error) {
	h := make([]uint16, n)
	return h, b.buf(a).ReadUint16(h)
}
func (b *gpuBackend) readF32(a uint64, n int) ([]float32, error) {
	f := make([]float32, n)
	return f, b.buf(a).ReadFloat32(f)
}
func (b *gpuBackend) launch(l ptx.Launch, args []any) error {
	if err := b.start(l, args); err != nil {
		return err
	}
	return b.ctx.Synchronize()
}

// start launches without waiting; device addresses become cuda.DevicePtr.
func (b *gpuBackend) start(l ptx.Launch, args []any) error {
	u3 := func(x [3]int) [3]uint32 { return [3]uint32{uint32(x[0]), uint32(x[1]), uint32(x[2])} }
	conv := make([]any, len(args))
	for i, a := range args {
		if p, ok := a.(uint64); ok {
			conv[i] = cuda.DevicePtr(p)
		} else {
			conv[i] = a
		}
	}
	return cuda.Launch(b.fn, u3(l.Grid), u3(l.Block), uint32(l.DynShared), conv...)
}

// Time measures one launch of the kernel on inputs of shape s (already on
// the device), best of reps, with CUDA events.
func Time(ctx *cuda.Context, k *Kernel, s verify.Shape, reps int) (time.Duration, error) {
	gb, ok := k.b.(*gpuBackend)
	if !ok {
		return 0, fmt.Errorf("gpurun: Time needs a GPU kernel")
	}
	nq, nkv, nl := s.Sizes()
	var ptrs []uint64
	for _, n := range []int{2 * nq, 2 * nkv, 2 * nkv, 2 * nq, 4 * nl} {
		a, err := gb.alloc(n)
		if err != nil {
			return 0, err
		}
		if err := gb.buf(a).Memset(0x3c); err != nil { // small finite bf16 values
			return 0, err
		}
		ptrs = append(ptrs, a)
	}
	defer gb.reset()
	l, err := k.F.Geometry(s.Batch, s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK, s.Scale)
	if err != nil {
		return 0, err
	}
	args, err := l.Args(ptrs...)
	if err != nil {
		return 0, err
	}
	if err := gb.launch(l, args); err != nil { // warm-up
		return 0, err
	}
	best := time.Duration(math.MaxInt64)
	for r := 0; r < reps; r++ {
		d, err := ctx.Time(func() error { return gb.start(l, args) })
		if err != nil {
			return 0, err
		}
		best = min(best, d)
	}
	return best, nil
}
