package neon

import (
	"bytes"
	"fmt"
	"strings"
)

// Param is one argument of a function: its name and Go type.
type Param struct {
	Name, Type string
}

// size is the argument's size (and alignment) in Go's ABI0 on arm64.
func (p Param) size() int {
	switch p.Type {
	case "float32", "int32", "uint32":
		return 4
	}
	return 8
}

// Func is one assembly function being built, instruction by instruction.
// Registers are named by the code that builds it (no allocator): the
// kernels' comments say which register holds what.
type Func struct {
	Name   string
	Doc    []string // doc comment lines of the Go declaration
	Params []Param
	Result *Param // nil: no result
	NoEsc  bool   // //go:noescape on the declaration
	Frame  int    // bytes of locals
	body   bytes.Buffer
	offs   map[string]int
	labels map[string]bool
}

// NewFunc starts a function.
func NewFunc(name string, params []Param, result *Param, doc ...string) *Func {
	f := &Func{Name: name, Doc: doc, Params: params, Result: result, NoEsc: true,
		offs: map[string]int{}, labels: map[string]bool{}}
	off := 0
	for _, p := range params {
		sz := p.size()
		off = (off + sz - 1) / sz * sz
		f.offs[p.Name] = off
		off += sz
	}
	if result != nil {
		off = (off + 7) / 8 * 8 // results start pointer-aligned
		f.offs[result.Name] = off
		off += result.size()
	}
	f.offs[""] = off
	return f
}

// argSize is the size of the arguments and results.
func (f *Func) argSize() int { return f.offs[""] }

// Arg returns the FP operand of an argument: name+off(FP).
func (f *Func) Arg(name string) string {
	off, ok := f.offs[name]
	if !ok || name == "" {
		panic("BUG: no argument " + name + " of " + f.Name)
	}
	return fmt.Sprintf("%s+%d(FP)", name, off)
}

// Ret returns the FP operand of the result.
func (f *Func) Ret() string {
	if f.Result == nil {
		panic("BUG: " + f.Name + " has no result")
	}
	return fmt.Sprintf("ret+%d(FP)", f.offs[f.Result.Name])
}

// I adds one instruction in Go's syntax (general registers, loads,
// stores, branches, scalar floating point).
func (f *Func) I(format string, a ...any) {
	fmt.Fprintf(&f.body, "\t"+format+"\n", a...)
}

// V adds a SIMD instruction.
func (f *Func) V(i Inst) { f.body.WriteString("\t" + i.Line() + "\n") }

// Label places a label; each may be placed once.
func (f *Func) Label(l string) {
	if f.labels[l] {
		panic("BUG: label " + l + " placed twice in " + f.Name)
	}
	f.labels[l] = true
	fmt.Fprintf(&f.body, "%s:\n", l)
}

// Comment adds a comment line.
func (f *Func) Comment(s string) { fmt.Fprintf(&f.body, "\t// %s\n", s) }

// The SIMD instructions as methods, operands in GNU order: destination
// first.
func (f *Func) fadd(d, n, m V)         { f.V(opFADD.inst(d, n, m)) }
func (f *Func) fsub(d, n, m V)         { f.V(opFSUB.inst(d, n, m)) }
func (f *Func) fmul(d, n, m V)         { f.V(opFMUL.inst(d, n, m)) }
func (f *Func) fmax(d, n, m V)         { f.V(opFMAX.inst(d, n, m)) }
func (f *Func) fmaxnm(d, n, m V)       { f.V(opFMAXNM.inst(d, n, m)) }
func (f *Func) fmin(d, n, m V)         { f.V(opFMIN.inst(d, n, m)) }
func (f *Func) fmla(d, n, m V)         { f.V(opFMLA.inst(d, n, m)) }
func (f *Func) fmls(d, n, m V)         { f.V(opFMLS.inst(d, n, m)) }
func (f *Func) fmlaE(d, n, m V, i int) { f.V(opFMLAe.inst(d, n, m, i)) }
func (f *Func) fmulE(d, n, m V, i int) { f.V(opFMULe.inst(d, n, m, i)) }
func (f *Func) fcmgt(d, n, m V)        { f.V(opFCMGT.inst(d, n, m)) }
func (f *Func) fcmeq(d, n, m V)        { f.V(opFCMEQ.inst(d, n, m)) }
func (f *Func) faddp(d, n, m V)        { f.V(opFADDP.inst(d, n, m)) }
func (f *Func) and(d, n, m V)          { f.V(opAND.inst(d, n, m)) }
func (f *Func) orr(d, n, m V)          { f.V(opORR.inst(d, n, m)) }
func (f *Func) bic(d, n, m V)          { f.V(opBIC.inst(d, n, m)) }
func (f *Func) bif(d, n, m V)          { f.V(opBIF.inst(d, n, m)) }
func (f *Func) bit(d, n, m V)          { f.V(opBIT.inst(d, n, m)) }
func (f *Func) addi(d, n, m V)         { f.V(opADD4S.inst(d, n, m)) }
func (f *Func) subi(d, n, m V)         { f.V(opSUB4S.inst(d, n, m)) }
func (f *Func) cmtst(d, n, m V)        { f.V(opCMTST.inst(d, n, m)) }
func (f *Func) cmeq(d, n, m V)         { f.V(opCMEQ.inst(d, n, m)) }
func (f *Func) trn1s(d, n, m V)        { f.V(opTRN1S.inst(d, n, m)) }
func (f *Func) trn2s(d, n, m V)        { f.V(opTRN2S.inst(d, n, m)) }
func (f *Func) trn1d(d, n, m V)        { f.V(opTRN1D.inst(d, n, m)) }
func (f *Func) trn2d(d, n, m V)        { f.V(opTRN2D.inst(d, n, m)) }
func (f *Func) fdiv(d, n, m V)         { f.V(opFDIV.inst(d, n, m)) }
func (f *Func) uzp1h(d, n, m V)        { f.V(opUZP1H.inst(d, n, m)) }
func (f *Func) fcvtn(d, n V, hi bool)  { f.V(pick(hi, opFCVTN2, opFCVTN).inst(d, n)) }
func (f *Func) zip1h(d, n, m V)        { f.V(opZIP1H.inst(d, n, m)) }
func (f *Func) zip2h(d, n, m V)        { f.V(opZIP2H.inst(d, n, m)) }
func (f *Func) frintn(d, n V)          { f.V(opFRINTN.inst(d, n)) }
func (f *Func) fcvtzs(d, n V)          { f.V(opFCVTZS.inst(d, n)) }
func (f *Func) scvtf(d, n V)           { f.V(opSCVTF.inst(d, n)) }
func (f *Func) fabs(d, n V)            { f.V(opFABS.inst(d, n)) }
func (f *Func) abs(d, n V)             { f.V(opABS4S.inst(d, n)) }
func (f *Func) fcvtl(d, n V, hi bool)  { f.V(pick(hi, opFCVTL2, opFCVTL).inst(d, n)) }
func (f *Func) fmaxnmv(d, n V)         { f.V(opFMAXNMV.inst(d, n)) }
func (f *Func) faddp2s(d, n V)         { f.V(opFADDP2S.inst(d, n)) }
func (f *Func) shl(d, n V, sh int)     { f.V(shl4s(d, n, sh)) }
func (f *Func) ushr(d, n V, sh int)    { f.V(ushr4s(d, n, sh)) }
func (f *Func) uxtl(d, n V, hi bool)   { f.V(uxtl(d, n, hi)) }
func (f *Func) dupE(d, n V, i int)     { f.V(dupElem(d, n, i)) }
func (f *Func) dupR(d V, r int)        { f.V(dupGP(d, r)) }
func (f *Func) mov(d, n V)             { f.V(mov(d, n)) }
func (f *Func) zero(d V)               { f.V(zeroV(d)) }
func (f *Func) dupConst(d V, bits uint32, tmp int) {
	f.I("MOVW $0x%08x, R%d", bits, tmp)
	f.dupR(d, tmp)
}

func pick[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

// vlist is the Go register list [Va.S4, ..., Va+n-1.S4].
func vlist(a V, n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("V%d.S4", int(a)+i)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// File is a set of functions written as one assembly file and one Go file
// of declarations.
type File struct {
	Pkg, Constraint, Generator string
	Funcs                      []*Func
}

// Add appends a function.
func (fl *File) Add(f *Func) { fl.Funcs = append(fl.Funcs, f) }

func (fl *File) header() string {
	return fmt.Sprintf("// Code generated by command: go run %s. DO NOT EDIT.\n\n//go:build %s\n\n", fl.Generator, fl.Constraint)
}

// Asm is the assembly file.
func (fl *File) Asm() []byte {
	var b bytes.Buffer
	b.WriteString(fl.header())
	b.WriteString("#include \"textflag.h\"\n")
	for _, f := range fl.Funcs {
		fmt.Fprintf(&b, "\n// func %s\nTEXT ·%s(SB), NOSPLIT, $%d-%d\n", f.signature(), f.Name, f.Frame, f.argSize())
		b.Write(f.body.Bytes())
	}
	return b.Bytes()
}

func (f *Func) signature() string {
	ps := make([]string, len(f.Params))
	for i, p := range f.Params {
		ps[i] = p.Name + " " + p.Type
	}
	s := f.Name + "(" + strings.Join(ps, ", ") + ")"
	if f.Result != nil {
		s += " " + f.Result.Type
	}
	return s
}

// Stubs is the Go file of declarations.
func (fl *File) Stubs() []byte {
	var b bytes.Buffer
	b.WriteString(fl.header())
	fmt.Fprintf(&b, "package %s\n", fl.Pkg)
	for _, f := range fl.Funcs {
		b.WriteString("\n")
		for _, l := range f.Doc {
			if l == "" {
				b.WriteString("//\n")
			} else {
				b.WriteString("// " + l + "\n")
			}
		}
		if f.NoEsc {
			if len(f.Doc) > 0 {
				b.WriteString("//\n")
			}
			b.WriteString("//go:noescape\n")
		}
		fmt.Fprintf(&b, "func %s\n", f.signature())
	}
	return b.Bytes()
}
