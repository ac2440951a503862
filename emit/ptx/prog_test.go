package ptx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
)

// opProg is a program of three arguments (a, b, c) whose one result is op
// applied to them (A = a, B = b, C = c) with immediate imm.
func opProg(op gen.IROp, imm int64) *gen.Prog {
	in := gen.Inst{Op: op, A: 0, B: 1, C: 2, Imm: imm}
	return &gen.Prog{Name: "op_" + op.String(), Args: []string{"a", "b", "c"},
		Insts:   []gen.Inst{{Op: gen.IRArg, Imm: 0}, {Op: gen.IRArg, Imm: 1}, {Op: gen.IRArg, Imm: 2}, in},
		Results: []int{3}}
}

// opCases returns argument triples for op: positions of docN documents
// for document ops, positive divisors for div, and otherwise small values
// of both signs, with gen.Inf and -gen.Inf where the op only compares or
// selects (programs never do arithmetic on them).
func opCases(op gen.IROp, r *rand.Rand, docN int) [][]int64 {
	return opCasesImm(op, 0, r, docN)
}

// opCasesImm is opCases for op with immediate imm (a load's field).
func opCasesImm(op gen.IROp, imm int64, r *rand.Rand, docN int) [][]int64 {
	var cases [][]int64
	inf := int64(gen.Inf)
	for c := 0; c < 96; c++ {
		v := func() int64 { return int64(r.IntN(81) - 40) }
		a := []int64{v(), v(), v()}
		switch op {
		case gen.IRLoad:
			if gen.Field(imm).Indexed() {
				a[0] = int64(r.IntN(docN))
			}
		case gen.IRTreeAnc:
			// a query position, and a key anywhere around the positions
			a[0], a[1] = int64(r.IntN(docN)), int64(r.IntN(docN+10)-5)
		case gen.IRDiv:
			a[1] = int64(1 + r.IntN(9))
			if c%4 == 0 {
				a[1] = 8
			}
		case gen.IRLt, gen.IRLe, gen.IREq, gen.IRMin, gen.IRMax, gen.IRSelect, gen.IRAnd, gen.IROr, gen.IRNot:
			for x := range a {
				switch r.IntN(8) {
				case 0:
					a[x] = inf
				case 1:
					a[x] = -inf
				case 2:
					a[x] = a[(x+1)%3] // ties
				case 3:
					a[x] = int64(r.IntN(2)) // booleans
				}
			}
		}
		cases = append(cases, a)
	}
	return cases
}

// TestEveryIROp renders every op of the plan IR: each non-word op, with
// its operands in registers, as immediates (folded) and mixed, is run
// under the interpreter and equals Prog.Eval; each word op is refused
// with an error naming it.
func TestEveryIROp(t *testing.T) {
	if gen.NumIROps < 20 {
		t.Fatalf("gen.NumIROps = %d, want at least 20", gen.NumIROps)
	}
	ids := docIDs(160)
	r := rand.New(rand.NewPCG(5, 6))
	for op := gen.IROp(0); op < gen.NumIROps; op++ {
		t.Run(op.String(), func(t *testing.T) {
			if op.Word() {
				imm := int64(0)
				if op == gen.IRWStep {
					imm = 3
				}
				f := NewFunc("w")
				_, err := RenderProg(f, opProg(op, imm), Env{Args: []Operand{I(1), I(2), I(3)}}, nil)
				if err == nil || !strings.Contains(err.Error(), " "+op.String()+" ") {
					t.Fatalf("word op %s: err = %v, want an error naming it", op, err)
				}
				return
			}
			imms := []int64{0}
			switch op {
			case gen.IRArg:
				imms = []int64{0, 1, 2}
			case gen.IRConst:
				imms = []int64{0, 5, -7, gen.Inf, -gen.Inf}
			case gen.IRMulC:
				imms = []int64{-3, 0, 1, 4, 5}
			case gen.IRDivC, gen.IRModC:
				imms = []int64{1, 2, 3, 8, 7}
			}
			var docs []int32
			if op.Tree() {
				docs = treeParents(len(ids), 3)
			}
			if op == gen.IRLoad {
				// every field: the head parameters', then the document
				// arrays' and the parent array's
				checkParamOp(t, r, []int64{int64(gen.FieldParam), int64(gen.FieldParam + 1), int64(gen.FieldParam + 2)})
				checkOp(t, r, op, []int64{int64(gen.FieldDocID), int64(gen.FieldDocStart), int64(gen.FieldDocEnd)}, ids, len(ids))
				imms, docs = []int64{int64(gen.FieldTreeInfo), int64(gen.FieldTreeInfo + 1), int64(gen.FieldTreeInfo + 2)}, treeParents(len(ids), 3)
			}
			checkOp(t, r, op, imms, docs, len(ids))
		})
	}
}

// checkOp runs op with each immediate of imms on run-time data docs (nil:
// none) under the interpreter against Prog.Eval: with its operands in
// registers, as immediates (folded) and mixed.
func checkOp(t *testing.T, r *rand.Rand, op gen.IROp, imms []int64, docs []int32, docN int) {
	t.Helper()
	for _, imm := range imms {
		p := opProg(op, imm)
		cases := opCasesImm(op, imm, r, docN)
		// operands in registers
		checkProg(t, p, nil, docs, cases)
		// operands as immediates (constant folding), and one of
		// A, B, C an immediate; one kernel per case
		for c, a := range cases[:12] {
			binds := []map[int]int64{{0: a[0], 1: a[1], 2: a[2]}, {c % 3: a[c%3]}}
			for _, bind := range binds {
				checkProg(t, p, bind, docs, [][]int64{a})
			}
		}
	}
}

// opHeads are the head parameters TestEveryIROp's param programs read:
// ranges of several widths, one of them negative (kernels take any s32
// range; specs declare values from 0).
var opHeads = []spec.HeadParam{{Name: "w", Min: 1, Max: 8192}, {Name: "s", Min: 0, Max: 64}, {Name: "x", Min: -40, Max: 40}}

// checkParamOp runs the param op of each index in imms: with the values
// loaded per case from head_params by the kernels' loading code (each case
// its own head, the ends of each range included), and as immediates with
// the arguments in registers or bound.
func checkParamOp(t *testing.T, r *rand.Rand, imms []int64) {
	t.Helper()
	heads := &progHeads{params: opHeads}
	for _, imm := range imms {
		p := opProg(gen.IRLoad, imm)
		cases := opCasesImm(gen.IRLoad, imm, r, 1)
		vals := make([][]int32, len(cases))
		for c := range vals {
			vals[c] = make([]int32, len(opHeads))
			for k, hp := range opHeads {
				v := hp.Min + r.IntN(hp.Max-hp.Min+1)
				switch c % 4 {
				case 0:
					v = hp.Min
				case 1:
					v = hp.Max
				}
				vals[c][k] = int32(v)
			}
		}
		checkProgHeads(t, p, nil, nil, cases, heads, vals)
		for c, a := range cases[:8] {
			imm := &progHeads{params: opHeads, imm: []int64{int64(vals[c][0]), int64(vals[c][1]), int64(vals[c][2])}}
			checkProgHeads(t, p, nil, nil, [][]int64{a}, imm, nil)
			checkProgHeads(t, p, map[int]int64{0: a[0], 1: a[1], 2: a[2]}, nil, [][]int64{a}, imm, nil)
		}
	}
}

// TestParamRange checks that a head parameter's declared range reaches the
// range analysis: a position plus a window of at most 8192 keys is s32,
// plus one of up to 2^31-1 keys is computed in s64, and both equal
// Prog.Eval; a param op without the
// kernel's values, or with a value outside its range, is an error.
func TestParamRange(t *testing.T) {
	p := &gen.Prog{Name: "i_plus_w", Args: []string{"i"},
		Insts:   []gen.Inst{{Op: gen.IRArg}, {Op: gen.IRLoad, Imm: int64(gen.FieldParam)}, {Op: gen.IRAdd, A: 0, B: 1}},
		Results: []int{2}}
	big := int64(math.MaxInt32)
	for _, c := range []struct {
		max  int64
		wide bool
	}{{8192, false}, {big, true}} {
		hp := []spec.HeadParam{{Name: "w", Min: 1, Max: int(c.max)}}
		text, err := progKernelHeads(p, nil, false, &progHeads{params: hp})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(text, "add.s64"); got != c.wide {
			t.Errorf("window up to %d: add.s64 rendered %v, want %v", c.max, got, c.wide)
		}
		// sums that fit s32 (a saturated one would differ from Eval)
		cases := [][]int64{{0}, {ArgMax}, {5}, {ArgMax}}
		vals := [][]int32{{1}, {8192}, {1000}, {1}}
		if c.wide {
			vals[0][0] = int32(c.max)
		}
		checkProgHeads(t, p, nil, nil, cases, &progHeads{params: hp}, vals)
	}
	if _, err := RenderProg(NewFunc("k"), p, Env{Args: []Operand{I(3)}}, nil); err == nil || !strings.Contains(err.Error(), "head parameters") {
		t.Errorf("param without head values: err = %v", err)
	}
	f := NewFunc("k")
	for _, h := range []HeadVal{{V: I(9), Min: 1, Max: 8}, {V: R(f.NewReg(U64)), Min: 1, Max: 8}, {V: I(1), Min: 0, Max: big + 1}} {
		if _, err := RenderProg(f, p, Env{Args: []Operand{I(3)}, Heads: []HeadVal{h}}, nil); err == nil {
			t.Errorf("head value %+v rendered", h)
		}
	}
}

func TestRenderRejects(t *testing.T) {
	arg := gen.Inst{Op: gen.IRArg}
	prog := func(insts ...gen.Inst) *gen.Prog {
		return &gen.Prog{Name: "bad", Args: []string{"i"}, Insts: append([]gen.Inst{arg}, insts...), Results: []int{len(insts)}}
	}
	reg := func(f *Func, t Type) Operand { return R(f.NewReg(t)) }
	for _, c := range []struct {
		name string
		p    *gen.Prog
		args func(f *Func) []Operand
		want string
	}{
		{"unknown op", prog(gen.Inst{Op: gen.IROp(200)}), nil, "unknown op"},
		{"const 2^31", prog(gen.Inst{Op: gen.IRConst, Imm: 1 << 31}), nil, "does not fit s32"},
		{"const -2^31-1", prog(gen.Inst{Op: gen.IRConst, Imm: -1<<31 - 1}), nil, "does not fit s32"},
		{"mulc 2^40", prog(gen.Inst{Op: gen.IRMulC, A: 0, Imm: 1 << 40}), nil, "does not fit s32"},
		{"divc 2^40", prog(gen.Inst{Op: gen.IRDivC, A: 0, Imm: 1 << 40}), nil, "does not fit s32"},
		{"modc 2^32", prog(gen.Inst{Op: gen.IRModC, A: 0, Imm: 1 << 32}), nil, "does not fit s32"},
		{"folded overflow", prog(gen.Inst{Op: gen.IRConst, Imm: gen.Inf}, gen.Inst{Op: gen.IRAdd, A: 1, B: 1}), func(f *Func) []Operand { return []Operand{reg(f, S32)} }, "does not fit s32"},
		{"div by 0", prog(gen.Inst{Op: gen.IRConst, Imm: 0}, gen.Inst{Op: gen.IRDiv, A: 0, B: 1}), nil, "div by the constant 0"},
		{"docid without arrays", prog(gen.Inst{Op: gen.IRLoad, Imm: int64(gen.FieldDocID), A: 0}), nil, "document arrays"},
		{"docend without arrays", prog(gen.Inst{Op: gen.IRLoad, Imm: int64(gen.FieldDocEnd), A: 0}), nil, "document arrays"},
		{"argument count", prog(gen.Inst{Op: gen.IRNot, A: 0}), func(f *Func) []Operand { return []Operand{I(1), I(2)} }, "takes 1 arguments"},
		{"64-bit argument", prog(gen.Inst{Op: gen.IRNot, A: 0}), func(f *Func) []Operand { return []Operand{reg(f, U64)} }, "not an s32"},
		{"float argument", prog(gen.Inst{Op: gen.IRNot, A: 0}), func(f *Func) []Operand { return []Operand{reg(f, F32)} }, "not an s32"},
		{"wide immediate argument", prog(gen.Inst{Op: gen.IRNot, A: 0}), func(f *Func) []Operand { return []Operand{I(1 << 33)} }, "not an s32"},
		{"dead word op", prog(gen.Inst{Op: gen.IRWAnd, A: 0, B: 0}, gen.Inst{Op: gen.IRNot, A: 0}), nil, "word op wand"},
	} {
		f := NewFunc("k")
		args := []Operand{reg(f, S32)}
		if c.args != nil {
			args = c.args(f)
		}
		_, err := RenderProg(f, c.p, Env{Args: args}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
	if _, err := RenderProg(NewFunc("k"), nil, Env{}, nil); err == nil {
		t.Error("nil program rendered")
	}
	hull := &gen.Prog{Name: "h", Args: []string{"i"}, Insts: []gen.Inst{arg, {Op: gen.IRNot, A: 0}}, Results: []int{0, 1}}
	if _, err := RenderPred(NewFunc("k"), hull, Env{Args: []Operand{I(1)}}, nil); err == nil {
		t.Error("RenderPred took a program of two results")
	}
}

// TestMemoShares renders the predicate of a block mask (i/b == j/b: a
// row-only and a column-only value) over 2 rows and 8 columns with a
// memo: each row's and each column's block is computed once, so the
// block is shorter than without the memo.
func TestMemoShares(t *testing.T) {
	p := examplePlan(t, "block").Pred
	count := func(memo *Memo) int {
		f := NewFunc("k")
		rows := []Operand{R(f.NewReg(S32)), R(f.NewReg(S32))}
		var cols []Operand
		for range 8 {
			cols = append(cols, R(f.NewReg(S32)))
		}
		n0 := len(f.Body)
		for _, r := range rows {
			for _, c := range cols {
				if _, err := RenderPred(f, p, Env{Args: []Operand{r, c}}, memo); err != nil {
					t.Fatal(err)
				}
			}
		}
		return len(f.Body) - n0
	}
	with, without := count(NewMemo()), count(nil)
	if with >= without {
		t.Errorf("%d instructions with the memo, %d without", with, without)
	}
	// the same (row, col) twice in one memo emits nothing the second time
	f := NewFunc("k")
	memo := NewMemo()
	args := []Operand{R(f.NewReg(S32)), R(f.NewReg(S32))}
	RenderProg(f, p, Env{Args: args}, memo)
	n := len(f.Body)
	RenderProg(f, p, Env{Args: args}, memo)
	if len(f.Body) != n {
		t.Errorf("re-rendering at the same operands emitted %d instructions", len(f.Body)-n)
	}
	t.Logf("%d instructions with the memo, %d without", with, without)
}

func TestLegalizeRejects(t *testing.T) {
	cases := map[string]Inst{
		"unknown op":  {Op: numOps + 3},
		"invalid op":  {Op: OpInvalid},
		"bad type":    {Op: OpAdd, T: F32, Dst: []Operand{R(Reg{T: F32})}, Src: []Operand{R(Reg{T: F32}), R(Reg{T: F32})}},
		"operands":    {Op: OpAdd, T: S32, Dst: []Operand{R(Reg{T: B32})}},
		"reg class":   {Op: OpAdd, T: S32, Dst: []Operand{R(Reg{T: B64})}, Src: []Operand{R(Reg{T: B32}), I(1)}},
		"bad label":   {Op: OpBra, Src: []Operand{Label("nowhere")}},
		"bad cmp":     {Op: OpSetp, T: S32, Cmp: "zz", Dst: []Operand{R(Reg{T: Pred})}, Src: []Operand{R(Reg{T: B32}), I(1)}},
		"bad space":   {Op: OpLd, T: U32, Space: "local", Dst: []Operand{R(Reg{T: B32})}, Src: []Operand{Addr(Reg{T: B64}, 0)}},
		"float imm":   {Op: OpAdd, T: S32, Dst: []Operand{R(Reg{T: B32})}, Src: []Operand{R(Reg{T: B32}), Fimm(1)}},
		"guard class": {Op: OpRet, Guard: &Reg{T: B32}},
		"wide imm":    {Op: OpAdd, T: S32, Dst: []Operand{R(Reg{T: B32})}, Src: []Operand{R(Reg{T: B32}), I(1 << 33)}},
	}
	for name, in := range cases {
		f := NewFunc("k")
		f.Emit(in)
		if err := Legalize(f); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := (&Module{SM: 80, Funcs: []*Func{f}}).Text(); err == nil {
			t.Errorf("%s: Text rendered it", name)
		}
	}
}

// TestEveryOpRenders checks that every op of the table has text.
func TestEveryOpRenders(t *testing.T) {
	for op := OpLdParam; op < numOps; op++ {
		if _, ok := op.spec(); !ok {
			t.Errorf("op %d has no table entry", op)
		}
	}
}

// TestModuleSM checks the header follows the module's SM and that an SM
// without an ISA version, or lacking an instruction the body uses, is
// refused.
func TestModuleSM(t *testing.T) {
	body := func(op Op) *Func {
		f := NewFunc("k")
		f.Emit(Inst{Op: op})
		return f
	}
	for _, c := range []struct {
		sm   int
		op   Op
		want string
	}{
		{80, OpRet, ".version 7.8\n.target sm_80\n.address_size 64\n"},
		{90, OpCpCommit, ".version 7.8\n.target sm_90\n.address_size 64\n"},
		{75, OpRet, ".target sm_75\n"},
		{75, OpCpCommit, "needs sm_80"},
		{70, OpRet, "no PTX ISA version"},
		{100, OpRet, "no PTX ISA version"},
		{0, OpRet, "no PTX ISA version"},
	} {
		text, err := (&Module{SM: c.sm, Funcs: []*Func{body(c.op)}}).Text()
		got := text
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("sm %d: got %q, want it to contain %q", c.sm, got, c.want)
		}
	}
}

func TestTarget(t *testing.T) {
	var _ gen.Target = SM80
	if SM80.Name() != "ptx-sm80-bf16" || SM80.Arch() != "sm_80" {
		t.Errorf("SM80: name %q arch %q", SM80.Name(), SM80.Arch())
	}
	if q, k := SM80.TileSizes(128); q != TileQ || k != TileK {
		t.Errorf("tiles %dx%d", q, k)
	}
	if fmt.Sprint(SM80.HeadDims()) != "[32 64 96 128 192 256]" {
		t.Errorf("head dims %v", SM80.HeadDims())
	}
	for _, d := range SM80.HeadDims() {
		if err := SM80.Supports(d, d); err != nil {
			t.Errorf("head_dim %d: %v", d, err)
		}
	}
	if len(DefaultTargets) == 0 {
		t.Fatal("no default targets")
	}
	names := map[string]bool{}
	for _, tg := range DefaultTargets {
		if err := tg.Check(); err != nil {
			t.Errorf("default target %s: %v", tg, err)
		}
		if names[tg.Name()] {
			t.Errorf("default target %s twice", tg)
		}
		names[tg.Name()] = true
	}
	for _, c := range []struct {
		t    Target
		d    int
		want string
	}{
		{SM80, 80, "head_dim 80"},
		{SM80, 48, "head_dim 48"},
		{SM90a, 512, "head_dim 512"},
		{Target{SM: 80, Elem: "f32"}, 64, `element type "f32"`},
		{Target{SM: 75, Elem: "bf16"}, 64, "cp.async"},
		{Target{SM: 100, Elem: "bf16"}, 64, "sm_100"},
	} {
		if err := c.t.Supports(c.d, c.d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s head_dim %d: err = %v, want it to mention %q", c.t, c.d, err, c.want)
		}
	}
}
