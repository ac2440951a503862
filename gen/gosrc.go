package gen

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"
)

// MaskPkg is the import path of the runtime package compiled masks use.
const MaskPkg = "github.com/attngen/attngen/runtime/mask"

// gotype is the Go type a value of a program has in rendered code.
type gotype uint8

const (
	goInt gotype = iota
	goBool
	goWord
)

func opType(types []gotype, in Inst) gotype {
	switch in.Op {
	case IRLt, IRLe, IREq, IRAnd, IROr, IRNot, IRTreeAnc:
		return goBool
	case IRSelect:
		return types[in.B]
	}
	if in.Op.Word() {
		return goWord
	}
	return goInt
}

// GoBody renders a program as Go statements: one local per live value
// (constants inline), the arguments named by args, document ids read
// through the *mask.Docs named docs, and a return of the results converted
// to want (one type per result: "int", "bool", "uint64" or "mask.Class").
// Every IR op renders; nothing else does.
func GoBody(p *Prog, args []string, docs string, want []string) ([]jen.Code, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	if len(args) != len(p.Args) || len(want) != len(p.Results) {
		return nil, fmt.Errorf("BUG: %s rendered with %d args and %d results", p.Name, len(args), len(want))
	}
	live := p.Live()
	types := make([]gotype, len(p.Insts))
	for k, in := range p.Insts {
		types[k] = opType(types, in)
	}
	name := func(k int) string { return fmt.Sprintf("v%d", k) }
	// ref renders value k as a Go expression of type t.
	var ref func(k int, t gotype) *jen.Statement
	ref = func(k int, t gotype) *jen.Statement {
		in := p.Insts[k]
		var e *jen.Statement
		switch in.Op {
		case IRArg:
			e = jen.Id(args[in.Imm])
		case IRConst:
			switch {
			case t == goBool:
				return jen.Lit(in.Imm != 0)
			case t == goWord:
				if in.Imm == -1 {
					return jen.Op("^").Uint64().Call(jen.Lit(0))
				}
				return jen.Uint64().Call(jen.Lit(int(in.Imm)))
			case in.Imm >= Inf:
				return jen.Qual(MaskPkg, "Inf")
			case in.Imm <= -Inf:
				return jen.Op("-").Qual(MaskPkg, "Inf")
			}
			return jen.Lit(int(in.Imm))
		default:
			e = jen.Id(name(k))
		}
		from := types[k]
		switch {
		case from == t:
			return e
		case from == goInt && t == goBool:
			return jen.Parens(e.Op("!=").Lit(0))
		case from == goBool && t == goInt:
			return jen.Qual(MaskPkg, "Int").Call(e)
		case from == goInt && t == goWord:
			return jen.Uint64().Call(e)
		}
		panic(fmt.Sprintf("BUG: %s v%d: no conversion from %d to %d", p.Name, k, from, t))
	}
	var code []jen.Code
	bin := func(op string, a, b int, t gotype) *jen.Statement {
		return ref(a, t).Op(op).Add(ref(b, t))
	}
	for k, in := range p.Insts {
		if !live[k] || in.Op == IRArg || in.Op == IRConst {
			continue
		}
		var e jen.Code
		switch in.Op {
		case IRAdd:
			e = bin("+", in.A, in.B, goInt)
		case IRSub:
			e = bin("-", in.A, in.B, goInt)
		case IRMulC:
			e = ref(in.A, goInt).Op("*").Lit(int(in.Imm))
		case IRDivC, IRModC:
			fn := "FloorDiv"
			if in.Op == IRModC {
				fn = "FloorMod"
			}
			if in.Imm&(in.Imm-1) == 0 {
				// by a power of two: an arithmetic shift or a mask
				sh := 0
				for 1<<sh < in.Imm {
					sh++
				}
				if in.Op == IRDivC {
					e = ref(in.A, goInt).Op(">>").Lit(sh)
				} else {
					e = ref(in.A, goInt).Op("&").Lit(int(in.Imm - 1))
				}
				break
			}
			e = jen.Qual(MaskPkg, fn).Call(ref(in.A, goInt), jen.Lit(int(in.Imm)))
		case IRDiv:
			e = jen.Qual(MaskPkg, "FloorDiv").Call(ref(in.A, goInt), ref(in.B, goInt))
		case IRMin, IRMax:
			e = jen.Id(in.Op.String()).Call(ref(in.A, goInt), ref(in.B, goInt))
		case IRLt:
			e = bin("<", in.A, in.B, goInt)
		case IRLe:
			e = bin("<=", in.A, in.B, goInt)
		case IREq:
			e = bin("==", in.A, in.B, goInt)
		case IRAnd:
			e = bin("&&", in.A, in.B, goBool)
		case IROr:
			e = bin("||", in.A, in.B, goBool)
		case IRNot:
			e = jen.Op("!").Add(ref(in.A, goBool))
		case IRSelect:
			t := types[k]
			code = append(code,
				jen.Id(name(k)).Op(":=").Add(ref(in.C, t)),
				jen.If(ref(in.A, goBool)).Block(jen.Id(name(k)).Op("=").Add(ref(in.B, t))))
			continue
		case IRLoad:
			e = goLoad(Field(in.Imm), docs, ref(in.A, goInt))
		case IRTreeAnc:
			e = jen.Id(docs).Dot("TreeAnc").Call(ref(in.A, goInt), ref(in.B, goInt))
		case IRWTree:
			e = jen.Id(docs).Dot("TreeWord").Call(ref(in.A, goInt), ref(in.B, goInt))
		case IRWRange:
			lo, hi := jen.Lit(0), jen.Lit(63)
			if in.A >= 0 {
				lo = ref(in.A, goInt)
			}
			if in.B >= 0 {
				hi = ref(in.B, goInt)
			}
			e = jen.Qual(MaskPkg, "Lanes").Call(lo, hi)
		case IRWStep:
			e = jen.Qual(MaskPkg, "Every").Call(ref(in.A, goInt), jen.Lit(int(in.Imm)))
		case IRWAnd:
			e = bin("&", in.A, in.B, goWord)
		case IRWOr:
			e = bin("|", in.A, in.B, goWord)
		case IRWNot:
			e = jen.Op("^").Add(ref(in.A, goWord))
		case IRWPeriod:
			// periodWord, inline: runs of B+1 lanes every Imm lanes from
			// the lane where (c + A) mod Imm is 0, each cut to the lanes of
			// C's class
			s := name(k) + "s"
			code = append(code, jen.Var().Id(name(k)).Uint64(),
				jen.For(
					jen.Id(s).Op(":=").Op("-").Qual(MaskPkg, "FloorMod").Call(ref(in.A, goInt), jen.Lit(int(in.Imm))),
					jen.Id(s).Op("<").Lit(64),
					jen.Id(s).Op("+=").Lit(int(in.Imm)),
				).Block(jen.Id(name(k)).Op("|=").Qual(MaskPkg, "Lanes").Call(jen.Id(s), jen.Id("min").Call(jen.Id(s).Op("+").Add(ref(in.B, goInt)), jen.Lit(63))).Op("&").Qual(MaskPkg, "Every").Call(jen.Id(s), jen.Id("max").Call(ref(in.C, goInt), jen.Lit(1)))))
			continue
		case IRWIf:
			code = append(code, jen.Var().Id(name(k)).Uint64(),
				jen.If(ref(in.A, goBool)).Block(jen.Id(name(k)).Op("=").Add(ref(in.B, goWord))))
			continue
		default:
			return nil, fmt.Errorf("gen: %s v%d: op %s has no Go rendering", p.Name, k, in.Op)
		}
		code = append(code, jen.Id(name(k)).Op(":=").Add(e))
	}
	var rets []jen.Code
	for n, r := range p.Results {
		switch want[n] {
		case "int":
			rets = append(rets, ref(r, goInt))
		case "bool":
			rets = append(rets, ref(r, goBool))
		case "uint64":
			rets = append(rets, ref(r, goWord))
		case "mask.Class":
			rets = append(rets, jen.Qual(MaskPkg, "Class").Call(ref(r, goInt)))
		default:
			return nil, fmt.Errorf("BUG: result type %q", want[n])
		}
	}
	return append(code, jen.Return(rets...)), nil
}

// progComment is a program's text as comment lines, so that generated code
// traces back to the plan.
func progComment(p *Prog) string {
	return strings.TrimSuffix(p.String(), "\n")
}

// goLoad is field f read from the *mask.Docs named docs, at position a
// when f is Indexed: the accessor Field.Load calls.
func goLoad(f Field, docs string, a jen.Code) jen.Code {
	switch {
	case f == FieldDocID:
		return jen.Int().Call(jen.Id(docs).Dot("ID").Call(a))
	case f == FieldDocStart:
		return jen.Id(docs).Dot("Start").Call(a)
	case f == FieldDocEnd:
		return jen.Id(docs).Dot("End").Call(a)
	case f < FieldParam:
		return jen.Id(docs).Dot("TreeInfo").Call(jen.Lit(int(f - FieldTreeInfo)))
	}
	return jen.Id(docs).Dot("Param").Call(jen.Lit(int(f - FieldParam)))
}
