package cuda

import (
	"errors"
	"strings"
	"testing"
)

// The tests in this file use the real driver (libcuda.so.1, or
// $ATTNGEN_LIBCUDA) and skip where CUDA is unavailable, as on CI. They are
// the binding's GPU check: build with CGO_ENABLED=0 go test -c ./cuda and run
// the binary with -test.run Real -test.v on a GPU host.

// realPTX holds two kernels for sm_80 and later (the driver JIT-compiles the
// PTX for the device): axpy, y[i] += a*x[i]; and smemReverse, which writes one
// word per thread at the far end of a dynamic shared array of nwords words,
// syncs, and reads back the word another thread wrote, so it faults unless the
// whole array (more than 48 KiB) is really there.
const realPTX = `.version 7.0
.target sm_80
.address_size 64

.extern .shared .align 16 .b8 smem[];

.visible .entry axpy(
	.param .u64 axpy_x,
	.param .u64 axpy_y,
	.param .f32 axpy_a,
	.param .u32 axpy_n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<5>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [axpy_x];
	ld.param.u64 %rd2, [axpy_y];
	ld.param.f32 %f1, [axpy_a];
	ld.param.u32 %r1, [axpy_n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r2, %r2, %r3, %r4;
	setp.ge.u32 %p1, %r2, %r1;
	@%p1 bra DONE;
	cvta.to.global.u64 %rd3, %rd1;
	cvta.to.global.u64 %rd4, %rd2;
	mul.wide.u32 %rd5, %r2, 4;
	add.s64 %rd6, %rd3, %rd5;
	add.s64 %rd7, %rd4, %rd5;
	ld.global.f32 %f2, [%rd6];
	ld.global.f32 %f3, [%rd7];
	fma.rn.f32 %f3, %f1, %f2, %f3;
	st.global.f32 [%rd7], %f3;
DONE:
	ret;
}

.visible .entry smemReverse(
	.param .u64 smemReverse_out,
	.param .u32 smemReverse_nwords
)
{
	.reg .b32 %r<10>;
	.reg .b64 %rd<5>;

	ld.param.u64 %rd1, [smemReverse_out];
	ld.param.u32 %r1, [smemReverse_nwords];
	mov.u32 %r2, %tid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r9, smem;
	sub.s32 %r4, %r1, 1;
	sub.s32 %r4, %r4, %r2;
	shl.b32 %r4, %r4, 2;
	add.s32 %r4, %r9, %r4;
	st.shared.u32 [%r4], %r2;
	bar.sync 0;
	sub.s32 %r5, %r1, %r3;
	add.s32 %r5, %r5, %r2;
	shl.b32 %r5, %r5, 2;
	add.s32 %r5, %r9, %r5;
	ld.shared.u32 %r6, [%r5];
	cvta.to.global.u64 %rd2, %rd1;
	mul.wide.u32 %rd3, %r2, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r6;
	ret;
}
`

func openReal(t *testing.T) *Context {
	t.Helper()
	drv, err := Open()
	if Unavailable(err) {
		t.Skipf("no CUDA here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("driver %s, CUDA %d; device %v", drv.Path(), drv.Version(), dev)
	ctx, err := dev.PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Release() })
	return ctx
}

func TestRealBadPTX(t *testing.T) {
	ctx := openReal(t)
	_, err := ctx.LoadModule([]byte(badPTX))
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrInvalidPTX {
		t.Fatalf("LoadModule(bad PTX) = %v, want CUDA_ERROR_INVALID_PTX", err)
	}
	if !strings.Contains(e.Log, "error") {
		t.Errorf("JIT log %q has no error", e.Log)
	}
	t.Logf("%v", err)
}

func TestRealKernels(t *testing.T) {
	ctx := openReal(t)
	dev := ctx.Device()
	if dev.Major < 8 {
		t.Skipf("%v: the test PTX targets sm_80", dev)
	}
	mod, err := ctx.LoadModule([]byte(realPTX))
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	if mod.InfoLog != "" {
		t.Logf("JIT info log: %s", mod.InfoLog)
	}

	axpy, err := mod.Function("axpy")
	if err != nil {
		t.Fatal(err)
	}
	regs, _ := axpy.NumRegs()
	local, _ := axpy.LocalBytes()
	t.Logf("axpy: %d registers, %d bytes local", regs, local)
	const n = 100_003
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i%1000), float32(i%7)
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
	d, err := ctx.Time(func() error {
		return Launch(axpy, [3]uint32{(n + 255) / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, dx, dy, float32(0.5), uint32(n))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("axpy of %d floats: %v", n, d)
	got := make([]float32, n)
	if err := dy.ReadFloat32(got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if want := y[i] + 0.5*x[i]; got[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], want)
		}
	}

	rev, err := mod.Function("smemReverse")
	if err != nil {
		t.Fatal(err)
	}
	shared := 100 << 10
	if dev.SharedPerBlockOptin < shared {
		t.Skipf("%v has %d bytes of opt-in shared memory", dev, dev.SharedPerBlockOptin)
	}
	const threads = 256
	out, err := ctx.Alloc(4 * threads)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	nwords := uint32(shared / 4)
	err = Launch(rev, [3]uint32{1, 1, 1}, [3]uint32{threads, 1, 1}, uint32(shared), out, nwords)
	if !errors.Is(err, ErrInvalidValue) {
		t.Errorf("launch with %d bytes of shared memory before opt-in: %v, want CUDA_ERROR_INVALID_VALUE", shared, err)
	}
	if err := rev.SetMaxDynamicSharedMemory(dev.SharedPerBlockOptin); err != nil {
		t.Fatal(err)
	}
	if err := Launch(rev, [3]uint32{1, 1, 1}, [3]uint32{threads, 1, 1}, uint32(shared), out, nwords); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	words := make([]byte, 4*threads)
	if err := out.Read(words); err != nil {
		t.Fatal(err)
	}
	for i := range threads {
		v := uint32(words[4*i]) | uint32(words[4*i+1])<<8 | uint32(words[4*i+2])<<16 | uint32(words[4*i+3])<<24
		if v != uint32(threads-1-i) {
			t.Fatalf("smemReverse out[%d] = %d, want %d", i, v, threads-1-i)
		}
	}
}

// TestRealTensorMap encodes a tiled tensor map on the real driver (as the
// wgmma recorder does for its tensor copies), and one the driver must
// refuse (a box dimension over 256).
func TestRealTensorMap(t *testing.T) {
	ctx := openReal(t)
	if dev := ctx.Device(); dev.Major < 9 {
		t.Skipf("%v: tensor maps need sm_90", dev)
	}
	buf, err := ctx.Alloc(128 * 40)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	m := TensorMapTiled{DataType: TensorMapUint16, Global: buf.Ptr(), Dims: []uint64{64, 40}, Strides: []uint64{128},
		Box: []uint32{64, 32}, Swizzle: TensorMapSwizzle128B}
	tm, err := ctx.EncodeTensorMapTiled(m)
	if err != nil {
		t.Fatalf("EncodeTensorMapTiled: %v", err)
	}
	if tm == (TensorMap{}) {
		t.Error("the encoded map is all zeros")
	}
	m.Box = []uint32{64, 300}
	var e *Error
	if _, err := ctx.EncodeTensorMapTiled(m); !errors.As(err, &e) {
		t.Errorf("a box of 300 rows: %v, want the driver's error", err)
	}
}
