package ptx

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
)

// fullScore is the score stage with every part, its values at call time
// (the most parameters and registers): soft-capping, signed ALiBi, learned
// sinks.
var fullScore = spec.Score{SoftCap: true, CapAtCall: true, Alibi: true, SlopesAtCall: true, LearnedSinks: true}

// TestScorePtxas assembles the kernels of every example with the full
// score stage (fullScore) added to its mask, or in place of its own, with
// both ptxas versions (ATTNGEN_PTXAS: the sm_80 forward for sm_80 and
// sm_90, the backward for sm_80; ATTNGEN_PTXAS12: the backward for sm_90,
// the sm_90a forward at head dimensions 64 and 128) and requires success
// and no spills in any of the modules' kernels, and of the sm_90a ones
// what TestHopperProducerPtxas12 requires: no remark, both setmaxnreg
// kept with a producer, the consumers within their registers (hopRegs).
// The examples as written (with and without score sections) are
// TestPtxas's, TestPtxas12's, TestBackwardPtxas's, TestHopperPtxas12's and
// TestHopperProducerPtxas12's.
func TestScorePtxas(t *testing.T) {
	t.Parallel()
	p11 := os.Getenv("ATTNGEN_PTXAS")
	p12 := os.Getenv("ATTNGEN_PTXAS12")
	if p11 == "" || p12 == "" {
		t.Skip("needs ATTNGEN_PTXAS and ATTNGEN_PTXAS12 (scripts/fetch-ptxas.sh)")
	}
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	var names []string
	var jobs, hopJobs []asmJob
	var hops []cubin
	var hopPlans []*gen.Plan
	for _, file := range files {
		s, err := spec.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		s.Score = fullScore
		base := filepath.Base(file) + " +score"
		p80, err := gen.Compile(s, SM80, nil)
		if err != nil {
			t.Fatal(err)
		}
		fwd := forwardOf(t, p80, Config{Target: SM80})
		bwd, err := GenerateBackward(p80, Config{Target: SM80})
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		for _, j := range []struct {
			what string
			job  asmJob
		}{
			{"forward sm_80", asmJob{p11, "sm_80", fwd.PTX}},
			{"forward sm_90", asmJob{p11, "sm_90", fwd.PTX}},
			{"backward sm_80", asmJob{p11, "sm_80", bwd.PTX}},
			{"backward sm_90 (12)", asmJob{p12, "sm_90", bwd.PTX}},
		} {
			names = append(names, base+" "+j.what)
			jobs = append(jobs, j.job)
		}
		for _, d := range []int{64, 128} {
			p := compilePattern(t, SM90a, s.Name, s.Pattern(), d)
			k := forwardOf(t, p, Config{Target: SM90a})
			hops = append(hops, cubin{name: fmt.Sprintf("%s forward sm_90a D=%d (12)", base, d), k: k})
			hopJobs = append(hopJobs, asmJob{p12, "sm_90a", k.PTX})
			hopPlans = append(hopPlans, p)
		}
	}
	for x, r := range assembleAll(t, jobs) {
		if r.err != nil {
			t.Errorf("%s: ptxas failed: %v\n%s", names[x], r.err, r.log)
			continue
		}
		if used, ok := noSpills(t, names[x], r.log); ok {
			t.Logf("%s: %s registers, no spills", names[x], used)
		}
	}
	hops = assembled(t, hops, hopJobs)
	lists := disassembled(t, nvdisasm(t, p12), hops)
	reg := regexp.MustCompile(`\bR(\d+)\b`)
	for x, c := range hops {
		used, ok := noSpills(t, c.name, c.log)
		for _, line := range strings.Split(strings.TrimSpace(c.log), "\n") {
			if !ptxasPlain.MatchString(line) {
				t.Errorf("%s: ptxas says: %s", c.name, line)
				ok = false
			}
		}
		top := 0
		for _, m := range reg.FindAllStringSubmatch(lists[x], -1) {
			var r int
			fmt.Sscan(m[1], &r)
			top = max(top, r)
		}
		d := c.k.HeadDim
		prod := hopProducer(hopPlans[x], d)
		if n := strings.Count(lists[x], "USETMAXREG"); prod && n != 2 {
			t.Errorf("%s: %d USETMAXREG in the SASS, want 2 (ptxas dropped setmaxnreg)", c.name, n)
			ok = false
		}
		if cr, _ := hopRegs(d); prod && top >= cr {
			t.Errorf("%s: register R%d beyond the consumers' %d", c.name, top, cr)
			ok = false
		}
		if ok {
			t.Logf("%s: %s registers, producer %v, highest register R%d, no spills", c.name, used, prod, top)
		}
	}
}

// noSpills checks every kernel's ptxas report in log: no spill stores or
// loads. It returns the kernels' register counts.
func noSpills(t *testing.T, name, log string) (string, bool) {
	t.Helper()
	spills := spillRE.FindAllStringSubmatch(log, -1)
	regs := regsRE.FindAllStringSubmatch(log, -1)
	if len(spills) == 0 || len(regs) != len(spills) {
		t.Errorf("%s: no report:\n%s", name, log)
		return "", false
	}
	var used []string
	for k, m := range spills {
		if m[1] != "0" || m[2] != "0" {
			t.Errorf("%s: spills:\n%s", name, log)
			return "", false
		}
		used = append(used, regs[k][1])
	}
	return strings.Join(used, " and "), true
}

// TestScoreSASS reports (and bounds) what soft-capping costs in the
// key-tile loop: the SASS of gemma2 (window 4096, soft-cap 50) against
// the same spec without its score section and against the window
// example, for sm_80 (the mma.sync kernel) and sm_90a (the wgmma kernel),
// assembled with ptxas 12. The soft-capped loop must hold the plain one's
// HMMA/HGMMA and LDSM counts and TileK/2 more MUFU.EX2 (wantSASSLoop,
// wantHopperLoop with the stage).
func TestScoreSASS(t *testing.T) {
	t.Parallel()
	p := ptxas12(t)
	dis := nvdisasm(t, p)
	type kernel struct {
		name string
		sc   bool
	}
	var cs []cubin
	var jobs []asmJob
	var ks []kernel
	for _, c := range []struct {
		file  string
		score bool
	}{{"gemma2", true}, {"gemma2", false}, {"window", false}} {
		s, err := spec.ParseFile(filepath.Join("../../spec/examples", c.file+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		name := c.file
		if !c.score {
			if s.Score.Active() {
				name += " without score"
			}
			s.Score = spec.Score{}
		}
		for _, tg := range []Target{SM80, SM90a} {
			pl, err := gen.Compile(s, tg, nil)
			if err != nil {
				t.Fatal(err)
			}
			k, err := GenerateForward(pl, Config{Target: tg})
			if err != nil {
				t.Fatal(err)
			}
			arch := "sm_80"
			if tg.Accel {
				arch = "sm_90a"
			}
			cs = append(cs, cubin{name: fmt.Sprintf("%s %s", name, arch), k: k})
			jobs = append(jobs, asmJob{p, arch, k.PTX})
			ks = append(ks, kernel{name, c.score})
		}
	}
	cs = assembled(t, cs, jobs)
	lists := disassembled(t, dis, cs)
	for x, c := range cs {
		got, err := readSASSLoop(lists[x])
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var want sassLoop
		if c.k.Target.Accel {
			want = wantHopperLoop(c.k.HeadDim, c.k.Threads > hopThreads, c.k.Score)
		} else {
			want = wantSASSLoop(c.k.HeadDim, c.k.Score)
		}
		insts := got.Insts
		got.Insts = 0
		if got != want {
			t.Errorf("%s: every tile %v, want %v; conditional %v, want %v; outside %v, want %v", c.name, got.Every, want.Every, got.Cond, want.Cond, got.Outside, want.Outside)
		}
		t.Logf("%s (D=%d): %d SASS instructions in the key-tile loop; every tile %v", c.name, c.k.HeadDim, insts, got.Every)
	}
}
