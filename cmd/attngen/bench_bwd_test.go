package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// passRow is the part of a bench -json row the -pass tests read.
type passRow struct {
	Pass      *string  `json:"pass"`
	Variant   string   `json:"variant"`
	Batch     int      `json:"batch"`
	Heads     int      `json:"heads"`
	HeadsKV   int      `json:"heads_kv"`
	SeqQ      int      `json:"seq_q"`
	HeadDim   int      `json:"head_dim"`
	Ms        float64  `json:"ms"`
	GFlops    float64  `json:"gflops"`
	PctPeak   float64  `json:"pct_peak"`
	Peak      float64  `json:"peak_gflops"`
	GBps      float64  `json:"gbps"`
	KeptPairs int64    `json:"kept_pairs"`
	MeasHeads int      `json:"measured_heads"`
	AllocsOp  *float64 `json:"allocs_per_op"`
	SysMs     *float64 `json:"sys_ms"`
}

func passRows(t *testing.T, args ...string) []passRow {
	t.Helper()
	out, errs, code := runCLI(append([]string{"bench"}, args...)...)
	if code != 0 {
		t.Fatalf("bench %v: exit %d: %s", args, code, errs)
	}
	var rows []passRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("bench %v: %v:\n%s", args, err, out)
	}
	return rows
}

// TestBenchPass: bench -pass fwd|bwd|both prints the rows of that pass,
// each with its pass: every supported variant and naive, forward then
// backward. A backward row's gflops counts 2.5 x 4*B*H*D*kept_pairs per
// second (one batch of measured_heads heads for naive), its gbps the
// float32 q, out, dout, dq and lse of the query rows and k, v, dk and dv
// of the keys some query keeps (naive: no out, no lse); the backward
// kernels allocate nothing after warm-up. Without -pass the rows are the
// forward's.
func TestBenchPass(t *testing.T) {
	const S, Q, H, HKV, D = 150, 100, 4, 2, 64
	base := []string{"-spec", "../../spec/examples/hetero.yaml", "-seq", "150", "-seq-q", "100", "-heads", "4", "-heads-kv", "2",
		"-reps", "1", "-bw-mib", "4", "-json"}
	s, err := spec.ParseFile("../../spec/examples/hetero.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.HeadDim != D {
		t.Fatalf("hetero.yaml: head_dim %d, the test assumes %d", s.HeadDim, D)
	}
	kept := verify.KeptPairs(s.Pattern(), Q, S)
	read := keysRead(s.Pattern(), Q, S)
	var variants []string
	for _, tg := range cpu.Targets {
		if cpu.Supported(tg.Variant) {
			variants = append(variants, tg.Variant.String())
		}
	}
	variants = append(variants, "naive")
	for _, c := range []struct {
		flag  []string
		want  []string // passes in order
		extra string
	}{
		{nil, []string{"fwd"}, ""},
		{[]string{"-pass", "fwd"}, []string{"fwd"}, ""},
		{[]string{"-pass", "bwd"}, []string{"bwd"}, ""},
		{[]string{"-pass", "both"}, []string{"fwd", "bwd"}, ""},
	} {
		rows := passRows(t, append(base, c.flag...)...)
		var want []string
		for _, p := range c.want {
			for _, v := range variants {
				want = append(want, p+"/"+v)
			}
		}
		var got []string
		for _, r := range rows {
			if r.Pass == nil {
				t.Fatalf("%v: a row without pass: %+v", c.flag, r)
			}
			got = append(got, *r.Pass+"/"+r.Variant)
			if *r.Pass != "bwd" {
				continue
			}
			if r.KeptPairs != kept || r.SeqQ != Q || r.Heads != H || r.HeadsKV != HKV || r.HeadDim != D {
				t.Errorf("%v %s: kept_pairs %d seq_q %d heads %d heads_kv %d head_dim %d", c.flag, r.Variant, r.KeptPairs, r.SeqQ, r.Heads, r.HeadsKV, r.HeadDim)
			}
			if !finitePositive(r.Ms) || !finitePositive(r.GFlops) || !finitePositive(r.GBps) {
				t.Errorf("%v %s: ms %v gflops %v gbps %v", c.flag, r.Variant, r.Ms, r.GFlops, r.GBps)
				continue
			}
			sec := r.Ms / 1e3
			batch, hq, hkv, perRow, lse := r.Batch, H, HKV, 4, 1
			if r.Variant == "naive" {
				batch, hq, hkv, perRow, lse = 1, r.MeasHeads, (r.MeasHeads+H/HKV-1)/(H/HKV), 3, 0
			}
			if r.MeasHeads != hq {
				t.Errorf("%v %s: measured_heads %d, want %d", c.flag, r.Variant, r.MeasHeads, hq)
			}
			if want := 2.5 * 4 * float64(batch*hq*D) * float64(kept) / sec / 1e9; !near(r.GFlops, want) {
				t.Errorf("%v %s: backward gflops %v, want 2.5x the forward count %v", c.flag, r.Variant, r.GFlops, want)
			}
			if !near(r.PctPeak, 100*r.GFlops/r.Peak) {
				t.Errorf("%v %s: pct_peak %v, gflops %v of peak %v", c.flag, r.Variant, r.PctPeak, r.GFlops, r.Peak)
			}
			bytes := 4 * (perRow*batch*hq*Q*D + 4*batch*hkv*read*D + lse*batch*hq*Q)
			if want := float64(bytes) / sec / 1e9; !near(r.GBps, want) {
				t.Errorf("%v %s: backward gbps %v, want %v", c.flag, r.Variant, r.GBps, want)
			}
			if r.AllocsOp == nil || r.Variant != "naive" && r.Variant != "purego" && *r.AllocsOp != 0 {
				t.Errorf("%v %s: allocs_per_op %v, want 0", c.flag, r.Variant, r.AllocsOp)
			}
			// system time per call: measured on Linux, at most the call's time
			// on every thread
			if r.SysMs == nil || *r.SysMs < 0 || *r.SysMs > float64(runtime.NumCPU())*r.Ms*2 {
				t.Errorf("%v %s: sys_ms %v (ms %v)", c.flag, r.Variant, r.SysMs, r.Ms)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("bench %v: rows %v, want %v", c.flag, got, want)
		}
	}
}

// TestBenchPassErrors: an unknown -pass, and a CPU backward with what it
// does not run (16-bit inputs or outputs, a paged cache), are usage errors
// naming the flag (bench_gpu_test.go runs -gpu -pass bwd).
func TestBenchPassErrors(t *testing.T) {
	ex := "../../spec/examples/causal.yaml"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-pass", "fwdbwd"}, `-pass "fwdbwd"`},
		{[]string{"-pass", ""}, `-pass ""`},
		{[]string{"-pass", "bwd", "-dtype", "bf16"}, "-dtype bf16"},
		{[]string{"-pass", "both", "-dtype", "f16", "-out-dtype", "f16"}, "-dtype f16"},
		{[]string{"-pass", "bwd", "-paged", "16"}, "-paged"},
	} {
		args := append([]string{"bench", "-spec", ex, "-seq", "64", "-reps", "1", "-bw-mib", "4"}, c.args...)
		_, errs, code := runCLI(args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("attngen %s: exit %d, stderr %q; want exit 2 naming %s", strings.Join(args, " "), code, errs, c.want)
		}
	}
}

// TestBenchVariants: -variants times exactly the variants named, in the
// usual order, and an unknown name is a usage error naming it.
func TestBenchVariants(t *testing.T) {
	base := []string{"-spec", "../../spec/examples/hetero.yaml", "-seq", "150", "-heads", "2", "-reps", "1", "-bw-mib", "4", "-json", "-pass", "both"}
	var got []string
	for _, r := range passRows(t, append(base, "-variants", "naive,purego")...) {
		got = append(got, *r.Pass+"/"+r.Variant)
	}
	if want := "fwd/purego fwd/naive bwd/purego bwd/naive"; strings.Join(got, " ") != want {
		t.Errorf("rows %v, want %s", got, want)
	}
	args := append([]string{"bench"}, append(base, "-variants", "avx512,sse")...)
	_, errs, code := runCLI(args...)
	if code != 2 || !strings.Contains(errs, `"sse"`) {
		t.Errorf("attngen %s: exit %d, stderr %q; want exit 2 naming sse", strings.Join(args, " "), code, errs)
	}
}
