package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// TestVerifyPassesCorrectSpecs: attngen verify exits 0 on correct kernels
// of the specs whose 3-layer stack check used to report FAIL (causal
// windows of 6 to 24, non-causal windows, dilated masks), with the CPU
// kernels and, for a few, the PTX kernel under the interpreter.
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
// gradients on dout, and NaN and infinities at masked positions.
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
			var shapes, deps, nonFinite int
			for _, line := range strings.Split(stdout, "\n") {
				switch {
				case strings.HasPrefix(line, prefix+" B") && strings.Contains(line, "dq err") && strings.Contains(line, "dk err") && strings.Contains(line, "dv err"):
					shapes++
				case strings.HasPrefix(line, prefix+": dout row i changes dv exactly") && strings.Contains(line, "S = 40"):
					deps++
				case strings.HasPrefix(line, prefix+": NaN and infinities"):
					nonFinite++
				}
			}
			if shapes != len(verify.Shapes(64)) || deps != 1 || nonFinite != 2 {
				t.Errorf("verify %s, %s: %d backward shape lines (want %d), %d dependency lines, %d non-finite lines:\n%s",
					f, tg.Variant, shapes, len(verify.Shapes(64)), deps, nonFinite, stdout)
			}
		}
	}
}

// TestVerifyPTXBackward: the PTX checks under the interpreter cover the
// backward kernels too: one line per backward shape (dq, dk and dv against
// the float64 reference, judged against the straightforward backward of
// the element type), one for the dependencies of the gradients on dout
// and one for non-finite values at masked positions, for each element
// type.
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
		var shapes, deps, nonFinite int
		for _, line := range strings.Split(out.String(), "\n") {
			switch {
			case strings.HasPrefix(line, prefix+": NaN and infinities at masked keys"):
				nonFinite++
			case strings.HasPrefix(line, prefix+" B") && strings.Contains(line, "dq err") && strings.HasSuffix(line, "("+tg.Elem+"; yardstick: straightforward "+tg.Elem+")"):
				shapes++
			case strings.HasPrefix(line, prefix+": dout row i changes dv exactly"):
				deps++
			}
		}
		if shapes != len(interpBwdShapes(s.HeadDim)) || deps != 1 || nonFinite != 1 {
			t.Errorf("%s: %d backward shape lines (want %d), %d dependency lines, %d non-finite lines (want 1 each):\n%s", tg.Name(), shapes, len(interpBwdShapes(s.HeadDim)), deps, nonFinite, out.String())
		}
	}
}
