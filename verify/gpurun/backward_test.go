package gpurun

import (
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// interpPair is a spec's forward and backward kernels for a target under
// the interpreter.
func interpPair(t *testing.T, s *spec.Spec, tg ptx.Target) (*Kernel, *BackwardKernel) {
	t.Helper()
	plan, err := gen.Compile(s, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := ptx.GenerateForward(plan, ptx.Config{Target: tg})
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	bw, err := ptx.GenerateBackward(plan, ptx.Config{Target: tg})
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	fk, err := Interp(fw)
	if err != nil {
		t.Fatal(err)
	}
	bk, err := InterpBackward(bw)
	if err != nil {
		t.Fatal(err)
	}
	return fk, bk
}

// TestInterpBackwardExamples runs every example spec's bf16 backward
// kernels under the interpreter, after its forward kernel, on small
// awkward shapes (one query, lengths off the tiles, fewer queries than
// keys, grouped heads, batches): dq, dk and dv within verify.ErrFactor of
// a straightforward bf16 backward's error against the float64 reference,
// exactly 0 where nothing is kept. Without -short, the dependencies of
// the gradients on dout are checked bit for bit on a small shape.
func TestInterpBackwardExamples(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	r := rand.New(rand.NewPCG(81, 82))
	for _, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fk, bk := interpPair(t, s, ptx.SM80)
		D := s.HeadDim
		shapes := []verify.Shape{
			{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 77, HeadDim: D},
			{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 130, HeadDim: D},
			{Batch: 2, HeadsQ: 2, HeadsKV: 2, SeqQ: 65, SeqK: 65, HeadDim: D, Scale: 0.3},
		}
		if testing.Short() {
			shapes = shapes[:2]
		}
		for _, sh := range shapes {
			rep, err := verify.CheckGradWith(s.Pattern(), fk.Run(), bk.Run(), sh, r, verify.GradBF16)
			if err != nil {
				t.Fatalf("%s: %v", filepath.Base(f), err)
			}
			t.Logf("%s: %v", filepath.Base(f), rep)
		}
		if !testing.Short() {
			dep := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 20, SeqK: 40, HeadDim: D}
			if err := verify.CheckGradDependencies(s.Pattern(), fk.Run(), bk.Run(), dep, r); err != nil {
				t.Fatalf("%s: %v", filepath.Base(f), err)
			}
		}
	}
}

// TestInterpBackwardF16 runs an f16 backward (head_dim 64 and 128) under
// the interpreter against the straightforward f16 backward.
func TestInterpBackwardF16(t *testing.T) {
	r := rand.New(rand.NewPCG(83, 84))
	for _, d := range []int{64, 128} {
		s := &spec.Spec{Name: "w", Mask: spec.Window(50), Causal: true, HeadDim: d}
		fk, bk := interpPair(t, s, ptx.Target{SM: 80, Elem: "f16"})
		sh := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 90, SeqK: 150, HeadDim: d}
		rep, err := verify.CheckGradWith(s.Pattern(), fk.Run(), bk.Run(), sh, r, verify.GradF16)
		if err != nil {
			t.Fatalf("d%d: %v", d, err)
		}
		t.Logf("d%d: %v", d, rep)
	}
}

// TestInterpBackwardCatchesWrongKernel: the check through the runner is
// sharp enough to reject the backward of a mask one key wider, and the
// runner refuses bad calls with an error.
func TestInterpBackwardCatchesWrongKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(85, 86))
	right := &spec.Spec{Name: "w40", Mask: spec.Window(40), Causal: true, HeadDim: 64}
	wrong := &spec.Spec{Name: "w41", Mask: spec.Window(41), Causal: true, HeadDim: 64}
	fk, _ := interpPair(t, right, ptx.SM80)
	_, bk := interpPair(t, wrong, ptx.SM80)
	sh := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 100, SeqK: 130, HeadDim: 64}
	if _, err := verify.CheckGradWith(right.Pattern(), fk.Run(), bk.Run(), sh, r, verify.GradBF16); err == nil || !strings.Contains(err.Error(), "error too large") {
		t.Fatalf("the backward of window 41 as window 40: %v, want an error too large", err)
	}

	_, bk = interpPair(t, right, ptx.SM80)
	nq, nkv, nl := sh.Sizes()
	buf := func(n int) []float32 { return make([]float32, n) }
	for _, c := range []struct {
		name string
		call func() error
		want string
	}{
		{"head dim", func() error {
			s := sh
			s.HeadDim = 128
			n1, n2, n3 := s.Sizes()
			return bk.Run()(buf(n1), buf(n2), buf(n2), buf(n1), buf(n1), buf(n2), buf(n2), buf(n1), buf(n3), nil, s, nil)
		}, "head dim 128"},
		{"short lse", func() error {
			return bk.Run()(buf(nq), buf(nkv), buf(nkv), buf(nq), buf(nq), buf(nkv), buf(nkv), buf(nq), buf(nl-1), nil, sh, nil)
		}, "lse has"},
		{"short dv", func() error {
			return bk.Run()(buf(nq), buf(nkv), buf(nkv-1), buf(nq), buf(nq), buf(nkv), buf(nkv), buf(nq), buf(nl), nil, sh, nil)
		}, "dv has"},
		{"bad shape", func() error {
			s := sh
			s.HeadsQ = 3
			s.HeadsKV = 2
			return bk.Run()(buf(nq), buf(nkv), buf(nkv), buf(nq), buf(nq), buf(nkv), buf(nkv), buf(nq), buf(nl), nil, s, nil)
		}, "multiple"},
		{"bench reps", func() error {
			_, err := bk.Bench(buf(nq), buf(nkv), buf(nkv), buf(nq), buf(nq), buf(nkv), buf(nkv), buf(nq), buf(nl), nil, sh, nil, 0, 0)
			return err
		}, "reps 0"},
	} {
		if err := c.call(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	if _, err := InterpBackward(nil); err == nil {
		t.Error("InterpBackward(nil): no error")
	}
}

// TestInterpBackwardDocs: document ids reach the backward kernels (a
// document mask's gradients need them) and too few are refused.
func TestInterpBackwardDocs(t *testing.T) {
	r := rand.New(rand.NewPCG(87, 88))
	s := &spec.Spec{Name: "d", Mask: spec.Intersect(spec.Document(), spec.Window(60)), Causal: true, HeadDim: 64}
	fk, bk := interpPair(t, s, ptx.SM80)
	sh := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 80, SeqK: 150, HeadDim: 64}
	rep, err := verify.CheckGradWith(s.Pattern(), fk.Run(), bk.Run(), sh, r, verify.GradBF16)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	nq, nkv, nl := sh.Sizes()
	buf := func(n int) []float32 { return make([]float32, n) }
	err = bk.Run()(buf(nq), buf(nkv), buf(nkv), buf(nq), buf(nq), buf(nkv), buf(nkv), buf(nq), buf(nl), make([]int32, 10), sh, nil)
	if err == nil || !strings.Contains(err.Error(), "document ids") {
		t.Errorf("10 document ids for 150 keys: %v", err)
	}
}

// TestInterpBackwardBench: Bench leaves the gradients of its last launch
// pair, the same as Run's, and times each pair.
func TestInterpBackwardBench(t *testing.T) {
	r := rand.New(rand.NewPCG(89, 90))
	s := &spec.Spec{Name: "c", Mask: spec.Full(), Causal: true, HeadDim: 64}
	fk, bk := interpPair(t, s, ptx.SM80)
	sh := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 70, SeqK: 70, HeadDim: 64}
	nq, nkv, nl := sh.Sizes()
	mk := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		verify.RoundBF16(x)
		return x
	}
	q, k, v, dout := mk(nq), mk(nkv), mk(nkv), mk(nq)
	out, lse := make([]float32, nq), make([]float32, nl)
	if err := fk.Run()(out, lse, q, k, v, nil, sh); err != nil {
		t.Fatal(err)
	}
	g := [3][]float32{make([]float32, nq), make([]float32, nkv), make([]float32, nkv)}
	if err := bk.Run()(g[0], g[1], g[2], dout, q, k, v, out, lse, nil, sh, nil); err != nil {
		t.Fatal(err)
	}
	b := [3][]float32{make([]float32, nq), make([]float32, nkv), make([]float32, nkv)}
	tm, err := bk.Bench(b[0], b[1], b[2], dout, q, k, v, out, lse, nil, sh, nil, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if tm.Warmup != 1 || len(tm.Times) != 2 || tm.Min() <= 0 {
		t.Errorf("timing %+v: want 1 warm-up and 2 timed pairs", tm)
	}
	for x := range g {
		for i := range g[x] {
			if math.Float32bits(g[x][i]) != math.Float32bits(b[x][i]) {
				t.Fatalf("gradient %d element %d: Run %v, Bench %v", x, i, g[x][i], b[x][i])
			}
		}
	}
}

// TestBackwardMockGPU binds a backward to the CUDA binding against the
// mock driver (cuda/testdata/mock_cuda.c, built with gcc; skipped without
// gcc): both entries of the module load (each allowed its dynamic shared
// memory above 48 KiB), Bench times each launch pair with events (the
// mock's 1.5 ms), and the gradients the mock never wrote come back as the
// NaN they were filled with, which the sampled check rejects; Run gives
// the same, and bad calls are refused before anything is allocated.
func TestBackwardMockGPU(t *testing.T) {
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
	drv, err := cuda.Open()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Release()
	s := &spec.Spec{Name: "c", Mask: spec.Full(), Causal: true, HeadDim: 128}
	plan, err := gen.Compile(s, ptx.SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	bw, err := ptx.GenerateBackward(plan, ptx.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// the mock refuses a launch above 48 KiB of dynamic shared memory
	// unless the function was allowed it
	if bw.DQShared <= 48*1024 || bw.DKVShared <= 48*1024 {
		t.Fatalf("shared memory %d and %d bytes: the test needs both kernels above 48 KiB", bw.DQShared, bw.DKVShared)
	}
	k, err := GPUBackward(ctx, bw)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(91, 92))
	sh := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 130, SeqK: 130, HeadDim: 128}
	nq, nkv, nl := sh.Sizes()
	q, kk, v, dout, out := randomBF16(r, nq), randomBF16(r, nkv), randomBF16(r, nkv), randomBF16(r, nq), randomBF16(r, nq)
	lse := make([]float32, nl)
	g := [3][]float32{make([]float32, nq), make([]float32, nkv), make([]float32, nkv)}
	tm, err := k.Bench(g[0], g[1], g[2], dout, q, kk, v, out, lse, nil, sh, nil, 2, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Times) != 20 || tm.Warmup != 2 || tm.Median() != 1500*time.Microsecond {
		t.Fatalf("timing %+v: want 20 timed launch pairs of the mock's 1.5 ms after 2 warm-ups", tm)
	}
	for x, grad := range g {
		if !math.IsNaN(float64(grad[0])) || !math.IsNaN(float64(grad[len(grad)-1])) {
			t.Fatalf("gradient %d: %v ... %v, want the NaN fill (the mock kernels write nothing)", x, grad[0], grad[len(grad)-1])
		}
	}
	p := s.Pattern()
	if _, err := verify.CheckGradSampled(p, nil, q, kk, v, dout, sh, g[0], g[1], g[2], nil, verify.GradBF16, verify.SampleGradRows(p, nil, sh, 16, r)); err == nil || !strings.Contains(err.Error(), "not written") {
		t.Fatalf("check of gradients never written: %v", err)
	}
	for _, grad := range g {
		clear(grad)
	}
	if err := k.Run()(g[0], g[1], g[2], dout, q, kk, v, out, lse, nil, sh, nil); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(g[1][5])) {
		t.Errorf("Run: dk[5] = %v, want the NaN fill", g[1][5])
	}
	if err := k.Run()(g[0], g[1], g[2], dout, q, kk, v, out, lse[:1], nil, sh, nil); err == nil || !strings.Contains(err.Error(), "lse has 1 elements") {
		t.Errorf("short lse: %v", err)
	}
	if _, err := GPUBackward(ctx, nil); err == nil {
		t.Error("GPUBackward(nil): no error")
	}
}

// TestInterpBackwardNonFinite: NaN and infinities at masked keys and
// values, or in a row's q and dout, reach no gradient through a masked
// pair (verify.CheckGradNonFinite; bit-identical rows elsewhere), for the
// example specs' kernels under the interpreter (three of them with
// -short), bf16 and f16.
func TestInterpBackwardNonFinite(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	if testing.Short() {
		files = []string{"../../spec/examples/document.yaml", "../../spec/examples/except.yaml", "../../spec/examples/dilated.yaml"}
	}
	r := rand.New(rand.NewPCG(93, 94))
	for n, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tg := ptx.SM80
		if n%2 == 1 {
			tg = ptx.Target{SM: 80, Elem: "f16"}
		}
		fk, bk := interpPair(t, s, tg)
		sh := verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 61, SeqK: 130, HeadDim: s.HeadDim}
		if err := verify.CheckGradNonFinite(s.Pattern(), fk.Run(), bk.Run(), sh, r, 2); err != nil {
			t.Errorf("%s %s: %v", filepath.Base(f), tg.Name(), err)
		}
	}
}
