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

// TestPtxas assembles every example's forward kernel (bf16 and f16, D of
// the spec) with NVIDIA's ptxas for sm_80 and sm_90 and requires success
// and no register spills. It needs ptxas, which no GPU is needed for:
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
		plan, err := gen.Compile(s, Sm80, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, elem := range []Type{BF16, F16} {
			k, err := GenerateForward(plan, Config{Elem: elem})
			if err != nil {
				t.Fatal(err)
			}
			src := filepath.Join(dir, k.Name+"_"+elem.String()+".ptx")
			if err := os.WriteFile(src, []byte(k.PTX), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, arch := range []string{"sm_80", "sm_90"} {
				out, err := exec.Command(ptxas, "-v", "--gpu-name", arch, src, "-o", filepath.Join(dir, "k.cubin")).CombinedOutput()
				if err != nil {
					t.Fatalf("%s %s %s: ptxas failed: %v\n%s", filepath.Base(f), elem, arch, err, out)
				}
				m := spillRE.FindSubmatch(out)
				if m == nil || string(m[1]) != "0" || string(m[2]) != "0" {
					t.Fatalf("%s %s %s: spills or no report:\n%s", filepath.Base(f), elem, arch, out)
				}
				regs := regsRE.FindSubmatch(out)
				if regs == nil {
					t.Fatalf("%s: no register count:\n%s", f, out)
				}
				t.Logf("%s %s %s: %s registers, no spills, %d bytes dynamic shared memory", filepath.Base(f), elem, arch, regs[1], k.DynShared)
			}
		}
	}
}
