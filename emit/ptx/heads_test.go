package ptx

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// Masks with head parameters (issue 11: window sizes and sink counts per
// query head, given at run time). perhead is the example: sinks
// (0 at some heads) and a causal-sized window over a non-causal pattern;
// the others take the left and right reach of a window, and the streaming
// shorthand under causality.
var headSpecs = map[string]string{
	"perhead": `name: perhead
head_params:
  window: {min: 1, max: 8192}
  sinks: {min: 0, max: 64}
mask: {union: [{global: {tokens: sinks}}, {window: {size: window}}]}
`,
	"perhead_lr": `name: perhead_lr
head_params:
  wl: {min: 0, max: 300}
  wr: {min: 0, max: 100}
mask: {window: {left: wl, right: wr}}
`,
	// ranges up to the largest value a spec allows: the programs add the
	// values to positions in s64 and saturate
	"perhead_huge": `name: perhead_huge
head_params:
  l: {min: 0, max: 2147483646}
  g: {min: 0, max: 2147483647}
mask: {union: [{global: {tokens: g}}, {window: {left: l, right: 3}}]}
`,
	"perhead_stream": `name: perhead_stream
causal: true
head_params:
  s: {min: 0, max: 16}
  w: {min: 1, max: 4096}
mask: {streaming: {sinks: s, window: w}}
`,
}

// headPlan compiles a spec of headSpecs at head dimension d for target tg.
func headPlan(t *testing.T, name string, d int, tg Target) *gen.Plan {
	t.Helper()
	s, err := spec.Parse(name+".yaml", []byte(headSpecs[name]+fmt.Sprintf("head_dim: %d\n", d)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.Compile(s, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.HeadParams()) != 2 {
		t.Fatalf("%s: %d head parameters", name, len(p.HeadParams()))
	}
	return p
}

// callHeads returns the head parameter values of a call of plan p on
// shape s: heads when given, random ones (verify.RandomHeadParams: every
// Min at head 0, every Max at the last) for a plan with head parameters,
// none otherwise.
func callHeads(p *gen.Plan, heads []int32, r *rand.Rand, s shape) []int32 {
	if heads != nil || len(p.HeadParams()) == 0 {
		return heads
	}
	return verify.RandomHeadParams(p.Source, r, s.hq, s.sk)
}

// headArray writes a call's head parameter values to the device and
// returns the head_params address; nothing without values.
func headArray(t *testing.T, dev *ptxi.Device, alloc func(int) uint64, vals []int32) []uint64 {
	t.Helper()
	if len(vals) == 0 {
		return nil
	}
	a := alloc(4 * len(vals))
	if err := dev.WriteU32(a, words32(vals)); err != nil {
		t.Fatal(err)
	}
	return []uint64{a}
}

func words32(x []int32) []uint32 {
	u := make([]uint32, len(x))
	for i, v := range x {
		u[i] = uint32(v)
	}
	return u
}

// headPattern is the pattern query head h of a call computes: pat bound to
// the head's values in s.HeadParams (pat itself without parameters).
func headPattern(pat spec.Pattern, s verify.Shape, h int) spec.Pattern {
	n := len(pat.Params)
	if n == 0 {
		return pat
	}
	vals := make([]int, n)
	for k := range vals {
		vals[k] = int(s.HeadParams[h*n+k])
	}
	b, err := pat.Bind(vals)
	if err != nil {
		panic(fmt.Sprintf("head %d: %v", h, err))
	}
	return b
}

// headCase is a call with chosen values: (first, second parameter) per
// query head, differing within each group of query heads that share a
// key/value head, with each parameter's Min and Max at some head.
type headCase struct {
	sh   shape
	vals map[string][]int32 // per spec, head-major
}

var headCases = []headCase{
	// two groups of two heads; values at both ends and between
	{shape{1, 4, 2, 70, 130}, map[string][]int32{
		"perhead":        {1, 0, 8192, 64, 37, 0, 5, 3},
		"perhead_lr":     {0, 0, 300, 100, 17, 2, 1, 64},
		"perhead_stream": {0, 1, 16, 4096, 3, 20, 0, 64},
		"perhead_huge":   {0, 0, 2147483646, 2147483647, 17, 0, 2147483646, 5},
	}},
	// one group of three heads, two batch elements, 200 keys
	{shape{2, 3, 1, 65, 200}, map[string][]int32{
		"perhead":        {70, 64, 1, 0, 130, 1},
		"perhead_lr":     {64, 0, 0, 100, 130, 31},
		"perhead_stream": {16, 1, 0, 70, 2, 4096},
		"perhead_huge":   {5, 2147483647, 0, 0, 1 << 30, 64},
	}},
	// decode: one query
	{shape{1, 2, 1, 1, 77}, map[string][]int32{
		"perhead":        {1, 0, 20, 5},
		"perhead_lr":     {0, 0, 40, 0},
		"perhead_stream": {0, 1, 5, 20},
		"perhead_huge":   {2147483646, 0, 3, 1},
	}},
}

func headNames() []string {
	return []string{"perhead", "perhead_lr", "perhead_stream", "perhead_huge"}
}

// TestHeadParamsParams checks where the kernels take head_params (after
// the mask's run-time data: after lse, and delta in the backward's), that
// gpu.Kernel descriptions list it with the parameters' names and ranges,
// that Launch.Args counts it among the addresses, and that plans without
// head parameters take none.
func TestHeadParamsParams(t *testing.T) {
	names := func(ps []Param) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.Name)
		}
		return strings.Join(s, " ")
	}
	p := headPlan(t, "perhead", 64, SM80)
	fk, err := GenerateForward(p, Config{})
	if err != nil {
		t.Fatal(err)
	}
	bk, err := GenerateBackward(p, Config{})
	if err != nil {
		t.Fatal(err)
	}
	hk, err := GenerateForward(headPlan(t, "perhead", 64, SM90a), Config{Target: SM90a})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		ps   []Param
		want string
	}{
		{"forward", fk.Params, "q k v o lse head_params seq_lens_q seq_lens_k q_pos k_pos seq_q"},
		{"dq", bk.DQParams, "q k v o dout lse delta head_params dq seq_lens_q seq_lens_k q_pos k_pos seq_q"},
		{"dk/dv", bk.DKVParams, "q k v dout lse delta head_params dk dv seq_lens_q seq_lens_k q_pos k_pos seq_q"},
		{"sm_90a", hk.Params, "o lse head_params tmap_q tmap_k tmap_v seq_lens_q seq_lens_k q_pos k_pos seq_q"},
	} {
		if got := names(c.ps); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s parameters %q, want them to start %q", c.what, got, c.want)
		}
	}
	want := [3]string{"head_params", "u64", "head parameters [heads_q][2], s32, head-major: window in [1, 8192], sinks in [0, 64]"}
	ks := []gpu.Kernel{fk.Kernel(), hk.Kernel(), bk.Kernels()[0], bk.Kernels()[1]}
	for _, k := range ks {
		found := false
		for _, p := range k.Params {
			found = found || p == want
		}
		if !found {
			t.Errorf("%s: gpu.Kernel params %v lack %v", k.Name, k.Params, want)
		}
	}
	if !strings.Contains(fk.PTX, ".param .u64 head_params,") || !strings.Contains(bk.PTX, ".param .u64 head_params,") {
		t.Error("the PTX entries lack head_params")
	}
	l, err := fk.Geometry(1, 2, 1, 10, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Args(1, 2, 3, 4, 5); err == nil {
		t.Error("Args took 5 addresses for a kernel with head_params")
	}
	if args, err := l.Args(1, 2, 3, 4, 5, 6); err != nil || len(args) != len(fk.Params) {
		t.Errorf("Args: %v, %d args for %d params", err, len(args), len(fk.Params))
	}
	// documents and head parameters: head_params follows the arrays
	s, err := spec.Parse("d.yaml", []byte("name: d\nhead_params:\n  w: {min: 1, max: 50}\nmask: {intersect: [{document: {}}, {window: {size: w}}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	dp, err := gen.Compile(s, SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	dk, err := GenerateForward(dp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(dk.Params), "q k v o lse doc_id doc_start doc_end head_params seq_lens_q seq_lens_k q_pos k_pos seq_q"; !strings.HasPrefix(got, want) {
		t.Errorf("document kernel parameters %q, want %q...", got, want)
	}
	for _, name := range exampleNames(t) {
		k, err := GenerateForward(examplePlan(t, name), Config{})
		if err != nil {
			t.Fatal(err)
		}
		if len(examplePlan(t, name).HeadParams()) == 0 && strings.Contains(k.PTX, "head_params") {
			t.Errorf("%s: a kernel without head parameters mentions head_params", name)
		}
	}
}

// TestInterpHeadParams runs the sm_80 forward of masks with head
// parameters under the interpreter (outputs poisoned), on awkward shapes
// with chosen values (each parameter's Min and Max, sinks 0 at some
// heads, values differing within each group of grouped heads) and random
// ones, against the float64 reference bound per head; head dimension 64
// in bf16 and f16, and 128 in bf16.
func TestInterpHeadParams(t *testing.T) {
	t.Parallel()
	for _, name := range headNames() {
		for _, c := range []struct {
			d  int
			tg Target
		}{{64, SM80}, {64, f16SM80}, {128, SM80}} {
			p := headPlan(t, name, c.d, SM80)
			cfg := Config{Target: c.tg, SoftLg2: true}
			for n, hc := range headCases {
				if c.d == 128 && n > 0 && testing.Short() {
					continue
				}
				t.Run(fmt.Sprintf("%s/d%d/%s/%v", name, c.d, c.tg.Elem, hc.sh), func(t *testing.T) {
					runForwardHeads(t, p, cfg, hc.sh, nil, true, nil, hc.vals[name])
				})
			}
			if c.d == 64 && c.tg == SM80 {
				sh := shape{1, 3, 1, 150, 200}
				t.Run(fmt.Sprintf("%s/d%d/random/%v", name, c.d, sh), func(t *testing.T) {
					runForwardHeads(t, p, cfg, sh, nil, true, nil, nil)
				})
			}
		}
	}
}

// TestHopperInterpHeadParams runs the sm_90a forward of the masks with
// head parameters on the chosen values, as TestInterpHeadParams.
func TestHopperInterpHeadParams(t *testing.T) {
	t.Parallel()
	for _, name := range headNames() {
		for _, c := range []struct {
			d  int
			tg Target
		}{{64, SM90a}, {64, f16SM90a}, {128, SM90a}} {
			p := headPlan(t, name, c.d, c.tg)
			for n, hc := range headCases {
				if (c.d == 128 || c.tg != SM90a) && n > 0 && testing.Short() {
					continue
				}
				t.Run(fmt.Sprintf("%s/d%d/%s/%v", name, c.d, c.tg.Elem, hc.sh), func(t *testing.T) {
					runForwardHeads(t, p, Config{Target: c.tg, SoftLg2: true}, hc.sh, nil, true, nil, hc.vals[name])
				})
			}
		}
	}
}

// TestBackwardInterpHeadParams runs the forward and both backward kernels
// of the masks with head parameters (gradients poisoned) on the chosen
// values, whose grouped heads differ (the dk/dv kernel loads each head's
// values and evaluates its query-tile schedule per head), and on random
// ones, against the reference bound per head.
func TestBackwardInterpHeadParams(t *testing.T) {
	t.Parallel()
	for _, name := range headNames() {
		for _, c := range []struct {
			d  int
			tg Target
		}{{64, SM80}, {64, f16SM80}, {128, SM80}} {
			p := headPlan(t, name, c.d, SM80)
			cfg := Config{Target: c.tg, SoftLg2: true}
			elem, _ := c.tg.ElemType()
			for n, hc := range headCases {
				if (c.d == 128 || c.tg != SM80) && n > 0 && testing.Short() {
					continue
				}
				t.Run(fmt.Sprintf("%s/d%d/%s/%v", name, c.d, c.tg.Elem, hc.sh), func(t *testing.T) {
					r := runBackwardHeads(t, p, cfg, hc.sh, nil, 5, nil, hc.vals[name])
					if bad := checkBackward(t, r, p.Source, elem, true); bad > 0 {
						t.Fatalf("%d failures", bad)
					}
				})
			}
			if c.d == 64 && c.tg == SM80 {
				sh := shape{1, 4, 2, 150, 200}
				t.Run(fmt.Sprintf("%s/d%d/random/%v", name, c.d, sh), func(t *testing.T) {
					r := runBackwardHeads(t, p, cfg, sh, nil, 6, nil, nil)
					if bad := checkBackward(t, r, p.Source, elem, true); bad > 0 {
						t.Fatalf("%d failures", bad)
					}
				})
			}
		}
	}
}

// TestHeadParamsPtxas assembles the kernels of perhead and perhead_huge
// (values up to 2^31-1, s64 arithmetic) at head dimensions 64 and 128
// (bf16 and f16): the forward and the backward module with ptxas
// 11.8 for sm_80 and sm_90 (ATTNGEN_PTXAS), the sm_90a forward with ptxas
// 12.4 (ATTNGEN_PTXAS12), and requires no spills.
func TestHeadParamsPtxas(t *testing.T) {
	t.Parallel()
	p11, p12 := os.Getenv("ATTNGEN_PTXAS"), os.Getenv("ATTNGEN_PTXAS12")
	if p11 == "" && p12 == "" {
		t.Skip("no ptxas: set ATTNGEN_PTXAS and ATTNGEN_PTXAS12 (scripts/fetch-ptxas.sh fetches them)")
	}
	type module struct {
		name    string
		kernels int
	}
	var ms []module
	var jobs []asmJob
	assemble := func(name, ptxas, arch, text string, kernels int) {
		ms = append(ms, module{name, kernels})
		jobs = append(jobs, asmJob{ptxas, arch, text})
	}
	check := func() {
		for x, r := range assembleAll(t, jobs) {
			name, kernels, out := ms[x].name, ms[x].kernels, r.log
			if r.err != nil {
				t.Fatalf("%s: ptxas failed: %v\n%s", name, r.err, out)
			}
			spills, regs := spillRE.FindAllStringSubmatch(out, -1), regsRE.FindAllStringSubmatch(out, -1)
			if len(spills) != kernels || len(regs) != kernels {
				t.Fatalf("%s: want %d kernels' reports:\n%s", name, kernels, out)
			}
			var rs []string
			for k, m := range spills {
				if m[1] != "0" || m[2] != "0" {
					t.Errorf("%s: spills:\n%s", name, out)
				}
				rs = append(rs, regs[k][1])
			}
			t.Logf("%s: %s registers, no spills", name, strings.Join(rs, " and "))
		}
	}
	for _, name := range []string{"perhead", "perhead_huge"} {
		for _, d := range []int{64, 128} {
			for _, elem := range []string{"bf16", "f16"} {
				if p11 != "" {
					p := headPlan(t, name, d, SM80)
					for _, sm := range []int{80, 90} {
						tg := Target{SM: sm, Elem: elem}
						fk, err := GenerateForward(p, Config{Target: tg})
						if err != nil {
							t.Fatal(err)
						}
						assemble(fmt.Sprintf("%s d%d %s %s forward", name, d, elem, tg.Arch()), p11, tg.Arch(), fk.PTX, 1)
						bk, err := GenerateBackward(p, Config{Target: tg})
						if err != nil {
							t.Fatal(err)
						}
						assemble(fmt.Sprintf("%s d%d %s %s backward (ptxas order)", name, d, elem, tg.Arch()), p11, tg.Arch(), bk.PTX, 2)
					}
				}
				if p12 != "" {
					tg := Target{SM: 90, Elem: elem, Accel: true}
					hk, err := GenerateForward(headPlan(t, name, d, tg), Config{Target: tg})
					if err != nil {
						t.Fatal(err)
					}
					assemble(fmt.Sprintf("%s d%d %s sm_90a forward", name, d, elem), p12, tg.Arch(), hk.PTX, 1)
				}
			}
		}
	}
	check()
}

// compilePattern compiles pattern pat (with its head parameters, if any)
// at head dimension d for target tg; compileFor for the patterns of
// examples, which may take head parameters.
func compilePattern(t *testing.T, tg Target, name string, pat spec.Pattern, d int) *gen.Plan {
	t.Helper()
	p, err := gen.Compile(&spec.Spec{Name: name, Mask: pat.Mask, Causal: pat.Causal, HeadDim: d, HeadParams: pat.Params, Score: pat.Score}, tg, nil)
	if err != nil {
		t.Fatalf("%s (%s): %v", name, pat, err)
	}
	return p
}

// headDocs is the run-time data a program of plan p reads at query head h
// of a call with head parameter values vals (head-major): docs (nil:
// none) with the head's values; docs itself for plans without head
// parameters.
func headDocs(p *gen.Plan, docs *spec.Docs, vals []int32, h int) *spec.Docs {
	n := len(p.HeadParams())
	if n == 0 {
		return docs
	}
	d := &spec.Docs{}
	d.SetHead(docs, vals[h*n:h*n+n])
	return d
}

// checkPlanProg is checkProg for a program of plan p: with head
// parameters, each case reads values drawn in the parameters' ranges (each
// range's ends included).
func checkPlanProg(t *testing.T, p *gen.Plan, prog *gen.Prog, bind map[int]int64, ids []int32, cases [][]int64, r *rand.Rand) int {
	t.Helper()
	hps := p.HeadParams()
	if len(hps) == 0 {
		return checkProg(t, prog, bind, ids, cases)
	}
	vals := make([][]int32, len(cases))
	for c := range vals {
		for _, hp := range hps {
			v := hp.Min + r.IntN(min(hp.Max, hp.Min+1000)-hp.Min+1)
			switch c % 5 {
			case 0:
				v = hp.Min
			case 1:
				v = hp.Max
			}
			vals[c] = append(vals[c], int32(v))
		}
	}
	if !prog.UsesDocs() {
		ids = nil
	}
	return checkProgHeads(t, prog, bind, ids, cases, &progHeads{params: hps}, vals)
}

// drawScore gives the shape of a run of plan p random values of its score
// stage (verify.RandomScore), unless it has some or p has no stage.
func drawScore(p *gen.Plan, vs *verify.Shape, rng *rand.Rand) {
	if p.Source.Score.Active() && vs.Score == nil {
		vs.Score = verify.RandomScore(p.Source.Score, vs.HeadsQ, rng)
	}
}

// scoreArrays uploads the score values of vs that a kernel with
// parameters params takes (alibi_slopes: the call's or mask.AlibiSlopes;
// sinks) and returns their addresses in parameter order and the call-time
// soft-cap (0 when the kernel takes none).
func scoreArrays(t *testing.T, dev *ptxi.Device, alloc func(int) uint64, params []Param, sc mask.Score, vs verify.Shape) ([]uint64, float32) {
	t.Helper()
	if !sc.Active() {
		return nil, 0
	}
	if vs.Score == nil {
		t.Fatal("scoreArrays: a kernel with a score stage and a shape without values")
	}
	softCap, slopes, sinks := vs.Score.Float32()
	if !sc.SlopesAtCall {
		slopes = nil
		for _, v := range mask.AlibiSlopes(vs.HeadsQ) {
			slopes = append(slopes, float32(v))
		}
	}
	var ptrs []uint64
	for _, a := range []struct {
		name string
		v    []float32
	}{{parSlopes.Name, slopes}, {parSinks.Name, sinks}} {
		if !paramsHave(params, a.name) {
			continue
		}
		p := alloc(4 * len(a.v))
		if err := dev.WriteF32(p, a.v); err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, p)
	}
	if !paramsHave(params, parCap.Name) {
		softCap = 0
	}
	return ptrs, softCap
}
