package ptx

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// ptxas 12.4 (Debian trixie's non-free toolkit; scripts/fetch-ptxas.sh
// 12.4) assembles for sm_90a, which ptxas 11.8 cannot, and comes with
// nvdisasm, which lists the SASS of a cubin. With them TestPtxas12
// assembles every example kernel for sm_90 and sm_90a without spills and
// TestSASSInnerLoop counts the tensor-core, shared-memory matrix and
// exponential instructions of the key-tile loop, so that a regression of
// the generated code shows without a GPU. ATTNGEN_PTXAS12 names that ptxas
// (.ci/run sets it); nvdisasm is looked up beside it, then as
// ATTNGEN_NVDISASM, then on PATH. Without them the tests are skipped.

// ptxas12 returns the ptxas of ATTNGEN_PTXAS12, failing the test when it
// is older than 12.0 (no sm_90a), or skips.
func ptxas12(t *testing.T) string {
	t.Helper()
	p := os.Getenv("ATTNGEN_PTXAS12")
	if p == "" {
		t.Skip("no ptxas 12: set ATTNGEN_PTXAS12 (scripts/fetch-ptxas.sh 12.4 fetches ptxas 12.4 and nvdisasm)")
	}
	out, err := exec.Command(p, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("ATTNGEN_PTXAS12=%s: %v\n%s", p, err, out)
	}
	m := regexp.MustCompile(`release (\d+)\.(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("ATTNGEN_PTXAS12=%s: no release in its --version:\n%s", p, out)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 12 {
		t.Fatalf("ATTNGEN_PTXAS12=%s is ptxas %s.%s: sm_90a needs 12.0 or later (scripts/fetch-ptxas.sh 12.4)", p, m[1], m[2])
	}
	return p
}

// nvdisasm returns the nvdisasm beside ptxas, ATTNGEN_NVDISASM or the one on
// PATH, or skips.
func nvdisasm(t *testing.T, ptxas string) string {
	t.Helper()
	if p := filepath.Join(filepath.Dir(ptxas), "nvdisasm"); fileExists(p) {
		return p
	}
	if p := os.Getenv("ATTNGEN_NVDISASM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("nvdisasm"); err == nil {
		return p
	}
	t.Skip("no nvdisasm beside ATTNGEN_PTXAS12, in ATTNGEN_NVDISASM or on PATH (scripts/fetch-ptxas.sh 12.4 fetches it)")
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// cubin is one example kernel assembled by ptxas 12.
type cubin struct {
	name string // spec file, element type and SM, for messages
	k    *Forward
	path string
	log  string // ptxas -v
}

// TestMain removes cubinDir, where assembleAll keeps the cubins of the
// test process (TestPtxas12 and TestSASSInnerLoop read the same ones).
func TestMain(m *testing.M) {
	code := m.Run()
	if cubinDir != "" {
		os.RemoveAll(cubinDir)
	}
	os.Exit(code)
}

// assemble12 assembles every example's forward kernel (both default element
// types, the module written for sm_90) with ptxas 12 for each of archs.
func assemble12(t *testing.T, ptxas string, archs ...string) []cubin {
	t.Helper()
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	var cs []cubin
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
			tg := Target{SM: 90, Elem: dt.Elem}
			k := forwardOf(t, plan, Config{Target: tg})
			for _, arch := range archs {
				cs = append(cs, cubin{name: fmt.Sprintf("%s %s %s", filepath.Base(f), dt.Elem, arch), k: k})
				jobs = append(jobs, asmJob{ptxas, arch, k.PTX})
			}
		}
	}
	return assembled(t, cs, jobs)
}

// disassembled returns the SASS listings of the cubins (disassembleAll); a
// failed nvdisasm fails t, naming the cubin.
func disassembled(t *testing.T, dis string, cs []cubin) []string {
	t.Helper()
	paths := make([]string, len(cs))
	for x, c := range cs {
		paths[x] = c.path
	}
	var lists []string
	for x, r := range disassembleAll(dis, paths) {
		if r.err != nil {
			t.Fatalf("%s: nvdisasm: %v\n%s", cs[x].name, r.err, r.log)
		}
		lists = append(lists, r.log)
	}
	return lists
}

// assembled runs the jobs (assembleAll), job x for cubin cs[x], and fills
// in the cubins' paths and logs; a failed run fails t, naming the cubin.
func assembled(t *testing.T, cs []cubin, jobs []asmJob) []cubin {
	t.Helper()
	for x, r := range assembleAll(t, jobs) {
		if r.err != nil {
			t.Fatalf("%s: ptxas failed: %v\n%s", cs[x].name, r.err, r.log)
		}
		cs[x].path, cs[x].log = r.cubin, r.log
	}
	return cs
}

// TestPtxas12 assembles every example's forward kernel, bf16 and f16, for
// sm_90 and sm_90a with ptxas 12 and requires success and no spills.
func TestPtxas12(t *testing.T) {
	t.Parallel()
	p := ptxas12(t)
	for _, c := range assemble12(t, p, "sm_90", "sm_90a") {
		m := spillRE.FindStringSubmatch(c.log)
		if m == nil || m[1] != "0" || m[2] != "0" {
			t.Errorf("%s: spills or no report:\n%s", c.name, c.log)
			continue
		}
		regs := regsRE.FindStringSubmatch(c.log)
		if regs == nil {
			t.Fatalf("%s: no register count:\n%s", c.name, c.log)
		}
		t.Logf("%s: %s registers, no spills", c.name, regs[1])
	}
}

// sassCounts are the instructions the SASS check counts.
type sassCounts struct {
	HMMA      int // HMMA.16816 (mma.sync.m16n8k16): one per 16x8x16 product
	HGMMA     int // HGMMA.64xNx16 (wgmma.mma_async m64nNk16), per warp of the warpgroup
	UTMALDG   int // UTMALDG (cp.async.bulk.tensor global to shared)
	DEPBAR    int // WARPGROUP.DEPBAR (a wait for wgmma: one per wgmma.wait_group unless ptxas serializes wgmma)
	LDSM      int // LDSM.16.M88.4 (ldmatrix.x4): four 8x8 b16 matrices
	LDSMT     int // LDSM.16.MT88.4 (ldmatrix.x4.trans)
	EX2       int // MUFU.EX2 (ex2.approx.ftz.f32)
	OtherHMMA int // HMMA of any other shape (none expected)
}

func (c sassCounts) String() string {
	if c.HGMMA > 0 || c.UTMALDG > 0 {
		return fmt.Sprintf("HGMMA %d, WARPGROUP.DEPBAR %d, UTMALDG %d, MUFU.EX2 %d", c.HGMMA, c.DEPBAR, c.UTMALDG, c.EX2)
	}
	return fmt.Sprintf("HMMA.16816 %d, LDSM.16.M88.4 %d, LDSM.16.MT88.4 %d, MUFU.EX2 %d", c.HMMA, c.LDSM, c.LDSMT, c.EX2)
}

func (c *sassCounts) add(op string) {
	switch {
	case strings.HasPrefix(op, "HGMMA."):
		c.HGMMA++
	case strings.HasPrefix(op, "UTMALDG"):
		c.UTMALDG++
	case strings.HasPrefix(op, "WARPGROUP.DEPBAR"):
		c.DEPBAR++
	case strings.HasPrefix(op, "HMMA.16816."):
		c.HMMA++
	case strings.HasPrefix(op, "HMMA"):
		c.OtherHMMA++
	case op == "LDSM.16.M88.4":
		c.LDSM++
	case op == "LDSM.16.MT88.4":
		c.LDSMT++
	case op == "MUFU.EX2":
		c.EX2++
	}
}

// sassLoop is what TestSASSInnerLoop reads of a kernel's SASS: the key-tile
// loop (of the backward branches whose bodies hold HMMA or HGMMA and no
// other such loop, the one whose body holds the most), split into the
// instructions every tile runs and those a forward branch inside the loop
// may skip, and the instructions outside it.
type sassLoop struct {
	Every, Cond, Outside sassCounts
	Insts                int // instructions in the loop
}

var (
	sassInstRE  = regexp.MustCompile(`^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_.]*)`)
	sassLabelRE = regexp.MustCompile(`^(\.L_x_\d+):`)
	sassTargRE  = regexp.MustCompile("`\\((\\.L_x_\\d+)\\)")
)

// readSASSLoop parses nvdisasm's listing of one kernel.
func readSASSLoop(listing string) (sassLoop, error) {
	type inst struct {
		op, target string
	}
	var insts []inst
	labels := map[string]int{}
	for _, line := range strings.Split(listing, "\n") {
		if m := sassLabelRE.FindStringSubmatch(line); m != nil {
			labels[m[1]] = len(insts)
			continue
		}
		m := sassInstRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		in := inst{op: m[1]}
		if in.op == "BRA" {
			if t := sassTargRE.FindStringSubmatch(line); t != nil {
				in.target = t[1]
			}
		}
		insts = append(insts, in)
	}
	if len(insts) == 0 {
		return sassLoop{}, fmt.Errorf("no instructions in the listing")
	}
	hmma := make([]int, len(insts)+1) // prefix counts of HMMA
	for i, in := range insts {
		hmma[i+1] = hmma[i]
		if strings.HasPrefix(in.op, "HMMA") || strings.HasPrefix(in.op, "HGMMA") {
			hmma[i+1]++
		}
	}
	// loops (backward branches) holding a product; a loop that holds
	// another such loop (the persistent kernel's loop over work items
	// around its key-tile loop) is not the key-tile loop
	var loops [][2]int
	for i, in := range insts {
		if in.target == "" {
			continue
		}
		to, ok := labels[in.target]
		if !ok {
			return sassLoop{}, fmt.Errorf("branch to unknown label %s", in.target)
		}
		if to <= i && hmma[i+1] > hmma[to] {
			loops = append(loops, [2]int{to, i})
		}
	}
	lo, hi, best := -1, -1, 0
	for _, a := range loops {
		inner := false
		for _, b := range loops {
			inner = inner || b != a && a[0] <= b[0] && b[1] <= a[1]
		}
		if !inner && hmma[a[1]+1]-hmma[a[0]] > best {
			lo, hi, best = a[0], a[1], hmma[a[1]+1]-hmma[a[0]]
		}
	}
	if lo < 0 {
		return sassLoop{}, fmt.Errorf("no loop holds an HMMA")
	}
	cond := make([]bool, len(insts))
	for i := lo; i <= hi; i++ {
		if insts[i].target == "" {
			continue
		}
		if to := labels[insts[i].target]; to > i && to <= hi+1 {
			for j := i + 1; j < to; j++ {
				cond[j] = true
			}
		}
	}
	var l sassLoop
	for i, in := range insts {
		switch {
		case i < lo || i > hi:
			l.Outside.add(in.op)
		case cond[i]:
			l.Cond.add(in.op)
		default:
			l.Every.add(in.op)
		}
	}
	l.Insts = hi - lo + 1
	return l, nil
}

// wantSASSLoop is what the kernel's structure implies, per warp (SASS
// counts warp instructions) and per key tile of tk keys (tilesOf(d).fwdK),
// for head dimension d. A warp owns 16 query rows; every warp reads the
// whole key and value tile.
//
//   - S = Q K^T is 16 x tk scores over d: (tk/8)*(d/16) products of
//     m16n8k16 (one HMMA.16816 each), with the key fragments read by one
//     ldmatrix.x4 (16 keys x 16 dims) per (tk/16)*(d/16).
//   - O += P V is 16 x d outputs over tk keys: (d/8)*(tk/16) HMMA,
//     the values read transposed, one LDSM.16.MT88.4 per 16 keys x 16 dims:
//     (tk/16)*(d/16).
//   - A thread holds 2 rows x tk/4 scores of the warp's 16 x tk block
//     (tk/8 accumulator fragments of 2 x 2): tk/2 exponentials, plus
//     one rescale factor ex2(m_old - m_new) per row: tk/2 + 2 MUFU.EX2.
//
// Those run on every tile. A partial tile whose value tile holds a
// non-finite value (sanitize, restore) runs one more P V-shaped product
// over the codes written where the keys were: (d/8)*(tk/16) HMMA and
// (tk/16)*(d/16) LDSM.16.MT88.4, behind a branch. Outside the loop, Q
// is read once into fragments, d/16 ldmatrix.x4, and no HMMA or ex2 runs
// (the epilogue's lg2 and division are MUFU.LG2 and MUFU.RCP); where the
// kernel does not hold Q (tilesOf(d).holdQ: D = 192, 256) those d/16
// ldmatrix.x4 run on every tile instead.
//
// The score stage (sc) adds, with soft-capping, one tanh per score (its
// e = 2^(-2 log2(e) |x|)): tk/2 more MUFU.EX2 on every tile; with
// learned sinks, the epilogue's two per row (2^(m - M) and 2^(sink - M)):
// 4 outside.
func wantSASSLoop(d int, sc mask.Score) sassLoop {
	tl := tilesOf(d)
	tk := tl.fwdK
	pv := (d / 8) * (tk / 16)
	tiles := (tk / 16) * (d / 16)
	l := sassLoop{
		Every:   sassCounts{HMMA: (tk/8)*(d/16) + pv, LDSM: tiles, LDSMT: tiles, EX2: tk/2 + 2},
		Cond:    sassCounts{HMMA: pv, LDSMT: tiles},
		Outside: sassCounts{LDSM: d / 16},
	}
	if !tl.holdQ {
		l.Every.LDSM += d / 16
		l.Outside.LDSM = 0
	}
	scoreEX2(&l, tk, sc)
	return l
}

// scoreEX2 adds the score stage's MUFU.EX2 to a loop of tk-key tiles
// (wantSASSLoop).
func scoreEX2(l *sassLoop, tk int, sc mask.Score) {
	if sc.SoftCap {
		l.Every.EX2 += tk / 2
	}
	if sc.LearnedSinks {
		l.Outside.EX2 += 4
	}
}

// TestSASSInnerLoop disassembles every example kernel assembled for sm_90a
// and checks the key-tile loop's instruction counts against wantSASSLoop.
func TestSASSInnerLoop(t *testing.T) {
	t.Parallel()
	p := ptxas12(t)
	dis := nvdisasm(t, p)
	seen := map[string]bool{}
	var cs []cubin
	for _, c := range assemble12(t, p, "sm_90", "sm_90a") {
		if strings.HasSuffix(c.name, "sm_90a") {
			cs = append(cs, c)
		}
	}
	lists := disassembled(t, dis, cs)
	for x, c := range cs {
		got, err := readSASSLoop(lists[x])
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := wantSASSLoop(c.k.HeadDim, c.k.Score)
		t.Logf("%s: %d SASS instructions in the key-tile loop", c.name, got.Insts)
		got.Insts = 0
		if got != want {
			t.Errorf("%s (D=%d): SASS of the key-tile loop\n every tile: %v\n  want      %v\n conditional: %v\n  want        %v\n outside: %v\n  want    %v",
				c.name, c.k.HeadDim, got.Every, want.Every, got.Cond, want.Cond, got.Outside, want.Outside)
			continue
		}
		if d := fmt.Sprint(c.k.HeadDim, c.k.Elem); !seen[d] {
			seen[d] = true
			t.Logf("%s (D=%d): every tile %v; sanitized partial tiles add %v; outside the loop %v", c.name, c.k.HeadDim, got.Every, got.Cond, got.Outside)
		}
	}
}

// TestReadSASSLoop checks the listing parser on a hand-written listing: a
// loop with a skipped block, an inner scan loop, code before and after.
func TestReadSASSLoop(t *testing.T) {
	listing := "" +
		"        /*0000*/                   LDSM.16.M88.4 R8, [R2] ;\n" +
		".L_x_9:\n" +
		"        /*0010*/               @P0 BRA `(.L_x_3) ;\n" +
		".L_x_4:\n" +
		"        /*0020*/              @!P0 BRA `(.L_x_4) ;\n" +
		".L_x_3:\n" +
		"        /*0030*/                   LDSM.16.M88.4 R116, [R3+UR7] ;\n" +
		"        /*0040*/                   HMMA.16816.F32.BF16 R40, R8, R116, R40 ;\n" +
		"        /*0050*/                   MUFU.EX2 R5, R5 ;\n" +
		"        /*0060*/              @!P0 BRA `(.L_x_8) ;\n" +
		"        /*0070*/                   LDSM.16.MT88.4 R4, [R3] ;\n" +
		"        /*0080*/                   HMMA.16816.F32.BF16 R40, R8, R4, R40 ;\n" +
		".L_x_8:\n" +
		"        /*0090*/                   LDSM.16.MT88.4 R4, [R3] ;\n" +
		"        /*00a0*/              @!P0 BRA `(.L_x_9) ;\n" +
		"        /*00b0*/                   MUFU.EX2 R5, R5 ;\n" +
		"        /*00c0*/                   EXIT ;\n"
	got, err := readSASSLoop(listing)
	if err != nil {
		t.Fatal(err)
	}
	want := sassLoop{
		Every:   sassCounts{HMMA: 1, LDSM: 1, LDSMT: 1, EX2: 1},
		Cond:    sassCounts{HMMA: 1, LDSMT: 1},
		Outside: sassCounts{LDSM: 1, EX2: 1},
		Insts:   10,
	}
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if _, err := readSASSLoop("        /*0000*/                   EXIT ;\n"); err == nil {
		t.Fatal("a listing without a loop: no error")
	}
}
