package ptx

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
)

var spillRE = regexp.MustCompile(`(\d+) bytes spill stores, (\d+) bytes spill loads`)
var regsRE = regexp.MustCompile(`Used (\d+) registers`)

// TestPtxas assembles every example's forward kernel (each default
// target's element type, D of the spec), written for sm_80 and for sm_90,
// with NVIDIA's ptxas for that SM and requires success and no register
// spills. It needs ptxas, which no GPU is needed for:
// ATTNGEN_PTXAS names it (.ci/run fetches it with scripts/fetch-ptxas.sh);
// without it the test is skipped.
func TestPtxas(t *testing.T) {
	ptxas := os.Getenv("ATTNGEN_PTXAS")
	if ptxas == "" {
		if p, err := exec.LookPath("ptxas"); err == nil {
			ptxas = p
		} else {
			t.Skip("no ptxas: set ATTNGEN_PTXAS (scripts/fetch-ptxas.sh fetches one)")
		}
	}
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	dir := t.TempDir()
	for _, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := gen.Compile(s, SM80, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range DefaultTargets {
			for _, sm := range []int{80, 90} {
				tg := Target{SM: sm, Elem: dt.Elem}
				k, err := GenerateForward(plan, Config{Target: tg})
				if err != nil {
					t.Fatal(err)
				}
				src := filepath.Join(dir, k.Name+"_"+tg.Name()+".ptx")
				if err := os.WriteFile(src, []byte(k.PTX), 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(ptxas, "-v", "--gpu-name", tg.Arch(), src, "-o", filepath.Join(dir, "k.cubin")).CombinedOutput()
				if err != nil {
					t.Fatalf("%s %s: ptxas failed: %v\n%s", filepath.Base(f), tg, err, out)
				}
				m := spillRE.FindSubmatch(out)
				if m == nil || string(m[1]) != "0" || string(m[2]) != "0" {
					t.Fatalf("%s %s: spills or no report:\n%s", filepath.Base(f), tg, out)
				}
				regs := regsRE.FindSubmatch(out)
				if regs == nil {
					t.Fatalf("%s: no register count:\n%s", f, out)
				}
				t.Logf("%s %s: %s registers, no spills, %d bytes dynamic shared memory", filepath.Base(f), tg, regs[1], k.DynShared)
			}
		}
	}
}
