package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// downstreamSteps are the README's steps ("Use it from your module") for a
// module that uses attngen from a local checkout before attngen is
// published, word for word; CHECKOUT stands for the checkout's path. The
// tool line and the replace let `go mod tidy` take the checkout at the zero
// pseudo-version without asking a proxy for attngen; attngen's own go.sum
// gives the checksums of its dependencies, so tidy adds no checksum it
// would have to look up in the checksum database (which a machine without
// network, or with only a module proxy, cannot reach).
var downstreamSteps = []string{
	"go mod init example.com/downstream",
	"go mod edit -replace github.com/attngen/attngen=CHECKOUT",
	"go mod edit -tool github.com/attngen/attngen/cmd/attngen",
	"cat CHECKOUT/go.sum >> go.sum",
	"go mod tidy",
	"go generate ./...",
	"go test ./...",
}

// TestDownstreamGoGenerate builds the README's downstream scenario for real,
// twice, each time in a new module outside this repository (a spec file and
// a //go:generate line) made by exactly the README's steps, with a module
// cache and GOPATH of its own that start empty, so that nothing an earlier
// run left in a cache (modules, checksum-database state) can help:
//
//   - online: modules come from a module proxy (a file:// proxy serving
//     exactly attngen's build list, copied from the module cache this test
//     binary was built from) and the checksum database is unreachable
//     (HTTPS_PROXY points at a closed port), as on a fresh machine whose
//     only network is a module proxy; then go generate, go test with and
//     without -tags purego, and go tool attngen version;
//   - offline: GOPROXY=off, after building attngen in the checkout filled
//     the (new) module cache, as for a user without network who built
//     attngen.
//
// The module's test checks the generated Forward against a straightforward
// implementation.
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
	proxy := buildModuleProxy(t, goBin, root)
	cacheRoot := t.TempDir()
	gopath := filepath.Join(cacheRoot, "gopath")
	// env is the environment of every go command below: a GOPATH (and so a
	// module cache and checksum-database cache) that starts empty, the
	// default checksum database (unreachable: any lookup fails, as it does
	// on a machine that reaches only a module proxy), and the given proxy.
	env := func(goproxy string) []string {
		var e []string
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			switch strings.ToUpper(k) {
			case "GOPATH", "GOMODCACHE", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GONOSUMCHECK", "GOPRIVATE",
				"GONOPROXY", "GOINSECURE", "GOFLAGS", "GOWORK", "GOTOOLCHAIN", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY":
				continue
			}
			e = append(e, kv)
		}
		return append(e, "GOPATH="+gopath, "GOMODCACHE="+filepath.Join(gopath, "pkg", "mod"),
			"GOPROXY="+goproxy, "GOSUMDB=sum.golang.org", "GOFLAGS=-modcacherw", "GOWORK=off",
			"GOTOOLCHAIN=local", "HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9")
	}
	// fresh empties the GOPATH, module cache included.
	fresh := func() {
		if err := os.RemoveAll(gopath); err != nil {
			t.Fatal(err)
		}
	}
	// The two runs use the same GOPATH path (emptied in between), so the
	// second one finds attngen's compiled packages in the build cache.
	t.Run("online", func(t *testing.T) {
		fresh()
		dir := downstreamModule(t)
		runDownstreamSteps(t, goBin, dir, root, env("file://"+filepath.ToSlash(proxy)))
		e := env("file://" + filepath.ToSlash(proxy))
		t.Log(runGo(t, goBin, dir, e, "test", "-tags", "purego", "./..."))
		if v := runGo(t, goBin, dir, e, "tool", "attngen", "version"); !strings.Contains(v, "replaced by "+root) {
			t.Errorf("go tool attngen version: %q, want it to name the checkout", v)
		}
	})
	t.Run("offline", func(t *testing.T) {
		fresh()
		// Building the attngen command in the checkout fills the module cache.
		runGo(t, goBin, root, env("file://"+filepath.ToSlash(proxy)), "build", "-o", os.DevNull, "./cmd/attngen")
		dir := downstreamModule(t)
		runDownstreamSteps(t, goBin, dir, root, env("off"))
	})
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

// runGo runs the go command in dir with env and returns its output,
// failing the test if it fails.
func runGo(t *testing.T, goBin, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runDownstreamSteps runs downstreamSteps in dir, CHECKOUT replaced by root.
// The one step that is not a go command, appending attngen's go.sum to the
// module's, is done here as the shell would.
func runDownstreamSteps(t *testing.T, goBin, dir, root string, env []string) {
	t.Helper()
	for _, step := range downstreamSteps {
		step = strings.ReplaceAll(step, "CHECKOUT", root)
		args := strings.Fields(step)
		switch {
		case len(args) == 4 && args[0] == "cat" && args[2] == ">>":
			appendFile(t, args[1], filepath.Join(dir, args[3]))
			continue
		case args[0] != "go":
			t.Fatalf("step %q is not a go command", step)
		}
		out := runGo(t, goBin, dir, env, args[1:]...)
		if step == "go generate ./..." {
			if _, err := os.Stat(filepath.Join(dir, "attn", "attention.go")); err != nil {
				t.Fatalf("go generate wrote no package: %v", err)
			}
		}
		t.Logf("%s\n%s", step, out)
	}
}

// appendFile appends the file src to dst, creating dst if needed.
func appendFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dst, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// buildModuleProxy lays out a file:// module proxy serving exactly the
// modules attngen's go.mod requires, copied from the module cache's
// download directory (every file the cache has of each required version:
// .info, .mod and, for modules whose packages were built, .zip), and
// returns its directory. Copying from the cache is no reliance
// on what it happens to hold: this test binary could not have been built
// without these modules.
func buildModuleProxy(t *testing.T, goBin, root string) string {
	t.Helper()
	cmd := exec.Command(goBin, "env", "GOMODCACHE")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	cache := filepath.Join(strings.TrimSpace(string(out)), "cache", "download")
	// The requirements of attngen's go.mod, read from the file alone: the
	// modules whose go.mod files any build in this module loads and, since
	// go.mod is tidy, every module that provides a package attngen imports.
	// (`go list -m all` would need the go.mod files of the whole module
	// graph, which a module cache filled by builds does not hold.)
	cmd = exec.Command(goBin, "mod", "edit", "-json")
	cmd.Dir = root
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var gomod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &gomod); err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	served := 0
	for _, m := range gomod.Require {
		esc := escapeModulePath(m.Path)
		from, to := filepath.Join(cache, esc, "@v"), filepath.Join(proxy, esc, "@v")
		if err := os.MkdirAll(to, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, ext := range []string{".info", ".mod", ".zip"} {
			b, err := os.ReadFile(filepath.Join(from, m.Version+ext))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, m.Version+ext), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(to, "list"), []byte(m.Version+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		served++
	}
	if served == 0 {
		t.Fatal("go.mod requires no module")
	}
	return proxy
}

// escapeModulePath is a module path as the module cache and proxies spell
// it: each upper-case letter becomes '!' and its lower case.
func escapeModulePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// downstreamModule writes the downstream module's files (no go.mod yet)
// into a new folder and returns it.
func downstreamModule(t *testing.T) string {
	t.Helper()
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
	return dir
}
