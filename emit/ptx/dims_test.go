package ptx

import (
	"fmt"
	"github.com/attngen/attngen/verify"
	"math/rand/v2"
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

// dimCase is one head dimension of TestInterpHeadDims with its mask.
type dimCase struct {
	d  int
	mk testMask
}

// dimCases give every size the examples lack one mask with partial
// tiles: a window, a sink and window (long empty runs), blocks (full and
// empty tiles), causal.
var dimCases = []dimCase{
	{32, testMask{"window", spec.Pattern{Mask: spec.Window(40), Causal: true}}},
	{96, testMask{"sinkwin", spec.Pattern{Mask: spec.Union(spec.Global(3), spec.Window(17)), Causal: true}}},
	{192, testMask{"block", spec.Pattern{Mask: spec.Block(24)}}},
	{256, testMask{"causal", spec.Pattern{Mask: spec.Full(), Causal: true}}},
}

// shortDims picks the sizes -short runs for a kernel: one each, chosen
// for the paths the other sizes lack.
func shortDims(cases []dimCase, d int) []dimCase {
	if !testing.Short() {
		return cases
	}
	for _, c := range cases {
		if c.d == d {
			return []dimCase{c}
		}
	}
	panic("shortDims: no such size")
}

// TestInterpHeadDims runs every kernel at every head dimension the
// examples lack (dimCases) under the interpreter on small awkward shapes
// against the float64 reference, and checks that non-finite values at
// masked positions reach no output (verify.CheckNonFinite for the
// forwards, checkBackwardNonFinite for the backward). -short runs one size
// per kernel: the sm_80 forward and the backward at 96 (copy lanes left
// idle) and 192 (dk/dv's split columns), the sm_90a forward at 96 (the
// 64-byte swizzle).
func TestInterpHeadDims(t *testing.T) {
	t.Parallel()
	sh := shape{1, 2, 1, 70, 130} // grouped heads, SeqQ < SeqK, not multiples of the tiles
	r := rand.New(rand.NewPCG(95, 96))
	nf := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 37, SeqK: 70}
	t.Run("sm80", func(t *testing.T) {
		for _, c := range shortDims(dimCases, 96) {
			p := compile(t, c.mk.name, c.mk.p.Mask, c.mk.p.Causal, c.d)
			t.Run(fmt.Sprintf("%s/d%d", c.mk.name, c.d), func(t *testing.T) {
				runForward(t, p, Config{SoftLg2: true}, sh, nil, true)
				k, mod := generated(t, p, Config{SoftLg2: true})
				s := nf
				s.HeadDim = c.d
				if err := verify.CheckNonFinite(c.mk.p, hopperRun(t, k, mod), s, r, 1); err != nil {
					t.Error(err)
				}
			})
		}
	})
	t.Run("backward", func(t *testing.T) {
		for _, c := range shortDims(dimCases, 192) {
			p := compile(t, c.mk.name, c.mk.p.Mask, c.mk.p.Causal, c.d)
			t.Run(fmt.Sprintf("%s/d%d", c.mk.name, c.d), func(t *testing.T) {
				res := runBackwardKernels(t, p, Config{SoftLg2: true}, sh, nil, uint64(c.d), nil)
				if bad := checkBackward(t, res, p.Source, BF16, true); bad > 0 {
					t.Fatalf("%d failures", bad)
				}
			})
		}
		if !testing.Short() {
			for k, c := range dimCases[1:3] { // the idle copy lanes and the split columns
				checkBackwardNonFinite(t, k, c.mk, c.d)
			}
		}
	})
	t.Run("sm90a", func(t *testing.T) {
		for _, c := range shortDims(dimCases, 96) {
			p := compileFor(t, SM90a, c.mk.name, c.mk.p.Mask, c.mk.p.Causal, c.d)
			t.Run(fmt.Sprintf("%s/d%d", c.mk.name, c.d), func(t *testing.T) {
				cfg := Config{Target: SM90a, SoftLg2: true}
				runForward(t, p, cfg, fitStride(p, sh), nil, true)
				k, mod := generated(t, p, cfg)
				s := nf
				s.HeadDim = c.d
				if err := verify.CheckNonFinite(c.mk.p, hopperRun(t, k, mod), s, r, 1); err != nil {
					t.Error(err)
				}
			})
		}
	})
}

// TestSASSHeadDims is TestSASSInnerLoop at the head dimensions the
// examples lack: the sm_80 forward of causal and gemma2 (the soft-cap's
// tanh), written for sm_90 and assembled for sm_90a with ptxas 12.4, its
// key-tile loop counted against wantSASSLoop (key tiles of 32 and Q read
// per tile at D = 192 and 256).
func TestSASSHeadDims(t *testing.T) {
	t.Parallel()
	p12 := ptxas12(t)
	dis := nvdisasm(t, p12)
	var cs []cubin
	var jobs []asmJob
	for _, d := range otherDims {
		for _, m := range []string{"causal", "gemma2"} {
			k := forwardOf(t, dimPlan(t, m, d, SM80), Config{Target: Target{SM: 90, Elem: "bf16"}})
			cs = append(cs, cubin{name: fmt.Sprintf("%s D=%d", m, d), k: k})
			jobs = append(jobs, asmJob{p12, "sm_90a", k.PTX})
		}
	}
	cs = assembled(t, cs, jobs)
	lists := disassembled(t, dis, cs)
	for x, c := range cs {
		got, err := readSASSLoop(lists[x])
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := wantSASSLoop(c.k.HeadDim, c.k.Score)
		got.Insts = 0
		if got != want {
			t.Errorf("%s: SASS of the key-tile loop\n every tile: %v\n  want      %v\n conditional: %v\n  want        %v\n outside: %v\n  want    %v",
				c.name, got.Every, want.Every, got.Cond, want.Cond, got.Outside, want.Outside)
			continue
		}
		t.Logf("%s: every tile %v; sanitized partial tiles add %v; outside the loop %v", c.name, got.Every, got.Cond, got.Outside)
	}
}
