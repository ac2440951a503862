package wgmmarec

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/attngen/attngen/cuda"
)

// RecordEnv names the directory TestRecordWgmma writes to.
const RecordEnv = "ATTNGEN_RECORD"

// RehearseEnv, set to 1 with RecordEnv, makes TestRecordWgmma record with
// the interpreter instead of a GPU: a rehearsal of the GPU step's plumbing
// (scripts/gpu-check.sh record-wgmma) on a machine without one.
const RehearseEnv = "ATTNGEN_RECORD_INTERP"

// TestRecordWgmma records wgmma.json.gz and tensorcopy.json.gz on a GPU
// into $ATTNGEN_RECORD and replays them through the interpreter, logging
// the differences (which are the recording's result, not a failure of
// this test). It skips without $ATTNGEN_RECORD or without a GPU.
func TestRecordWgmma(t *testing.T) {
	dir := os.Getenv(RecordEnv)
	if dir == "" {
		t.Skip("set " + RecordEnv + "=/abs/dir to record on a GPU")
	}
	if !filepath.IsAbs(dir) {
		t.Fatalf("%s=%s: want an absolute directory", RecordEnv, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getenv(RehearseEnv) == "1" {
		t.Logf("%s=1: recording with the interpreter (a rehearsal, not a golden)", RehearseEnv)
		recordAll(t, NewInterp(), dir)
		return
	}
	g, err := OpenGPU()
	if cuda.Unavailable(err) {
		t.Skipf("no GPU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if a := g.Arch(); a != "sm_90" {
		t.Fatalf("device is %s: the kernels are sm_90a PTX, which only sm_90 (H100/H200) runs", a)
	}
	t.Logf("recording on %s", g.Name())
	recordAll(t, g, dir)
}

// recordAll records both files with b into dir, reads them back and
// replays them, returning the reports. A recording that fails part way is
// written as wgmma-partial.json.gz or tensorcopy-partial.json.gz (for the
// record, not to commit) and fails the test; the other recording is still
// made.
func recordAll(t *testing.T, b Backend, dir string) (*Report, *Report) {
	t.Helper()
	t0 := time.Now()
	save := func(name, partial string, v any, n int, err error) bool {
		t.Helper()
		if err != nil {
			t.Errorf("recording %s failed after %d cases: %v", name, n, err)
			if werr := WriteFile(filepath.Join(dir, partial), v); werr != nil {
				t.Error(werr)
			}
			return false
		}
		if err := WriteFile(filepath.Join(dir, name), v); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d cases recorded (%v so far)", name, n, time.Since(t0).Round(time.Millisecond))
		return true
	}
	wf, err := RecordWgmma(b)
	wok := save(WgmmaFileName, "wgmma-partial.json.gz", wf, len(wf.Cases), err)
	cf, err := RecordCopy(b)
	cok := save(CopyFileName, "tensorcopy-partial.json.gz", cf, len(cf.Cases), err)

	wr, cr := &Report{}, &Report{}
	summary := "recorded on " + b.Name() + "\n"
	if wok {
		var back WgmmaFile
		if err := ReadFile(filepath.Join(dir, WgmmaFileName), &back); err != nil {
			t.Fatal(err)
		}
		if wr, err = ReplayWgmma(&back); err != nil {
			t.Fatalf("replaying wgmma: %v", err)
		}
		summary += "wgmma replay through the interpreter: " + wr.String() + "\n"
	} else {
		summary += "wgmma: the recording failed (see the test log)\n"
	}
	if cok {
		var back CopyFile
		if err := ReadFile(filepath.Join(dir, CopyFileName), &back); err != nil {
			t.Fatal(err)
		}
		if cr, err = ReplayCopy(&back); err != nil {
			t.Fatalf("replaying the tensor copy: %v", err)
		}
		summary += "tensor copy replay through the interpreter: " + cr.String() + "\n"
	} else {
		summary += "tensor copy: the recording failed (see the test log)\n"
	}
	t.Log(summary)
	if err := os.WriteFile(filepath.Join(dir, "wgmma-replay.txt"), []byte(summary), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded and replayed in %v", time.Since(t0).Round(time.Millisecond))
	return wr, cr
}

// TestInterpRecordReplay records with the interpreter as the device into a
// temporary directory and replays the files, which must match bit for bit;
// then it perturbs one recorded bit at a time (an output, an input, the
// recorded image address, a copied word) and the replay must catch each.
func TestInterpRecordReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("records every case under the interpreter")
	}
	dir := t.TempDir()
	wr, cr := recordAll(t, NewInterp(), dir)
	if !wr.OK() || !cr.OK() {
		t.Fatalf("the interpreter disagrees with its own recording:\n%s\n%s", wr, cr)
	}
	if wr.Checked != len(specs()) || wr.Outputs == 0 || cr.Checked != len(copyCases()) {
		t.Fatalf("replayed %d wgmma cases (%d outputs) and %d copies; want %d and %d", wr.Checked, wr.Outputs, cr.Checked, len(specs()), len(copyCases()))
	}

	load := func() *WgmmaFile {
		var f WgmmaFile
		if err := ReadFile(filepath.Join(dir, WgmmaFileName), &f); err != nil {
			t.Fatal(err)
		}
		return &f
	}
	// pick a layout case with N = 256 and one with scale-d = 1 and an exact family
	f := load()
	var big, exact int = -1, -1
	for i, c := range f.Cases {
		if c.N == 256 && big < 0 {
			big = i
		}
		if c.Family == string(famInt) && c.ScaleD == 1 && c.A == ARegs && exact < 0 {
			exact = i
		}
	}
	for _, p := range []struct {
		name   string
		mutate func(f *WgmmaFile)
		check  func(r *Report) bool
	}{
		{"one output bit", func(f *WgmmaFile) { f.Cases[big].D[777] ^= 1 }, func(r *Report) bool {
			return r.Differ == 1 && len(r.Cases) == 1 && r.Cases[0].Name == f.Cases[big].Name && r.Classes["1 ulp"] == 1
		}},
		{"an output's sign", func(f *WgmmaFile) { f.Cases[3].D[5] ^= 1 << 31 }, func(r *Report) bool { return r.Differ == 1 }},
		{"an input accumulator", func(f *WgmmaFile) { f.Cases[exact].C[100] ^= 1 << 30 }, func(r *Report) bool { return r.Differ == 1 }},
		{"an A register", func(f *WgmmaFile) { f.Cases[exact].ARegs[9] ^= 0x40004000 }, func(r *Report) bool { return r.Differ > 0 }},
		{"the image's recorded address", func(f *WgmmaFile) { f.Cases[0].Base = 512 }, func(r *Report) bool { return !r.OK() && r.Differ == 0 }},
		{"a recorded descriptor", func(f *WgmmaFile) { f.Cases[big].DescBUsed = hex64(1 << 62) }, func(r *Report) bool { return !r.OK() }},
	} {
		f := load()
		p.mutate(f)
		r, err := ReplayWgmma(f)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if r.OK() || !p.check(r) {
			t.Errorf("perturbing %s: replay reported\n%s", p.name, r)
		} else {
			t.Logf("perturbing %s: %s", p.name, strings.SplitN(r.String(), "\n", 2)[0])
		}
	}
	var c CopyFile
	if err := ReadFile(filepath.Join(dir, CopyFileName), &c); err != nil {
		t.Fatal(err)
	}
	c.Cases[2].Out[40] ^= 1 << 7
	r, err := ReplayCopy(&c)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || r.Differ != 1 {
		t.Errorf("perturbing a copied word: replay reported\n%s", r)
	}
}

// TestCases checks the case list: names unique, every listed family and
// layout present, kernels and images within what the kernels accept.
func TestCases(t *testing.T) {
	names := map[string]bool{}
	seen := map[string]bool{}
	for _, s := range specs() {
		if names[s.name] {
			t.Errorf("duplicate case %s", s.name)
		}
		names[s.name] = true
		c := s.build()
		if err := c.check(); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
		if n := 4*len(c.Image) + 1024; n > maxDynShared || 4*len(c.Image) > padTo {
			t.Errorf("%s: %d bytes of shared memory", s.name, n)
		}
		seen[c.Type+"/"+c.A+"/"+c.Swizzle+"/"+map[bool]string{false: "bK", true: "bMN"}[c.BMN]+"/"+string(rune('0'+c.N/64))] = true
		seen[c.Family] = true
		if c.NegA || c.NegB {
			seen["neg"] = true
		}
		if c.ScaleD == 0 {
			seen["scale0/"+c.Family] = true
		}
	}
	for _, a := range []string{ADescK, ADescMN, ARegs} {
		for _, sw := range []string{"none", "32B", "64B", "128B"} {
			for _, b := range []string{"bK", "bMN"} {
				for _, n := range []string{"1", "4"} {
					if n == "4" && a == ADescMN {
						continue // A is the same operand at N = 256
					}
					if k := "bf16/" + a + "/" + sw + "/" + b + "/" + n; !seen[k] {
						t.Errorf("no case %s", k)
					}
				}
			}
		}
	}
	for _, k := range []string{"int", "normal", "spread", "bigc", "special", "subnormal", "negzero", "mixzero", "neg", "scale0/negzero", "scale0/special"} {
		if !seen[k] {
			t.Errorf("no %s case", k)
		}
	}
}

// TestPtxas12 assembles the recording kernels with ptxas 12.4 for sm_90a
// ($ATTNGEN_PTXAS12, as emit/ptx's sm_90a tests): no error, no warning.
func TestPtxas12(t *testing.T) {
	p := os.Getenv("ATTNGEN_PTXAS12")
	if p == "" {
		t.Skip("no ptxas 12: set ATTNGEN_PTXAS12 (scripts/fetch-ptxas.sh 12.4)")
	}
	ver, err := exec.Command(p, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", p, err, ver)
	}
	if m := regexp.MustCompile(`release (\d+)\.`).FindSubmatch(ver); m == nil || string(m[1]) < "12" || len(m[1]) < 2 {
		t.Fatalf("%s is not ptxas 12 or later:\n%s", p, ver)
	}
	wg, err := WgmmaModule(Variants())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, m := range []struct{ name, src string }{{"wgmma.ptx", wg}, {"tensorcopy.ptx", CopyModule()}} {
		in := filepath.Join(dir, m.name)
		if err := os.WriteFile(in, []byte(m.src), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(p, "-v", "--gpu-name", "sm_90a", in, "-o", filepath.Join(dir, m.name+".cubin")).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) || strings.Contains(strings.ToLower(string(out)), "warning") || strings.Contains(strings.ToLower(string(out)), "error") {
			t.Errorf("ptxas %s for sm_90a: %v\n%s", m.name, err, out)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		entries := strings.Count(string(out), "Compiling entry function")
		if want := len(entryNames(m.src)); entries != want {
			t.Errorf("ptxas compiled %d entries of %s, want %d", entries, m.name, want)
		}
		if strings.Contains(string(out), "bytes spill") && !strings.Contains(string(out), "0 bytes spill stores, 0 bytes spill loads") {
			t.Errorf("%s spills:\n%s", m.name, out)
		}
		t.Logf("%s: %d kernels assembled for sm_90a", m.name, entries)
	}
}

// failing is the interpreter with a launch that fails from the nth on (a
// device that faults part way).
type failing struct {
	*Interp
	n int
}

func (f *failing) Launch(k string, dyn int, args ...any) error {
	if f.n--; f.n < 0 {
		return errors.New("simulated launch failure")
	}
	return f.Interp.Launch(k, dyn, args...)
}

// TestPartialRecording: a device that fails part way still yields the cases
// recorded before the failure, with the error.
func TestPartialRecording(t *testing.T) {
	f, err := RecordWgmma(&failing{NewInterp(), 5})
	if err == nil || !strings.Contains(err.Error(), "simulated") || f == nil || len(f.Cases) != 5 || f.Cases[4].D == nil {
		t.Errorf("wgmma: %v, %d cases", err, len(f.Cases))
	}
	c, err := RecordCopy(&failing{NewInterp(), 2})
	if err == nil || c == nil || len(c.Cases) != 2 {
		t.Errorf("tensor copy: %v, %d cases", err, len(c.Cases))
	}
}
