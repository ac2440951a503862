package cuda

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// DefaultLibrary is the driver library [Open] loads unless ATTNGEN_LIBCUDA
// names another. It is the driver's soname, installed by the NVIDIA driver
// (the toolkit's libcuda.so, without the .1, is only a link-time stub).
const DefaultLibrary = "libcuda.so.1"

// LibraryEnv is the environment variable that overrides [DefaultLibrary].
const LibraryEnv = "ATTNGEN_LIBCUDA"

// Driver is a loaded CUDA driver library and its function table. The library
// stays loaded for the life of the process.
//
// Only [Open] and [OpenLibrary] make a usable Driver: the methods of a nil or
// zero Driver, and of everything reached through one, return an error
// wrapping [ErrZeroValue].
type Driver struct {
	path    string
	version int
	ready   bool // every function bound and cuInit done

	cuInit                    func(flags uint32) Result
	cuDriverGetVersion        func(v *int32) Result
	cuDeviceGet               func(dev *int32, ordinal int32) Result
	cuDeviceGetCount          func(n *int32) Result
	cuDeviceGetName           func(name *byte, n int32, dev int32) Result
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) Result
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) Result
	cuDevicePrimaryCtxRelease func(dev int32) Result
	cuCtxSetCurrent           func(ctx uintptr) Result
	cuCtxSynchronize          func() Result
	cuModuleLoadDataEx        func(mod *uintptr, image *byte, n uint32, opts *int32, vals *uintptr) Result
	cuModuleGetFunction       func(fn *uintptr, mod uintptr, name *byte) Result
	cuModuleUnload            func(mod uintptr) Result
	cuFuncSetAttribute        func(fn uintptr, attr int32, v int32) Result
	cuFuncGetAttribute        func(v *int32, attr int32, fn uintptr) Result
	cuMemAlloc                func(p *DevicePtr, n uintptr) Result
	cuMemFree                 func(p DevicePtr) Result
	cuMemcpyHtoD              func(dst DevicePtr, src unsafe.Pointer, n uintptr) Result
	cuMemcpyDtoH              func(dst unsafe.Pointer, src DevicePtr, n uintptr) Result
	cuMemsetD8                func(dst DevicePtr, v uint8, n uintptr) Result
	cuLaunchKernel            func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params, extra *unsafe.Pointer) Result
	cuEventCreate             func(ev *uintptr, flags uint32) Result
	cuEventRecord             func(ev uintptr, stream uintptr) Result
	cuEventSynchronize        func(ev uintptr) Result
	cuEventElapsedTime        func(ms *float32, start, end uintptr) Result
	cuEventDestroy            func(ev uintptr) Result
	cuGetErrorName            func(r Result, s **byte) Result
	cuGetErrorString          func(r Result, s **byte) Result

	// Optional functions (optionalSymbols): nil where the driver lacks them.
	cuTensorMapEncodeTiled func(tmap unsafe.Pointer, dtype int32, rank uint32, global uintptr, dims, strides *uint64, box, elemStrides *uint32, interleave, swizzle, l2, oob int32) Result
}

// symbols lists, for each function pointer, the exported names to try in
// order. A _v2 name comes first only where it has the same C signature as the
// unsuffixed one or where the unsuffixed one is the pre-CUDA-3.2 32-bit ABI
// (the memory functions, which must never fall back). cuCtxSynchronize is
// bound by its plain name on purpose: newer drivers also export a
// cuCtxSynchronize_v2 that takes a CUcontext argument.
func (d *Driver) symbols() []struct {
	fptr  any
	names []string
} {
	type sym = struct {
		fptr  any
		names []string
	}
	return []sym{
		{&d.cuInit, []string{"cuInit"}},
		{&d.cuDriverGetVersion, []string{"cuDriverGetVersion"}},
		{&d.cuDeviceGet, []string{"cuDeviceGet"}},
		{&d.cuDeviceGetCount, []string{"cuDeviceGetCount"}},
		{&d.cuDeviceGetName, []string{"cuDeviceGetName"}},
		{&d.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}},
		{&d.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}},
		{&d.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
		{&d.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}},
		{&d.cuCtxSynchronize, []string{"cuCtxSynchronize"}},
		{&d.cuModuleLoadDataEx, []string{"cuModuleLoadDataEx"}},
		{&d.cuModuleGetFunction, []string{"cuModuleGetFunction"}},
		{&d.cuModuleUnload, []string{"cuModuleUnload"}},
		{&d.cuFuncSetAttribute, []string{"cuFuncSetAttribute"}},
		{&d.cuFuncGetAttribute, []string{"cuFuncGetAttribute"}},
		{&d.cuMemAlloc, []string{"cuMemAlloc_v2"}},
		{&d.cuMemFree, []string{"cuMemFree_v2"}},
		{&d.cuMemcpyHtoD, []string{"cuMemcpyHtoD_v2"}},
		{&d.cuMemcpyDtoH, []string{"cuMemcpyDtoH_v2"}},
		{&d.cuMemsetD8, []string{"cuMemsetD8_v2"}},
		{&d.cuLaunchKernel, []string{"cuLaunchKernel"}},
		{&d.cuEventCreate, []string{"cuEventCreate"}},
		{&d.cuEventRecord, []string{"cuEventRecord"}},
		{&d.cuEventSynchronize, []string{"cuEventSynchronize"}},
		{&d.cuEventElapsedTime, []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}},
		{&d.cuEventDestroy, []string{"cuEventDestroy_v2"}},
		{&d.cuGetErrorName, []string{"cuGetErrorName"}},
		{&d.cuGetErrorString, []string{"cuGetErrorString"}},
	}
}

// optionalSymbols lists driver functions that Open binds where the library
// exports them and leaves nil where it does not (an older driver, the test
// mock): the methods that need one return an error wrapping
// [ErrMissingSymbol] instead.
func (d *Driver) optionalSymbols() []struct {
	fptr any
	name string
} {
	return []struct {
		fptr any
		name string
	}{
		{&d.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled"}, // CUDA 12.0
	}
}

var (
	openMu sync.Mutex
	opened = map[string]*Driver{}
)

// Open loads the CUDA driver named by $ATTNGEN_LIBCUDA, or [DefaultLibrary],
// and initializes it (cuInit). See [OpenLibrary].
func Open() (*Driver, error) {
	path := os.Getenv(LibraryEnv)
	if path == "" {
		path = DefaultLibrary
	}
	return OpenLibrary(path)
}

// OpenLibrary loads the CUDA driver library at path (a file name searched the
// way dlopen searches, or a path), binds the driver functions and calls
// cuInit(0). Where the library cannot be loaded the error wraps [ErrNoDriver];
// where a function is missing it wraps [ErrMissingSymbol]; where cuInit fails
// it is an [*Error] (for example [ErrNoDevice] on a machine with a driver and
// no GPU). [Unavailable] is true of all three. A library opened once is
// returned again by later calls with the same path.
func OpenLibrary(path string) (*Driver, error) {
	switch {
	case path == "":
		return nil, fmt.Errorf("cuda: load: empty library path: %w", ErrNoDriver)
	case strings.IndexByte(path, 0) >= 0:
		return nil, fmt.Errorf("cuda: load %q: the path contains a NUL byte: %w", path, ErrNoDriver)
	}
	openMu.Lock()
	defer openMu.Unlock()
	if d, ok := opened[path]; ok {
		return d, nil
	}
	lib, err := dlopen(path)
	if err != nil {
		return nil, fmt.Errorf("cuda: load %s: %w (%v)", path, ErrNoDriver, err)
	}
	d := &Driver{path: path}
	for _, s := range d.symbols() {
		found := false
		for _, name := range s.names {
			if addr := dlsym(lib, name); addr != 0 {
				register(s.fptr, addr)
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("cuda: %s: no symbol %s: %w", path, s.names[0], ErrMissingSymbol)
		}
	}
	for _, s := range d.optionalSymbols() {
		if addr := dlsym(lib, s.name); addr != 0 {
			register(s.fptr, addr)
		}
	}
	if err := d.check("cuInit", d.cuInit(0)); err != nil {
		return nil, err
	}
	var v int32
	if err := d.check("cuDriverGetVersion", d.cuDriverGetVersion(&v)); err != nil {
		return nil, err
	}
	d.version = int(v)
	d.ready = true
	opened[path] = d
	return d, nil
}

// Path is the library this driver was loaded from ("" for a nil Driver).
func (d *Driver) Path() string {
	if d == nil {
		return ""
	}
	return d.path
}

// Version is the CUDA version the driver supports, 1000*major + 10*minor
// (13000 for CUDA 13.0), from cuDriverGetVersion (0 for a nil Driver).
func (d *Driver) Version() int {
	if d == nil {
		return 0
	}
	return d.version
}

// usable returns nil for a Driver made by OpenLibrary, else the error of
// method called on it.
func (d *Driver) usable(method string) error {
	if d == nil || !d.ready {
		return zeroValue(method, "*Driver", "Open or OpenLibrary")
	}
	return nil
}

// check turns a CUresult into nil or an [*Error] carrying the driver's name
// and description of the code.
func (d *Driver) check(fn string, r Result) error {
	if r == Success {
		return nil
	}
	return &Error{Func: fn, Code: r, Name: d.errorName(r), Desc: d.errorString(r)}
}

func (d *Driver) errorName(r Result) string {
	var s *byte
	if d.cuGetErrorName != nil && d.cuGetErrorName(r, &s) == Success && s != nil {
		return goString(s)
	}
	return r.Name()
}

func (d *Driver) errorString(r Result) string {
	var s *byte
	if d.cuGetErrorString != nil && d.cuGetErrorString(r, &s) == Success && s != nil {
		return goString(s)
	}
	return ""
}

// goString copies the NUL-terminated C string at p.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// cString returns s as a NUL-terminated byte slice.
func cString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// errNilHandle is returned by methods called on a freed or zero handle.
var errNilHandle = errors.New("cuda: use of a released, freed or unloaded handle")
