package ptx

import (
	"fmt"
	"strings"
)

// dtype is a PTX fundamental type as written in a register declaration or an
// instruction suffix.
type dtype uint8

const (
	tNone dtype = iota
	tPred
	tB8
	tB16
	tB32
	tB64
	tU8
	tU16
	tU32
	tU64
	tS8
	tS16
	tS32
	tS64
	tF16
	tF16x2
	tBF16
	tBF16x2
	tF32
	tF64
)

var dtypeNames = map[string]dtype{
	"pred": tPred, "b8": tB8, "b16": tB16, "b32": tB32, "b64": tB64,
	"u8": tU8, "u16": tU16, "u32": tU32, "u64": tU64,
	"s8": tS8, "s16": tS16, "s32": tS32, "s64": tS64,
	"f16": tF16, "f16x2": tF16x2, "bf16": tBF16, "bf16x2": tBF16x2,
	"f32": tF32, "f64": tF64,
}

func (t dtype) String() string {
	for k, v := range dtypeNames {
		if v == t {
			return "." + k
		}
	}
	return ".?"
}

// size is the width in bytes (0 for predicates).
func (t dtype) size() int {
	switch t {
	case tB8, tU8, tS8:
		return 1
	case tB16, tU16, tS16, tF16, tBF16:
		return 2
	case tB32, tU32, tS32, tF16x2, tBF16x2, tF32:
		return 4
	case tB64, tU64, tS64, tF64:
		return 8
	}
	return 0
}

type tclass uint8

const (
	cPred tclass = iota
	cBit
	cUint
	cSint
	cFloat
)

func (t dtype) class() tclass {
	switch t {
	case tPred:
		return cPred
	case tB8, tB16, tB32, tB64:
		return cBit
	case tU8, tU16, tU32, tU64:
		return cUint
	case tS8, tS16, tS32, tS64:
		return cSint
	}
	return cFloat
}

func (t dtype) isInt() bool  { c := t.class(); return c == cBit || c == cUint || c == cSint }
func (t dtype) signed() bool { return t.class() == cSint }

// compatible reports whether a register declared as reg may stand where an
// instruction expects an operand of type want (PTX's operand type rules: a
// bit-size type matches any type of the same size, signed and unsigned
// integers of one size match each other, floating types match only
// themselves).
func compatible(want, reg dtype) bool {
	if want == tPred || reg == tPred {
		return want == reg
	}
	if want.size() != reg.size() {
		return false
	}
	wc, rc := want.class(), reg.class()
	switch {
	case wc == cBit || rc == cBit:
		return true
	case (wc == cUint || wc == cSint) && (rc == cUint || rc == cSint):
		return true
	}
	return want == reg
}

// Error is a parse or execution error. Line is the 1-based source line of the
// statement at fault and Text its source text.
type Error struct {
	File  string
	Line  int
	Col   int
	Text  string // the statement (instruction) text, when there is one
	Msg   string
	Where string // execution context: block and thread(s)
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteByte(':')
	}
	fmt.Fprintf(&b, "%d", e.Line)
	if e.Col > 0 {
		fmt.Fprintf(&b, ":%d", e.Col)
	}
	b.WriteString(": ")
	if e.Text != "" {
		b.WriteString(e.Text)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Where != "" {
		b.WriteString(" (")
		b.WriteString(e.Where)
		b.WriteByte(')')
	}
	return b.String()
}

// ErrorList is every error found while parsing a module, in source order.
type ErrorList []*Error

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}
