package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// decodeRow is the part of a bench -json row these tests read.
type decodeRow struct {
	Variant   string   `json:"variant"`
	Seq       int      `json:"seq"`
	Batch     int      `json:"batch"`
	Heads     int      `json:"heads"`
	HeadDim   int      `json:"head_dim"`
	Threads   int      `json:"threads"`
	Ms        float64  `json:"ms"`
	GFlops    float64  `json:"gflops"`
	KeptPairs int64    `json:"kept_pairs"`
	MeasHeads int      `json:"measured_heads"`
	Dtype     *string  `json:"dtype"`
	OutDtype  *string  `json:"out_dtype"`
	SeqQ      *int     `json:"seq_q"`
	HeadsKV   *int     `json:"heads_kv"`
	GBps      *float64 `json:"gbps"`
	PeakGBps  *float64 `json:"peak_gbps"`
}

func benchRows(t *testing.T, args ...string) []decodeRow {
	t.Helper()
	out, errs, code := runCLI(append([]string{"bench"}, args...)...)
	if code != 0 {
		t.Fatalf("bench %v: exit %d: %s", args, code, errs)
	}
	var rows []decodeRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("bench %v: %v:\n%s", args, err, out)
	}
	if len(rows) == 0 {
		t.Fatalf("bench %v: no rows", args)
	}
	return rows
}

func finitePositive(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }

// near reports whether x and y agree to 1e-9 relative.
func near(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(math.Abs(x), math.Abs(y)) }

// TestBenchDecodeRows: a decoding shape (one query, grouped heads) prints
// rows with dtype, seq_q, heads_kv, gbps and peak_gbps, whose GFLOP/s count
// the pairs one query keeps and whose GB/s count q, every key and value of
// every key/value head (all kept by the last causal row), out and lse, at
// 2 bytes an input element for bf16 and f16.
//
// With -out-dtype (16-bit output) the kernels' out counts 2 bytes an
// element; with -paged the rows are those of the same call on a paged
// cache, for every dtype.
func TestBenchDecodeRows(t *testing.T) {
	for _, dt := range []string{"fp32", "bf16", "f16"} {
		benchDecodeRows(t, dt, "fp32")
	}
	benchDecodeRows(t, "bf16", "bf16", "-paged", "16")
	benchDecodeRows(t, "f16", "f16")
	benchDecodeRows(t, "f16", "fp32", "-paged", "7")
	benchDecodeRows(t, "fp32", "fp32", "-paged", "100")
}

func benchDecodeRows(t *testing.T, dt, odt string, extra ...string) {
	const S, Q, H, HKV, D = 256, 1, 4, 2, 128
	rows := benchRows(t, append([]string{"-spec", "../../spec/examples/causal.yaml", "-seq", "256", "-seq-q", "1", "-heads", "4", "-heads-kv", "2",
		"-reps", "1", "-bw-mib", "4", "-dtype", dt, "-out-dtype", odt, "-json"}, extra...)...)
	s, err := spec.ParseFile("../../spec/examples/causal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kept := verify.KeptPairs(s.Pattern(), Q, S)
	if kept != S {
		t.Fatalf("KeptPairs(causal, 1, %d) = %d, want %d", S, kept, S)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Variant] = true
		if r.Dtype == nil || r.OutDtype == nil || r.SeqQ == nil || r.HeadsKV == nil || r.GBps == nil || r.PeakGBps == nil {
			t.Fatalf("%s: a new field is missing: %+v", r.Variant, r)
		}
		if *r.OutDtype != odt {
			t.Errorf("%s: out_dtype %q, want %q", r.Variant, *r.OutDtype, odt)
		}
		if *r.Dtype != dt || *r.SeqQ != Q || *r.HeadsKV != HKV || r.Seq != S || r.Heads != H || r.HeadDim != D {
			t.Errorf("%s: dtype %q seq_q %d heads_kv %d seq %d heads %d head_dim %d", r.Variant, *r.Dtype, *r.SeqQ, *r.HeadsKV, r.Seq, r.Heads, r.HeadDim)
		}
		if r.KeptPairs != kept {
			t.Errorf("%s: kept_pairs %d, want %d", r.Variant, r.KeptPairs, kept)
		}
		if !finitePositive(r.Ms) || !finitePositive(r.GFlops) || !finitePositive(*r.GBps) || !finitePositive(*r.PeakGBps) {
			t.Errorf("%s: ms %v gflops %v gbps %v peak_gbps %v", r.Variant, r.Ms, r.GFlops, *r.GBps, *r.PeakGBps)
			continue
		}
		sec := r.Ms / 1e3
		// The kernels run every batch and head; naive runs one batch of
		// measured_heads query heads and the key/value heads they read.
		batch, hq, hkv, lse := r.Batch, H, HKV, 1
		if r.Variant == "naive" {
			batch, hq, hkv, lse = 1, r.MeasHeads, (r.MeasHeads+H/HKV-1)/(H/HKV), 0
		}
		if r.MeasHeads != hq {
			t.Errorf("%s: measured_heads %d, want %d", r.Variant, r.MeasHeads, hq)
		}
		if want := 4 * float64(batch*hq*D) * float64(kept) / sec / 1e9; !near(r.GFlops, want) {
			t.Errorf("%s: gflops %v, want %v", r.Variant, r.GFlops, want)
		}
		es, os := 4, 4 // bytes of an input and an output element: 2 for the 16-bit kernels, not naive
		if dt != "fp32" && r.Variant != "naive" {
			es = 2
		}
		if odt != "fp32" && r.Variant != "naive" {
			os = 2
		}
		bytes := float64(es*(batch*hq*Q*D+2*batch*hkv*S*D) + os*batch*hq*Q*D + 4*lse*batch*hq*Q)
		if want := bytes / sec / 1e9; !near(*r.GBps, want) {
			t.Errorf("%s: gbps %v, want %v", r.Variant, *r.GBps, want)
		}
	}
	for _, v := range []string{"purego", "naive"} {
		if !seen[v] {
			t.Errorf("no %s row", v)
		}
	}
}

// TestBenchNaiveBatch: naive runs one batch, so its GFLOP/s must not count
// the pairs of the other batches.
func TestBenchNaiveBatch(t *testing.T) {
	rows := benchRows(t, "-spec", "../../spec/examples/window.yaml", "-seq", "64", "-heads", "1", "-batch", "3",
		"-reps", "1", "-bw-mib", "4", "-json")
	for _, r := range rows {
		if r.Variant != "naive" {
			continue
		}
		want := 4 * float64(r.MeasHeads*r.HeadDim) * float64(r.KeptPairs) / (r.Ms / 1e3) / 1e9
		if !near(r.GFlops, want) {
			t.Errorf("naive with -batch 3: gflops %v, want %v (one batch of %d heads)", r.GFlops, want, r.MeasHeads)
		}
		return
	}
	t.Error("no naive row")
}

// TestBenchDecodeUsage: the new flags' bad values are usage errors (exit 2)
// that say what is wrong, before anything is measured.
func TestBenchDecodeUsage(t *testing.T) {
	ex := "../../spec/examples/causal.yaml"
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"-dtype", "int8"}, []string{`-dtype "int8"`, "fp32, bf16 or f16"}},
		{[]string{"-paged", "0"}, []string{"-paged 0", "positions a page"}},
		{[]string{"-out-dtype", "bf16"}, []string{`-out-dtype "bf16"`, "-dtype bf16 or f16"}},
		{[]string{"-dtype", "f16", "-out-dtype", "bf16"}, []string{`-out-dtype "bf16"`, "fp32 or f16"}},
		{[]string{"-dtype", "bf16", "-out-dtype", "int8"}, []string{`-out-dtype "int8"`, "fp32 or bf16"}},
		{[]string{"-gpu", "-out-dtype", "fp32"}, []string{"-out-dtype", "-gpu"}},
		{[]string{"-seq", "256", "-seq-q", "0"}, []string{"-seq-q 0", "between 1 and -seq 256"}},
		{[]string{"-seq", "256", "-seq-q", "257"}, []string{"-seq-q 257", "between 1 and -seq 256"}},
		{[]string{"-seq", "256", "-seq-q", "-3"}, []string{"-seq-q -3", "between 1 and -seq 256"}},
		{[]string{"-heads", "4", "-heads-kv", "3"}, []string{"-heads 4", "-heads-kv 3", "multiple"}},
		{[]string{"-heads", "4", "-heads-kv", "8"}, []string{"-heads 4", "-heads-kv 8", "multiple"}},
		{[]string{"-heads", "4", "-heads-kv", "0"}, []string{"-heads-kv", "at least 1"}},
		{[]string{"-gpu", "-seq-q", "1"}, []string{"-gpu", "-seq-q"}},
		{[]string{"-gpu", "-heads", "4", "-heads-kv", "2"}, []string{"-gpu", "-heads-kv"}},
		{[]string{"-bw-mib", "0"}, []string{"-bw-mib"}},
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
		if out != "" || strings.Contains(errs, "bench causal:") {
			t.Errorf("%v: measured before refusing: stdout %q stderr %q", c.args, out, errs)
		}
	}
}

// TestBenchMemoryDecodeShape: the memory check sizes q and out by -seq-q
// and the query heads, and k, v and their tiles by -seq and -heads-kv: a
// long cache for one key/value head fits where the same cache for every
// query head does not.
func TestBenchMemoryDecodeShape(t *testing.T) {
	limit, _ := memoryLimit()
	const D, H = 128, 64
	// k, v and their two tile copies of one head take about half the limit.
	seq := int(limit / 2 / (4 * 4 * D))
	if err := benchMemory(1, H, 1, 1, seq, D, 4, 0, false, 0); err != nil {
		t.Errorf("one query, one key/value head, seq %d: %v", seq, err)
	}
	err := benchMemory(1, H, H, 1, seq, D, 4, 0, false, 0)
	if err == nil || !strings.Contains(err.Error(), "-heads-kv 64") {
		t.Errorf("one query, %d key/value heads, seq %d: %v, want a refusal naming -heads-kv", H, seq, err)
	}
	if err := benchMemory(1, H, H, seq, seq, D, 4, 0, false, 0); err == nil {
		t.Errorf("prefill, %d heads, seq %d: no refusal", H, seq)
	}
	// The probe's buffer counts too.
	if err := benchMemory(1, H, 1, 1, seq, D, 4, 0, false, limit); err == nil || !strings.Contains(err.Error(), "read-bandwidth probe") {
		t.Errorf("with a probe buffer as large as the limit: %v", err)
	}
}
