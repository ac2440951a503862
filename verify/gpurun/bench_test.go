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

func benchKernel(t *testing.T, p spec.Pattern, d int) *ptx.Forward {
	t.Helper()
	plan, err := gen.Compile(&spec.Spec{Name: "bench", Mask: p.Mask, Causal: p.Causal, HeadDim: d}, ptx.SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ptx.GenerateForward(plan, ptx.Config{SoftLg2: true})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func randomBF16(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	verify.RoundBF16(x)
	return x
}

// TestBenchInterp: Bench under the interpreter times each launch after the
// warm-up and returns the output of the timed launches, which passes the
// sampled check against the float64 reference.
func TestBenchInterp(t *testing.T) {
	p := spec.Pattern{Mask: spec.Block(40), Causal: true}
	k, err := Interp(benchKernel(t, p, 64))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	s := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 70, HeadDim: 64}
	nq, nkv, nl := s.Sizes()
	q, kk, v := randomBF16(r, nq), randomBF16(r, nkv), randomBF16(r, nkv)
	out, lse := make([]float32, nq), make([]float32, nl)
	tm, err := k.Bench(out, lse, q, kk, v, nil, s, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if tm.Warmup != 1 || len(tm.Times) != 3 || tm.Min() <= 0 || tm.Min() > tm.Median() || tm.Median() > tm.Max() {
		t.Fatalf("timing %+v: want 1 warm-up and 3 positive times, min <= median <= max", tm)
	}
	rows := verify.SampleRows(p, nil, s, 20, r)
	rep, err := verify.CheckOutput(p, nil, q, kk, v, s, out, lse, verify.BF16Kernel, rows)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	if _, err := k.Bench(out, lse, q, kk, v, nil, s, 0, 0); err == nil {
		t.Error("reps 0: no error")
	}
}

func TestTimingMedian(t *testing.T) {
	ms := func(xs ...int) Timing {
		var tm Timing
		for _, x := range xs {
			tm.Times = append(tm.Times, time.Duration(x)*time.Millisecond)
		}
		return tm
	}
	for _, c := range []struct {
		tm   Timing
		want time.Duration
	}{
		{ms(5, 1, 3), 3 * time.Millisecond},
		{ms(4, 1, 3, 2), 2500 * time.Microsecond},
		{ms(), 0},
	} {
		if got := c.tm.Median(); got != c.want {
			t.Errorf("median of %v: %v, want %v", c.tm.Times, got, c.want)
		}
	}
}

// TestBenchMockGPU runs Bench on the CUDA binding against the mock driver
// (cuda/testdata/mock_cuda.c, built with gcc; skipped without gcc), which
// launches nothing: every timed launch is timed with events (the mock's
// 1.5 ms), and the output the mock kernel never wrote comes back as NaN,
// so the check after timing fails.
func TestBenchMockGPU(t *testing.T) {
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
	p := spec.Pattern{Mask: spec.Full(), Causal: true}
	k, err := GPU(ctx, benchKernel(t, p, 128))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	s := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 130, SeqK: 130, HeadDim: 128}
	nq, nkv, nl := s.Sizes()
	q, kk, v := randomBF16(r, nq), randomBF16(r, nkv), randomBF16(r, nkv)
	out, lse := make([]float32, nq), make([]float32, nl)
	tm, err := k.Bench(out, lse, q, kk, v, nil, s, 2, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Times) != 20 || tm.Median() != 1500*time.Microsecond {
		t.Fatalf("timing %+v: want 20 launches of the mock's 1.5 ms", tm)
	}
	if !math.IsNaN(float64(out[0])) || !math.IsNaN(float64(lse[nl-1])) {
		t.Fatalf("out[0] = %v, lse[last] = %v: want the NaN fill (the mock kernel writes nothing)", out[0], lse[nl-1])
	}
	_, err = verify.CheckOutput(p, nil, q, kk, v, s, out, lse, verify.BF16Kernel, verify.SampleRows(p, nil, s, 16, r))
	if err == nil || !strings.Contains(err.Error(), "lse") && !strings.Contains(err.Error(), "not written") {
		t.Fatalf("check after timing of an output never written: %v", err)
	}
}
