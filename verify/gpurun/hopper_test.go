package gpurun

import (
	"encoding/binary"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/cuda/cudamock"
	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	"github.com/ebitengine/purego"
)

// hopperKernel is an example spec's sm_90a forward kernel.
func hopperKernel(t *testing.T, file string, tg ptx.Target) (*spec.Spec, *ptx.Forward) {
	t.Helper()
	s, err := spec.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := gen.Compile(s, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ptx.GenerateForward(plan, ptx.Config{Target: tg})
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

// TestInterpHopper runs the sm_90a forward through gpurun's interpreter
// backend (tensor maps registered with the interpreter from the kernel's
// description) against the float64 reference: the identity layout with
// grouped heads and lengths off the tiles, the residue layout (lengths
// multiples of its stride), documents, a tree, and f16; a residue shape off the
// stride is refused with the reason.
func TestInterpHopper(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 82))
	cases := []struct {
		file string
		tg   ptx.Target
		sh   verify.Shape
		opts verify.NumericOptions
	}{
		{"causal", ptx.SM90a, verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 37, SeqK: 150}, verify.BF16Kernel},
		{"dilated", ptx.SM90a, verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 136, SeqK: 200}, verify.BF16Kernel},
		{"document", ptx.SM90a, verify.Shape{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 70, SeqK: 130}, verify.BF16Kernel},
		{"tree", ptx.SM90a, verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 90, SeqK: 150}, verify.BF16Kernel},
		{"window", ptx.Target{SM: 90, Elem: "f16", Accel: true}, verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 129, SeqK: 129}, verify.F16Kernel},
	}
	for _, c := range cases {
		s, f := hopperKernel(t, "../../spec/examples/"+c.file+".yaml", c.tg)
		// 256 consumer threads, and a producer warpgroup where the kernel has one
		if !f.Target.Accel || (f.Threads != 256 && f.Threads != 384) || f.TileQ != 128 {
			t.Fatalf("%s: not the sm_90a kernel: %s, %d threads, %d-row tiles", c.file, f.Target.Arch(), f.Threads, f.TileQ)
		}
		k, err := Interp(f)
		if err != nil {
			t.Fatal(err)
		}
		sh := c.sh
		sh.HeadDim = s.HeadDim
		rep, err := verify.CheckNumericWith(s.Pattern(), k.Run(), sh, r, c.opts)
		if err != nil {
			t.Fatalf("%s (%s): %v", c.file, c.tg.Name(), err)
		}
		t.Logf("%s (%s): %v", c.file, c.tg.Name(), rep)
	}
	s, f := hopperKernel(t, "../../spec/examples/dilated.yaml", ptx.SM90a)
	k, err := Interp(f)
	if err != nil {
		t.Fatal(err)
	}
	sh := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 100, SeqK: 200, HeadDim: s.HeadDim}
	nq, nkv, nl := sh.Sizes()
	err = k.Run()(make([]float32, nq), make([]float32, nl), make([]float32, nq), make([]float32, nkv), make([]float32, nkv), nil, sh)
	if err == nil || !strings.Contains(err.Error(), "multiples of the stride") {
		t.Errorf("seq_q 100 on stride 8: %v", err)
	}
}

// TestInterpHopperAgrees: on identical inputs the sm_90a and sm_80 kernels
// under the interpreter agree within the element type's rounding (the
// check attngen verify -gpu makes between the GPU and the interpreter).
func TestInterpHopperAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(83, 84))
	s, h := hopperKernel(t, "../../spec/examples/longformer.yaml", ptx.SM90a)
	_, a := hopperKernel(t, "../../spec/examples/longformer.yaml", ptx.SM80)
	kh, err := Interp(h)
	if err != nil {
		t.Fatal(err)
	}
	ka, err := Interp(a)
	if err != nil {
		t.Fatal(err)
	}
	sh := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 130, SeqK: 130, HeadDim: s.HeadDim}
	nq, nkv, nl := sh.Sizes()
	q, kk, v := randomBF16(r, nq), randomBF16(r, nkv), randomBF16(r, nkv)
	oh, lh, oa, la := make([]float32, nq), make([]float32, nl), make([]float32, nq), make([]float32, nl)
	if err := kh.Run()(oh, lh, q, kk, v, nil, sh); err != nil {
		t.Fatal(err)
	}
	if err := ka.Run()(oa, la, q, kk, v, nil, sh); err != nil {
		t.Fatal(err)
	}
	for i := range oa {
		if d := oh[i] - oa[i]; d > 1e-2*(1+abs32(oa[i])) || -d > 1e-2*(1+abs32(oa[i])) {
			t.Fatalf("out[%d]: sm_90a %v, sm_80 %v", i, oh[i], oa[i])
		}
	}
	for i := range la {
		if d := lh[i] - la[i]; d > 1e-4 || -d > 1e-4 {
			t.Fatalf("lse[%d]: sm_90a %v, sm_80 %v", i, lh[i], la[i])
		}
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// mockTensorMap mirrors the head of struct mock_tensormap in
// cuda/testdata/mock_cuda.c, for mock_last_tensormap.
type mockTensorMap struct {
	Global      uint64
	Dims        [5]uint64
	Strides     [5]uint64
	Box         [5]uint32
	ElemStrides [5]uint32
	DType       int32
	Rank        uint32
	Interleave  int32
	Swizzle     int32
	L2          int32
	OOB         int32
	Calls       uint64
}

// mockLaunch is the mock driver's launch record (cudamock.Launch).
type mockLaunch = cudamock.Launch

// TestHopperMockGPU runs the sm_90a kernel's GPU path against the mock
// driver (cuda/testdata/mock_cuda.c, built with gcc; skipped without it),
// which poses as a 9.0 device and, with MOCK_CUDA_CC=80, as an 8.0 one:
// on 9.0 the module loads with its dynamic shared memory, each tensor map
// is encoded with cuTensorMapEncodeTiled from the kernel's description (the
// tensor's address, dimensions, strides, box, 16-bit elements, 128-byte
// swizzle) and copied to device memory, and the launch passes the maps'
// addresses in tmap_q, tmap_k and tmap_v with the kernel's threads (384:
// the dilated example at head_dim 128 has a producer warpgroup); on 8.0 the
// sm_90a kernel is refused before anything is loaded, and the sm_80 one
// still binds.
func TestHopperMockGPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the mock libcuda is built for linux only")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found; cannot build the mock libcuda.so.1")
	}
	lib := filepath.Join(t.TempDir(), "libcuda.so.1")
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-O1", "-o", lib, filepath.Join("..", "..", "cuda", "testdata", "mock_cuda.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	t.Setenv(cuda.LibraryEnv, lib)
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	var lastLaunch func(*mockLaunch) int32
	var lastTensorMap func(*mockTensorMap) int32
	purego.RegisterLibFunc(&lastLaunch, h, "mock_last_launch")
	purego.RegisterLibFunc(&lastTensorMap, h, "mock_last_tensormap")
	drv, err := cuda.Open()
	if err != nil {
		t.Fatal(err)
	}
	open := func() *cuda.Context {
		dev, err := drv.Device(0)
		if err != nil {
			t.Fatal(err)
		}
		ctx, err := dev.PrimaryContext()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ctx.Release() })
		return ctx
	}
	s, f := hopperKernel(t, "../../spec/examples/dilated.yaml", ptx.SM90a) // head_dim 128, stride 8
	_, f80 := hopperKernel(t, "../../spec/examples/dilated.yaml", ptx.SM80)
	ctx := open()
	if d := ctx.Device(); d.Major != 9 || d.Minor != 0 {
		t.Fatalf("the mock is %d.%d, want 9.0", d.Major, d.Minor)
	}
	k, err := GPU(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	sh := verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 64, SeqK: 96, HeadDim: s.HeadDim}
	nq, nkv, nl := sh.Sizes()
	r := rand.New(rand.NewPCG(85, 86))
	q, kk, v := randomBF16(r, nq), randomBF16(r, nkv), randomBF16(r, nkv)
	var before mockTensorMap
	calls0 := lastTensorMap(&before)
	c, err := k.prepare(make([]float32, nq), make([]float32, nl), q, kk, v, nil, sh)
	if err != nil {
		t.Fatal(err)
	}
	defer k.b.reset()
	var tm mockTensorMap
	if n := lastTensorMap(&tm); n != calls0+3 {
		t.Fatalf("%d tensor maps encoded, want 3", n-calls0)
	}
	// the last map encoded is v's: rank 5, (D, class, group, head, batch)
	// of BHSD rows, the residue stride 8
	D, st := uint64(s.HeadDim), uint64(8)
	hkv, sk := uint64(sh.HeadsKV), uint64(sh.SeqK)
	switch {
	case tm.Rank != 5 || tm.DType != int32(cuda.TensorMapUint16) || tm.Swizzle != int32(cuda.TensorMapSwizzle128B):
		t.Errorf("tensor map of v: rank %d, type %d, swizzle %d", tm.Rank, tm.DType, tm.Swizzle)
	case tm.Dims != [5]uint64{D, st, sk / st, hkv, uint64(sh.Batch)} || tm.Strides != [5]uint64{2 * D, 2 * D * st, 2 * D * sk, 2 * D * sk * hkv}:
		t.Errorf("tensor map of v: dims %v, strides %v", tm.Dims, tm.Strides)
	case tm.Box != [5]uint32{64, 1, 64, 1, 1} || tm.ElemStrides != [5]uint32{1, 1, 1, 1, 1}:
		t.Errorf("tensor map of v: box %v, element strides %v", tm.Box, tm.ElemStrides)
	case tm.Interleave != 0 || tm.L2 != 0 || tm.OOB != 0:
		t.Errorf("tensor map of v: interleave %d, L2 %d, fill %d", tm.Interleave, tm.L2, tm.OOB)
	}
	// the launch: out, lse, then the three maps' addresses, each holding
	// the map the mock encoded (its global address and dimensions first)
	if err := launch(k.b, f.Name, c.l, c.args); err != nil {
		t.Fatal(err)
	}
	var l mockLaunch
	lastLaunch(&l)
	if l.Block != [3]uint32{384, 1, 1} || f.Threads != 384 || l.Shared != uint32(f.DynShared) || l.NParams != uint32(len(f.Params)) {
		t.Fatalf("launch: block %v, %d bytes shared, %d parameters", l.Block, l.Shared, l.NParams)
	}
	// the persistent grid: one CTA per work item (query tiles x heads x
	// batch x stride) up to one per multiprocessor; the last parameter is
	// the batch
	items := (sh.SeqQ/8 + 127) / 128 * sh.HeadsQ * sh.Batch * 8
	if sms := ctx.Device().SMs; !c.l.Persistent || c.l.Grid != [3]int{items, 1, 1} || l.Grid != [3]uint32{uint32(min(items, sms)), 1, 1} {
		t.Errorf("persistent %v, geometry's grid %v, launched %v; want %d items on %d multiprocessors", c.l.Persistent, c.l.Grid, l.Grid, items, sms)
	}
	if n := len(f.Params) - 1; f.Params[n].Name != "batch" || l.Sizes[n] != 4 || l.Values[n] != uint64(sh.Batch) {
		t.Errorf("last parameter %s = %d (%d bytes), want batch = %d", f.Params[n].Name, l.Values[n], l.Sizes[n], sh.Batch)
	}
	want := []struct {
		param      string
		seq, heads uint64
	}{{"tmap_q", uint64(sh.SeqQ), uint64(sh.HeadsQ)}, {"tmap_k", sk, hkv}, {"tmap_v", sk, hkv}}
	var globals []uint64
	for x, p := range f.Params {
		if !strings.HasPrefix(p.Name, "tmap_") {
			continue
		}
		w := want[len(globals)]
		if p.Name != w.param || l.Sizes[x] != 8 {
			t.Fatalf("parameter %d: %s of %d bytes, want %s", x, p.Name, l.Sizes[x], w.param)
		}
		h, err := k.b.readU16(l.Values[x], 64)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 128)
		for i, u := range h {
			binary.LittleEndian.PutUint16(b[2*i:], u)
		}
		g := binary.LittleEndian.Uint64(b)
		var dims [5]uint64
		for i := range dims {
			dims[i] = binary.LittleEndian.Uint64(b[8+8*i:])
		}
		if dims != [5]uint64{D, st, w.seq / st, w.heads, uint64(sh.Batch)} {
			t.Errorf("%s: the map in device memory has dimensions %v", p.Name, dims)
		}
		globals = append(globals, g)
	}
	if len(globals) != 3 || globals[0] == globals[1] || globals[1] == globals[2] || globals[0] == 0 {
		t.Fatalf("tensor maps of %#x: want q, k and v at three addresses", globals)
	}
	qh, err := k.b.readU16(globals[0], 4)
	if err != nil {
		t.Fatal(err)
	}
	if qh[0] != verify.BF16(q[0]) || qh[3] != verify.BF16(q[3]) {
		t.Errorf("the tensor map of q points at %#x, which holds %#x, not q", globals[0], qh)
	}

	// an 8.0 device: the sm_90a kernel is refused, the sm_80 kernel binds
	t.Setenv("MOCK_CUDA_CC", "80")
	ctx8 := open()
	if d := ctx8.Device(); d.Major != 8 || d.Minor != 0 {
		t.Fatalf("MOCK_CUDA_CC=80: the mock is %d.%d", d.Major, d.Minor)
	}
	if _, err := GPU(ctx8, f); err == nil || !strings.Contains(err.Error(), "runs only on devices of compute capability 9.0; this one is 8.0") {
		t.Errorf("sm_90a kernel on an 8.0 device: %v", err)
	}
	if _, err := GPU(ctx8, f80); err != nil {
		t.Errorf("sm_80 kernel on an 8.0 device: %v", err)
	}
}
