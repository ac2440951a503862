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
	t.Parallel()
	ptxas := os.Getenv("ATTNGEN_PTXAS")
	if ptxas == "" {
		if p, err := exec.LookPath("ptxas"); err == nil {
			ptxas = p
		} else {
			t.Skip("no ptxas: set ATTNGEN_PTXAS (scripts/fetch-ptxas.sh fetches one)")
		}
	}
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	type kernel struct {
		file string
		tg   Target
		k    *Forward
	}
	var ks []kernel
	var jobs []asmJob
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
				k := forwardOf(t, plan, Config{Target: tg})
				ks = append(ks, kernel{f, tg, k})
				jobs = append(jobs, asmJob{ptxas, tg.Arch(), k.PTX})
			}
		}
	}
	for x, r := range assembleAll(t, jobs) {
		f, tg, k, out := ks[x].file, ks[x].tg, ks[x].k, r.log
		if r.err != nil {
			t.Fatalf("%s %s: ptxas failed: %v\n%s", filepath.Base(f), tg, r.err, out)
		}
		m := spillRE.FindStringSubmatch(out)
		if m == nil || m[1] != "0" || m[2] != "0" {
			t.Fatalf("%s %s: spills or no report:\n%s", filepath.Base(f), tg, out)
		}
		regs := regsRE.FindStringSubmatch(out)
		if regs == nil {
			t.Fatalf("%s: no register count:\n%s", f, out)
		}
		t.Logf("%s %s: %s registers, no spills, %d bytes dynamic shared memory", filepath.Base(f), tg, regs[1], k.DynShared)
	}
}
