package ptx

import (
	"fmt"
	"math"
	"strings"

	"github.com/attngen/attngen/gen"
)

// Env is what a plan program reads when rendered into a kernel: one s32
// operand (a 32-bit register or an immediate) per program argument, in
// Prog.Args order, and the kernel's document arrays.
type Env struct {
	Args []Operand
	// Docs holds the global addresses of the document arrays; nil when
	// the kernel takes none, and then a program that reads document ids
	// is an error.
	Docs *DocRegs
}

// DocRegs are the b64 global addresses of a document kernel's three s32
// arrays over key positions (see forwardParams): the document id, the
// first and the last position of each position's document.
type DocRegs struct {
	ID, Start, End Reg
}

// Value is a rendered program value: an s32 operand (register or
// immediate) or, for comparisons and logic, a predicate register.
type Value struct {
	IsPred bool
	Int    Operand // when !IsPred
	P      Reg     // when IsPred
}

func intVal(o Operand) Value { return Value{Int: o} }
func predVal(p Reg) Value    { return Value{IsPred: true, P: p} }

// IntOf returns v as an s32 operand (a predicate becomes 1 or 0).
func (f *Func) IntOf(v Value) Operand {
	if !v.IsPred {
		return v.Int
	}
	return f.Selp(S32, I(1), I(0), v.P)
}

// PredOf returns v as a predicate register (an integer is true when not 0).
func (f *Func) PredOf(v Value) Reg {
	if v.IsPred {
		return v.P
	}
	return f.Setp("ne", S32, v.Int, I(0))
}

// boolOf normalizes v to the 0/1 meaning of logic ops without emitting
// anything for predicates and immediates.
func (f *Func) boolOf(v Value) Value {
	switch {
	case v.IsPred:
		return v
	case isImm(v.Int):
		return intVal(I(b2i(v.Int.Imm != 0)))
	}
	return predVal(f.PredOf(v))
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Memo shares program values between renderings at different argument
// operands in one straight-line block: a value is keyed by the program,
// its number and the operands of exactly the arguments it depends on, so
// the per-element predicate pred(i, j) computes a row-only value once per
// row operand, a column-only value once per column operand, and constants
// once. Registers it reuses were computed earlier in the same block, so a
// memo must not outlive the block (or branch) it was filled in.
type Memo struct {
	vals map[memoKey]Value
}

type memoKey struct {
	p    *gen.Prog
	k    int
	args string
}

// NewMemo returns an empty memo.
func NewMemo() *Memo { return &Memo{vals: map[memoKey]Value{}} }

// CommentProg writes the program's listing (gen.Prog.String) as comments.
func (f *Func) CommentProg(what string, p *gen.Prog) {
	f.Comment(what + " (plan program, one value per line):")
	for _, line := range strings.Split(strings.TrimSpace(p.String()), "\n") {
		f.Comment("  " + line)
	}
}

// checkImm is the s32 legalization of a program immediate: constants
// (gen.Inf and -gen.Inf included) and the immediates of mulc, divc and
// modc must fit s32.
func checkImm(p *gen.Prog, k int, what string, v int64) error {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return fmt.Errorf("ptx: program %s v%d: %s %d does not fit s32", p.Name, k, what, v)
	}
	return nil
}

// RenderProg emits PTX computing program p on env's operands and returns
// its results, in Prog.Results order. Values are s32 (positions are below
// 2^30; gen.Inf is 2^31-1 and only compared); divc, modc and div are
// floored, correct for negative dividends; comparisons and logic produce
// predicates; document ops load from env.Docs. Dead values (Prog.Live) are
// not rendered, constants are folded, and memo (nil: none) shares values
// between renderings in one block. Every non-word gen.IROp renders; a word
// op (which exists only in the CPU keep-word program), an unknown op, a
// program that fails Check, arguments that are not s32 operands, an
// immediate outside s32 or document ops without env.Docs return an error.
func RenderProg(f *Func, p *gen.Prog, env Env, memo *Memo) ([]Value, error) {
	if p == nil {
		return nil, fmt.Errorf("ptx: nil program")
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("ptx: %w", err)
	}
	for k, in := range p.Insts {
		if in.Op.Word() {
			return nil, fmt.Errorf("ptx: program %s v%d: word op %s cannot be rendered (keep words exist only in the CPU keep-word program; PTX kernels evaluate the predicate per element)", p.Name, k, in.Op)
		}
	}
	if len(env.Args) != len(p.Args) {
		return nil, fmt.Errorf("ptx: program %s takes %d arguments (%s), got %d operands", p.Name, len(p.Args), strings.Join(p.Args, ", "), len(env.Args))
	}
	for n, a := range env.Args {
		if !(a.Kind == KImm && a.Imm >= math.MinInt32 && a.Imm <= math.MaxInt32 || a.Kind == KReg && a.Reg.T == B32 && !a.Neg) {
			return nil, fmt.Errorf("ptx: program %s: argument %s = %s is not an s32 register or immediate", p.Name, p.Args[n], a)
		}
	}
	if len(p.Args) > 64 {
		memo = nil // dependencies are a 64-bit set
	}
	live := p.Live()
	vals := make([]Value, len(p.Insts))
	deps := make([]uint64, len(p.Insts)) // bit n: depends on argument n
	for k, in := range p.Insts {
		if !live[k] {
			continue
		}
		switch in.Op {
		case gen.IRArg:
			deps[k] = 1 << uint(in.Imm)
		default:
			for _, x := range operands(in) {
				deps[k] |= deps[x]
			}
		}
		var key memoKey
		if memo != nil {
			var b strings.Builder
			for n := range env.Args {
				if deps[k]&(1<<uint(n)) != 0 {
					b.WriteString(env.Args[n].String())
					b.WriteByte('|')
				}
			}
			key = memoKey{p, k, b.String()}
			if v, ok := memo.vals[key]; ok {
				vals[k] = v
				continue
			}
		}
		v, err := f.renderInst(p, k, in, vals, env)
		if err != nil {
			return nil, err
		}
		if !v.IsPred && isImm(v.Int) {
			if err := checkImm(p, k, "value", v.Int.Imm); err != nil {
				return nil, err
			}
		}
		vals[k] = v
		if memo != nil {
			memo.vals[key] = v
		}
	}
	res := make([]Value, len(p.Results))
	for n, r := range p.Results {
		res[n] = vals[r]
	}
	return res, nil
}

// RenderPred renders a one-result program (the partial-tile predicate) and
// returns its result as a predicate register.
func RenderPred(f *Func, p *gen.Prog, env Env, memo *Memo) (Reg, error) {
	if p != nil && len(p.Results) != 1 {
		return Reg{}, fmt.Errorf("ptx: program %s has %d results, want 1", p.Name, len(p.Results))
	}
	res, err := RenderProg(f, p, env, memo)
	if err != nil {
		return Reg{}, err
	}
	return f.PredOf(res[0]), nil
}

// RenderInts renders a program and returns its results as s32 operands.
func RenderInts(f *Func, p *gen.Prog, env Env) ([]Operand, error) {
	res, err := RenderProg(f, p, env, nil)
	if err != nil {
		return nil, err
	}
	out := make([]Operand, len(res))
	for n, v := range res {
		out[n] = f.IntOf(v)
	}
	return out, nil
}

// operands lists the value operands of a non-word instruction.
func operands(in gen.Inst) []int {
	switch in.Op.Arity() {
	case 1:
		return []int{in.A}
	case 2:
		return []int{in.A, in.B}
	case 3:
		return []int{in.A, in.B, in.C}
	}
	return nil
}

// cmpOf maps comparison ops to setp comparisons and their Go meaning.
var cmpOf = map[gen.IROp]struct {
	cmp  string
	eval func(a, b int64) bool
}{
	gen.IRLt: {"lt", func(a, b int64) bool { return a < b }},
	gen.IRLe: {"le", func(a, b int64) bool { return a <= b }},
	gen.IREq: {"eq", func(a, b int64) bool { return a == b }},
}

// renderInst emits one instruction of p; vals holds the values before it.
func (f *Func) renderInst(p *gen.Prog, k int, in gen.Inst, vals []Value, env Env) (Value, error) {
	var a, b, c Value
	switch in.Op.Arity() {
	case 3:
		c = vals[in.C]
		fallthrough
	case 2:
		b = vals[in.B]
		fallthrough
	case 1:
		a = vals[in.A]
	}
	switch in.Op {
	case gen.IRArg:
		return intVal(env.Args[in.Imm]), nil
	case gen.IRConst:
		if err := checkImm(p, k, "constant", in.Imm); err != nil {
			return Value{}, err
		}
		return intVal(I(in.Imm)), nil
	case gen.IRAdd:
		return intVal(f.Add(f.IntOf(a), f.IntOf(b))), nil
	case gen.IRSub:
		return intVal(f.Sub(f.IntOf(a), f.IntOf(b))), nil
	case gen.IRMulC:
		if err := checkImm(p, k, "mulc by", in.Imm); err != nil {
			return Value{}, err
		}
		return intVal(f.MulC(f.IntOf(a), in.Imm)), nil
	case gen.IRDivC, gen.IRModC:
		if err := checkImm(p, k, in.Op.String()+" by", in.Imm); err != nil {
			return Value{}, err
		}
		if in.Op == gen.IRModC {
			return intVal(f.FloorMod(f.IntOf(a), in.Imm)), nil
		}
		return intVal(f.FloorDiv(f.IntOf(a), in.Imm)), nil
	case gen.IRDiv:
		x, y := f.IntOf(a), f.IntOf(b)
		if isImm(y) {
			if y.Imm < 1 {
				return Value{}, fmt.Errorf("ptx: program %s v%d: div by the constant %d (want >= 1)", p.Name, k, y.Imm)
			}
			return intVal(f.FloorDiv(x, y.Imm)), nil
		}
		return intVal(f.FloorDivR(x, y)), nil
	case gen.IRMin:
		return intVal(f.Min(f.IntOf(a), f.IntOf(b))), nil
	case gen.IRMax:
		return intVal(f.Max(f.IntOf(a), f.IntOf(b))), nil
	case gen.IRLt, gen.IRLe, gen.IREq:
		x, y := f.IntOf(a), f.IntOf(b)
		cm := cmpOf[in.Op]
		if isImm(x) && isImm(y) {
			return intVal(I(b2i(cm.eval(x.Imm, y.Imm)))), nil
		}
		return predVal(f.Setp(cm.cmp, S32, x, y)), nil
	case gen.IRAnd, gen.IROr:
		x, y := f.boolOf(a), f.boolOf(b)
		if in.A == in.B {
			return x, nil
		}
		if !y.IsPred {
			x, y = y, x
		}
		if !x.IsPred {
			// a constant operand: x && y is y when x is true, false
			// otherwise; x || y is true when x is true, y otherwise
			if (in.Op == gen.IRAnd) == (x.Int.Imm != 0) {
				return y, nil
			}
			return x, nil
		}
		op := OpAnd
		if in.Op == gen.IROr {
			op = OpOr
		}
		r := f.NewReg(Pred)
		f.Emit(Inst{Op: op, T: Pred, Dst: []Operand{R(r)}, Src: []Operand{R(x.P), R(y.P)}})
		return predVal(r), nil
	case gen.IRNot:
		x := f.boolOf(a)
		if !x.IsPred {
			return intVal(I(1 - x.Int.Imm)), nil
		}
		return predVal(f.PNot(x.P)), nil
	case gen.IRSelect:
		cond := f.boolOf(a)
		if !cond.IsPred {
			if cond.Int.Imm != 0 {
				return b, nil
			}
			return c, nil
		}
		return intVal(f.Selp(S32, f.IntOf(b), f.IntOf(c), cond.P)), nil
	case gen.IRDocID, gen.IRDocStart, gen.IRDocEnd:
		if env.Docs == nil {
			return Value{}, fmt.Errorf("ptx: program %s v%d: %s needs the run-time document arrays, which this kernel does not take", p.Name, k, in.Op)
		}
		base := map[gen.IROp]Reg{gen.IRDocID: env.Docs.ID, gen.IRDocStart: env.Docs.Start, gen.IRDocEnd: env.Docs.End}[in.Op]
		return intVal(f.LoadS32(base, f.IntOf(a))), nil
	}
	return Value{}, fmt.Errorf("ptx: program %s v%d: op %s cannot be rendered", p.Name, k, in.Op)
}

// LoadS32 loads the s32 at base[idx] from global memory (base a b64
// address register, idx an s32 operand).
func (f *Func) LoadS32(base Reg, idx Operand) Operand {
	off := f.NewReg(S64)
	f.Emit(Inst{Op: OpMulWide, T: S32, Dst: []Operand{R(off)}, Src: []Operand{f.reg(S32, idx), I(4)}})
	addr := f.Op3(OpAdd, S64, R(base), R(off))
	v := f.NewReg(S32)
	f.Emit(Inst{Op: OpLd, T: S32, Space: "global", Dst: []Operand{R(v)}, Src: []Operand{Addr(addr.Reg, 0)}})
	return R(v)
}
