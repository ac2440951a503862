package ptx

import (
	"flag"
	"fmt"
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
	p, err := gen.Compile(s, Sm80, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var supported = []string{"block", "bridge", "causal", "dilated", "document", "hetero", "hybrid", "se_bridge", "streaming", "window"}

func TestForwardDeterministic(t *testing.T) {
	for _, name := range supported {
		p := examplePlan(t, name)
		for _, cfg := range []Config{{}, {Elem: F16}, {SoftLg2: true}} {
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
		".visible .entry attn_fwd_bridge(\n\t.param .u64 q,\n\t.param .u64 k,\n\t.param .u64 v,\n\t.param .u64 o,\n\t.param .u64 lse,\n\t.param .u32 seq_q,\n\t.param .u32 seq_k,\n\t.param .u32 heads_q,\n\t.param .u32 heads_kv,\n\t.param .f32 scale_log2\n)\n.reqntid 128, 1, 1\n{\n",
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
	if k.DynShared != 64*272+4*64*272 {
		t.Errorf("dynamic shared %d bytes", k.DynShared)
	}
}

func TestForwardF16(t *testing.T) {
	k, err := GenerateForward(examplePlan(t, "causal"), Config{Elem: F16, SoftLg2: true})
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
	p, err := gen.Compile(&spec.Spec{Name: "causal64", Mask: spec.Full(), Causal: true, HeadDim: 64}, Sm80, nil)
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
	odd, err := gen.Compile(&spec.Spec{Name: "odd", Mask: spec.Full(), Causal: true, HeadDim: 96}, Sm80, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := spec.ParseFile("../../spec/examples/causal.yaml")
	tiles48, err := gen.Compile(s, gen.Tiles{TargetName: "x", Q: 48, K: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *gen.Plan
		cfg  Config
		want string
	}{
		{"head dim", odd, Config{}, "head_dim 96"},
		{"tiles", tiles48, Config{}, "tiles 48x64"},
		{"element", causal, Config{Elem: F32}, "element type"},
	} {
		_, err := GenerateForward(c.p, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
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
	if l.Grid != [3]int{3, 8, 3} || l.Block != [3]int{128, 1, 1} || l.DynShared != 5*64*144 {
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
	if _, err := k.Geometry(1, 1, 1, 1, 1, -0.5); err == nil {
		t.Error("negative scale accepted")
	}
	for _, bad := range [][5]int{{1, 8, 3, 10, 10}, {1, 1, 1, 11, 10}, {0, 1, 1, 1, 1}} {
		if _, err := k.Geometry(bad[0], bad[1], bad[2], bad[3], bad[4], 0); err == nil {
			t.Errorf("shape %v accepted", bad)
		}
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
