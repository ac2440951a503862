package ptx

import (
	"fmt"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
)

// allIROps lists every gen.IROp: the values whose String is a name.
func allIROps() []gen.IROp {
	var ops []gen.IROp
	for op := gen.IROp(0); op < 255; op++ {
		if op.String() == fmt.Sprintf("IROp(%d)", int(op)) {
			break
		}
		ops = append(ops, op)
	}
	return ops
}

// predFunc is a kernel shell with positions and document arrays for
// predicate lowering tests.
func predFunc() (*Func, PredEnv) {
	f := NewFunc("pred")
	f.Params = []Param{{Name: "ids", T: U64}, {Name: "starts", T: U64}, {Name: "i", T: S32}, {Name: "j", T: S32}}
	ids, starts := f.NewReg(U64), f.NewReg(U64)
	f.Emit(Inst{Op: OpLdParam, T: U64, Dst: []Operand{R(ids)}, Src: []Operand{AddrSym("ids", 0)}})
	f.Emit(Inst{Op: OpLdParam, T: U64, Dst: []Operand{R(starts)}, Src: []Operand{AddrSym("starts", 0)}})
	i, j := f.NewReg(S32), f.NewReg(S32)
	f.Emit(Inst{Op: OpLdParam, T: S32, Dst: []Operand{R(i)}, Src: []Operand{AddrSym("i", 0)}})
	f.Emit(Inst{Op: OpLdParam, T: S32, Dst: []Operand{R(j)}, Src: []Operand{AddrSym("j", 0)}})
	return f, PredEnv{Row: R(i), Col: R(j), Docs: true, DocIDs: ids, DocStarts: starts}
}

// TestEveryIROpHandled lowers a predicate using each IR op and renders it.
func TestEveryIROpHandled(t *testing.T) {
	ops := allIROps()
	if len(ops) < 14 {
		t.Fatalf("found %d IR ops, want at least 14", len(ops))
	}
	for _, op := range ops {
		p := &gen.Pred{Insts: []gen.Inst{{Op: gen.IRRow}, {Op: gen.IRCol}}}
		in := gen.Inst{Op: op, A: 0, B: 1}
		if op.Arity() < 2 {
			in.B = 0
		}
		if op.HasImm() {
			in.Imm = 3
		}
		if op.Arity() == 0 {
			in.A = 0
		}
		p.Insts = append(p.Insts, in)
		f, env := predFunc()
		r, err := LowerPred(f, p, env)
		if err != nil {
			t.Errorf("op %s: %v", op, err)
			continue
		}
		if r.T != Pred {
			t.Errorf("op %s: result %s is not a predicate", op, r)
		}
		m := &Module{Funcs: []*Func{f}}
		if _, err := m.Text(); err != nil {
			t.Errorf("op %s: %v", op, err)
		}
	}
}

func TestUnknownIROp(t *testing.T) {
	f, env := predFunc()
	p := &gen.Pred{Insts: []gen.Inst{{Op: gen.IRRow}, {Op: gen.IROp(200), A: 0, B: 0}}}
	if _, err := LowerPred(f, p, env); err == nil {
		t.Fatal("unknown IR op lowered without error")
	}
	p = &gen.Pred{Insts: []gen.Inst{{Op: gen.IRRow}, {Op: gen.IRDivC, A: 0, Imm: 1 << 40}}}
	if _, err := LowerPred(f, p, env); err == nil {
		t.Fatal("divc by 2^40 lowered without error")
	}
	env.Docs = false
	p = &gen.Pred{Insts: []gen.Inst{{Op: gen.IRRow}, {Op: gen.IRDocID, A: 0}}}
	if _, err := LowerPred(f, p, env); err == nil || !strings.Contains(err.Error(), "document") {
		t.Fatalf("docid without document arrays: err = %v", err)
	}
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
		if _, err := (&Module{Funcs: []*Func{f}}).Text(); err == nil {
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
