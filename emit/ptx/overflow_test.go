package ptx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// overflowTargets are the targets attngen generate builds with -sm 80,90
// -dtype bf16,f16 (DefaultTargets among them).
var overflowTargets = []Target{SM80, f16SM80, {SM: 90, Elem: "bf16"}, {SM: 90, Elem: "f16"}}

// parseSpec parses a spec the way attngen check does and fails the test
// when the parser refuses it.
func parseSpec(t *testing.T, name string, causal bool, d int, m string) *spec.Spec {
	t.Helper()
	text := fmt.Sprintf("name: %s\ncausal: %v\nhead_dim: %d\nmask: %s\n", name, causal, d, m)
	s, err := spec.Parse(name+".yaml", []byte(text))
	if err != nil {
		t.Fatalf("the parser refuses\n%s: %v", text, err)
	}
	return s
}

// extremeSpecs draws n random specs with extreme parameters (spectest
// Extreme): every primitive in turn, then nested unions and
// intersections, and every fourth nested one intersected with document.
// Each goes through the parser (the mask's String form is flow YAML).
func extremeSpecs(t *testing.T, seed uint64, n int) []*spec.Spec {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 29))
	var out []*spec.Spec
	for k := 0; k < n; k++ {
		var m *spec.Mask
		switch op := spec.Op(k % int(spec.NumOps)); {
		case k < 4*int(spec.NumOps) && !op.Combinator():
			m = spectest.Extreme(r, op)
		case k%4 == 0:
			m = spec.Intersect(spec.Document(), spectest.ExtremeMask(r, 2))
		default:
			m = spectest.ExtremeMask(r, 3)
		}
		s := parseSpec(t, fmt.Sprintf("x%d", k), r.IntN(2) == 0, []int{64, 128}[r.IntN(2)], m.String())
		if !s.Mask.Equal(m) {
			t.Fatalf("spec %s parsed as %s", m, s.Mask)
		}
		out = append(out, s)
	}
	return out
}

// TestExtremeSpecsGenerate: every spec the parser accepts, with parameters
// near 0, 2^29 and spec.MaxInt for every primitive, compiles into a plan
// and a forward kernel for every target attngen generate builds.
func TestExtremeSpecsGenerate(t *testing.T) {
	t.Parallel()
	n := 240
	if testing.Short() {
		n = 80
	}
	for _, s := range extremeSpecs(t, 1, n) {
		for _, tg := range overflowTargets {
			p, err := gen.Compile(s, tg, nil)
			if err != nil {
				t.Errorf("%s (causal %v): compile for %s: %v", s.Mask, s.Causal, tg, err)
				continue
			}
			if _, err := GenerateForward(p, Config{Target: tg}); err != nil {
				t.Errorf("%s (causal %v): generate for %s: %v", s.Mask, s.Causal, tg, err)
			}
		}
	}
}

// extremeKernelSpecs are specs whose programs leave s32 before the
// renderer widens them (the first is issue 8's), and neighbours of them.
var extremeKernelSpecs = []struct {
	causal bool
	mask   string
}{
	{false, "{window: {left: 5, right: 2147483647}}"},
	{false, "{window: {left: 2147483646, right: 2147483647}}"},
	{false, "{window: {left: 0, right: 2147483647}}"},
	{true, "{window: {size: 2147483647}}"},
	{false, "{dilated: {stride: 2147483647, size: 3}}"},
	{true, "{dilated: {stride: 2147483647, size: 3}}"},
	{false, "{dilated: {stride: 7, size: 2147483647}}"},
	{false, "{dilated: {stride: 64, size: 2147483647}}"},
	{false, "{dilated: {stride: 536870912, size: 2147483647}}"},
	{true, "{dilated: {stride: 2147483647}}"},
	{false, "{bridge: {block: 2147483647, targets: 2147483647, sources: 2147483647, max_distance: 2147483647}}"},
	{false, "{bridge: {block: 50, targets: 50, sources: 50, max_distance: 2147483647}}"},
	{false, "{union: [{global: {tokens: 2147483647}}, {block: {size: 2147483647}}]}"},
	{false, "{intersect: [{window: {left: 2147483646, right: 2147483647}}, {dilated: {stride: 3}}]}"},
	{false, "{union: [{window: {left: 3, right: 2147483647}}, {bridge: {block: 40, targets: 5, sources: 40}}]}"},
	{false, "{intersect: [{document: {}}, {window: {left: 5, right: 2147483647}}]}"},
}

// TestExtremeKernels runs the forward kernel of each extreme spec under
// the interpreter on small shapes and compares its outputs with the
// float64 reference of the spec's mask; for identity layouts it also
// checks that the plan's predicate (Prog.Eval) is that mask on every pair
// of the shape, so the kernel keeps exactly the pairs of the plan.
func TestExtremeKernels(t *testing.T) {
	t.Parallel()
	for k, c := range extremeKernelSpecs {
		s := parseSpec(t, fmt.Sprintf("ext%d", k), c.causal, 64, c.mask)
		cfg := Config{SoftLg2: true}
		if k%3 == 2 {
			cfg.Target = f16SM80
		}
		p, err := gen.Compile(s, cfg.Target.orDefault(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range []shape{{1, 2, 1, 150, 200}, {1, 1, 1, 1, 150}} {
			t.Run(fmt.Sprintf("%d/%v", k, sh), func(t *testing.T) {
				t.Logf("causal %v, %s, layout %s", c.causal, c.mask, layoutText(p.Layout))
				var ids []int32
				if p.Pred.UsesDocs() {
					ids = docIDs(sh.sk)
				}
				if p.Layout.Kind == gen.Identity {
					checkPlanPairs(t, p, sh, ids)
				}
				runForwardDocs(t, p, cfg, sh, nil, true, ids)
			})
		}
	}
}

// orDefault is the target a zero Config stands for.
func (t Target) orDefault() Target {
	if t == (Target{}) {
		return SM80
	}
	return t
}

// checkPlanPairs compares the plan's predicate with the spec's mask on
// every pair of the shape (identity layout).
func checkPlanPairs(t *testing.T, p *gen.Plan, sh shape, ids []int32) {
	t.Helper()
	var docs *spec.Docs
	if ids != nil {
		var err error
		if docs, err = spec.NewDocs(ids); err != nil {
			t.Fatal(err)
		}
	}
	var res [1]int64
	for r := 0; r < sh.sq; r++ {
		i := spec.Row(r, sh.sq, sh.sk)
		for j := 0; j < sh.sk; j++ {
			p.Pred.Eval([]int64{int64(i), int64(j)}, docs, nil, res[:])
			if (res[0] != 0) != p.Source.AtDocs(i, j, docs) {
				t.Fatalf("plan pred(%d, %d) = %d, the spec says %v", i, j, res[0], p.Source.AtDocs(i, j, docs))
			}
		}
	}
}

// runProgCases renders p into progKernel (bound arguments as immediates,
// the others read from memory) and returns, per case, the s32 results it
// computed.
func runProgCases(t *testing.T, p *gen.Prog, bind map[int]int64, cases [][]int64) [][]int64 {
	t.Helper()
	n := len(cases)
	for len(cases)%128 != 0 {
		cases = append(cases, cases[n-1])
	}
	text, err := progKernel(p, bind, false)
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	mod, err := ptxi.Parse(p.Name+".ptx", text)
	if err != nil {
		t.Fatalf("%s: %v\n%s", p.Name, err, text)
	}
	in := progInputs(p, bind, cases)
	dev := ptxi.NewDevice()
	nout := len(p.Results) + 1
	ia, err := dev.Alloc(4 * len(in))
	if err != nil {
		t.Fatal(err)
	}
	oa, err := dev.Alloc(4 * nout * len(cases))
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.WriteU32(ia, in); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Launch(mod, "prog", [3]int{len(cases) / 128, 1, 1}, [3]int{128, 1, 1}, 0, ia, oa, uint32(len(cases))); err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	out, err := dev.ReadU32(oa, nout*len(cases))
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]int64, n)
	for c := range got {
		for r := 0; r < nout; r++ {
			got[c] = append(got[c], int64(int32(out[nout*c+r])))
		}
	}
	return got
}

// saturate32 clamps v to the s32 range, which is how RenderProg returns a
// result that does not fit: above or below every position.
func saturate32(v int64) int64 { return min(max(v, math.MinInt32), math.MaxInt32) }

// largePos draws a kernel position: near 0, near maxSeq (the largest
// seq_k the kernel takes) or anywhere below it, up to the key tile a
// partial tile's columns run past seq_k.
func largePos(r *rand.Rand) int64 {
	switch r.IntN(3) {
	case 0:
		return r.Int64N(200)
	case 1:
		return maxSeq - 200 + r.Int64N(200+TileK)
	}
	return r.Int64N(maxSeq)
}

// TestExtremeProgsLargePositions renders the hull, class and predicate
// programs of extreme specs (issue 8's window first, then random ones)
// and runs them under the interpreter on positions near 0 and near maxSeq:
// every result equals Prog.Eval's, saturated to s32 (hull bounds past
// s32 lie beyond every position either way).
func TestExtremeProgsLargePositions(t *testing.T) {
	specs := []*spec.Spec{parseSpec(t, "issue8", false, 64, extremeKernelSpecs[0].mask)}
	for k, c := range extremeKernelSpecs[1:] {
		if !strings.Contains(c.mask, "document") {
			specs = append(specs, parseSpec(t, fmt.Sprintf("k%d", k), c.causal, 64, c.mask))
		}
	}
	for _, s := range extremeSpecs(t, 2, 60) {
		if !s.Mask.HasData() {
			specs = append(specs, s)
		}
	}
	r := rand.New(rand.NewPCG(31, 37))
	bad := 0
	for _, s := range specs {
		p, err := gen.Compile(s, SM80, nil)
		if err != nil {
			t.Fatal(err)
		}
		var hull, hull0, class, pred [][]int64
		for c := 0; c < 256; c++ {
			q0, q1 := largePos(r), largePos(r)
			q0, q1 = min(q0, q1), max(q0, q1)
			k0, k1 := largePos(r), largePos(r)
			k0, k1 = min(k0, k1), max(k0, k1)
			if c%2 == 0 {
				q1 = min(q0+int64(r.IntN(TileQ)), maxSeq-1)
				k1 = min(k0+int64(r.IntN(TileK)), maxSeq-1)
			}
			hull = append(hull, []int64{q0, q1, largePos(r)})
			hull0 = append(hull0, []int64{q0, q1, 0})
			class = append(class, []int64{q0, q1, k0, k1})
			pred = append(pred, []int64{q0, k0}, []int64{q1, k1}, []int64{q1, q0}, []int64{k0, k1})
		}
		for _, run := range []struct {
			p     *gen.Prog
			bind  map[int]int64
			cases [][]int64
		}{{p.Hull, nil, hull}, {p.Hull, map[int]int64{2: 0}, hull0}, {p.Class, nil, class}, {p.Pred, nil, pred}} {
			got := runProgCases(t, run.p, run.bind, run.cases)
			res := make([]int64, len(run.p.Results))
			for c, a := range run.cases {
				run.p.Eval(a, nil, nil, res)
				for x, v := range res {
					if got[c][x] != saturate32(v) {
						if bad < 8 {
							t.Errorf("%s (causal %v): %s%v result %d = %d, Eval gives %d\n%s", s.Mask, s.Causal, run.p.Name, a, x, got[c][x], v, run.p)
						}
						bad++
					}
				}
				if want := b2i(res[0] != 0); got[c][len(res)] != want {
					if bad < 8 {
						t.Errorf("%s (causal %v): %s%v as a predicate = %d, want %d", s.Mask, s.Causal, run.p.Name, a, got[c][len(res)], want)
					}
					bad++
				}
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d mismatches", bad)
	}
}

// TestWideOps renders every op that may be computed in s64 with operands
// that do not fit s32 (arguments shifted by ±gen.Inf, or twice), alone
// and next to an s32 operand, and runs it under the interpreter on
// positions near 0 and ArgMax: each result equals Prog.Eval's, saturated
// to s32.
func TestWideOps(t *testing.T) {
	const inf = int64(gen.Inf)
	r := rand.New(rand.NewPCG(41, 43))
	var cases [][]int64
	for c := 0; c < 256; c++ {
		cases = append(cases, []int64{largePos(r), largePos(r), largePos(r)})
	}
	cases = append(cases, []int64{0, 0, 0}, []int64{ArgMax, ArgMax, ArgMax}, []int64{0, ArgMax, 1}, []int64{ArgMax, 0, 0})
	// operands: v0..v2 = a, b, c and v5 = b - Inf fit s32; v4 = a + Inf,
	// v6 = c + Inf, v7 = b - 2 Inf and v8 = c + 2 Inf do not
	base := []gen.Inst{{Op: gen.IRArg, Imm: 0}, {Op: gen.IRArg, Imm: 1}, {Op: gen.IRArg, Imm: 2}, {Op: gen.IRConst, Imm: inf},
		{Op: gen.IRAdd, A: 0, B: 3}, {Op: gen.IRSub, A: 1, B: 3}, {Op: gen.IRAdd, A: 2, B: 3}, {Op: gen.IRSub, A: 5, B: 3}, {Op: gen.IRAdd, A: 6, B: 3}}
	wide := map[int]bool{4: true, 6: true, 7: true, 8: true}
	ops := []struct {
		op   gen.IROp
		imms []int64
	}{
		{gen.IRAdd, nil}, {gen.IRSub, nil}, {gen.IRMulC, []int64{-3, 1, 7, 1 << 20}}, {gen.IRDivC, []int64{1, 3, 64, inf}},
		{gen.IRModC, []int64{1, 3, 64, 1 << 29, inf}}, {gen.IRDiv, nil}, {gen.IRMin, nil}, {gen.IRMax, nil},
		{gen.IRLt, nil}, {gen.IRLe, nil}, {gen.IREq, nil}, {gen.IRSelect, nil},
	}
	bad, runs := 0, 0
	for _, o := range ops {
		imms := o.imms
		if imms == nil {
			imms = []int64{0}
		}
		for _, imm := range imms {
			for _, pick := range [][3]int{{4, 7, 8}, {7, 1, 4}, {1, 8, 0}, {8, 4, 7}, {2, 4, 1}, {6, 5, 2}} {
				in := gen.Inst{Op: o.op, A: pick[0], B: pick[1], C: pick[2], Imm: imm}
				switch o.op {
				case gen.IRDiv:
					in.B = []int{8, 6, 2}[pick[0]%3] // a divisor >= 1: c+2Inf, c+Inf or c (kept >= 1 below)
				case gen.IRSelect:
					in.A = 0 // a position: true unless 0
				}
				some := false // an operand does not fit s32
				for k, x := range []int{in.A, in.B, in.C}[:in.Arity()] {
					some = some || wide[x] && !(o.op == gen.IRSelect && k == 0)
				}
				if !some {
					continue
				}
				insts := append(append([]gen.Inst{}, base...), in)
				p := &gen.Prog{Name: "wide_" + o.op.String(), Args: []string{"a", "b", "c"}, Insts: insts, Results: []int{len(insts) - 1}}
				if err := p.Check(); err != nil {
					t.Fatal(err)
				}
				if text, err := progKernel(p, nil, false); err != nil || !strings.Contains(text, ".s64") {
					t.Fatalf("%s %v: no s64 instruction (err %v)", o.op, pick, err)
				}
				var cs [][]int64
				for _, a := range cases {
					a = append([]int64{}, a...)
					a[2] = max(a[2], 1)
					cs = append(cs, a)
				}
				got := runProgCases(t, p, nil, cs)
				runs++
				res := make([]int64, 1)
				for c, a := range cs {
					p.Eval(a, nil, nil, res)
					if got[c][0] != saturate32(res[0]) || got[c][1] != b2i(res[0] != 0) {
						if bad < 8 {
							t.Errorf("%s %v (imm %d) on %v: got %v, Eval gives %d\n%s", o.op, pick, imm, a, got[c], res[0], p)
						}
						bad++
					}
				}
			}
		}
	}
	t.Logf("%d programs, %d cases each", runs, len(cases))
	if bad > 0 {
		t.Fatalf("%d mismatches", bad)
	}
}

// TestHugeStrideGeometry: a dilated stride of a key tile or more runs in
// the identity layout (each residue class holds at most one position of a
// sequence shorter than the stride), so its launch is the identity one and
// takes any batch the grid allows.
func TestHugeStrideGeometry(t *testing.T) {
	for _, st := range []int{TileK, 1 << 29, spec.MaxInt} {
		s := parseSpec(t, "st", false, 64, fmt.Sprintf("{dilated: {stride: %d, size: 2}}", st))
		p, err := gen.Compile(s, SM80, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.Layout.Kind != gen.Identity {
			t.Fatalf("stride %d: layout %s", st, layoutText(p.Layout))
		}
		k, err := GenerateForward(p, Config{})
		if err != nil {
			t.Fatal(err)
		}
		l, err := k.Geometry(65535, 1, 1, 100, maxSeq-1, 0)
		if err != nil {
			t.Fatalf("stride %d: %v", st, err)
		}
		if l.Grid[2] != 65535 {
			t.Errorf("stride %d: grid %v", st, l.Grid)
		}
	}
}

// TestRenderRangeRejects: a value whose range leaves 64 bits, and a
// document op on a value outside s32 (not a position), are errors.
func TestRenderRangeRejects(t *testing.T) {
	arg, inf := gen.Inst{Op: gen.IRArg}, gen.Inst{Op: gen.IRConst, Imm: gen.Inf}
	for _, c := range []struct {
		name  string
		insts []gen.Inst
		want  string
	}{
		{"range past 64 bits", []gen.Inst{arg, {Op: gen.IRMulC, A: 0, Imm: gen.Inf}, {Op: gen.IRMulC, A: 1, Imm: gen.Inf}, {Op: gen.IRMulC, A: 2, Imm: gen.Inf}}, "does not fit 64 bits"},
		{"document id of a wide value", []gen.Inst{arg, inf, {Op: gen.IRAdd, A: 0, B: 1}, {Op: gen.IRLoad, Imm: int64(gen.FieldDocID), A: 2}}, "outside s32"},
	} {
		p := &gen.Prog{Name: "bad", Args: []string{"i"}, Insts: c.insts, Results: []int{len(c.insts) - 1}}
		f := NewFunc("k")
		docs := &DocRegs{ID: f.NewReg(B64), Start: f.NewReg(B64), End: f.NewReg(B64)}
		_, err := RenderProg(f, p, Env{Args: []Operand{R(f.NewReg(S32))}, Docs: docs}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
}
