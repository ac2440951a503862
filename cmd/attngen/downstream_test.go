package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// downstreamSteps are the README's steps ("Using attngen from your
// module") for a module that uses attngen from a local checkout before the
// module is published, word for word; CHECKOUT stands for the checkout's
// path. A plain "go get -tool" would ask the module proxy for a version
// that does not exist; the require of the zero pseudo-version, satisfied
// by the replace, means nothing is looked up.
var downstreamSteps = []string{
	"go mod init example.com/downstream",
	"go mod edit -replace github.com/attngen/attngen=CHECKOUT",
	"go mod edit -require=github.com/attngen/attngen@v0.0.0-00010101000000-000000000000",
	"go get -tool github.com/attngen/attngen/cmd/attngen",
	"go generate ./...",
	"go test ./...",
}

// TestDownstreamGoGenerate builds the README's downstream scenario for real:
// a folder outside this repository with a spec file and a //go:generate
// line, made a module by exactly the README's steps with the module proxy
// off (GOPROXY=off), so attngen comes from this checkout as a go tool; then
// go generate and go test in it, with and without -tags purego. Its test
// checks the generated Forward against a straightforward implementation.
func TestDownstreamGoGenerate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: skipped under -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("attn/window.yaml", `name: attn
mask:
  streaming: {sinks: 2, window: 40}
head_dim: 64
`)
	// The directive is split so that go generate in this repository does
	// not take it for one of ours.
	write("attn/gen.go", "// Package attn wraps the attention kernels attngen generates from window.yaml.\npackage attn\n\n//go:"+"generate go tool attngen -spec window.yaml -out .\n")
	write("attn/attn_test.go", `package attn

import (
	"math"
	"math/rand"
	"testing"
)

// naive is masked attention written out plainly: sinks 0..1 and a window of 40.
func naive(q, k, v []float32, n, d int) []float32 {
	out := make([]float32, n*d)
	for i := 0; i < n; i++ {
		var w []float64
		var js []int
		m := math.Inf(-1)
		for j := 0; j <= i; j++ {
			if j < 2 || i-j <= 39 {
				s := 0.0
				for x := 0; x < d; x++ {
					s += float64(q[i*d+x]) * float64(k[j*d+x])
				}
				s /= math.Sqrt(float64(d))
				w, js = append(w, s), append(js, j)
				m = math.Max(m, s)
			}
		}
		sum := 0.0
		for n := range w {
			w[n] = math.Exp(w[n] - m)
			sum += w[n]
		}
		for n, j := range js {
			for x := 0; x < d; x++ {
				out[i*d+x] += float32(w[n] / sum * float64(v[j*d+x]))
			}
		}
	}
	return out
}

func TestForward(t *testing.T) {
	const n, d = 150, 64
	r := rand.New(rand.NewSource(1))
	mk := func() []float32 {
		x := make([]float32, n*d)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	q, k, v := mk(), mk(), mk()
	out := make([]float32, n*d)
	if err := Forward(out, nil, q, k, v, Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: n, SeqK: n, HeadDim: d}); err != nil {
		t.Fatal(err)
	}
	want := naive(q, k, v, n, d)
	for i := range out {
		if math.Abs(float64(out[i]-want[i])) > 1e-5 {
			t.Fatalf("out[%d] = %v, want %v", i, out[i], want[i])
		}
	}
	if err := Forward(out[:10], nil, q, k, v, Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: n, SeqK: n, HeadDim: d}); err == nil {
		t.Fatal("short out accepted")
	}
}
`)
	run := func(args ...string) string {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		// Offline: everything must come from the checkout and the module
		// cache that building attngen itself filled.
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, step := range downstreamSteps {
		args := strings.Fields(strings.ReplaceAll(step, "CHECKOUT", root))
		if args[0] != "go" {
			t.Fatalf("step %q is not a go command", step)
		}
		out := run(args[1:]...)
		if step == "go generate ./..." {
			if _, err := os.Stat(filepath.Join(dir, "attn", "attention.go")); err != nil {
				t.Fatalf("go generate wrote no package: %v", err)
			}
		}
		t.Logf("%s\n%s", step, out)
	}
	t.Log(run("test", "-tags", "purego", "./..."))
	if v := run("tool", "attngen", "version"); !strings.Contains(v, "replaced by "+root) {
		t.Errorf("go tool attngen version: %q, want it to name the checkout", v)
	}
	// The README shows these steps; the test runs them.
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(downstreamSteps, "\n")
	want = strings.ReplaceAll(want, "CHECKOUT", "/path/to/attngen")
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not show the steps this test runs:\n%s", want)
	}
}
