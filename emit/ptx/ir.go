package ptx

import (
	"fmt"
	"math"
)

// Type is a PTX register or instruction type.
type Type uint8

const (
	NoType Type = iota
	Pred
	B16
	B32
	B64
	U32
	S32
	U64
	S64
	F32
	BF16
	F16
	BF16x2
	F16x2
	numTypes
)

var typeNames = [...]string{"", "pred", "b16", "b32", "b64", "u32", "s32", "u64", "s64", "f32", "bf16", "f16", "bf16x2", "f16x2"}

func (t Type) String() string {
	if t < numTypes {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Size is the size in bytes (0 for predicates).
func (t Type) Size() int {
	switch t {
	case B16, BF16, F16:
		return 2
	case B32, U32, S32, F32, BF16x2, F16x2:
		return 4
	case B64, U64, S64:
		return 8
	}
	return 0
}

// regClass is the declared type of a virtual register of type t: every
// integer type lives in a bit-size register (PTX lets a .bN register serve
// any N-bit integer instruction type), floats in .f32.
func regClass(t Type) Type {
	switch t {
	case Pred:
		return Pred
	case B16, BF16, F16:
		return B16
	case B32, U32, S32, BF16x2, F16x2:
		return B32
	case B64, U64, S64:
		return B64
	case F32:
		return F32
	}
	return NoType
}

// regPrefix names the registers of a declared class.
var regPrefix = map[Type]string{Pred: "%p", B16: "%h", B32: "%r", B64: "%rd", F32: "%f"}

// Reg is a virtual register: a declared class and a number within it.
type Reg struct {
	T  Type // declared class (Pred, B16, B32, B64, F32)
	ID int
}

func (r Reg) String() string { return fmt.Sprintf("%s%d", regPrefix[r.T], r.ID) }

// OperandKind says what an Operand holds.
type OperandKind uint8

const (
	KReg     OperandKind = iota + 1
	KImm                 // integer immediate
	KFImm                // f32 immediate, written 0fXXXXXXXX
	KAddr                // [Base+Off] or [Sym+Off]
	KVec                 // {r0, r1, ...}
	KSpecial             // %tid.x, ...
	KSym                 // a shared variable or parameter name used as a value
	KLabel
	KTensor // [Reg, {Vec...}]: a tensor map address and its coordinates
	// KStaged is a 32-bit word of shared memory at [Name+Off] used as a
	// value: Emit loads it with ld.volatile.shared into a fresh register
	// right before each instruction that reads it (Staged)
	KStaged
)

// Operand is one instruction operand.
type Operand struct {
	Kind OperandKind
	Reg  Reg
	Neg  bool // !p (predicate source of setp combine / guards)
	Imm  int64
	F    float32
	Off  int64
	Name string // special register, symbol, label, or Addr symbol
	Vec  []Reg
}

// R, I, F, ... build operands.
func R(r Reg) Operand          { return Operand{Kind: KReg, Reg: r} }
func I(v int64) Operand        { return Operand{Kind: KImm, Imm: v} }
func Fimm(v float32) Operand   { return Operand{Kind: KFImm, F: v} }
func Special(n string) Operand { return Operand{Kind: KSpecial, Name: n} }
func Sym(n string) Operand     { return Operand{Kind: KSym, Name: n} }
func Label(n string) Operand   { return Operand{Kind: KLabel, Name: n} }
func Vec(rs ...Reg) Operand    { return Operand{Kind: KVec, Vec: rs} }
func Addr(r Reg, off int64) Operand {
	return Operand{Kind: KAddr, Reg: r, Off: off}
}
func AddrSym(n string, off int64) Operand { return Operand{Kind: KAddr, Name: n, Off: off} }

// Staged is the s32 word at shared variable sym + off as a source operand
// that is reloaded at every use (ld.volatile.shared, which ptxas may
// neither hoist nor merge): a value the same for the whole CTA that
// would otherwise hold a register across a loop (the kit's per-row
// lengths and positions, stageRow).
func Staged(sym string, off int64) Operand { return Operand{Kind: KStaged, Name: sym, Off: off} }

// TensorCoord is the source operand [tmap, {c0, c1, ...}] of a bulk tensor
// copy: a 64-bit register holding a tensor map's address, and s32
// coordinates (innermost first) in 32-bit registers.
func TensorCoord(tmap Reg, coords ...Reg) Operand {
	return Operand{Kind: KTensor, Reg: tmap, Vec: coords}
}

func (o Operand) String() string {
	switch o.Kind {
	case KReg:
		if o.Neg {
			return "!" + o.Reg.String()
		}
		return o.Reg.String()
	case KImm:
		return fmt.Sprint(o.Imm)
	case KFImm:
		return fmt.Sprintf("0f%08X", math.Float32bits(o.F))
	case KAddr:
		base := o.Name
		if base == "" {
			base = o.Reg.String()
		}
		switch {
		case o.Off > 0:
			return fmt.Sprintf("[%s+%d]", base, o.Off)
		case o.Off < 0:
			return fmt.Sprintf("[%s+%d]", base, o.Off) // PTX reads [r+-4]
		}
		return "[" + base + "]"
	case KVec:
		s := "{"
		for k, r := range o.Vec {
			if k > 0 {
				s += ", "
			}
			s += r.String()
		}
		return s + "}"
	case KSpecial, KSym, KLabel:
		return o.Name
	case KTensor:
		return "[" + o.Reg.String() + ", " + Vec(o.Vec...).String() + "]"
	}
	return "?"
}

// Inst is one PTX instruction. Which fields matter is decided by the op's
// entry in the op table (table.go).
type Inst struct {
	Op       Op
	T, T2    Type   // instruction type(s)
	Cmp      string // setp comparison: eq ne lt le gt ge lo ls hi hs
	Space    string // ld/st: global or shared
	Guard    *Reg   // @p / @!p
	GuardNeg bool
	Dst      []Operand
	Src      []Operand
	Comment  string // written after the instruction
}

// Func is a kernel under construction: parameters, shared memory and an
// instruction list over virtual registers.
type Func struct {
	Name    string
	Params  []Param
	ReqNTID int // threads per block (.reqntid), 0 for none
	// MinCTAs is the .minnctapersm directive (0 for none; it needs ReqNTID):
	// the fewest CTAs per SM the register budget must allow.
	MinCTAs   int
	DynShared string // name of the dynamic shared array, "" for none
	// SharedAlign is the alignment of the dynamic shared array in bytes
	// (at least 16; swizzled tensor copies and wgmma need 1024).
	SharedAlign int
	Body        []Inst
	next        map[Type]int
	labels      int
}

// Param is a kernel parameter.
type Param struct {
	Name string
	T    Type // U64 (pointers), U32, S32 or F32
	Doc  string
}

// NewFunc starts a kernel.
func NewFunc(name string) *Func { return &Func{Name: name, next: map[Type]int{}} }

// NewReg allocates a fresh virtual register able to hold t.
func (f *Func) NewReg(t Type) Reg {
	c := regClass(t)
	if c == NoType {
		panic("BUG: no register class for " + t.String())
	}
	r := Reg{T: c, ID: f.next[c]}
	f.next[c]++
	return r
}

// NewLabel returns a fresh label with a readable stem.
func (f *Func) NewLabel(stem string) string {
	f.labels++
	return fmt.Sprintf("$L%d_%s", f.labels, stem)
}

// Emit appends an instruction, preceded by a load of each staged source
// operand (KStaged) into a fresh register, which replaces it.
func (f *Func) Emit(in Inst) {
	copied := false
	for x, o := range in.Src {
		if o.Kind != KStaged {
			continue
		}
		if !copied {
			in.Src, copied = append([]Operand(nil), in.Src...), true
		}
		r := f.NewReg(S32)
		f.Body = append(f.Body, Inst{Op: OpLdVol, T: S32, Dst: []Operand{R(r)}, Src: []Operand{AddrSym(o.Name, o.Off)}})
		in.Src[x] = R(r)
	}
	f.Body = append(f.Body, in)
}

// Place puts a label at the current position.
func (f *Func) Place(label string) { f.Emit(Inst{Op: OpLabel, Dst: []Operand{Label(label)}}) }

// Comment emits a comment line.
func (f *Func) Comment(text string) { f.Emit(Inst{Op: OpComment, Comment: text}) }
