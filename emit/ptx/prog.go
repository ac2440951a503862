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
	// Heads are the values of the plan's head parameters at the query
	// head being computed (IRParam k reads Heads[k]); nil when the kernel
	// takes none, and then a program that reads one is an error.
	Heads []HeadVal
}

// HeadVal is one head parameter as a program reads it: its value at the
// query head being computed, an s32 register the kernel loaded from its
// head_params array (or an immediate), and the range [Min, Max] the plan
// declares for it (gen.Plan.HeadParams), which the range analysis takes
// for a register. The caller vouches for the range: values outside it
// may compute in s32 what needs s64.
type HeadVal struct {
	V        Operand
	Min, Max int64
}

// DocRegs are the b64 global addresses of a document kernel's three s32
// arrays over key positions (docParams): the document id, the
// first and the last position of each position's document.
type DocRegs struct {
	ID, Start, End Reg
	// Tree, for a tree kernel, holds its parent-array arrays instead
	// (treeParams); ID, Start and End are then unused.
	Tree *TreeRegs
}

// TreeRegs are the b64 global addresses of a tree kernel's arrays (see
// TreeArrays).
type TreeRegs struct {
	Lo, Off, Anc, Info Reg
}

// Value is a rendered program value: an s32 operand (register or
// immediate) or, for comparisons and logic, a predicate register. Inside
// RenderProg (and in a Memo) a value whose range does not fit s32 is an
// s64 operand (a .b64 register); RenderProg never returns one.
type Value struct {
	IsPred bool
	Int    Operand // when !IsPred
	P      Reg     // when IsPred
}

func intVal(o Operand) Value { return Value{Int: o} }
func predVal(p Reg) Value    { return Value{IsPred: true, P: p} }

// IntOf returns v as an s32 operand (a predicate becomes 1 or 0). A
// 64-bit value (see RenderProg) saturates to [math.MinInt32,
// math.MaxInt32], which keeps its order against every s32 value strictly
// between the two (every position).
func (f *Func) IntOf(v Value) Operand {
	switch {
	case v.IsPred:
		return f.Selp(S32, I(1), I(0), v.P)
	case isWide(v.Int):
		return f.saturate(v.Int, interval{math.MinInt64, math.MaxInt64})
	}
	return v.Int
}

// saturate clamps a 64-bit operand whose value lies in r to s32 (the
// bounds r already keeps are not compared).
func (f *Func) saturate(o Operand, r interval) Operand {
	if isImm(o) {
		return I(min(max(o.Imm, math.MinInt32), math.MaxInt32))
	}
	if r.lo < math.MinInt32 {
		o = f.Op3(OpMax, S64, o, I(math.MinInt32))
	}
	if r.hi > math.MaxInt32 {
		o = f.Op3(OpMin, S64, o, I(math.MaxInt32))
	}
	return f.narrow(o)
}

// PredOf returns v as a predicate register (an integer is true when not 0).
func (f *Func) PredOf(v Value) Reg {
	switch {
	case v.IsPred:
		return v.P
	case isWide(v.Int):
		return f.Setp("ne", S64, v.Int, I(0))
	}
	return f.Setp("ne", S32, v.Int, I(0))
}

// isWide reports whether an integer operand of a program value is 64-bit:
// a .b64 register or an immediate outside s32.
func isWide(o Operand) bool {
	return o.Kind == KReg && o.Reg.T == B64 || o.Kind == KImm && (o.Imm < math.MinInt32 || o.Imm > math.MaxInt32)
}

// narrow converts a 64-bit register whose value fits s32 to an s32
// register.
func (f *Func) narrow(o Operand) Operand {
	if o.Kind != KReg {
		return o
	}
	r := f.NewReg(S32)
	f.Emit(Inst{Op: OpCvtNarrow, T: S32, T2: S64, Dst: []Operand{R(r)}, Src: []Operand{o}})
	return R(r)
}

// widen returns an integer value as an s64 operand: immediates stay,
// s32 registers are sign-extended, predicates become 1 or 0.
func (f *Func) widen(v Value) Operand {
	if v.IsPred {
		return f.Selp(S64, I(1), I(0), v.P)
	}
	if v.Int.Kind != KReg || v.Int.Reg.T == B64 {
		return v.Int
	}
	r := f.NewReg(S64)
	f.Emit(Inst{Op: OpCvtWide, T: S64, T2: S32, Dst: []Operand{R(r)}, Src: []Operand{v.Int}})
	return R(r)
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
// (gen.Inf and -gen.Inf included), the immediates of mulc, divc and modc,
// and values folded from constants alone must fit s32.
func checkImm(p *gen.Prog, k int, what string, v int64) error {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return fmt.Errorf("ptx: program %s v%d: %s %d does not fit s32", p.Name, k, what, v)
	}
	return nil
}

// RenderProg emits PTX computing program p on env's operands and returns
// its results, in Prog.Results order. It is exact, as Prog.Eval, for
// arguments in registers that are kernel positions, in [0, ArgMax]
// (immediate arguments are taken as they are): a range analysis bounds
// every value from the arguments' ranges (valueRanges), values whose range
// fits s32 are computed in s32 (every kernel of ordinary masks), and the
// few whose range does not (a window reaching 2^31-1 keys ahead adds it to
// a position) are computed in s64 and converted back where their range
// fits again. A result whose range exceeds s32 is saturated to
// [math.MinInt32, math.MaxInt32] (see IntOf): results are key bounds, and a
// saturated bound lies beyond every position on the same side as the true
// one. divc, modc and div are floored, correct for negative dividends;
// comparisons and logic produce predicates; document ops load from
// env.Docs; param is the operand env.Heads holds for it (the kernel loads
// the head's values once per head), with the parameter's [Min, Max] as
// its range. Dead values (Prog.Live) are not rendered, constants are
// folded, and memo (nil: none) shares values between renderings in one
// block. Every non-word gen.IROp renders; a word op (which exists only in
// the CPU keep-word program), an unknown op, a program that fails Check,
// arguments that are not s32 operands, a constant or immediate outside s32
// (gen keeps them in [-gen.Inf, gen.Inf]), a value folded from constants
// alone outside s32, a value whose range does not fit 64 bits, document
// ops without env.Docs or a param op without its env.Heads value return an
// error.
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
	for k, h := range env.Heads {
		ok := h.Min <= h.Max && h.Min >= math.MinInt32 && h.Max <= math.MaxInt32
		switch {
		case h.V.Kind == KImm:
			ok = ok && h.V.Imm >= h.Min && h.V.Imm <= h.Max
		default:
			ok = ok && h.V.Kind == KReg && h.V.Reg.T == B32 && !h.V.Neg
		}
		if !ok {
			return nil, fmt.Errorf("ptx: program %s: head parameter %d = %s in [%d, %d] is not an s32 register or immediate within an s32 range", p.Name, k, h.V, h.Min, h.Max)
		}
	}
	if len(p.Args) > 64 {
		memo = nil // dependencies are a 64-bit set
	}
	live := p.Live()
	for k, in := range p.Insts {
		if live[k] && (in.Op == gen.IRConst || in.Op == gen.IRMulC || in.Op == gen.IRDivC || in.Op == gen.IRModC) {
			what := "constant"
			if in.Op != gen.IRConst {
				what = in.Op.String() + " by"
			}
			if err := checkImm(p, k, what, in.Imm); err != nil {
				return nil, err
			}
		}
	}
	rng, err := valueRanges(p, env, live)
	if err != nil {
		return nil, err
	}
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
		var v Value
		var err error
		if wideOp(in.Op) && (!rng[k].fits32() || anyWide(in, vals)) {
			v, err = f.renderWide(p, k, in, vals, rng[k])
		} else {
			v, err = f.renderInst(p, k, in, vals, env)
		}
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
		if v := res[n]; !v.IsPred && isWide(v.Int) {
			res[n] = intVal(f.saturate(v.Int, rng[r]))
		}
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
	switch in.Arity() {
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
	switch in.Arity() {
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
	case gen.IRLoad:
		return f.renderLoad(p, k, gen.Field(in.Imm), a, env)
	case gen.IRTreeAnc:
		if env.Docs == nil || env.Docs.Tree == nil {
			return Value{}, fmt.Errorf("ptx: program %s v%d: %s needs the run-time tree arrays, which this kernel does not take", p.Name, k, in.Op)
		}
		if (!a.IsPred && isWide(a.Int)) || (!b.IsPred && isWide(b.Int)) {
			return Value{}, fmt.Errorf("ptx: program %s v%d: %s of a value outside s32 (not a position)", p.Name, k, in.Op)
		}
		return predVal(f.treeAnc(env.Docs.Tree, f.IntOf(a), f.IntOf(b))), nil
	}
	return Value{}, fmt.Errorf("ptx: program %s v%d: op %s cannot be rendered", p.Name, k, in.Op)
}

// renderLoad emits an IRLoad of field fl (instruction k of p) at position
// a: an s32 from the kernel parameter that holds the field (env.Docs'
// arrays, env.Heads' values), or an error when the kernel takes none.
func (f *Func) renderLoad(p *gen.Prog, k int, fl gen.Field, a Value, env Env) (Value, error) {
	switch fl.Input() {
	case gen.InputHeadParams:
		n := int(fl - gen.FieldParam)
		if n >= len(env.Heads) {
			return Value{}, fmt.Errorf("ptx: program %s v%d: %s needs the values of the head parameters, which this kernel does not take (%d given)", p.Name, k, fl, len(env.Heads))
		}
		return intVal(env.Heads[n].V), nil
	case gen.InputTree:
		if env.Docs == nil || env.Docs.Tree == nil {
			return Value{}, fmt.Errorf("ptx: program %s v%d: %s needs the run-time tree arrays, which this kernel does not take", p.Name, k, fl)
		}
		return intVal(f.LoadS32(env.Docs.Tree.Info, I(int64(fl-gen.FieldTreeInfo)))), nil
	}
	if env.Docs == nil || env.Docs.Tree != nil {
		return Value{}, fmt.Errorf("ptx: program %s v%d: %s needs the run-time document arrays, which this kernel does not take", p.Name, k, fl)
	}
	if !a.IsPred && isWide(a.Int) {
		return Value{}, fmt.Errorf("ptx: program %s v%d: %s of a value outside s32 (not a position)", p.Name, k, fl)
	}
	base := map[gen.Field]Reg{gen.FieldDocID: env.Docs.ID, gen.FieldDocStart: env.Docs.Start, gen.FieldDocEnd: env.Docs.End}[fl]
	return intVal(f.LoadS32(base, f.IntOf(a))), nil
}

// treeAnc is 1 when key j is query i or an ancestor of i (TreeArrays):
// 0 <= j <= i and either j <= lo[i] (every key up to lo[i] is an ancestor)
// or j is past the chain and its bit is set in i's row of anc. The bit
// index is clamped into the row (0 .. i - chain), so the load stays inside
// the arrays whatever j is; the clamped bit is then not used.
func (f *Func) treeAnc(t *TreeRegs, i, j Operand) Reg {
	lo := f.LoadS32(t.Lo, i)
	chain := f.LoadS32(t.Info, I(0))
	c := f.Min(f.Max(f.Sub(j, chain), I(0)), f.Max(f.Sub(i, chain), I(0)))
	word := f.Add(f.LoadS32(t.Off, i), f.Op3(OpShr, S32, c, I(5)))
	w := f.LoadS32(t.Anc, word)
	bit := f.Op3(OpAnd, B32, f.Op3(OpShr, U32, w, f.Op3(OpAnd, B32, c, I(31))), I(1))
	node := f.PAnd(f.Setp("ge", S32, j, chain), f.Setp("ne", U32, bit, I(0)))
	in := f.PAnd(f.Setp("ge", S32, j, I(0)), f.Setp("le", S32, j, i))
	return f.PAnd(in, f.POr(f.Setp("le", S32, j, lo), node))
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

// ArgMax bounds the program arguments the forward kernel passes in
// registers: positions below maxSeq (Geometry refuses seq_k >= maxSeq),
// plus the rows and columns of a last query or key tile that run past
// seq_k (less than a tile each), and residue classes below the stride.
// RenderProg's range analysis takes every register argument to lie in
// [0, ArgMax]; immediate arguments have their own value.
const ArgMax = maxSeq + 2*TileK

// interval is the closed range [lo, hi] of a program value.
type interval struct{ lo, hi int64 }

func (r interval) fits32() bool { return r.lo >= math.MinInt32 && r.hi <= math.MaxInt32 }

// addOK, mulOK are int64 addition and multiplication that report overflow.
func addOK(a, b int64) (int64, bool) {
	c := a + b
	return c, (c > a) == (b > 0) || b == 0
}

func mulOK(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	return c, c/b == a && !(a == -1 && b == math.MinInt64) && !(b == -1 && a == math.MinInt64)
}

// span is the interval of the given bounds (at least one).
func span(xs ...int64) interval {
	r := interval{xs[0], xs[0]}
	for _, x := range xs[1:] {
		r.lo, r.hi = min(r.lo, x), max(r.hi, x)
	}
	return r
}

// valueRanges bounds every live value of p, given register arguments in
// [0, ArgMax] and immediate arguments at their value, by interval
// arithmetic (exact for a value of constants and immediates alone). Two
// patterns are tightened because programs use them on positions: x mod c
// of an x within one period of c is x shifted, and x - (x mod c) is c times
// floor(x / c). Document ids are any s32, document bounds positions, head
// parameters their declared [Min, Max] (an immediate value: itself). A
// bound that leaves int64 is an error.
func valueRanges(p *gen.Prog, env Env, live []bool) ([]interval, error) {
	rs := make([]interval, len(p.Insts))
	for k, in := range p.Insts {
		if !live[k] {
			continue
		}
		var a, b, c interval
		switch in.Arity() {
		case 3:
			c = rs[in.C]
			fallthrough
		case 2:
			b = rs[in.B]
			fallthrough
		case 1:
			a = rs[in.A]
		}
		r, ok := interval{}, true
		switch in.Op {
		case gen.IRArg:
			r = interval{0, ArgMax}
			if o := env.Args[in.Imm]; isImm(o) {
				r = interval{o.Imm, o.Imm}
			}
		case gen.IRConst:
			r = interval{in.Imm, in.Imm}
		case gen.IRAdd:
			lo, ok1 := addOK(a.lo, b.lo)
			hi, ok2 := addOK(a.hi, b.hi)
			r, ok = interval{lo, hi}, ok1 && ok2
		case gen.IRSub:
			if m := p.Insts[in.B]; m.Op == gen.IRModC && m.A == in.A {
				lo, ok1 := mulOK(floorDivI(a.lo, m.Imm), m.Imm)
				hi, ok2 := mulOK(floorDivI(a.hi, m.Imm), m.Imm)
				r, ok = interval{lo, hi}, ok1 && ok2
				break
			}
			lo, ok1 := addOK(a.lo, -b.hi)
			hi, ok2 := addOK(a.hi, -b.lo)
			r, ok = interval{lo, hi}, ok1 && ok2 && b.lo != math.MinInt64
		case gen.IRMulC:
			lo, ok1 := mulOK(a.lo, in.Imm)
			hi, ok2 := mulOK(a.hi, in.Imm)
			r, ok = span(lo, hi), ok1 && ok2
		case gen.IRDivC:
			r = interval{floorDivI(a.lo, in.Imm), floorDivI(a.hi, in.Imm)}
		case gen.IRModC:
			r = interval{0, in.Imm - 1}
			if q := floorDivI(a.lo, in.Imm); q == floorDivI(a.hi, in.Imm) {
				r = interval{a.lo - q*in.Imm, a.hi - q*in.Imm}
			}
		case gen.IRDiv:
			// floor(x / y) for y >= 1 (the op's precondition) is monotone
			// in x, and in y for x of one sign: the corners bound it
			b.lo, b.hi = max(b.lo, 1), max(b.hi, 1)
			r = span(floorDivI(a.lo, b.lo), floorDivI(a.lo, b.hi), floorDivI(a.hi, b.lo), floorDivI(a.hi, b.hi))
		case gen.IRMin:
			r = interval{min(a.lo, b.lo), min(a.hi, b.hi)}
		case gen.IRMax:
			r = interval{max(a.lo, b.lo), max(a.hi, b.hi)}
		case gen.IRLt, gen.IRLe, gen.IREq, gen.IRAnd, gen.IROr, gen.IRNot:
			r = interval{0, 1}
		case gen.IRSelect:
			r = span(b.lo, b.hi, c.lo, c.hi)
		case gen.IRLoad:
			switch fl := gen.Field(in.Imm); {
			case fl == gen.FieldDocID:
				r = interval{math.MinInt32, math.MaxInt32}
			case fl.Input() == gen.InputDocs:
				r = interval{0, ArgMax} // a document's first or last position
			case fl.Input() == gen.InputTree:
				r = interval{-1, ArgMax} // a chain length, a TreeLo, a chain position (TreeArrays)
			default:
				n := int(fl - gen.FieldParam)
				if n >= len(env.Heads) {
					return nil, fmt.Errorf("ptx: program %s v%d: %s needs the values of the head parameters, which this kernel does not take (%d given)", p.Name, k, fl, len(env.Heads))
				}
				h := env.Heads[n]
				r = interval{h.Min, h.Max}
				if isImm(h.V) {
					r = interval{h.V.Imm, h.V.Imm}
				}
			}
		case gen.IRTreeAnc:
			r = interval{0, 1}
		default:
			return nil, fmt.Errorf("ptx: program %s v%d: op %s cannot be rendered", p.Name, k, in.Op)
		}
		if !ok {
			return nil, fmt.Errorf("ptx: program %s v%d: the range of %s does not fit 64 bits", p.Name, k, in.Op)
		}
		rs[k] = r
	}
	return rs, nil
}

// wideOp reports whether an op is rendered in s64 when its range or an
// operand does not fit s32 (logic ops only test operands against 0, and
// document ops take positions).
func wideOp(op gen.IROp) bool {
	switch op {
	case gen.IRAdd, gen.IRSub, gen.IRMulC, gen.IRDivC, gen.IRModC, gen.IRDiv, gen.IRMin, gen.IRMax,
		gen.IRLt, gen.IRLe, gen.IREq, gen.IRSelect:
		return true
	}
	return false
}

// anyWide reports whether an operand of in is a 64-bit value.
func anyWide(in gen.Inst, vals []Value) bool {
	for _, x := range operands(in) {
		if !vals[x].IsPred && isWide(vals[x].Int) {
			return true
		}
	}
	return false
}

// renderWide emits one instruction of p in s64: operands are widened,
// and the result is narrowed back to s32 when its range r fits. An
// instruction of immediates alone is folded with Prog.Eval's arithmetic.
func (f *Func) renderWide(p *gen.Prog, k int, in gen.Inst, vals []Value, r interval) (Value, error) {
	if in.Op == gen.IRDiv {
		if y := vals[in.B]; !y.IsPred && isImm(y.Int) && y.Int.Imm < 1 {
			return Value{}, fmt.Errorf("ptx: program %s v%d: div by the constant %d (want >= 1)", p.Name, k, y.Int.Imm)
		}
	}
	ops := operands(in)
	q := &gen.Prog{Name: p.Name, Results: []int{len(ops)}}
	e := in
	idx := []*int{&e.A, &e.B, &e.C}
	for n, x := range ops {
		v := vals[x]
		if v.IsPred || !isImm(v.Int) {
			q = nil
			break
		}
		q.Insts = append(q.Insts, gen.Inst{Op: gen.IRConst, Imm: v.Int.Imm})
		*idx[n] = n
	}
	if q != nil {
		q.Insts = append(q.Insts, e)
		var res [1]int64
		q.Eval(nil, nil, nil, res[:])
		return intVal(I(res[0])), nil
	}
	w := func(x int) Operand { return f.widen(vals[x]) }
	var out Operand
	switch in.Op {
	case gen.IRAdd:
		out = f.Op3(OpAdd, S64, w(in.A), w(in.B))
	case gen.IRSub:
		out = f.Op3(OpSub, S64, w(in.A), w(in.B))
	case gen.IRMulC:
		out = f.Op3(OpMulLo, S64, w(in.A), I(in.Imm))
	case gen.IRDivC:
		out = f.floorDiv64(w(in.A), I(in.Imm))
	case gen.IRModC:
		out = f.floorMod64(w(in.A), in.Imm)
	case gen.IRDiv:
		out = f.floorDiv64(w(in.A), w(in.B))
	case gen.IRMin:
		out = f.Op3(OpMin, S64, w(in.A), w(in.B))
	case gen.IRMax:
		out = f.Op3(OpMax, S64, w(in.A), w(in.B))
	case gen.IRLt, gen.IRLe, gen.IREq:
		return predVal(f.Setp(cmpOf[in.Op].cmp, S64, w(in.A), w(in.B))), nil
	case gen.IRSelect:
		cond := f.boolOf(vals[in.A])
		if !cond.IsPred {
			if cond.Int.Imm != 0 {
				return vals[in.B], nil
			}
			return vals[in.C], nil
		}
		out = f.Selp(S64, w(in.B), w(in.C), cond.P)
	default:
		return Value{}, fmt.Errorf("ptx: program %s v%d: op %s has no 64-bit rendering", p.Name, k, in.Op)
	}
	if r.fits32() {
		out = f.narrow(out)
	}
	return intVal(out), nil
}

// floorDiv64 is floor(a / d) in s64 for d >= 1 (an immediate or a
// register): div.s64 with a correction when the remainder is negative.
func (f *Func) floorDiv64(a, d Operand) Operand {
	q := f.Op3(OpDiv, S64, a, d)
	r := f.Op3(OpRem, S64, a, d)
	p := f.Setp("lt", S64, r, I(0))
	f.Emit(Inst{Op: OpSub, T: S64, Guard: &p, Dst: []Operand{q}, Src: []Operand{q, I(1)}})
	return q
}

// floorMod64 is a mod c in [0, c) in s64 for c >= 1.
func (f *Func) floorMod64(a Operand, c int64) Operand {
	r := f.Op3(OpRem, S64, a, I(c))
	p := f.Setp("lt", S64, r, I(0))
	f.Emit(Inst{Op: OpAdd, T: S64, Guard: &p, Dst: []Operand{r}, Src: []Operand{r, I(c)}})
	return r
}
