package ptx

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
)

// dimMasks are the examples the head-dimension checks run at every size:
// a short predicate, the longest predicate (bigbird: the forward's
// bigPred and the dk/dv kernel's 32-row limit), the longest scan
// (neighborhood: the sm_90a kernel without a producer), a soft-cap
// (gemma2) and documents.
var dimMasks = []string{"causal", "bigbird", "neighborhood", "gemma2", "document"}

// otherDims are the head dimensions no example spec has (the examples'
// are 64 and 128, which TestPtxas, TestPtxas12 and TestBackwardPtxas
// assemble for every example).
var otherDims = []int{32, 96, 192, 256}

// dimPlan compiles example name at head dimension d for target tg.
func dimPlan(t *testing.T, name string, d int, tg Target) *gen.Plan {
	t.Helper()
	s, err := spec.ParseFile(filepath.Join("../../spec/examples", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s.HeadDim, s.HeadDimV = d, d
	p, err := gen.Compile(s, tg, nil)
	if err != nil {
		t.Fatalf("%s D=%d %s: %v", name, d, tg, err)
	}
	return p
}

// TestPtxasHeadDims assembles, at every head dimension the examples lack,
// the kernels of dimMasks (bf16): the sm_80 forward and the backward
// module with ptxas 11.8 for sm_80 and sm_90 (ATTNGEN_PTXAS) and ptxas
// 12.4 for sm_90 (ATTNGEN_PTXAS12), and the sm_90a forward with ptxas 12.4
// for sm_90a, and requires no spills, and shared memory within the
// target's limit (164 KiB a CTA on sm_80, 227 KiB on sm_90a). It logs a
// table of registers per kernel.
func TestPtxasHeadDims(t *testing.T) {
	t.Parallel()
	p11, p12 := os.Getenv("ATTNGEN_PTXAS"), os.Getenv("ATTNGEN_PTXAS12")
	if p11 == "" && p12 == "" {
		t.Skip("no ptxas: set ATTNGEN_PTXAS and ATTNGEN_PTXAS12 (scripts/fetch-ptxas.sh fetches them)")
	}
	type run struct {
		ptxas, ver, arch string
		sm               int
	}
	var plain []run
	if p11 != "" {
		plain = append(plain, run{p11, "11.8", "sm_80", 80}, run{p11, "11.8", "sm_90", 90})
	}
	if p12 != "" {
		plain = append(plain, run{p12, "12.4", "sm_90", 90})
	}
	dims := otherDims
	masks := dimMasks
	if testing.Short() {
		masks = masks[:2]
	}
	type job struct {
		name    string
		kernels int // reports expected: 1 forward, 2 backward
	}
	var js []job
	var jobs []asmJob
	for _, d := range dims {
		for _, m := range masks {
			p := dimPlan(t, m, d, SM80)
			for _, rn := range plain {
				tg := Target{SM: rn.sm, Elem: "bf16"}
				k := forwardOf(t, p, Config{Target: tg})
				if k.DynShared > 164<<10 {
					t.Errorf("%s D=%d %s: forward shared memory %d bytes > 164 KiB", m, d, tg, k.DynShared)
				}
				js = append(js, job{fmt.Sprintf("D=%d %s fwd %s ptxas %s", d, m, rn.arch, rn.ver), 1})
				jobs = append(jobs, asmJob{rn.ptxas, rn.arch, k.PTX})
				b := backwardOf(t, p, Config{Target: tg})
				if b.DQShared > 164<<10 || b.DKVShared > 164<<10 {
					t.Errorf("%s D=%d %s: backward shared memory %d, %d bytes > 164 KiB", m, d, tg, b.DQShared, b.DKVShared)
				}
				js = append(js, job{fmt.Sprintf("D=%d %s bwd %s ptxas %s", d, m, rn.arch, rn.ver), 2})
				jobs = append(jobs, asmJob{rn.ptxas, rn.arch, b.PTX})
			}
			if p12 != "" {
				hp := dimPlan(t, m, d, SM90a)
				k := forwardOf(t, hp, Config{Target: SM90a})
				if k.DynShared > 227<<10 {
					t.Errorf("%s D=%d sm_90a: shared memory %d bytes > 227 KiB", m, d, k.DynShared)
				}
				js = append(js, job{fmt.Sprintf("D=%d %s fwd sm_90a ptxas 12.4", d, m), 1})
				jobs = append(jobs, asmJob{p12, "sm_90a", k.PTX})
			}
		}
	}
	var table []string
	for x, r := range assembleAll(t, jobs) {
		name := js[x].name
		if r.err != nil {
			t.Errorf("%s: ptxas failed: %v\n%s", name, r.err, r.log)
			continue
		}
		spills, regs := spillRE.FindAllStringSubmatch(r.log, -1), regsRE.FindAllStringSubmatch(r.log, -1)
		if len(spills) != js[x].kernels || len(regs) != js[x].kernels {
			t.Errorf("%s: want %d kernel reports:\n%s", name, js[x].kernels, r.log)
			continue
		}
		var rs, ss []string
		for k := range spills {
			rs = append(rs, regs[k][1])
			ss = append(ss, spills[k][1]+"/"+spills[k][2])
			if spills[k][1] != "0" || spills[k][2] != "0" {
				t.Errorf("%s: spills:\n%s", name, r.log)
			}
		}
		table = append(table, fmt.Sprintf("%s: registers %s, spill stores/loads %s", name, strings.Join(rs, " "), strings.Join(ss, " ")))
	}
	sort.Strings(table)
	t.Logf("\n%s", strings.Join(table, "\n"))
}
