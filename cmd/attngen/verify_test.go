package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
