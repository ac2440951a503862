package ptx

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

const (
	// GlobalBase is the device address of the first global allocation.
	GlobalBase uint64 = 0x7f00_0000_0000
	// SharedWindow is where a block's shared memory appears in the generic
	// address space (cvta.shared / cvta.to.shared).
	SharedWindow uint64 = 0x7e00_0000_0000

	allocAlign = 256
	redZone    = 256 // unallocated bytes between allocations

	// MaxSharedPerBlock is the H100/H200 limit on shared memory per block
	// (static plus dynamic), in bytes.
	MaxSharedPerBlock = 227 * 1024
)

// Device is a flat global memory plus the limits and checks used by Launch.
// It is not safe for concurrent use.
type Device struct {
	mem   []byte
	valid []bool // per byte: inside an allocation

	// MaxWarpInstructions bounds the warp instructions one Launch may execute
	// (a guard against endless loops). NewDevice sets 1<<28.
	MaxWarpInstructions int64
	// MaxGlobal bounds the global memory Alloc may hand out. NewDevice sets 1 GiB.
	MaxGlobal int
	// CheckRaces reports shared-memory accesses by different warps to the
	// same byte between two barriers when at least one writes, and accesses
	// to bytes a cp.async has not yet completed. NewDevice sets it.
	CheckRaces bool
	// CheckUninitShared reports loads of shared bytes not written since the
	// block started. NewDevice sets it. Without it shared memory starts
	// filled with 0xff bytes (an f32 NaN) in every block.
	CheckUninitShared bool

	// OnGlobalStore, if set, is called for every lane's st to global
	// memory, in execution order, with the block's ctaid, the address and
	// the bytes stored (tests read the order in which a kernel works
	// through its outputs).
	OnGlobalStore func(ctaid [3]int, addr uint64, n int)

	tmaps map[uint64]*TensorMap // NewTensorMap's maps by device address
}

// NewDevice returns an empty device with all checks on.
func NewDevice() *Device {
	return &Device{MaxWarpInstructions: 1 << 28, MaxGlobal: 1 << 30, CheckRaces: true, CheckUninitShared: true}
}

// Alloc reserves n bytes of zeroed global memory aligned to 256 bytes and
// returns its device address. Allocations are separated by unallocated
// bytes, so an access that runs off the end of one is an error.
func (d *Device) Alloc(n int) (uint64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("ptx: Alloc(%d): size must be positive", n)
	}
	start := (len(d.mem) + redZone + allocAlign - 1) / allocAlign * allocAlign
	end := start + n
	if end+redZone > d.MaxGlobal {
		return 0, fmt.Errorf("ptx: Alloc(%d): global memory limit %d bytes exceeded", n, d.MaxGlobal)
	}
	grow := end + redZone - len(d.mem)
	d.mem = append(d.mem, make([]byte, grow)...)
	d.valid = append(d.valid, make([]bool, grow)...)
	for i := start; i < end; i++ {
		d.valid[i] = true
	}
	return GlobalBase + uint64(start), nil
}

// global returns the offset of [addr, addr+n) in d.mem, or false when any
// byte is outside an allocation.
func (d *Device) global(addr uint64, n int) (int, bool) {
	if addr < GlobalBase || addr-GlobalBase > uint64(len(d.mem)) || n > len(d.mem) {
		return 0, false
	}
	off := int(addr - GlobalBase)
	if off+n > len(d.mem) || !d.valid[off] || !d.valid[off+n-1] {
		return 0, false
	}
	if n > redZone {
		for i := off; i < off+n; i++ {
			if !d.valid[i] {
				return 0, false
			}
		}
	}
	return off, true
}

// Write copies b to global memory at addr.
func (d *Device) Write(addr uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	off, ok := d.global(addr, len(b))
	if !ok {
		return fmt.Errorf("ptx: Write of %d bytes at %#x is outside any allocation", len(b), addr)
	}
	copy(d.mem[off:], b)
	return nil
}

// Read copies global memory at addr into b.
func (d *Device) Read(addr uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	off, ok := d.global(addr, len(b))
	if !ok {
		return fmt.Errorf("ptx: Read of %d bytes at %#x is outside any allocation", len(b), addr)
	}
	copy(b, d.mem[off:])
	return nil
}

// WriteU32 stores little-endian 32-bit words at addr.
func (d *Device) WriteU32(addr uint64, v []uint32) error {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return d.Write(addr, b)
}

// ReadU32 loads n little-endian 32-bit words from addr.
func (d *Device) ReadU32(addr uint64, n int) ([]uint32, error) {
	b := make([]byte, 4*n)
	if err := d.Read(addr, b); err != nil {
		return nil, err
	}
	v := make([]uint32, n)
	for i := range v {
		v[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return v, nil
}

// WriteU16 stores little-endian 16-bit words (bf16 or f16 bits) at addr.
func (d *Device) WriteU16(addr uint64, v []uint16) error {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return d.Write(addr, b)
}

// ReadU16 loads n little-endian 16-bit words from addr.
func (d *Device) ReadU16(addr uint64, n int) ([]uint16, error) {
	b := make([]byte, 2*n)
	if err := d.Read(addr, b); err != nil {
		return nil, err
	}
	v := make([]uint16, n)
	for i := range v {
		v[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return v, nil
}

// WriteF32 stores float32 values at addr.
func (d *Device) WriteF32(addr uint64, v []float32) error {
	u := make([]uint32, len(v))
	for i, f := range v {
		u[i] = math.Float32bits(f)
	}
	return d.WriteU32(addr, u)
}

// ReadF32 loads n float32 values from addr.
func (d *Device) ReadF32(addr uint64, n int) ([]float32, error) {
	u, err := d.ReadU32(addr, n)
	if err != nil {
		return nil, err
	}
	f := make([]float32, n)
	for i, x := range u {
		f[i] = math.Float32frombits(x)
	}
	return f, nil
}

// Stats counts what a Launch executed.
type Stats struct {
	Blocks             int
	Warps              int   // warps started, over all blocks
	WarpInstructions   int64 // instructions issued per warp (predicated-off ones included)
	ThreadInstructions int64 // instructions summed over active lanes
	Barriers           int64 // barrier completions (bar.sync 0 and named barriers), over all blocks
	Elapsed            time.Duration
}

// Launch runs kernel of m over grid x block threads with dynShared bytes of
// dynamic shared memory. Blocks run one after another in ctaid order (x
// fastest); within a block, warps run in lockstep between barriers.
//
// Params must match the kernel's parameters one for one: uint64 (or a
// non-negative int) for .u64/.s64/.b64, uint32, int32 or int for 32-bit
// integer parameters (checked for range), and float32 for .f32.
func (d *Device) Launch(m *Module, kernel string, grid, block [3]int, dynShared int, params ...any) (*Stats, error) {
	k := m.Kernel(kernel)
	if k == nil {
		return nil, fmt.Errorf("ptx: module %s has no kernel %q", m.File, kernel)
	}
	for i := 0; i < 3; i++ {
		if grid[i] <= 0 || block[i] <= 0 {
			return nil, fmt.Errorf("ptx: launch of %s: grid %v and block %v must be positive", kernel, grid, block)
		}
	}
	nthreads := block[0] * block[1] * block[2]
	if nthreads > 1024 {
		return nil, fmt.Errorf("ptx: launch of %s: %d threads per block exceed 1024", kernel, nthreads)
	}
	if k.ReqNTID != [3]int{} && k.ReqNTID != block {
		return nil, fmt.Errorf("ptx: launch of %s: block %v but the kernel requires .reqntid %v", kernel, block, k.ReqNTID)
	}
	if k.MaxNTID != [3]int{} && nthreads > k.MaxNTID[0]*k.MaxNTID[1]*k.MaxNTID[2] {
		return nil, fmt.Errorf("ptx: launch of %s: %d threads exceed .maxntid %v", kernel, nthreads, k.MaxNTID)
	}
	if dynShared < 0 {
		return nil, fmt.Errorf("ptx: launch of %s: negative dynamic shared memory", kernel)
	}
	shSize := k.static
	if k.dynAlign > 0 {
		shSize = (shSize+k.dynAlign-1)/k.dynAlign*k.dynAlign + dynShared
	} else if dynShared > 0 {
		shSize += dynShared
	}
	if shSize > MaxSharedPerBlock {
		return nil, fmt.Errorf("ptx: launch of %s: %d bytes of shared memory exceed %d", kernel, shSize, MaxSharedPerBlock)
	}
	pbuf, err := packParams(k, params)
	if err != nil {
		return nil, err
	}
	st := &Stats{}
	t0 := time.Now()
	r := newBlockRun(d, k, grid, block, shSize, pbuf, st)
	for z := 0; z < grid[2]; z++ {
		for y := 0; y < grid[1]; y++ {
			for x := 0; x < grid[0]; x++ {
				if err := r.run([3]int{x, y, z}); err != nil {
					st.Elapsed = time.Since(t0)
					return st, err
				}
				st.Blocks++
			}
		}
	}
	st.Elapsed = time.Since(t0)
	return st, nil
}

func packParams(k *Kernel, params []any) ([]byte, error) {
	if len(params) != len(k.Params) {
		return nil, fmt.Errorf("ptx: %s takes %d parameters, got %d", k.Name, len(k.Params), len(params))
	}
	size := 0
	for _, p := range k.Params {
		size = max(size, p.Offset+p.typ.size())
	}
	buf := make([]byte, size)
	for i, p := range k.Params {
		v := params[i]
		bad := func() error {
			return fmt.Errorf("ptx: %s parameter %d (%s %s): cannot pass %T(%v)", k.Name, i, p.Type, p.Name, v, v)
		}
		switch p.typ.size() {
		case 8:
			var u uint64
			switch x := v.(type) {
			case uint64:
				u = x
			case int64:
				u = uint64(x)
			case int:
				u = uint64(int64(x))
			case uintptr:
				u = uint64(x)
			default:
				return nil, bad()
			}
			binary.LittleEndian.PutUint64(buf[p.Offset:], u)
		case 4:
			var u uint32
			if p.typ == tF32 {
				x, ok := v.(float32)
				if !ok {
					return nil, bad()
				}
				u = math.Float32bits(x)
			} else {
				switch x := v.(type) {
				case uint32:
					u = x
				case int32:
					u = uint32(x)
				case int:
					if x < math.MinInt32 || x > math.MaxUint32 || p.typ == tS32 && x > math.MaxInt32 || p.typ == tU32 && x < 0 {
						return nil, bad()
					}
					u = uint32(x)
				default:
					return nil, bad()
				}
			}
			binary.LittleEndian.PutUint32(buf[p.Offset:], u)
		}
	}
	return buf, nil
}
