package wgmmarec

import (
	"fmt"
	"strings"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/verify/ptx"
)

// Backend runs the recording kernels: the PTX interpreter or a GPU.
// Addresses are device addresses; kernel arguments are uint64 (addresses)
// and uint32.
type Backend interface {
	// Name says what computed the results ("PTX interpreter", or the GPU's
	// name and architecture).
	Name() string
	// Load compiles a PTX module; its kernels can then be launched by name.
	Load(file, src string) error
	Alloc(n int) (uint64, error)
	Write(addr uint64, b []byte) error
	Read(addr uint64, b []byte) error
	Launch(kernel string, dynShared int, args ...any) error // one block of 128 threads
	// TensorMap makes a 2-D tensor map of u16 elements in device memory and
	// returns its address and, where there is one, the encoded map.
	TensorMap(m CopyCase) (uint64, []byte, error)
	// Reset frees every allocation.
	Reset() error
}

// Interp is the PTX interpreter as a Backend, with all its checks on.
type Interp struct {
	dev     *ptx.Device
	kernels map[string]*ptx.Module
}

// NewInterp returns an interpreter backend.
func NewInterp() *Interp { return &Interp{dev: ptx.NewDevice(), kernels: map[string]*ptx.Module{}} }

func (b *Interp) Name() string { return "PTX interpreter (verify/ptx)" }

func (b *Interp) Load(file, src string) error {
	m, err := ptx.Parse(file, src)
	if err != nil {
		return err
	}
	for _, k := range m.Kernels() {
		b.kernels[k.Name] = m
	}
	return nil
}

func (b *Interp) Alloc(n int) (uint64, error)       { return b.dev.Alloc(n) }
func (b *Interp) Write(addr uint64, p []byte) error { return b.dev.Write(addr, p) }
func (b *Interp) Read(addr uint64, p []byte) error  { return b.dev.Read(addr, p) }
func (b *Interp) Reset() error                      { b.dev = ptx.NewDevice(); return nil }
func (b *Interp) Launch(k string, dyn int, args ...any) error {
	m := b.kernels[k]
	if m == nil {
		return fmt.Errorf("wgmmarec: no loaded module has kernel %s", k)
	}
	_, err := b.dev.Launch(m, k, [3]int{1, 1, 1}, [3]int{128, 1, 1}, dyn, args...)
	return err
}

func (b *Interp) TensorMap(c CopyCase) (uint64, []byte, error) {
	sw, ok := map[string]ptx.Swizzle{"none": ptx.SwizzleNone, "32B": ptx.Swizzle32B, "64B": ptx.Swizzle64B, "128B": ptx.Swizzle128B}[c.Swizzle]
	if !ok {
		return 0, nil, fmt.Errorf("wgmmarec: swizzle %q", c.Swizzle)
	}
	a, err := b.dev.NewTensorMap(ptx.TensorMap{
		Global: c.global, ElemSize: 2, Dims: []uint64{uint64(c.Dims[0]), uint64(c.Dims[1])},
		Strides: []uint64{uint64(c.RowBytes)}, Box: []uint32{uint32(c.Box[0]), uint32(c.Box[1])}, Swizzle: sw,
	})
	return a, nil, err
}

// maxDynShared is the dynamic shared memory the recording kernels may use
// (padTo and 1024 bytes of alignment slack; an H200 allows 227 KiB).
const maxDynShared = 200 << 10

// GPU is a CUDA device as a Backend.
type GPU struct {
	ctx   *cuda.Context
	name  string
	funcs map[string]*cuda.Function
	bufs  map[uint64]*cuda.Buffer
}

// OpenGPU opens device 0's primary context. Where there is no driver or no
// device the error satisfies cuda.Unavailable.
func OpenGPU() (*GPU, error) {
	drv, err := cuda.Open()
	if err != nil {
		return nil, err
	}
	dev, err := drv.Device(0)
	if err != nil {
		return nil, err
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return nil, err
	}
	return &GPU{ctx: ctx, name: fmt.Sprintf("%s (%s, CUDA driver %d)", dev.Name, dev.Arch(), drv.Version()),
		funcs: map[string]*cuda.Function{}, bufs: map[uint64]*cuda.Buffer{}}, nil
}

// Arch is the device's architecture (sm_90 for an H100/H200).
func (g *GPU) Arch() string { return g.ctx.Device().Arch() }

// Close frees everything and releases the context.
func (g *GPU) Close() error {
	g.Reset()
	return g.ctx.Release()
}

func (g *GPU) Name() string { return g.name }

func (g *GPU) Load(file, src string) error {
	m, err := g.ctx.LoadModule([]byte(src))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, k := range entryNames(src) {
		f, err := m.Function(k)
		if err != nil {
			return err
		}
		if err := f.SetMaxDynamicSharedMemory(maxDynShared); err != nil {
			return err
		}
		g.funcs[k] = f
	}
	return nil
}

func (g *GPU) Alloc(n int) (uint64, error) {
	b, err := g.ctx.Alloc(n)
	if err != nil {
		return 0, err
	}
	a := uint64(b.Ptr())
	g.bufs[a] = b
	return a, nil
}

func (g *GPU) buf(a uint64, n int) (*cuda.Buffer, error) {
	b := g.bufs[a]
	if b == nil || n > b.Len() {
		return nil, fmt.Errorf("wgmmarec: %d bytes at %#x are not one allocation", n, a)
	}
	return b, nil
}

func (g *GPU) Write(a uint64, p []byte) error {
	b, err := g.buf(a, len(p))
	if err != nil {
		return err
	}
	return b.Write(p)
}

func (g *GPU) Read(a uint64, p []byte) error {
	b, err := g.buf(a, len(p))
	if err != nil {
		return err
	}
	return b.Read(p)
}

func (g *GPU) Reset() error {
	var first error
	for a, b := range g.bufs {
		if err := b.Free(); err != nil && first == nil {
			first = err
		}
		delete(g.bufs, a)
	}
	return first
}

func (g *GPU) Launch(k string, dyn int, args ...any) error {
	f := g.funcs[k]
	if f == nil {
		return fmt.Errorf("wgmmarec: no loaded module has kernel %s", k)
	}
	if err := cuda.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{128, 1, 1}, uint32(dyn), args...); err != nil {
		return err
	}
	return g.ctx.Synchronize()
}

func (g *GPU) TensorMap(c CopyCase) (uint64, []byte, error) {
	sw, ok := map[string]cuda.TensorMapSwizzle{"none": cuda.TensorMapSwizzleNone, "32B": cuda.TensorMapSwizzle32B, "64B": cuda.TensorMapSwizzle64B, "128B": cuda.TensorMapSwizzle128B}[c.Swizzle]
	if !ok {
		return 0, nil, fmt.Errorf("wgmmarec: swizzle %q", c.Swizzle)
	}
	tm, err := g.ctx.EncodeTensorMapTiled(cuda.TensorMapTiled{
		DataType: cuda.TensorMapUint16, Global: cuda.DevicePtr(c.global),
		Dims: []uint64{uint64(c.Dims[0]), uint64(c.Dims[1])}, Strides: []uint64{uint64(c.RowBytes)},
		Box: []uint32{uint32(c.Box[0]), uint32(c.Box[1])}, Swizzle: sw,
	})
	if err != nil {
		return 0, nil, err
	}
	a, err := g.Alloc(len(tm))
	if err != nil {
		return 0, nil, err
	}
	return a, tm[:], g.Write(a, tm[:])
}

// entryNames lists the .entry names of a module generated here.
func entryNames(src string) []string {
	var names []string
	const key = ".visible .entry "
	for i := 0; ; {
		j := strings.Index(src[i:], key)
		if j < 0 {
			return names
		}
		j += i + len(key)
		k := j
		for k < len(src) && src[k] != '(' {
			k++
		}
		names = append(names, src[j:k])
		i = k
	}
}
