package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
	"github.com/attngen/attngen/verify"
	"github.com/attngen/attngen/verify/gpurun"
)

// TestVerifyPassesCorrectSpecs: attngen verify exits 0 on correct kernels
// of the specs whose 3-layer stack check used to report FAIL (causal
// windows of 6 to 24, non-causal windows, dilated masks) and of those
// whose gradient checks did (every row keeping one shared key), with the
// CPU kernels and, for a few, the PTX kernel under the interpreter.
func TestVerifyPassesCorrectSpecs(t *testing.T) {
	dir := t.TempDir()
	var specs []string
	add := func(name, causal, mask string) string {
		f := filepath.Join(dir, name+".yaml")
		body := fmt.Sprintf("name: %s\ncausal: %s\nhead_dim: 64\nmask: %s\n", name, causal, mask)
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, f)
		return f
	}
	for n := 6; n <= 24; n += 3 {
		add(fmt.Sprintf("window%d", n), "true", fmt.Sprintf("{window: {size: %d}}", n))
	}
	add("twosided", "false", "{window: {left: 5, right: 2}}")
	add("wide", "false", "{window: {left: 5, right: 2147483647}}")
	add("dilated", "false", "{dilated: {stride: 4, size: 5}}")
	add("dilatedc", "true", "{dilated: {stride: 3}}")
	// every row keeps a single shared key: dq and dk are exactly 0, as is
	// the float32 yardstick's, and the kernels' rounding noise used to
	// fail "at most 8x the yardstick" (issue 19)
	add("global1", "true", "{global: {tokens: 1}}")
	add("key0", "true", "{keys: {below: 1}}")
	add("globalends", "true", "{global: {positions: [0, 2147483646], rows: true}}")
	for i, f := range specs {
		args := []string{"verify", "-spec", f, "-seed", fmt.Sprint(i + 1)}
		if i%4 != 0 {
			args = append(args, "-no-ptx")
		}
		stdout, stderr, code := runCLI(args...)
		if code != 0 || strings.Contains(stdout, "FAIL") {
			t.Errorf("attngen %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
	}
}

// TestVerifyBackward: attngen verify checks every supported CPU variant's
// backward too, in the forward's report style: one line per shape (dq, dk
// and dv against the float64 reference), the dependencies of the
// gradients on dout, and NaN and infinities at masked positions; and the
// forward's masked-data rule, one line per hostile shape.
func TestVerifyBackward(t *testing.T) {
	for _, f := range []string{"../../spec/examples/hetero.yaml", "../../spec/examples/document.yaml"} {
		stdout, stderr, code := runCLI("verify", "-spec", f, "-seed", "5", "-no-ptx", "-dep-seq", "40")
		if code != 0 || strings.Contains(stdout, "FAIL") {
			t.Fatalf("verify %s: exit %d\n%s%s", f, code, stdout, stderr)
		}
		for _, tg := range cpu.Targets {
			if !cpu.Supported(tg.Variant) {
				continue
			}
			prefix := fmt.Sprintf("%-7s ok   backward", tg.Variant)
			masked := fmt.Sprintf("%-7s ok   masked data: NaN and infinities", tg.Variant)
			var shapes, deps, nonFinite, maskedData int
			for _, line := range strings.Split(stdout, "\n") {
				switch {
				case strings.HasPrefix(line, masked) && (strings.HasSuffix(line, "bit-identical (B2 Hq2 Hkv1 Sq61 Sk130)") || strings.HasSuffix(line, "bit-identical (B1 Hq4 Hkv2 Sq2 Sk600)")):
					maskedData++
				case strings.HasPrefix(line, prefix+" B") && strings.Contains(line, "dq err") && strings.Contains(line, "dk err") && strings.Contains(line, "dv err"):
					shapes++
				case strings.HasPrefix(line, prefix+": dout row i changes dv exactly") && strings.Contains(line, "S = 40"):
					deps++
				case strings.HasPrefix(line, prefix+": NaN and infinities"):
					nonFinite++
				}
			}
			if shapes != len(verify.Shapes(64)) || deps != 1 || nonFinite != 2 || maskedData != 2 {
				t.Errorf("verify %s, %s: %d backward shape lines (want %d), %d dependency lines, %d non-finite lines, %d forward masked-data lines (want 2):\n%s",
					f, tg.Variant, shapes, len(verify.Shapes(64)), deps, nonFinite, maskedData, stdout)
			}
		}
	}
}

// TestVerifyPTXBackward: the PTX checks under the interpreter cover the
// backward kernels too: one line per backward shape (dq, dk and dv against
// the float64 reference, judged against the straightforward backward of
// the element type), one for the dependencies of the gradients on dout
// and one for non-finite values at masked positions, for each element
// type; and one for the forward's masked-data rule.
func TestVerifyPTXBackward(t *testing.T) {
	s, err := spec.ParseFile("../../spec/examples/document.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, tg := range []ptx.Target{ptx.SM80, {SM: 80, Elem: "f16"}} {
		var out bytes.Buffer
		failed, err := verifyPTX(s, tg, r, false, 0, &out, io.Discard)
		if err != nil || failed != 0 {
			t.Fatalf("%s: %d failed, %v:\n%s", tg.Name(), failed, err, out.String())
		}
		prefix := "ptx-sim " + tg.Name() + " ok   backward"
		var shapes, deps, nonFinite, masked int
		for _, line := range strings.Split(out.String(), "\n") {
			switch {
			case strings.HasPrefix(line, "ptx-sim "+tg.Name()+" ok   masked data: NaN and infinities") && strings.HasSuffix(line, "(B2 Hq2 Hkv1 Sq61 Sk130)"):
				masked++
			case strings.HasPrefix(line, prefix+": NaN and infinities at masked keys"):
				nonFinite++
			case strings.HasPrefix(line, prefix+" B") && strings.Contains(line, "dq err") && strings.HasSuffix(line, "("+tg.Elem+"; yardstick: straightforward "+tg.Elem+")"):
				shapes++
			case strings.HasPrefix(line, prefix+": dout row i changes dv exactly"):
				deps++
			}
		}
		if shapes != len(interpBwdShapes(s.HeadDim)) || deps != 1 || nonFinite != 1 || masked != 1 {
			t.Errorf("%s: %d backward shape lines (want %d), %d dependency lines, %d non-finite lines, %d forward masked-data lines (want 1 each):\n%s", tg.Name(), shapes, len(interpBwdShapes(s.HeadDim)), deps, nonFinite, masked, out.String())
		}
	}
}

// TestVerifyPTXSM90a: verify -sm 90a checks the sm_90a forward under the
// interpreter (each interpreter shape, rounded up to the residue stride,
// the dependencies, the masked-data rule, the ragged batch without and
// with positions) and no backward (the sm_80 kernels serve it),
// for each element type; a kernel off by one mask element fails.
func TestVerifyPTXSM90a(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct {
		file   string
		tg     ptx.Target
		seqs   [][2]int // the numeric shapes' seq_q and seq_k
		ragged int      // the ragged batch's lines: without and with positions (0: the kernel takes neither)
	}{
		{"dilated", ptx.SM90a, [][2]int{{8, 8}, {40, 72}, {72, 72}}, 2}, // stride 8; the ragged batch's tensors rounded up to it
		{"window", ptx.Target{SM: 90, Elem: "f16", Accel: true}, [][2]int{{1, 1}, {37, 70}, {65, 65}}, 2},
	} {
		s, err := spec.ParseFile("../../spec/examples/" + c.file + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		failed, err := verifyPTX(s, c.tg, r, false, 0, &out, io.Discard)
		if err != nil || failed != 0 {
			t.Fatalf("%s %s: %d failed, %v:\n%s", c.file, c.tg.Name(), failed, err, out.String())
		}
		text := out.String()
		prefix := "ptx-sim " + c.tg.Name() + " ok   "
		for _, sq := range c.seqs {
			if !strings.Contains(text, fmt.Sprintf("%sB", prefix)) || !strings.Contains(text, fmt.Sprintf(" Sq%d Sk%d D%d: out err", sq[0], sq[1], s.HeadDim)) {
				t.Errorf("%s: no line for Sq%d Sk%d:\n%s", c.file, sq[0], sq[1], text)
			}
		}
		if n := strings.Count(text, prefix); n != len(c.seqs)+2+c.ragged || strings.Contains(text, "dq err") || !strings.Contains(text, "the sm_80 kernels serve it") {
			t.Errorf("%s: %d passed lines, want %d and no backward:\n%s", c.file, n, len(c.seqs)+2+c.ragged, text)
		}
		if got := strings.Count(text, prefix+"rows of "); got != c.ragged {
			t.Errorf("%s: %d ragged lines, want %d:\n%s", c.file, got, c.ragged, text)
		}
		if c.ragged < 2 && !strings.Contains(text, "positions skipped") || c.ragged == 0 && !strings.Contains(text, "ragged batch skipped") {
			t.Errorf("%s: the kernel takes no lengths or positions, and verify does not say it skipped them:\n%s", c.file, text)
		}
		if !strings.Contains(text, prefix+"masked data: ") {
			t.Errorf("%s: no masked-data line:\n%s", c.file, text)
		}
	}
	// the same checks fail on a mask one key off
	s := &spec.Spec{Name: "w", Mask: spec.Window(16), Causal: true, HeadDim: 64}
	plan, err := gen.Compile(&spec.Spec{Name: "w", Mask: spec.Window(17), Causal: true, HeadDim: 64}, ptx.SM90a, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ptx.GenerateForward(plan, ptx.Config{Target: ptx.SM90a})
	if err != nil {
		t.Fatal(err)
	}
	k, err := gpurun.Interp(f)
	if err != nil {
		t.Fatal(err)
	}
	sh := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 70, SeqK: 70, HeadDim: 64}
	if _, err := verify.CheckNumericWith(s.Pattern(), k.Run(), sh, r, verify.BF16Kernel); err == nil {
		t.Error("the window-17 sm_90a kernel passed as window 16")
	}
}

// TestVerifyGPUSM90aRefused: verify -gpu -sm 90a on an 8.0 device (the
// mock driver with MOCK_CUDA_CC=80) fails before any check, naming both
// compute capabilities.
func TestVerifyGPUSM90aRefused(t *testing.T) {
	mockCUDA(t)
	t.Setenv("MOCK_CUDA_CC", "80")
	out, errs, code := runCLI("verify", "-spec", "../../spec/examples/causal.yaml", "-gpu", "-sm", "80,90a")
	if code != 1 || out != "" || !strings.Contains(errs, "an sm_90a kernel runs only on devices of compute capability 9.0; this one is 8.0") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestVerifyGPUSM90aMock: verify -gpu -sm 90a on the mock's 9.0 device
// runs every GPU check of the sm_90a forward (the forward's shapes,
// rounded up to the stride, S = 8192 sampled, dependencies, masked data,
// GPU against the interpreter), each reported; the mock runs no kernel, so each fails
// and the command exits 1, while the interpreter checks pass.
func TestVerifyGPUSM90aMock(t *testing.T) {
	mockCUDA(t)
	out, errs, code := runCLI("verify", "-spec", "../../spec/examples/dilated.yaml", "-gpu", "-sm", "90a", "-seed", "1", "-sample", "64")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s", code, errs)
	}
	steps := len(interpShapes(128)) + len(verify.Shapes(128)) + 1 + 1 + 1 + len(interpShapes(128))
	gpuFails := strings.Count(out, "\ngpu ptx-sm90a-bf16 FAIL") + strings.Count(out, "\ngpu=sim ptx-sm90a-bf16 FAIL")
	switch {
	case !strings.Contains(out, "\ngpu: Mock NVIDIA H200"):
		t.Errorf("no device line:\n%s", out)
	case gpuFails != steps || !strings.Contains(out, fmt.Sprintf("%d checks FAILED", steps)):
		t.Errorf("%d failed GPU checks, want %d:\n%s", gpuFails, steps, out)
	case strings.Contains(out, "ptx-sm80") || strings.Contains(out, "ptx-sim ptx-sm90a-bf16 FAIL"):
		t.Errorf("an sm_80 check, or a failed interpreter check:\n%s", out)
	case !strings.Contains(errs, "numeric, B1 Hq2 Hkv1 Sq8192 Sk8192") || !strings.Contains(errs, "numeric, B1 Hq2 Hkv1 Sq40 Sk72"):
		// (the progress names each shape; a failure's text depends on
		// what the mock's never written memory holds)
		t.Errorf("the S = 8192 shape or a stride-rounded shape is missing:\n%s", errs)
	case !strings.Contains(errs, fmt.Sprintf("gpu check %d of %d", steps, steps)):
		t.Errorf("progress does not count %d checks:\n%s", steps, errs)
	}
}

// The seed and the number of specs of TestVerifyRandomSpecs (go test
// -run TestVerifyRandomSpecs -args -random.seed N -random.specs M draws
// others).
var (
	randomSeed  = flag.Uint64("random.seed", 1919, "TestVerifyRandomSpecs: seed of the random specs")
	randomSpecs = flag.Int("random.specs", 40, "TestVerifyRandomSpecs: number of random specs")
)

// propertyChecks are the CPU checks of TestVerifyRandomSpecs: attngen
// verify's, on smaller awkward shapes (one query and key, lengths off the
// tile sizes, grouped heads, batches with a scale, decoding with groups
// of 8 query heads, and 160 rows of grouped heads, enough for the rounding
// noise of a gradient that cancels to 0 to show) so that dozens of specs
// fit in go test.
func propertyChecks(d int) cpuChecks {
	return cpuChecks{
		shapes: []verify.Shape{
			{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: d},
			{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 37, SeqK: 70, HeadDim: d},
			{Batch: 2, HeadsQ: 2, HeadsKV: 2, SeqQ: 65, SeqK: 65, HeadDim: d, Scale: 0.3},
			{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: 3, SeqK: 150, HeadDim: d},
			{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 160, SeqK: 160, HeadDim: d, Scale: 0.3},
		},
		hostile: []verify.Shape{
			{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 29, SeqK: 70, HeadDim: d},
			{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 2, SeqK: 130, HeadDim: d},
		},
		ragged: raggedShapes(d, 0),
		depN:   24,
	}
}

// randomSpec is a random valid spec (spectest's random masks with
// parameters scaled to up to 150 positions, a quarter of them to one or
// two; now and then under a document or tree mask) as its YAML text and
// parsed; ok is false when the parser refuses it.
func randomSpec(r *rand.Rand, name string) (string, *spec.Spec, bool) {
	n := 1 + r.IntN(150)
	if r.IntN(4) == 0 {
		// parameters of a position or two: single keys, single rows,
		// windows of 1, the degenerate masks where gradients cancel to 0
		n = 1 + r.IntN(2)
	}
	p := spectest.Pattern(r, n, 3)
	switch r.IntN(8) {
	case 0:
		p.Mask = spec.Intersect(spec.Document(), p.Mask)
	case 1:
		p.Mask = spec.Union(spec.Tree(), p.Mask)
	}
	src := fmt.Sprintf("name: %s\ncausal: %v\nhead_dim: 64\nmask: %s\n", name, p.Causal, p.Mask)
	s, err := spec.Parse(name+".yaml", []byte(src))
	return src, s, err == nil
}

// TestVerifyRandomSpecs: attngen verify's CPU checks (verifyCPU: forward
// and backward numerics, dependencies, masked data, non-finite gradients,
// the 3-layer stack) pass every CPU variant on random valid specs, and
// every eighth spec's sm_80 kernels pass verifyPTX under the interpreter
// (not with -short), so that a verifier that fails correct kernels shows
// here: with the gradient checks' old floor, global tokens 1 and window 1
// (rows keeping one shared key, or one key each) failed. A failure prints
// the spec and the seed that draws it.
func TestVerifyRandomSpecs(t *testing.T) {
	seed := *randomSeed
	n := *randomSpecs
	if testing.Short() {
		n = min(n, 12)
	}
	var variants []cpu.Variant
	for _, tg := range cpu.Targets {
		if cpu.Supported(tg.Variant) {
			variants = append(variants, tg.Variant)
		}
	}
	valid := 0
	for i := 0; valid < n && i < 4*n; i++ {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		src, s, ok := randomSpec(r, fmt.Sprintf("random%d", i))
		if !ok {
			continue
		}
		valid++
		for _, v := range variants {
			var out bytes.Buffer
			failed, err := verifyCPU(s, v, propertyChecks(s.HeadDim), r, &out)
			if err != nil || failed > 0 {
				var fails []string
				for _, line := range strings.Split(out.String(), "\n") {
					if strings.Contains(line, " FAIL ") {
						fails = append(fails, line)
					}
				}
				t.Errorf("spec %d (rand.NewPCG(%d, %d)), %s: %d checks failed, error %v:\n%s%s", i, seed, i, v, failed, err, src, strings.Join(fails, "\n"))
			}
		}
		if testing.Short() || valid%8 != 1 {
			continue
		}
		// every eighth spec: the PTX checks under the interpreter too,
		// bf16 and f16 in turn
		tg := ptx.SM80
		if valid%16 == 9 {
			tg = ptx.Target{SM: 80, Elem: "f16"}
		}
		var out bytes.Buffer
		failed, err := verifyPTX(s, tg, r, false, 0, &out, io.Discard)
		if err != nil || failed > 0 {
			t.Errorf("spec %d (rand.NewPCG(%d, %d)), %s: %d checks failed, error %v:\n%s%s", i, seed, i, tg.Name(), failed, err, src, out.String())
		}
	}
	if valid < n {
		t.Errorf("%d valid random specs of %d drawn, want %d", valid, 4*n, n)
	}
}

// TestVerifyPTXLayout: verify -layout runs the PTX forward checks with q,
// k, v and out held as BSHD or as a packed QKV buffer on the device (the
// packed layout on shapes of as many queries as keys), and says so; a
// layout verify does not know is a usage error.
func TestVerifyPTXLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	s, err := spec.ParseFile("../../spec/examples/window.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		layout string
		seqs   [][2]int
	}{
		{"bshd", [][2]int{{1, 1}, {37, 70}, {65, 65}}},
		{"packed", [][2]int{{1, 1}, {70, 70}, {65, 65}}},
	} {
		var out bytes.Buffer
		failed, err := verifyPTXLayout(s, ptx.SM90a, r, false, 0, c.layout, &out, io.Discard)
		text := out.String()
		if err != nil || failed != 0 {
			t.Fatalf("%s: %d failed, %v:\n%s", c.layout, failed, err, text)
		}
		if !strings.Contains(text, "hold q, k, v and out as "+c.layout+" on the device") {
			t.Errorf("%s: the layout is not reported:\n%s", c.layout, text)
		}
		for _, sq := range c.seqs {
			if !strings.Contains(text, fmt.Sprintf(" Sq%d Sk%d D%d: out err", sq[0], sq[1], s.HeadDim)) {
				t.Errorf("%s: no line for Sq%d Sk%d:\n%s", c.layout, sq[0], sq[1], text)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if err := cmdVerify([]string{"-spec", "../../spec/examples/window.yaml", "-layout", "sbhd"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error()+stderr.String(), "want one of bhsd, bshd, packed") {
		t.Errorf("-layout sbhd: %v %s", err, stderr.String())
	}
}
