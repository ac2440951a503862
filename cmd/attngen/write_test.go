package main

import (
	"bytes"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tempModule makes a Go module in a temporary folder, with the example
// specs copied into spec/, and makes it the current folder.
func tempModule(t *testing.T) string {
	t.Helper()
	examples, err := filepath.Abs("../../spec/examples")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/user\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "spec"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"window.yaml", "bridge.yaml", "causal.yaml"} {
		data, err := os.ReadFile(filepath.Join(examples, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "spec", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(root)
	return root
}

// attngen runs one command line and fails the test unless it exits 0.
func attngen(t *testing.T, args ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("attngen %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
}

// readPackage returns the files directly in dir by name, failing the test
// if there are none.
func readPackage(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.Type().IsRegular() {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = string(data)
		}
	}
	if out["attention.go"] == "" || out["mask.go"] == "" {
		t.Fatalf("%s holds no generated package: %d files", dir, len(out))
	}
	return out
}

// samePackage fails unless dir still holds exactly the files of want.
func samePackage(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := readPackage(t, dir)
	for n, data := range want {
		if got[n] != data {
			t.Errorf("%s/%s was removed or changed", dir, n)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s/%s appeared", dir, n)
		}
	}
}

// TestGenerateKeepsSubpackage: attngen -spec window.yaml -out attn leaves
// the package generated before into attn/sub/bridge alone.
func TestGenerateKeepsSubpackage(t *testing.T) {
	tempModule(t)
	attngen(t, "-spec", "spec/bridge.yaml", "-out", "attn/sub/bridge")
	bridge := readPackage(t, "attn/sub/bridge")
	attngen(t, "-spec", "spec/window.yaml", "-out", "attn", "-pkg", "attn")
	readPackage(t, "attn")
	samePackage(t, "attn/sub/bridge", bridge)
}

// TestGenerateIntoCurrentFolder: cd gen && attngen -spec
// ../spec/window.yaml -out . writes the package into gen itself and leaves
// the other packages in gen's subfolders (and gen's own hand-written
// files) alone.
func TestGenerateIntoCurrentFolder(t *testing.T) {
	root := tempModule(t)
	gen := filepath.Join(root, "gen")
	if err := os.Mkdir(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "// Package gen holds the generated packages.\npackage gen\n\n//go:generate attngen -spec ../spec/bridge.yaml -out bridge\n"
	if err := os.WriteFile(filepath.Join(gen, "doc.go"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(gen)
	attngen(t, "-spec", "../spec/bridge.yaml", "-out", "bridge")
	attngen(t, "-spec", "../spec/causal.yaml", "-out", "causal", "-sm", "none")
	bridge := readPackage(t, "bridge")
	causal := readPackage(t, "causal")
	attngen(t, "-spec", "../spec/window.yaml", "-out", ".")
	readPackage(t, ".")
	samePackage(t, "bridge", bridge)
	samePackage(t, "causal", causal)
	if data, err := os.ReadFile("doc.go"); err != nil || string(data) != doc {
		t.Fatalf("doc.go was removed or changed: %v", err)
	}
}

// TestGenerateRefusesHandWritten: a hand-written attention.go in -out is
// not overwritten; attngen names it and exits 1.
func TestGenerateRefusesHandWritten(t *testing.T) {
	tempModule(t)
	if err := os.Mkdir("attn", 0o755); err != nil {
		t.Fatal(err)
	}
	mine := "package attn\n\n// Forward is hand-written.\nfunc Forward() {}\n"
	if err := os.WriteFile("attn/attention.go", []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-spec", "spec/window.yaml", "-out", "attn"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), filepath.Join("attn", "attention.go")) {
		t.Fatalf("exit %d, stderr %q: want 1 and an error naming attn/attention.go", code, stderr.String())
	}
	if data, err := os.ReadFile("attn/attention.go"); err != nil || string(data) != mine {
		t.Fatalf("attn/attention.go was changed: %v", err)
	}
	entries, err := os.ReadDir("attn")
	if err != nil || len(entries) != 1 {
		t.Fatalf("attn holds %d entries after a refused run, want 1: %v", len(entries), err)
	}
}

// TestGenerateRemovesStaleKernels: regenerating a package with other -sm
// or -dtype flags leaves exactly the .ptx files its gpu.go embeds: the
// sm_90a kernels of an earlier -sm 80,90a run go with -sm 80, every kernel
// (and gpu.go) with -sm none, and the bf16 kernels with -dtype f16. A
// hand-written file with a kernel's name stays.
func TestGenerateRemovesStaleKernels(t *testing.T) {
	tempModule(t)
	if err := os.Mkdir("attn", 0o755); err != nil {
		t.Fatal(err)
	}
	mine := "// my own kernel\n"
	if err := os.WriteFile("attn/forward_sm_90a_f32.ptx", []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	// embedded lists the .ptx files gpu.go embeds (none without gpu.go).
	embedded := func() map[string]bool {
		out := map[string]bool{}
		data, err := os.ReadFile("attn/gpu.go")
		if os.IsNotExist(err) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f, ok := strings.CutPrefix(line, "//go:embed "); ok {
				out[f] = true
			}
		}
		return out
	}
	for _, c := range []struct{ first, then []string }{
		{[]string{"-sm", "80,90a"}, []string{"-sm", "80"}},
		{[]string{"-sm", "80,90a"}, []string{"-sm", "none"}},
		{[]string{"-sm", "90a"}, []string{"-sm", "80"}},
		{[]string{"-sm", "80,90a", "-dtype", "bf16"}, []string{"-sm", "80,90a", "-dtype", "f16"}},
	} {
		for _, flags := range [][]string{c.first, c.then} {
			attngen(t, append([]string{"-spec", "spec/window.yaml", "-out", "attn"}, flags...)...)
		}
		want := embedded()
		if len(want) == 0 && c.then[1] != "none" {
			t.Fatalf("%v: gpu.go embeds no kernel", c.then)
		}
		entries, err := os.ReadDir("attn")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			n := e.Name()
			if strings.HasSuffix(n, ".ptx") && !want[n] && n != "forward_sm_90a_f32.ptx" {
				t.Errorf("%v then %v: stale attn/%s left behind", c.first, c.then, n)
			}
		}
		for n := range want {
			if _, err := os.Stat(filepath.Join("attn", n)); err != nil {
				t.Errorf("%v then %v: gpu.go embeds %s: %v", c.first, c.then, n, err)
			}
		}
		if data, err := os.ReadFile("attn/forward_sm_90a_f32.ptx"); err != nil || string(data) != mine {
			t.Fatalf("%v then %v: the hand-written attn/forward_sm_90a_f32.ptx was removed or changed: %v", c.first, c.then, err)
		}
	}
}

// packageDoc is the package comment go doc prints for the non-test Go
// files of dir (go/doc, as go doc reads it).
func packageDoc(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "example.com/user/attn")
	if err != nil {
		t.Fatal(err)
	}
	return p.Doc
}

// TestGenerateLeavesPackageDocToUser: when a file of the user's in -out
// (gen.go holding the go:generate line, say) has a package comment, the
// generated attention.go writes none, so go doc prints the user's alone
// instead of both glued together, on the first run and on regenerating;
// a test file's comment does not count, and once the user's comment is
// gone attngen writes its own again.
func TestGenerateLeavesPackageDocToUser(t *testing.T) {
	tempModule(t)
	if err := os.Mkdir("attn", 0o755); err != nil {
		t.Fatal(err)
	}
	mine := "Package attn wraps the attention kernels attngen generates from window.yaml.\n"
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join("attn", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("attn_test.go", "// Package attn is tested here.\npackage attn\n")
	write("gen.go", "package attn\n\n//go:"+"generate attngen -spec ../spec/window.yaml -out . -pkg attn\n")
	attngen(t, "-spec", "spec/window.yaml", "-out", "attn", "-pkg", "attn")
	if d := packageDoc(t, "attn"); !strings.HasPrefix(d, "Package attn computes fused, tiled masked attention") {
		t.Fatalf("gen.go without a package comment: go doc prints %q, want attngen's", d)
	}
	write("gen.go", "// "+mine+"package attn\n\n//go:"+"generate attngen -spec ../spec/window.yaml -out . -pkg attn\n")
	for run := range 2 {
		attngen(t, "-spec", "spec/window.yaml", "-out", "attn", "-pkg", "attn")
		if d := packageDoc(t, "attn"); d != mine {
			t.Errorf("run %d: go doc prints %q, want the user's %q alone", run, d, mine)
		}
	}
	write("gen.go", "package attn\n")
	attngen(t, "-spec", "spec/window.yaml", "-out", "attn", "-pkg", "attn")
	if d := packageDoc(t, "attn"); !strings.HasPrefix(d, "Package attn computes fused, tiled masked attention") {
		t.Errorf("the user's comment removed: go doc prints %q, want attngen's", d)
	}
}
