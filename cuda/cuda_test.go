package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/attngen/attngen/cuda/cudamock"
)

// The tests run against a mock libcuda.so.1 built from testdata/mock_cuda.c
// with gcc (skipped where there is no gcc), so they need no GPU and check the
// Go side end to end: symbol binding, argument passing, the JIT log, launch
// geometry and parameter values, memory, events and error names.

var (
	mockDir  string
	mockOnce = map[string]*sync.Once{}
	mockPath = map[string]string{}
	mockErr  = map[string]error{}
	mockMu   sync.Mutex
)

func TestMain(m *testing.M) {
	code := m.Run()
	if mockDir != "" {
		os.RemoveAll(mockDir)
	}
	os.Exit(code)
}

// mockLibrary builds the mock driver once per variant and returns its path.
// Variants: "" (the full mock), "nolaunch" (without cuLaunchKernel), "copy" (a
// second copy of the full mock, loaded separately, for cuInit failures),
// "notmap" (without the optional cuTensorMapEncodeTiled).
func mockLibrary(t *testing.T, variant string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("mock libcuda is built for linux only")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found; cannot build the mock libcuda.so.1 (testdata/mock_cuda.c)")
	}
	mockMu.Lock()
	defer mockMu.Unlock()
	if mockDir == "" {
		if mockDir, err = os.MkdirTemp("", "attngen-cuda-mock-"); err != nil {
			t.Fatal(err)
		}
	}
	if mockOnce[variant] == nil {
		mockOnce[variant] = new(sync.Once)
	}
	mockOnce[variant].Do(func() {
		dir := filepath.Join(mockDir, "mock"+variant)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			mockErr[variant] = err
			return
		}
		out := filepath.Join(dir, "libcuda.so.1")
		args := []string{"-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-o", out}
		if variant == "nolaunch" {
			args = append(args, "-DMOCK_OMIT_LAUNCH")
		}
		if variant == "notmap" {
			args = append(args, "-DMOCK_OMIT_TENSORMAP")
		}
		args = append(args, filepath.Join("testdata", "mock_cuda.c"))
		if msg, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			mockErr[variant] = fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, msg)
			return
		}
		mockPath[variant] = out
	})
	if err := mockErr[variant]; err != nil {
		t.Fatal(err)
	}
	return mockPath[variant]
}

// mockLaunch is the mock driver's launch record (cudamock.Launch).
type mockLaunch = cudamock.Launch

// mockAPI is the mock-only functions of mock_cuda.c, called through purego.
type mockAPI struct {
	lastLaunch        func(*mockLaunch) int32
	lastFuncAttribute func(attr, value *int32)
	contextRetains    func() int32
	liveAllocations   func() int64
	liveEvents        func() int64
	liveModules       func() int64
	failNext          func(fn string, code int32)
}

func bindMock(t *testing.T, path string) *mockAPI {
	t.Helper()
	lib, err := dlopen(path)
	if err != nil {
		t.Fatal(err)
	}
	m := new(mockAPI)
	for _, s := range []struct {
		fptr any
		name string
	}{
		{&m.lastLaunch, "mock_last_launch"},
		{&m.lastFuncAttribute, "mock_last_func_attribute"},
		{&m.contextRetains, "mock_context_retains"},
		{&m.liveAllocations, "mock_live_allocations"},
		{&m.liveEvents, "mock_live_events"},
		{&m.liveModules, "mock_live_modules"},
		{&m.failNext, "mock_fail_next"},
	} {
		addr := dlsym(lib, s.name)
		if addr == 0 {
			t.Fatalf("mock has no %s", s.name)
		}
		register(s.fptr, addr)
	}
	return m
}

// openMock opens the mock driver, device 0 and its primary context (released
// at the end of the test).
func openMock(t *testing.T) (*Driver, *Context, *mockAPI) {
	t.Helper()
	path := mockLibrary(t, "")
	drv, err := OpenLibrary(path)
	if err != nil {
		t.Fatalf("OpenLibrary(mock): %v", err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctx.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	})
	return drv, ctx, bindMock(t, path)
}

const goodPTX = `.version 8.0
.target sm_90
.address_size 64

.visible .entry attn_fwd(
	.param .u64 attn_fwd_q,
	.param .u64 attn_fwd_o,
	.param .f32 attn_fwd_scale,
	.param .u32 attn_fwd_n,
	.param .s32 attn_fwd_m,
	.param .u64 attn_fwd_raw,
	.param .f64 attn_fwd_d,
	.param .s64 attn_fwd_e
)
{
	ret;
}

.visible .entry mock_axpy(
	.param .u64 mock_axpy_x,
	.param .u64 mock_axpy_y,
	.param .f32 mock_axpy_a,
	.param .u32 mock_axpy_n
)
{
	ret;
}

.visible .entry noargs()
{
	ret;
}
`

const badPTX = `.version 8.0
.target sm_90
BAD instruction;
`

func loadGood(t *testing.T, ctx *Context) *Module {
	t.Helper()
	mod, err := ctx.LoadModule([]byte(goodPTX))
	if err != nil {
		t.Fatalf("LoadModule: %v", err)
	}
	t.Cleanup(func() {
		if err := mod.Unload(); err != nil {
			t.Errorf("Unload: %v", err)
		}
	})
	return mod
}

func function(t *testing.T, mod *Module, name string) *Function {
	t.Helper()
	fn, err := mod.Function(name)
	if err != nil {
		t.Fatalf("Function(%q): %v", name, err)
	}
	return fn
}

// TestOpenNoDriver: with no library at the override path, Open fails cleanly
// with ErrNoDriver (deterministic even on a machine with a GPU).
func TestOpenNoDriver(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere", "libcuda.so.1")
	t.Setenv(LibraryEnv, missing)
	drv, err := Open()
	if err == nil {
		t.Fatalf("Open() = %v, nil; want ErrNoDriver", drv)
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Open() error %v does not wrap ErrNoDriver", err)
	}
	if !Unavailable(err) {
		t.Errorf("Unavailable(%v) = false", err)
	}
	for _, want := range []string{"no CUDA driver: libcuda.so.1 not found", missing} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := OpenLibrary(missing); !errors.Is(err, ErrNoDriver) {
		t.Errorf("OpenLibrary(missing) error %v does not wrap ErrNoDriver", err)
	}
}

func TestOpenMissingSymbol(t *testing.T) {
	_, err := OpenLibrary(mockLibrary(t, "nolaunch"))
	if !errors.Is(err, ErrMissingSymbol) || !Unavailable(err) {
		t.Fatalf("error %v: want ErrMissingSymbol", err)
	}
	if !strings.Contains(err.Error(), "cuLaunchKernel") {
		t.Errorf("error %q does not name the missing symbol", err)
	}
}

// TestOpenInitFailure: cuInit failing (here CUDA_ERROR_NO_DEVICE, as on a
// machine with a driver and no GPU) is an *Error with the driver's names.
func TestOpenInitFailure(t *testing.T) {
	path := mockLibrary(t, "")
	// A fresh copy (a new file, so dlopen loads it anew, with its own state)
	// for each run: a driver that opened is cached by path.
	copyPath := filepath.Join(t.TempDir(), "libcuda.so.1")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyPath, data, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MOCK_CUDA_INIT_RESULT", "100")
	_, err = OpenLibrary(copyPath)
	if !errors.Is(err, ErrNoDevice) || !Unavailable(err) {
		t.Fatalf("error %v: want ErrNoDevice", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Func != "cuInit" || e.Name != "CUDA_ERROR_NO_DEVICE" || e.Desc != "no CUDA-capable device is detected" {
		t.Errorf("error %#v", err)
	}
	// A failed open is not cached: with the failure gone the same library opens.
	t.Setenv("MOCK_CUDA_INIT_RESULT", "0")
	if _, err := OpenLibrary(copyPath); err != nil {
		t.Errorf("second OpenLibrary: %v", err)
	}
}

func TestOpenEnvOverride(t *testing.T) {
	path := mockLibrary(t, "")
	t.Setenv(LibraryEnv, path)
	drv, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	if drv.Path() != path || drv.Version() != 13000 {
		t.Errorf("Path %q Version %d", drv.Path(), drv.Version())
	}
	again, err := OpenLibrary(path)
	if err != nil || again != drv {
		t.Errorf("second open: %p %v, want the same driver %p", again, err, drv)
	}
}

func TestDevice(t *testing.T) {
	drv, ctx, _ := openMock(t)
	n, err := drv.DeviceCount()
	if err != nil || n != 1 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	dev := ctx.Device()
	want := Device{Ordinal: 0, Name: "Mock NVIDIA H200", Major: 9, Minor: 0, SMs: 132, MaxThreads: 1024, WarpSize: 32,
		SharedPerBlock: 48 << 10, SharedPerBlockOptin: 227 << 10, SharedPerSM: 228 << 10}
	got := *dev
	got.drv, got.handle = nil, 0
	if got != want {
		t.Errorf("device\n got %+v\nwant %+v", got, want)
	}
	if dev.Arch() != "sm_90" {
		t.Errorf("Arch = %q", dev.Arch())
	}
	if v, err := dev.Attribute(AttrMaxRegistersPerBlock); err != nil || v != 65536 {
		t.Errorf("Attribute(regs) = %d, %v", v, err)
	}
	if !strings.Contains(dev.String(), "Mock NVIDIA H200 (sm_90, 132 SMs, 227 KiB") {
		t.Errorf("String = %q", dev.String())
	}
	_, err = drv.Device(1)
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrInvalidDevice || e.Name != "CUDA_ERROR_INVALID_DEVICE" || e.Func != "cuDeviceGet" {
		t.Errorf("Device(1) error %v", err)
	}
}

func TestContextRelease(t *testing.T) {
	_, ctx, mock := openMock(t)
	base := mock.contextRetains()
	ctx2, err := ctx.Device().PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	if got := mock.contextRetains(); got != base+1 {
		t.Fatalf("retains after PrimaryContext = %d, want %d", got, base+1)
	}
	if err := ctx2.Release(); err != nil {
		t.Fatal(err)
	}
	if err := ctx2.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if got := mock.contextRetains(); got != base {
		t.Fatalf("retains after Release = %d, want %d", got, base)
	}
	if _, err := ctx2.Alloc(16); err == nil {
		t.Error("Alloc on a released context succeeded")
	}
}

// TestLoadModuleJITLog: a PTX compile failure returns the JIT error log in the
// error; a good module carries the info log.
func TestLoadModuleJITLog(t *testing.T) {
	_, ctx, mock := openMock(t)
	_, err := ctx.LoadModule([]byte(badPTX))
	if !errors.Is(err, ErrInvalidPTX) {
		t.Fatalf("LoadModule(bad) error %v, want ErrInvalidPTX", err)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not *Error", err)
	}
	if !strings.Contains(e.Log, "ptxas application ptx input, line 3; error   : Unknown symbol 'BAD'") {
		t.Errorf("Log = %q", e.Log)
	}
	msg := err.Error()
	for _, want := range []string{"cuModuleLoadDataEx", "CUDA_ERROR_INVALID_PTX (218)", "a PTX JIT compilation failed",
		"line 3; error", "Ptx assembly aborted"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error message lacks %q:\n%s", want, msg)
		}
	}
	if _, err := ctx.LoadModule(nil); err == nil {
		t.Error("LoadModule(nil) succeeded")
	}

	before := mock.liveModules()
	mod, err := ctx.LoadModule([]byte(goodPTX))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(mod.InfoLog, "mock compile done") {
		t.Errorf("InfoLog = %q", mod.InfoLog)
	}
	// A NUL-terminated image is passed as is.
	mod2, err := ctx.LoadModule([]byte(goodPTX + "\x00"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mod.Function("attn_fwd"); err != nil {
		t.Error(err)
	}
	_, err = mod.Function("attn_bwd")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "cuModuleGetFunction(attn_bwd)") {
		t.Errorf("Function(attn_bwd) error %v", err)
	}
	for _, m := range []*Module{mod, mod2} {
		if err := m.Unload(); err != nil {
			t.Error(err)
		}
		if err := m.Unload(); err != nil {
			t.Errorf("second Unload: %v", err)
		}
	}
	if got := mock.liveModules(); got != before {
		t.Errorf("live modules %d, want %d", got, before)
	}
	if _, err := mod.Function("attn_fwd"); err == nil {
		t.Error("Function on an unloaded module succeeded")
	}
}

// TestSharedMemoryAttribute: a launch above 48 KiB of dynamic shared memory
// needs cuFuncSetAttribute first, and the value reaches the driver.
func TestSharedMemoryAttribute(t *testing.T) {
	_, ctx, mock := openMock(t)
	fn := function(t, loadGood(t, ctx), "noargs")
	const big = 160 << 10
	err := Launch(fn, [3]uint32{1, 1, 1}, [3]uint32{128, 1, 1}, big)
	if !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("launch with %d shared bytes before opt-in: %v, want ErrInvalidValue", big, err)
	}
	if !strings.Contains(err.Error(), "cuLaunchKernel(noargs, grid [1 1 1], block [128 1 1], shared 163840)") {
		t.Errorf("launch error lacks the launch: %v", err)
	}
	if err := fn.SetMaxDynamicSharedMemory(big); err != nil {
		t.Fatal(err)
	}
	var attr, value int32
	mock.lastFuncAttribute(&attr, &value)
	if attr != 8 || value != big {
		t.Errorf("driver saw cuFuncSetAttribute(attr %d, value %d), want (8, %d)", attr, value, big)
	}
	if v, err := fn.Attribute(FuncMaxDynamicSharedSizeBytes); err != nil || v != big {
		t.Errorf("Attribute(max dynamic shared) = %d, %v", v, err)
	}
	if err := Launch(fn, [3]uint32{1, 1, 1}, [3]uint32{128, 1, 1}, big); err != nil {
		t.Fatalf("launch after opt-in: %v", err)
	}
	var l mockLaunch
	mock.lastLaunch(&l)
	if l.Shared != big {
		t.Errorf("launch shared = %d, want %d", l.Shared, big)
	}
	if err := fn.SetMaxDynamicSharedMemory(300 << 10); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("SetMaxDynamicSharedMemory(300 KiB) = %v, want ErrInvalidValue", err)
	}
	if v, err := fn.NumRegs(); err != nil || v != 40 {
		t.Errorf("NumRegs = %d, %v", v, err)
	}
	if v, err := fn.LocalBytes(); err != nil || v != 8 {
		t.Errorf("LocalBytes = %d, %v", v, err)
	}
}

// TestLaunchParams: grid, block, shared memory and every parameter value reach
// cuLaunchKernel, each read by the driver at its PTX size.
func TestLaunchParams(t *testing.T) {
	_, ctx, mock := openMock(t)
	fn := function(t, loadGood(t, ctx), "attn_fwd")
	q, err := ctx.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Free()
	o, err := ctx.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Free()
	var before mockLaunch
	n0 := mock.lastLaunch(&before)

	grid, block := [3]uint32{7, 3, 2}, [3]uint32{128, 2, 1}
	err = Launch(fn, grid, block, 4096,
		q, o, float32(0.125), uint32(7), int32(-3), DevicePtr(0xdead_beef_00), float64(2.5), int64(-9))
	if err != nil {
		t.Fatal(err)
	}
	var l mockLaunch
	if n := mock.lastLaunch(&l); n != n0+1 {
		t.Fatalf("launch count %d, want %d", n, n0+1)
	}
	if l.Func != uint64(fn.handle) || l.Stream != 0 || l.Grid != grid || l.Block != block || l.Shared != 4096 {
		t.Errorf("launch %+v", l)
	}
	wantSizes := []uint32{8, 8, 4, 4, 4, 8, 8, 8}
	wantValues := []uint64{uint64(q.Ptr()), uint64(o.Ptr()), uint64(math.Float32bits(0.125)), 7, 0xffff_fffd,
		0xdead_beef_00, math.Float64bits(2.5), uint64(0xffff_ffff_ffff_fff7)}
	if int(l.NParams) != len(wantSizes) {
		t.Fatalf("driver read %d params, want %d", l.NParams, len(wantSizes))
	}
	for i := range wantSizes {
		if l.Sizes[i] != wantSizes[i] || l.Values[i] != wantValues[i] {
			t.Errorf("param %d: size %d value %#x, want size %d value %#x", i, l.Sizes[i], l.Values[i], wantSizes[i], wantValues[i])
		}
	}

	// A kernel without parameters gets a nil kernelParams.
	if err := Launch(function(t, loadGood(t, ctx), "noargs"), [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0); err != nil {
		t.Errorf("launch noargs: %v", err)
	}

	// The low-level form with caller-built parameter pointers.
	a, b := uint64(q.Ptr()), uint64(o.Ptr())
	s, m, k := float32(1), uint32(2), int32(3)
	raw, d, e := uint64(4), float64(5), int64(6)
	params := []unsafe.Pointer{unsafe.Pointer(&a), unsafe.Pointer(&b), unsafe.Pointer(&s), unsafe.Pointer(&m),
		unsafe.Pointer(&k), unsafe.Pointer(&raw), unsafe.Pointer(&d), unsafe.Pointer(&e)}
	if err := fn.LaunchParams([3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, params); err != nil {
		t.Fatal(err)
	}
	mock.lastLaunch(&l)
	if l.Values[2] != uint64(math.Float32bits(1)) || l.Values[4] != 3 || l.Values[6] != math.Float64bits(5) {
		t.Errorf("LaunchParams values %#x", l.Values[:8])
	}

	// Bad arguments fail before the driver is called.
	freed, err := ctx.Alloc(8)
	if err != nil {
		t.Fatal(err)
	}
	freed.Free()
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{q, o, float32(1), 7}, "argument 3: unsupported type int"},
		{[]any{q, (*Buffer)(nil)}, "argument 1: nil or freed buffer"},
		{[]any{freed}, "argument 0: nil or freed buffer"},
	} {
		err := Launch(fn, grid, block, 0, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Launch%v: %v, want %q", c.args, err, c.want)
		}
	}
	if n := mock.lastLaunch(&l); n != n0+3 {
		t.Errorf("launch count %d, want %d", n, n0+3)
	}
	// The driver's own validation surfaces as an *Error.
	if err := Launch(fn, grid, [3]uint32{1024, 2, 1}, 0, q, o, float32(0), uint32(0), int32(0), DevicePtr(0), 0.0, int64(0)); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("launch with 2048 threads: %v, want ErrInvalidValue", err)
	}
}

// TestAxpy runs the mock's one emulated kernel: buffers, scalars and copies
// work together end to end.
func TestAxpy(t *testing.T) {
	_, ctx, _ := openMock(t)
	fn := function(t, loadGood(t, ctx), "mock_axpy")
	const n = 1000
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(1000-i)
	}
	dx, err := ctx.UploadFloat32(x)
	if err != nil {
		t.Fatal(err)
	}
	defer dx.Free()
	dy, err := ctx.UploadFloat32(y)
	if err != nil {
		t.Fatal(err)
	}
	defer dy.Free()
	if err := Launch(fn, [3]uint32{(n + 127) / 128, 1, 1}, [3]uint32{128, 1, 1}, 0, dx, dy, float32(2), uint32(n)); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := dy.ReadFloat32(got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if want := y[i] + 2*x[i]; got[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], want)
		}
	}
}

func TestMemoryRoundTrip(t *testing.T) {
	_, ctx, mock := openMock(t)
	base := mock.liveAllocations()

	f := []float32{1, -2.5, float32(math.Inf(1)), 3e-38, 0}
	bf, err := ctx.UploadFloat32(f)
	if err != nil {
		t.Fatal(err)
	}
	if bf.Len() != 4*len(f) || bf.Ptr() == 0 {
		t.Errorf("Len %d Ptr %#x", bf.Len(), bf.Ptr())
	}
	gf := make([]float32, len(f))
	if err := bf.ReadFloat32(gf); err != nil {
		t.Fatal(err)
	}
	for i := range f {
		if math.Float32bits(gf[i]) != math.Float32bits(f[i]) {
			t.Errorf("float32 %d: got %v want %v", i, gf[i], f[i])
		}
	}

	h := []uint16{0x3f80, 0xbf80, 0x7f80, 0xffff, 1}
	bh, err := ctx.UploadUint16(h)
	if err != nil {
		t.Fatal(err)
	}
	gh := make([]uint16, len(h))
	if err := bh.ReadUint16(gh); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(gh) != fmt.Sprint(h) {
		t.Errorf("uint16 round trip %v, want %v", gh, h)
	}

	bb, err := ctx.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := bb.Memset(0xab); err != nil {
		t.Fatal(err)
	}
	if err := bb.Write([]byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	gb := make([]byte, 16)
	if err := bb.Read(gb); err != nil {
		t.Fatal(err)
	}
	if want := "[1 2 3 171 171 171 171 171 171 171 171 171 171 171 171 171]"; fmt.Sprint(gb) != want {
		t.Errorf("bytes %v, want %s", gb, want)
	}
	if err := bb.Write(make([]byte, 17)); err == nil {
		t.Error("write past the end succeeded")
	}
	if err := bb.Read(make([]byte, 17)); err == nil {
		t.Error("read past the end succeeded")
	}
	if err := bb.Write(nil); err != nil {
		t.Errorf("empty write: %v", err)
	}
	if _, err := ctx.Alloc(0); err == nil {
		t.Error("Alloc(0) succeeded")
	}

	if got := mock.liveAllocations(); got != base+3 {
		t.Errorf("live allocations %d, want %d", got, base+3)
	}
	for _, b := range []*Buffer{bf, bh, bb} {
		if err := b.Free(); err != nil {
			t.Error(err)
		}
		if err := b.Free(); err != nil {
			t.Errorf("second Free: %v", err)
		}
	}
	if got := mock.liveAllocations(); got != base {
		t.Errorf("live allocations after Free %d, want %d", got, base)
	}
	if err := bb.Write([]byte{1}); err == nil {
		t.Error("write to a freed buffer succeeded")
	}

	mock.failNext("cuMemAlloc_v2", 2)
	if _, err := ctx.Alloc(8); !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory") {
		t.Errorf("injected OOM: %v", err)
	}
}

func TestEvents(t *testing.T) {
	_, ctx, mock := openMock(t)
	fn := function(t, loadGood(t, ctx), "noargs")
	base := mock.liveEvents()
	launched := false
	d, err := ctx.Time(func() error {
		launched = true
		return Launch(fn, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0)
	})
	if err != nil || !launched {
		t.Fatalf("Time: %v (work run: %v)", err, launched)
	}
	if d != 1500*time.Microsecond {
		t.Errorf("elapsed %v, want 1.5ms", d)
	}
	if got := mock.liveEvents(); got != base {
		t.Errorf("live events %d, want %d", got, base)
	}

	a, err := ctx.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	b, err := ctx.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Elapsed(b) // never recorded
	if !errors.Is(err, ErrInvalidHandle) || !strings.Contains(err.Error(), "cuEventElapsedTime: CUDA_ERROR_INVALID_HANDLE (400): invalid resource handle") {
		t.Errorf("Elapsed of unrecorded events: %v", err)
	}
	for _, e := range []*Event{a, b} {
		if err := e.Record(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if d, err := a.Elapsed(b); err != nil || d != 1500*time.Microsecond {
		t.Errorf("Elapsed = %v, %v", d, err)
	}
	a.Destroy()
	b.Destroy()
	b.Destroy()
	if err := a.Record(); err == nil {
		t.Error("Record of a destroyed event succeeded")
	}
	if got := mock.liveEvents(); got != base {
		t.Errorf("live events %d, want %d", got, base)
	}
}

// TestErrorNames: errors carry the driver's name and description of the
// CUresult, and fall back to the package's table where the driver has none.
func TestErrorNames(t *testing.T) {
	_, ctx, mock := openMock(t)
	mock.failNext("cuCtxSynchronize", 700)
	err := ctx.Synchronize()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Synchronize error %v is not *Error", err)
	}
	want := Error{Func: "cuCtxSynchronize", Code: ErrIllegalAddress, Name: "CUDA_ERROR_ILLEGAL_ADDRESS",
		Desc: "an illegal memory access was encountered"}
	if *e != want {
		t.Errorf("error %+v, want %+v", *e, want)
	}
	if got := err.Error(); got != "cuda: cuCtxSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered" {
		t.Errorf("message %q", got)
	}
	if !errors.Is(err, ErrIllegalAddress) || errors.Is(err, ErrLaunchFailed) {
		t.Error("errors.Is does not match the CUresult")
	}
	var r Result
	if !errors.As(err, &r) || r != 700 {
		t.Errorf("errors.As Result = %d", r)
	}

	// 719 is unknown to the mock's cuGetErrorName: the package's table names it.
	mock.failNext("cuLaunchKernel", 719)
	err = Launch(function(t, loadGood(t, ctx), "noargs"), [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0)
	if !errors.As(err, &e) || e.Name != "CUDA_ERROR_LAUNCH_FAILED" || e.Desc != "" {
		t.Errorf("unknown-to-driver error: %+v", err)
	}
	mock.failNext("cuCtxSynchronize", 12345)
	if err := ctx.Synchronize(); err == nil || !strings.Contains(err.Error(), "CUresult(12345) (12345)") {
		t.Errorf("unnamed error: %v", err)
	}
	if ErrInvalidPTX.Error() != "CUDA_ERROR_INVALID_PTX" || Result(218) != ErrInvalidPTX {
		t.Error("Result names")
	}
	if Unavailable(nil) || Unavailable(ErrInvalidPTX) || !Unavailable(fmt.Errorf("x: %w", ErrStubLibrary)) {
		t.Error("Unavailable")
	}
}

// TestThreading: the mock, like the driver, keeps the current context per OS
// thread. A raw call on a thread without one fails; the package's methods set
// it on whatever thread runs them, also from many goroutines at once.
func TestThreading(t *testing.T) {
	drv, ctx, _ := openMock(t)
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // the thread ends with the goroutine
		if r := drv.cuCtxSetCurrent(0); r != Success {
			done <- r
			return
		}
		if r := drv.cuCtxSynchronize(); r != ErrInvalidContext {
			done <- fmt.Errorf("raw cuCtxSynchronize without a context = %v, want CUDA_ERROR_INVALID_CONTEXT", r)
			return
		}
		done <- ctx.Synchronize()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				v := []float32{float32(g), float32(i)}
				b, err := ctx.UploadFloat32(v)
				if err != nil {
					errs <- err
					return
				}
				got := make([]float32, 2)
				err = b.ReadFloat32(got)
				b.Free()
				if err != nil || got[0] != v[0] || got[1] != v[1] {
					errs <- fmt.Errorf("goroutine %d: %v %v", g, got, err)
					return
				}
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMockLayout(t *testing.T) {
	if s := unsafe.Sizeof(mockLaunch{}); s != 816 {
		t.Fatalf("mockLaunch is %d bytes, mock_cuda.c's struct is 816", s)
	}
}
