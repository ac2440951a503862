package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	"github.com/attngen/attngen/verify/gpurun"
)

// TestBenchGPUUsage: bench -gpu's timing and check flags are refused with
// a reason before anything runs: fewer than 20 timed launches, the -gpu
// flags without -gpu, negative counts.
func TestBenchGPUUsage(t *testing.T) {
	ex := "../../spec/examples/causal.yaml"
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"-gpu", "-reps", "19"}, []string{"-reps 19", "at least 20"}},
		{[]string{"-warmup", "2"}, []string{"-warmup", "only -gpu"}},
		{[]string{"-sample", "2"}, []string{"-sample", "only -gpu"}},
		{[]string{"-seed", "2"}, []string{"-seed", "only -gpu"}},
		{[]string{"-gpu", "-warmup", "-1"}, []string{"-warmup -1"}},
		{[]string{"-gpu", "-sample", "-1"}, []string{"-sample -1"}},
	}
	for _, c := range cases {
		args := append([]string{"bench", "-spec", ex}, c.args...)
		out, errs, code := runCLI(args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr %q", c.args, code, errs)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, errs)
			}
		}
		if out != "" {
			t.Errorf("%v: measured before refusing: stdout %q", c.args, out)
		}
	}
	if _, errs, code := runCLI("verify", "-spec", ex, "-sample", "-1"); code != 2 || !strings.Contains(errs, "-sample -1") {
		t.Errorf("verify -sample -1: exit %d, stderr %q", code, errs)
	}
}

// TestBenchGPUMock runs bench -gpu on the mock CUDA driver
// (cuda/testdata/mock_cuda.c, built with gcc; skipped without gcc): 30
// timed launches after the warm-up by default, the median reported, and
// the output checked after timing, which fails (exit 1) because the mock
// runs no kernel: the NaN the output was filled with comes back.
func TestBenchGPUMock(t *testing.T) {
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
	out, errs, code := runCLI("bench", "-spec", "../../spec/examples/window.yaml", "-gpu", "-batch", "1", "-heads", "2", "-seq", "300", "-sample", "40", "-json")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (the output check fails on the mock); stdout %q stderr %q", code, out, errs)
	}
	var res []map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 {
		t.Fatalf("stdout is not one JSON result: %v\n%s", err, out)
	}
	r := res[0]
	if r["runs"] != 30.0 || r["warmup"] != 3.0 || r["stat"] != "median" || r["ms"] != 1.5 {
		t.Errorf("result %v: want 30 timed runs after 3 warm-ups, median 1.5 ms (the mock's events)", r)
	}
	if c, _ := r["check"].(string); !strings.HasPrefix(c, "FAIL") || !strings.Contains(r["inputs"].(string), "random normal bf16") {
		t.Errorf("check %q, inputs %q: want a failed check on random inputs", r["check"], r["inputs"])
	}
	if !strings.Contains(errs, "output of the timed launches is wrong") {
		t.Errorf("stderr does not say the output is wrong:\n%s", errs)
	}
}

// TestBenchInputs: the inputs are random normal values rounded to bf16,
// not a constant pattern.
func TestBenchInputs(t *testing.T) {
	x := benchInputs(rand.New(rand.NewPCG(1, 2)), 4096)
	distinct := map[float32]bool{}
	var sum, sq float64
	for _, v := range x {
		distinct[v] = true
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	mean, varc := sum/4096, sq/4096-(sum/4096)*(sum/4096)
	if len(distinct) < 200 || mean < -0.1 || mean > 0.1 || varc < 0.9 || varc > 1.1 {
		t.Errorf("%d distinct values, mean %.3f, variance %.3f: want many, about 0 and 1", len(distinct), mean, varc)
	}
}

// mockCUDA builds the mock CUDA driver (cuda/testdata/mock_cuda.c) and
// points the binding at it; skipped without linux and gcc.
func mockCUDA(t *testing.T) {
	t.Helper()
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
}

// TestBenchGPUPassMock runs bench -gpu -pass bwd and both on the mock CUDA
// driver: a bwd row times the dq and dk/dv kernels together (the mock's
// events: 1.5 ms a timed launch pair) over 30 runs after 3 warm-ups and
// counts 2.5x the forward's FLOPs; both gives a fwd row and then a bwd
// row. The mock runs no kernel, so the gradients come back as the NaN
// they were filled with and the check fails (exit 1), row printed.
func TestBenchGPUPassMock(t *testing.T) {
	mockCUDA(t)
	base := []string{"bench", "-spec", "../../spec/examples/window.yaml", "-gpu", "-batch", "1", "-heads", "2", "-seq", "200", "-sample", "16"}
	for _, c := range []struct {
		pass  string
		want  []string
		reps  string
		wantN float64
	}{
		{"bwd", []string{"bwd"}, "", 30},
		{"both", []string{"fwd", "bwd"}, "21", 21},
	} {
		args := append(append([]string{}, base...), "-pass", c.pass, "-json")
		if c.reps != "" {
			args = append(args, "-reps", c.reps)
		}
		out, errs, code := runCLI(args...)
		if code != 1 {
			t.Fatalf("-pass %s: exit %d, want 1 (the checks fail on the mock); stdout %q stderr %q", c.pass, code, out, errs)
		}
		var res []map[string]any
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != len(c.want) {
			t.Fatalf("-pass %s: stdout is not %d JSON rows: %v\n%s", c.pass, len(c.want), err, out)
		}
		kept := float64(verify.KeptPairs(spec.Pattern{Mask: spec.Window(1024), Causal: true}, 200, 200))
		for i, r := range res {
			if r["pass"] != c.want[i] || r["variant"] != "ptx-bf16" || r["runs"] != c.wantN || r["warmup"] != 3.0 || r["stat"] != "median" || r["ms"] != 1.5 {
				t.Errorf("-pass %s row %d: %v: want pass %s, %v timed runs after 3 warm-ups, median 1.5 ms", c.pass, i, r, c.want[i], c.wantN)
			}
			factor := 1.0
			if r["pass"] == "bwd" {
				factor = 2.5
			}
			want := factor * 4 * 2 * 128 * kept / 1.5e-3 / 1e12
			if tf, _ := r["tflops"].(float64); math.Abs(tf-want) > 1e-9*want || r["kept_pairs"] != kept {
				t.Errorf("-pass %s row %d: %v TFLOP/s, kept %v: want %v (%.1fx the forward's FLOPs of %v kept pairs in 1.5 ms)", c.pass, i, r["tflops"], r["kept_pairs"], want, factor, kept)
			}
			if ck, _ := r["check"].(string); !strings.HasPrefix(ck, "FAIL") {
				t.Errorf("-pass %s row %d: check %q, want FAIL (the mock writes nothing)", c.pass, i, ck)
			}
		}
		if !strings.Contains(errs, "gradients of the timed launches is wrong") {
			t.Errorf("-pass %s: stderr does not say the gradients are wrong:\n%s", c.pass, errs)
		}
		if c.pass == "both" && !strings.Contains(errs, "output of the timed launches is wrong") {
			t.Errorf("-pass both: stderr does not say the output is wrong:\n%s", errs)
		}
	}
	// text rows name the pass
	out, _, code := runCLI(append(append([]string{}, base...), "-pass", "both")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 2 || !strings.HasPrefix(lines[0], "bench window fwd on ") || !strings.HasPrefix(lines[1], "bench window bwd on ") ||
		!strings.Contains(lines[1], "dq and dk/dv kernels timed together") {
		t.Errorf("text rows (exit %d):\n%s", code, out)
	}
}

// TestBenchGPUPassNoDevice: without a CUDA driver, bench -gpu -pass bwd
// fails with an error saying so, before measuring anything.
func TestBenchGPUPassNoDevice(t *testing.T) {
	t.Setenv(cuda.LibraryEnv, filepath.Join(t.TempDir(), "no-libcuda.so.1"))
	for _, pass := range []string{"bwd", "both"} {
		out, errs, code := runCLI("bench", "-spec", "../../spec/examples/causal.yaml", "-gpu", "-pass", pass, "-seq", "128", "-heads", "1")
		if code != 1 || out != "" || !strings.Contains(strings.ToLower(errs), "cuda") {
			t.Errorf("-pass %s without a driver: exit %d, stdout %q, stderr %q; want exit 1 naming CUDA", pass, code, out, errs)
		}
	}
}

// TestGPURowFLOPs: a bwd row counts 2.5x the FLOPs of a fwd row of the
// same time, and the text line names the pass and what was checked.
func TestGPURowFLOPs(t *testing.T) {
	b := gpuBench{batch: 2, heads: 3, seq: 100, seed: 4}
	tm := gpurun.Timing{Warmup: 1, Times: []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}}
	f := gpuRow("fwd", "m", "dev", b, 64, 1000, tm, "ok")
	w := gpuRow("bwd", "m", "dev", b, 64, 1000, tm, "ok")
	want := 4.0 * 2 * 3 * 64 * 1000 / 2e-3 / 1e12
	if f["ms"] != 2.0 || f["ms_min"] != 1.0 || f["ms_max"] != 3.0 || f["runs"] != 3 || f["tflops"] != want {
		t.Errorf("fwd row %v: want median 2 ms of 3, %v TFLOP/s", f, want)
	}
	if w["tflops"] != 2.5*want || w["pass"] != "bwd" {
		t.Errorf("bwd row %v: want %v TFLOP/s", w, 2.5*want)
	}
	if s := gpuRowText(w); !strings.HasPrefix(s, "bench m bwd on dev: B=2 H=3 D=64 S=100 bf16, sm_80 kernels: median 2.000 ms of 3") || !strings.HasSuffix(s, "gradients (dq and dk/dv kernels timed together) ok") {
		t.Errorf("text %q", s)
	}
}

// TestBenchGPUSM90aMock: bench -gpu -sm 80,90a times both forward kernels
// on the same inputs, one row each (variant and target named), on the
// mock's 9.0 device; on an 8.0 device (MOCK_CUDA_CC=80) asking for sm_90a
// fails before timing anything, naming both capabilities, while the
// default (sm_80) still times; -sm without -gpu is a usage error.
func TestBenchGPUSM90aMock(t *testing.T) {
	mockCUDA(t)
	base := []string{"bench", "-spec", "../../spec/examples/window.yaml", "-gpu", "-batch", "1", "-heads", "2", "-seq", "256", "-sample", "16", "-json"}
	out, errs, code := runCLI(append(append([]string{}, base...), "-sm", "80,90a")...)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (the checks fail on the mock); stdout %q stderr %q", code, out, errs)
	}
	var res []map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 2 {
		t.Fatalf("stdout is not two JSON rows: %v\n%s", err, out)
	}
	for i, w := range [][2]string{{"ptx-bf16", "sm_80"}, {"ptx-sm90a-bf16", "sm_90a"}} {
		if r := res[i]; r["pass"] != "fwd" || r["variant"] != w[0] || r["target"] != w[1] || r["runs"] != 30.0 || r["ms"] != 1.5 {
			t.Errorf("row %d: %v, want a fwd row of %s (%s)", i, r, w[0], w[1])
		}
	}
	if !strings.Contains(errs, "timing the sm_90a bf16 kernel") {
		t.Errorf("stderr does not name the sm_90a timing:\n%s", errs)
	}

	t.Setenv("MOCK_CUDA_CC", "80")
	out, errs, code = runCLI(append(append([]string{}, base...), "-sm", "80,90a")...)
	if code != 1 || out != "" || !strings.Contains(errs, "an sm_90a kernel runs only on devices of compute capability 9.0; this one is 8.0") || strings.Contains(errs, "timing") {
		t.Errorf("-sm 90a on an 8.0 device: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	out, _, code = runCLI(base...)
	if err := json.Unmarshal([]byte(out), &res); code != 1 || err != nil || len(res) != 1 || res[0]["target"] != "sm_80" {
		t.Errorf("default on an 8.0 device: exit %d, %v\n%s", code, err, out)
	}
	if _, errs, code := runCLI("bench", "-spec", "../../spec/examples/window.yaml", "-sm", "90a"); code != 2 || !strings.Contains(errs, "only -gpu takes it") {
		t.Errorf("-sm without -gpu: exit %d, %s", code, errs)
	}
	if _, errs, code := runCLI(append(append([]string{}, base...), "-sm", "9x")...); code != 2 || !strings.Contains(errs, "-sm") {
		t.Errorf("-sm 9x: exit %d, %s", code, errs)
	}
}
