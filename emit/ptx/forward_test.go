package ptx

import (
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func examplePlan(t *testing.T, name string) *gen.Plan {
	t.Helper()
	s, err := spec.ParseFile(filepath.Join("../../spec/examples", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.Compile(s, SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// exampleNames lists the example specs (spec/examples/*.yaml).
func exampleNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../spec/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example specs: %v", err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	return names
}

var f16SM80 = Target{SM: 80, Elem: "f16"}

func TestForwardDeterministic(t *testing.T) {
	t.Parallel()
	for _, name := range exampleNames(t) {
		p := examplePlan(t, name)
		for _, cfg := range []Config{{}, {Target: f16SM80}, {SoftLg2: true}, {Target: Target{SM: 90, Elem: "bf16"}}} {
			a, err := GenerateForward(p, cfg)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			b, err := GenerateForward(examplePlan(t, name), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if a.PTX != b.PTX {
				t.Errorf("%s %+v: two generations differ", name, cfg)
			}
		}
	}
}

// TestForwardHeader checks the header, the parameter list and that the
// register declarations cover exactly the registers the body uses.
func TestForwardHeader(t *testing.T) {
	k, err := GenerateForward(examplePlan(t, "bridge"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		".version 7.8\n.target sm_80\n.address_size 64\n",
		".extern .shared .align 16 .b8 smem[];\n",
		".visible .entry attn_fwd_bridge(\n\t.param .u64 q,\n\t.param .u64 k,\n\t.param .u64 v,\n\t.param .u64 o,\n\t.param .u64 lse,\n\t.param .u64 seq_lens_q,\n\t.param .u64 seq_lens_k,\n\t.param .u64 q_pos,\n\t.param .u64 k_pos,\n\t.param .u32 seq_q,\n\t.param .u32 seq_k,\n\t.param .u32 heads_q,\n\t.param .u32 heads_kv,\n\t.param .f32 scale_log2,\n" +
			"\t.param .u32 stride_q_batch,\n\t.param .u32 stride_q_head,\n\t.param .u32 stride_q_pos,\n\t.param .u32 stride_k_batch,\n\t.param .u32 stride_k_head,\n\t.param .u32 stride_k_pos,\n" +
			"\t.param .u32 stride_v_batch,\n\t.param .u32 stride_v_head,\n\t.param .u32 stride_v_pos,\n\t.param .u32 stride_o_batch,\n\t.param .u32 stride_o_head,\n\t.param .u32 stride_o_pos\n)\n.reqntid 128, 1, 1\n.minnctapersm 2\n{\n",
		"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {",
		"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {",
		"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {",
		"cp.async.cg.shared.global [",
		"cp.async.wait_group 1;",
		"shfl.sync.bfly.b32",
		"ex2.approx.ftz.f32",
		"lg2.approx.ftz.f32",
		"cvt.rn.bf16x2.f32",
	} {
		if !strings.Contains(k.PTX, want) {
			t.Errorf("PTX lacks %q", want)
		}
	}
	decl := regexp.MustCompile(`\.reg \.(\w+) (%[a-z]+)<(\d+)>;`)
	declared := map[string]int{}
	for _, m := range decl.FindAllStringSubmatch(k.PTX, -1) {
		n, _ := strconv.Atoi(m[3])
		declared[m[2]] = n
	}
	if len(declared) != 4 {
		t.Errorf("declared register classes %v, want pred, b32, b64, f32", declared)
	}
	body := k.PTX[strings.Index(k.PTX, "{\n"):]
	used := map[string]int{}
	for _, m := range regexp.MustCompile(`(%p|%rd|%r|%f|%h)(\d+)\b`).FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[2])
		used[m[1]] = max(used[m[1]], n+1)
	}
	for c, n := range used {
		if declared[c] != n {
			t.Errorf("%s: declared %d, body uses %d", c, declared[c], n)
		}
	}
	if k.DynShared != 64*272+4*64*272+4*Threads/32 {
		t.Errorf("dynamic shared %d bytes", k.DynShared)
	}
}

func TestForwardF16(t *testing.T) {
	k, err := GenerateForward(examplePlan(t, "causal"), Config{Target: f16SM80, SoftLg2: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "cvt.rn.f16x2.f32"} {
		if !strings.Contains(k.PTX, want) {
			t.Errorf("PTX lacks %q", want)
		}
	}
	for _, bad := range []string{"bf16", "lg2"} {
		if strings.Contains(k.PTX, bad) {
			t.Errorf("f16 soft-lg2 PTX mentions %q", bad)
		}
	}
}

// TestForwardGolden pins the text of the causal kernel, head_dim 64.
func TestForwardGolden(t *testing.T) {
	p, err := gen.Compile(&spec.Spec{Name: "causal64", Mask: spec.Full(), Causal: true, HeadDim: 64}, SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := GenerateForward(p, Config{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "causal64.ptx")
	if *update {
		if err := os.WriteFile(path, []byte(k.PTX), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != k.PTX {
		t.Errorf("causal64 PTX differs from %s (rerun with -update after checking the change)", path)
	}
}

func TestForwardRejects(t *testing.T) {
	causal := examplePlan(t, "causal")
	odd, err := gen.Compile(&spec.Spec{Name: "odd", Mask: spec.Full(), Causal: true, HeadDim: 80}, SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	oddSplit, err := gen.Compile(&spec.Spec{Name: "odd", Mask: spec.Full(), Causal: true, HeadDim: 128, HeadDimV: 64}, SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := spec.ParseFile("../../spec/examples/causal.yaml")
	tiles48, err := gen.Compile(s, gen.Tiles{TargetName: "x", Q: 48, K: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// plans whose programs cannot be rendered
	with := func(edit func(p *gen.Plan)) *gen.Plan {
		p := *examplePlan(t, "window")
		edit(&p)
		return &p
	}
	wordPred := with(func(p *gen.Plan) { p.Pred, p.RowInterval = p.Word, false })
	bigConst := with(func(p *gen.Plan) {
		q := *p.Pred
		q.Insts = append(append([]gen.Inst{}, q.Insts...), gen.Inst{Op: gen.IRConst, Imm: 1 << 40}, gen.Inst{Op: gen.IRLt, A: len(q.Insts), B: q.Results[0]})
		q.Results = []int{len(q.Insts) - 1}
		p.Pred = &q
		p.RowInterval = false // partial tiles render the predicate
	})
	noHull := with(func(p *gen.Plan) { p.Hull = nil })
	swapped := with(func(p *gen.Plan) { p.Hull, p.Class = p.Class, p.Hull })
	docResidue := with(func(p *gen.Plan) {
		p.Layout = gen.Layout{Kind: gen.Residue, Stride: 3}
		p.Class = examplePlan(t, "document").Class
	})
	for _, c := range []struct {
		name string
		p    *gen.Plan
		cfg  Config
		want string
	}{
		{"head dim", odd, Config{}, "head_dim 80"},
		{"split head dims", oddSplit, Config{}, "head_dim {qk: 128, v: 64}"},
		{"tiles", tiles48, Config{}, "tiles 48x64"},
		{"element", causal, Config{Target: Target{SM: 80, Elem: "f32"}}, "element type"},
		{"old sm", causal, Config{Target: Target{SM: 75, Elem: "bf16"}}, "cp.async.cg.shared.global (sm_80)"},
		{"new sm", causal, Config{Target: Target{SM: 120, Elem: "bf16"}}, "sm_120"},
		{"word op", wordPred, Config{}, "word op"},
		{"s32", bigConst, Config{}, "does not fit s32"},
		{"no hull", noHull, Config{}, "no hull program"},
		{"hull shape", swapped, Config{}, "takes 4 arguments"},
		{"documents in a residue layout", docResidue, Config{}, "residue layout"},
	} {
		_, err := GenerateForward(c.p, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
}

// TestForwardTargetHeader checks the target's SM reaches the header.
func TestForwardTargetHeader(t *testing.T) {
	p := examplePlan(t, "causal")
	for _, tg := range []Target{SM80, {SM: 90, Elem: "f16"}, {SM: 86, Elem: "bf16"}} {
		k, err := GenerateForward(p, Config{Target: tg})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(".version 7.8\n.target sm_%d\n", tg.SM); !strings.Contains(k.PTX, want) {
			t.Errorf("%s: PTX lacks %q", tg, want)
		}
		if k.Target != tg || k.Elem.String() != tg.Elem {
			t.Errorf("%s: Forward says target %s, elem %s", tg, k.Target, k.Elem)
		}
	}
}

// TestNoSpecImport checks that the package's code (tests aside) does not
// import spec: everything it knows of a mask comes from the plan.
func TestNoSpecImport(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			if path, _ := strconv.Unquote(im.Path.Value); strings.HasPrefix(path, "github.com/attngen/attngen/spec") {
				t.Errorf("%s imports %s", file, path)
			}
		}
	}
}

func TestGeometry(t *testing.T) {
	k, err := GenerateForward(examplePlan(t, "hybrid"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := k.Geometry(3, 8, 2, 130, 300, 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Grid != [3]int{3, 8, 3} || l.Block != [3]int{128, 1, 1} || l.DynShared != 5*64*144+4*Threads/32 {
		t.Errorf("geometry %+v", l)
	}
	if l.SeqQ != 130 || l.SeqK != 300 || l.HeadsQ != 8 || l.HeadsKV != 2 || l.ScaleLog2 != float32(0.125*1.4426950408889634) {
		t.Errorf("scalars %+v", l)
	}
	args, err := l.Args(1, 2, 3, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Args(1, 2, 3); err == nil {
		t.Error("Args took 3 addresses")
	}
	if len(args) != len(k.Params) {
		t.Fatalf("%d args for %d params", len(args), len(k.Params))
	}
	// a residue layout: one grid row per residue class, as many query
	// tiles as the largest class has queries
	dil, err := GenerateForward(examplePlan(t, "dilated"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if dil.Stride != 8 {
		t.Fatalf("dilated stride %d", dil.Stride)
	}
	for _, sh := range [][2]int{{1, 1}, {1, 9}, {70, 1000}, {1000, 1000}, {513, 520}} {
		l, err := dil.Geometry(2, 1, 1, sh[0], sh[1], 0)
		if err != nil {
			t.Fatal(err)
		}
		most := 0
		for _, seg := range examplePlan(t, "dilated").Segments(sh[0], sh[1]) {
			most = max(most, seg.SeqQ)
		}
		if l.Grid != [3]int{(most + TileQ - 1) / TileQ, 1, 16} {
			t.Errorf("seq %v: grid %v, the largest segment has %d queries", sh, l.Grid, most)
		}
	}
	if _, err := k.Geometry(1, 1, 1, 1, 1, -0.5); err == nil {
		t.Error("negative scale accepted")
	}
	for _, bad := range [][5]int{{1, 8, 3, 10, 10}, {0, 1, 1, 1, 1}} {
		if _, err := k.Geometry(bad[0], bad[1], bad[2], bad[3], bad[4], 0); err == nil {
			t.Errorf("shape %v accepted", bad)
		}
	}
	// more queries than keys: a launch only with positions (the kernel
	// takes them; TestPositionsRefused checks kernels that do not)
	wide, err := k.Geometry(1, 1, 1, 70, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if wide.Grid != [3]int{2, 1, 1} {
		t.Errorf("seq_q 70 > seq_k 10: grid %v, want 2 query tiles", wide.Grid)
	}
	if _, err := wide.Args(1, 2, 3, 4, 5); err == nil || !strings.Contains(err.Error(), "exceeds seq_k") {
		t.Errorf("seq_q > seq_k without positions: %v", err)
	}
	wide.QPos = 6
	if _, err := wide.Args(1, 2, 3, 4, 5); err != nil {
		t.Errorf("seq_q > seq_k at positions: %v", err)
	}
}

func TestDocArrays(t *testing.T) {
	start, end, err := DocArrays([]int32{0, 0, 1, 1, 1, 4})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(start, end) != "[0 0 2 2 2 5] [1 1 4 4 4 5]" {
		t.Errorf("start %v end %v", start, end)
	}
	if _, _, err := DocArrays([]int32{1, 0}); err == nil {
		t.Error("decreasing ids accepted")
	}
}
