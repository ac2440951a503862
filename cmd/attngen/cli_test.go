package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// commandNames are attngen's commands, generate included.
var commandNames = []string{"generate", "verify", "bench", "check", "show", "reach", "plan"}

// cliModule is a fresh directory holding a go.mod, to generate into.
func cliModule(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/tmp\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runCLI(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestHelpPrintsCommandUsage: 'attngen help CMD' and 'attngen CMD -h' print
// the command's usage and flags to stdout and exit 0.
func TestHelpPrintsCommandUsage(t *testing.T) {
	for _, name := range commandNames {
		help, errs, code := runCLI("help", name)
		if code != 0 || errs != "" {
			t.Errorf("help %s: exit %d, stderr %q", name, code, errs)
		}
		if !strings.HasPrefix(help, "usage: attngen ") || !strings.Contains(help, "-spec") || !strings.Contains(help, "Flags:") {
			t.Errorf("help %s printed:\n%s", name, help)
		}
		dashH, errs, code := runCLI(name, "-h")
		if code != 0 || errs != "" || dashH != help {
			t.Errorf("%s -h: exit %d, stderr %q, stdout differs from help %s:\n%s", name, code, errs, name, dashH)
		}
	}
	for _, name := range []string{"help", "version"} {
		out, _, code := runCLI("help", name)
		if code != 0 || !strings.HasPrefix(out, "usage: attngen "+name) {
			t.Errorf("help %s: exit %d:\n%s", name, code, out)
		}
	}
	if _, errs, code := runCLI("help", "nosuch"); code != 2 || !strings.Contains(errs, "nosuch") {
		t.Errorf("help nosuch: exit %d, stderr %q", code, errs)
	}
	top, _, code := runCLI("help")
	if code != 0 {
		t.Errorf("help: exit %d", code)
	}
	for _, w := range append([]string{"-dtype", "-sm", "-verify", "-out", "-pkg", "attngen version", "attngen help", "Exit status"}, commandNames[1:]...) {
		if !strings.Contains(top, w) {
			t.Errorf("top-level usage lacks %q:\n%s", w, top)
		}
	}
}

// TestVersion: 'attngen version' and 'attngen -version' print the module
// version from the build information, saying so when it is a development
// build.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		out, errs, code := runCLI(args...)
		if code != 0 || errs != "" || out != versionLine()+"\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
		// A test binary is built from this checkout, not a module version.
		if !strings.HasPrefix(out, "attngen (devel)") || !strings.Contains(out, "source checkout") {
			t.Errorf("%v: %q, want the development-build line", args, out)
		}
	}
	if _, _, code := runCLI("version", "extra"); code != 2 {
		t.Errorf("version extra: exit %d, want 2", code)
	}
}

// TestExitStatus: 0 success, 1 failure, 2 usage error, for every command.
func TestExitStatus(t *testing.T) {
	ex := "../../spec/examples/window.yaml"
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: a\nmask: {block: {size: 0}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
	}{
		{nil, 2},
		{[]string{"nosuch"}, 2},
		{[]string{"check", "-spec", ex, "-seq", "64"}, 0},
		{[]string{"check", ex, "-seq", "64"}, 0},
		{[]string{"check", "-spec", bad}, 1},
		{[]string{"check", "-spec", "no/such.yaml"}, 1},
		{[]string{"plan", "-spec", ex, "-seq", "128", "-seq-q", "129"}, 2},
		{[]string{"show", "-spec", ex, "-o", "x.jpg"}, 2},
		{[]string{"reach", "-spec", ex, "-seq", "64", "-hops"}, 2},
		{[]string{"generate", "-spec", ex, "-sm", "x"}, 2},
		{[]string{"-spec", ex, "-dtype", "f64"}, 2},
		{[]string{"verify", "-spec", ex, "-sm", "none", "-gpu"}, 2},
	}
	for _, name := range commandNames {
		cases = append(cases,
			struct {
				args []string
				code int
			}{[]string{name, "-nosuchflag"}, 2},
			struct {
				args []string
				code int
			}{[]string{name}, 2}, // no spec
			struct {
				args []string
				code int
			}{[]string{name, "-spec", ex, "stray"}, 2},
			struct {
				args []string
				code int
			}{[]string{name, ex, "stray"}, 2},
			struct {
				args []string
				code int
			}{[]string{name, "-spec", bad}, 1},
		)
	}
	for _, c := range cases {
		out, errs, code := runCLI(c.args...)
		if code != c.code {
			t.Errorf("attngen %s: exit %d, want %d\nstdout %.300q\nstderr %.300q", strings.Join(c.args, " "), code, c.code, out, errs)
		}
		if c.code == 2 && len(c.args) > 0 && !strings.Contains(errs, "attngen") {
			t.Errorf("attngen %s: usage error without a message: %q", strings.Join(c.args, " "), errs)
		}
	}
}

// TestStrayArgumentsAfterSpec: the 'bench -spec F 1 -seq 8192' used
// to run at the default -seq; now the "1" is a usage error, and a flag
// after the spec argument is honoured.
func TestStrayArgumentsAfterSpec(t *testing.T) {
	ex := "../../spec/examples/window.yaml"
	_, errs, code := runCLI("bench", "-spec", ex, "1", "-seq", "8192")
	if code != 2 || !strings.Contains(errs, `unexpected argument "1"`) {
		t.Errorf("bench -spec F 1 -seq 8192: exit %d, stderr %q", code, errs)
	}
	a, errs, code := runCLI("check", ex, "-seq", "300")
	b, _, _ := runCLI("check", "-spec", ex, "-seq", "300")
	if code != 0 || a != b || !strings.Contains(a, "density at seq 300:") {
		t.Errorf("check F -seq 300: exit %d, stderr %q\n%s\nwant\n%s", code, errs, a, b)
	}
	// "--" ends the flags: what follows is an argument even if it looks
	// like a flag.
	if _, errs, code := runCLI("check", "--", "-seq"); code != 1 || !strings.Contains(errs, "-seq") {
		t.Errorf("check -- -seq: exit %d, stderr %q (want the file -seq not found)", code, errs)
	}
}

// TestSpecArgument: every command taking -spec takes the spec file as its
// one argument instead, with the same output.
func TestSpecArgument(t *testing.T) {
	ex := "../../spec/examples/block.yaml"
	for _, c := range [][]string{
		{"check", "-seq", "100"},
		{"show", "-seq", "256", "-tile", "64"},
		{"reach", "-seq", "64", "-layers", "2"},
		{"plan", "-seq", "256"},
	} {
		a, ea, ca := runCLI(append(append([]string{c[0]}, c[1:]...), ex)...)
		b, eb, cb := runCLI(append([]string{c[0], "-spec", ex}, c[1:]...)...)
		if ca != 0 || cb != 0 || a != b || a == "" {
			t.Errorf("%s: argument: exit %d %q; -spec: exit %d %q; outputs equal %v", c[0], ca, ea, cb, eb, a == b)
		}
	}
	dir := cliModule(t)
	_, errs, code := runCLI("generate", "-sm", "none", "-out", filepath.Join(dir, "blk"), ex)
	if code != 0 {
		t.Fatalf("generate F: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "blk", "attention.go")); err != nil {
		t.Error(err)
	}
}

// TestBenchProgress: bench reports each variant on stderr as it starts, so
// a long run shows where it is.
func TestBenchProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the FMA peak: skipped under -short")
	}
	out, errs, code := runCLI("bench", "-spec", "../../spec/examples/window.yaml", "-seq", "64", "-heads", "1", "-reps", "1", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "bench window: purego, 1 thread") || !strings.Contains(errs, "bench window: naive, 1 thread") {
		t.Errorf("no progress on stderr:\n%s", errs)
	}
	if strings.Contains(out, "bench window:") {
		t.Errorf("progress on stdout:\n%s", out)
	}
}

// TestGoDocListsCommands: the package documentation (go doc ./cmd/attngen)
// names every command.
func TestGoDocListsCommands(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	for _, name := range append(commandNames[1:], "help", "version") {
		if !strings.Contains(doc, "attngen "+name) {
			t.Errorf("doc.go does not describe 'attngen %s'", name)
		}
	}
	for _, w := range []string{"attngen -spec", "-dtype", "-sm", "-verify", "Exit status"} {
		if !strings.Contains(doc, w) {
			t.Errorf("doc.go lacks %q", w)
		}
	}
}

// TestGenerateRecordsVerifyNamedSpec: a spec file whose name starts with
// "verify" keeps its name in the regenerate command of every header; the
// -verify flag (in any spelling) is left out.
func TestGenerateRecordsVerifyNamedSpec(t *testing.T) {
	dir := cliModule(t)
	src, err := os.ReadFile("../../spec/examples/window.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "verify_window.yaml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir) // the spec is named as users name it, relative: the old filter dropped it
	specPath, out := "verify_window.yaml", "attn"
	if got := withoutVerify([]string{"-spec", specPath, "-verify", "--verify=true", "-out", out, "verify.yaml"}); strings.Join(got, " ") != "-spec "+specPath+" -out "+out+" verify.yaml" {
		t.Errorf("withoutVerify: %q", got)
	}
	_, errs, code := runCLI("-spec", specPath, "-sm", "none", "-out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(filepath.Join(out, "attention.go"))
	if err != nil {
		t.Fatal(err)
	}
	want := "// Code generated by \"attngen " + strings.Join(quoteArgs([]string{"-spec", specPath, "-sm", "none", "-out", out}), " ") + "\"; DO NOT EDIT."
	if first, _, _ := strings.Cut(string(data), "\n"); first != want {
		t.Errorf("header\n %s\nwant\n %s", first, want)
	}
}

// TestGenerateVerifyChecksWrittenTargets: -verify verifies the GPU kernels
// that were written (-sm, -dtype), not the default bf16 one.
func TestGenerateVerifyChecksWrittenTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs attngen verify: skipped under -short")
	}
	dir := cliModule(t)
	out, errs, code := runCLI("-spec", "../../spec/examples/window.yaml", "-out", filepath.Join(dir, "w"), "-dtype", "f16", "-verify")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "ptx-sim ptx-sm80-f16 ok") {
		t.Errorf("the f16 kernel written was not verified:\n%s", out)
	}
	if strings.Contains(out, "bf16 ok") {
		t.Errorf("a bf16 kernel was verified though only f16 was written:\n%s", out)
	}
	if !strings.Contains(out, "all checks passed") {
		t.Errorf("verify did not pass:\n%s", out)
	}
}
