package ptx

import (
	"fmt"
	"math"
	"strings"

	"github.com/attngen/attngen/gen"
)

// PredEnv is what the partial-tile predicate reads in a kernel: the query
// and key positions of one score element (s32 registers, in the plan's
// layout), and, for document masks, the global addresses of two per-position
// s32 arrays (document id and document start). Docs is false when the
// kernel has no document arrays; a predicate that reads them is an error.
type PredEnv struct {
	Row, Col  Operand
	Docs      bool
	DocIDs    Reg // b64 global address of s32 ids[pos]
	DocStarts Reg // b64 global address of s32 starts[pos]
}

// pval is a lowered predicate value: an integer operand (register or
// immediate) or a predicate register.
type pval struct {
	isPred bool
	v      Operand
	p      Reg
}

func (f *Func) asInt(x pval) Operand {
	if !x.isPred {
		return x.v
	}
	return f.Selp(S32, I(1), I(0), x.p)
}

func (f *Func) asPred(x pval) Reg {
	if x.isPred {
		return x.p
	}
	return f.Setp("ne", S32, x.v, I(0))
}

// LowerPred emits PTX computing p at (env.Row, env.Col) and returns the
// predicate register that holds the result. Values are s32: positions are
// below 2^31. divc and modc are floored (correct for negative operands,
// which differences of positions can be); by powers of two they are an
// arithmetic shift and a mask. Every gen.IROp is handled; any other op, a
// predicate that fails Check, or document ops without env.Docs return an
// error.
func LowerPred(f *Func, p *gen.Pred, env PredEnv) (Reg, error) {
	return LowerPredMemo(f, p, env, nil)
}

// PredMemo shares predicate subexpressions between evaluations at
// different (row, col) operands in one straight-line block: a value that
// depends only on the row is computed once per row operand, one that
// depends only on the column once per column operand, constants once.
type PredMemo struct {
	vals map[string]pval
}

// NewPredMemo returns an empty memo.
func NewPredMemo() *PredMemo { return &PredMemo{vals: map[string]pval{}} }

// LowerPredMemo is LowerPred sharing values through memo (nil: none).
// Registers it reuses were computed earlier in the same block, so a memo
// must not outlive the block (or branch) it was filled in.
func LowerPredMemo(f *Func, p *gen.Pred, env PredEnv, memo *PredMemo) (Reg, error) {
	if p == nil {
		return Reg{}, fmt.Errorf("ptx: nil predicate")
	}
	if err := p.Check(); err != nil {
		return Reg{}, fmt.Errorf("ptx: %w", err)
	}
	if memo == nil || len(memo.vals) == 0 {
		f.Comment("partial-tile predicate (gen.Pred, one value per line):")
		for _, line := range strings.Split(strings.TrimSpace(p.String()), "\n") {
			f.Comment("  " + line)
		}
	}
	vals := make([]pval, len(p.Insts))
	deps := make([]uint8, len(p.Insts)) // 1: reads the row, 2: reads the column
	loadDoc := func(base Reg, pos Operand) Operand {
		off := f.NewReg(S64)
		f.Emit(Inst{Op: OpMulWide, T: S32, Dst: []Operand{R(off)}, Src: []Operand{f.reg(S32, pos), I(4)}})
		addr := f.Op3(OpAdd, S64, R(base), R(off))
		v := f.NewReg(S32)
		f.Emit(Inst{Op: OpLd, T: S32, Space: "global", Dst: []Operand{R(v)}, Src: []Operand{Addr(addr.Reg, 0)}})
		return R(v)
	}
	for k, in := range p.Insts {
		switch in.Op {
		case gen.IRRow:
			deps[k] = 1
		case gen.IRCol:
			deps[k] = 2
		default:
			if in.Op.Arity() >= 1 {
				deps[k] |= deps[in.A]
			}
			if in.Op.Arity() == 2 {
				deps[k] |= deps[in.B]
			}
		}
		key := ""
		if memo != nil {
			key = fmt.Sprint(k, "|", in.Op)
			if deps[k]&1 != 0 {
				key += "|" + env.Row.String()
			}
			if deps[k]&2 != 0 {
				key += "|" + env.Col.String()
			}
			if v, ok := memo.vals[key]; ok {
				vals[k] = v
				continue
			}
		}
		a, b := pval{}, pval{}
		if in.Op.Arity() >= 1 {
			a = vals[in.A]
		}
		if in.Op.Arity() == 2 {
			b = vals[in.B]
		}
		var out pval
		switch in.Op {
		case gen.IRRow:
			out.v = env.Row
		case gen.IRCol:
			out.v = env.Col
		case gen.IRConst:
			if in.Imm < math.MinInt32 || in.Imm > math.MaxInt32 {
				return Reg{}, fmt.Errorf("ptx: predicate v%d: constant %d does not fit s32", k, in.Imm)
			}
			out.v = I(in.Imm)
		case gen.IRAdd:
			out.v = f.Add(f.asInt(a), f.asInt(b))
		case gen.IRSub:
			out.v = f.Sub(f.asInt(a), f.asInt(b))
		case gen.IRDivC, gen.IRModC:
			if in.Imm > math.MaxInt32 {
				return Reg{}, fmt.Errorf("ptx: predicate v%d: %s by %d does not fit s32", k, in.Op, in.Imm)
			}
			if in.Op == gen.IRModC {
				out.v = f.FloorMod(f.asInt(a), in.Imm)
				break
			}
			out.v = f.FloorDiv(f.asInt(a), in.Imm)
		case gen.IRLt, gen.IRLe, gen.IREq:
			x, y := f.asInt(a), f.asInt(b)
			cmp := map[gen.IROp]string{gen.IRLt: "lt", gen.IRLe: "le", gen.IREq: "eq"}[in.Op]
			if isImm(x) && isImm(y) {
				r := map[string]bool{"lt": x.Imm < y.Imm, "le": x.Imm <= y.Imm, "eq": x.Imm == y.Imm}[cmp]
				out.v = I(map[bool]int64{false: 0, true: 1}[r])
				break
			}
			out = pval{isPred: true, p: f.Setp(cmp, S32, x, y)}
		case gen.IRAnd, gen.IROr:
			if in.A == in.B {
				out = a
				break
			}
			if !a.isPred && isImm(a.v) || !b.isPred && isImm(b.v) {
				// constant operand: fold
				c, o := a, b
				if !(!c.isPred && isImm(c.v)) {
					c, o = b, a
				}
				if (in.Op == gen.IRAnd) == (c.v.Imm != 0) {
					out = o
				} else {
					out = c
				}
				break
			}
			op := OpAnd
			if in.Op == gen.IROr {
				op = OpOr
			}
			r := f.NewReg(Pred)
			f.Emit(Inst{Op: op, T: Pred, Dst: []Operand{R(r)}, Src: []Operand{R(f.asPred(a)), R(f.asPred(b))}})
			out = pval{isPred: true, p: r}
		case gen.IRDocID, gen.IRDocStart:
			if !env.Docs {
				return Reg{}, fmt.Errorf("ptx: predicate v%d: %s needs run-time document ids, which this kernel does not take (document masks are not supported by the v1 PTX forward kernel)", k, in.Op)
			}
			base := env.DocIDs
			if in.Op == gen.IRDocStart {
				base = env.DocStarts
			}
			out.v = loadDoc(base, f.asInt(a))
		default:
			return Reg{}, fmt.Errorf("ptx: predicate v%d: op %s cannot be rendered", k, in.Op)
		}
		vals[k] = out
		if key != "" {
			memo.vals[key] = out
		}
	}
	last := vals[len(vals)-1]
	if !last.isPred && isImm(last.v) {
		// constant result: a predicate that is always true or false
		x := f.Mov(S32, last.v)
		return f.Setp("ne", S32, R(x), I(0)), nil
	}
	return f.asPred(last), nil
}
