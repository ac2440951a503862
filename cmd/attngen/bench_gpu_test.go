package main

import (
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/attngen/attngen/cuda"
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
