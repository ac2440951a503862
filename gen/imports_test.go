package gen

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// listed is what go list says of one package.
type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Standard   bool
}

// goList runs go list -json on patterns (from the repository root).
func goList(t *testing.T, patterns ...string) []listed {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command(goBin, append([]string{"list", "-json=ImportPath,Imports,Deps,Standard"}, patterns...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", patterns, err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %v: no packages", patterns)
	}
	return pkgs
}

const module = "github.com/attngen/attngen"

// isStd reports a standard-library import path (no dot in its first element).
func isStd(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// TestLayering enforces the package layering with go list (ARCHITECTURE in
// docs/architecture.md): the plan is target-free, emitters read only the
// plan, the runtime and generated code depend on nothing of the generator.
func TestLayering(t *testing.T) {
	// spec and gen never depend on an emitter, the CLI, verify or the CUDA
	// binding, and gen carries no YAML types.
	for _, p := range goList(t, "./spec/...", "./gen") {
		for _, d := range p.Deps {
			for _, banned := range []string{"/emit/", "/cmd/", "/verify", "/cuda", "/generated"} {
				if strings.HasPrefix(d, module) && strings.Contains(strings.TrimPrefix(d, module), banned) {
					t.Errorf("%s depends on %s", p.ImportPath, d)
				}
			}
			if strings.Contains(d, "mmcloughlin/avo") {
				t.Errorf("%s depends on %s", p.ImportPath, d)
			}
		}
		if p.ImportPath == module+"/gen" {
			for _, imp := range p.Imports {
				if strings.Contains(imp, "yaml") {
					t.Errorf("gen imports %s: it must not carry YAML types", imp)
				}
			}
		}
	}
	// Emitters render the plan: they never import spec.
	for _, p := range goList(t, "./emit/...") {
		for _, imp := range p.Imports {
			if imp == module+"/spec" {
				t.Errorf("%s imports spec: emitters read only the plan", p.ImportPath)
			}
		}
	}
	// The runtime and every generated package depend only on the standard
	// library, x/sys and the runtime.
	for _, p := range goList(t, "./runtime/...", "./generated/...") {
		if strings.Contains(p.ImportPath, "/internal/") {
			continue // go generate helpers of generated/
		}
		for _, d := range p.Deps {
			if isStd(d) || strings.HasPrefix(d, "golang.org/x/sys/") || strings.HasPrefix(d, module+"/runtime/") {
				continue
			}
			t.Errorf("%s depends on %s", p.ImportPath, d)
		}
	}
}
