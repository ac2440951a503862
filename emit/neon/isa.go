package neon

import "fmt"

// V is a SIMD register, V0-V31.
type V uint8

// Inst is one Advanced SIMD instruction: its 32-bit encoding, its text in
// GNU syntax (what the ARM ARM and objdump -gnu print) and, when Go's
// arm64 assembler knows it, its Go text. Files carry the Go text where
// there is one and WORD $enc (with the GNU text as comment) elsewhere;
// TestEncodings holds both to the Go assembler and disassembler.
type Inst struct {
	Enc uint32
	GNU string
	Go  string
}

// Line is the instruction as a line of a Go assembly file.
func (i Inst) Line() string {
	if i.Go != "" {
		return i.Go
	}
	return fmt.Sprintf("WORD $0x%08x // %s", i.Enc, i.GNU)
}

func rd(d V) uint32 { return uint32(d & 31) }
func rn(n V) uint32 { return uint32(n&31) << 5 }
func rm(m V) uint32 { return uint32(m&31) << 16 }
func check(r ...V) {
	for _, x := range r {
		if x > 31 {
			panic(fmt.Sprintf("BUG: register V%d", x))
		}
	}
}

// op3 is an instruction of the "three registers of the same type" class
// (C4.1.x Advanced SIMD three same): base holds Q, U, size and opcode;
// arr is the GNU arrangement and goArr Go's ("" when Go lacks the op).
type op3 struct {
	name, goName string
	base         uint32
	arr, goArr   string
}

// The three-same operations on four float32 lanes (Q = 1, sz = 0) and on
// 16 bytes or four 32-bit integers.
var (
	opFADD   = op3{"fadd", "", 0x4e20d400, "4s", ""}
	opFSUB   = op3{"fsub", "", 0x4ea0d400, "4s", ""}
	opFMUL   = op3{"fmul", "", 0x6e20dc00, "4s", ""}
	opFMAX   = op3{"fmax", "", 0x4e20f400, "4s", ""}
	opFMAXNM = op3{"fmaxnm", "", 0x4e20c400, "4s", ""}
	opFMIN   = op3{"fmin", "", 0x4ea0f400, "4s", ""}
	opFDIV   = op3{"fdiv", "", 0x6e20fc00, "4s", ""}
	opFMLA   = op3{"fmla", "VFMLA", 0x4e20cc00, "4s", "S4"}
	opFMLS   = op3{"fmls", "VFMLS", 0x4ea0cc00, "4s", "S4"}
	opFCMGT  = op3{"fcmgt", "", 0x6ea0e400, "4s", ""}
	opFCMEQ  = op3{"fcmeq", "", 0x4e20e400, "4s", ""}
	opFADDP  = op3{"faddp", "", 0x6e20d400, "4s", ""}
	opAND    = op3{"and", "VAND", 0x4e201c00, "16b", "B16"}
	opORR    = op3{"orr", "VORR", 0x4ea01c00, "16b", "B16"}
	opEOR    = op3{"eor", "VEOR", 0x6e201c00, "16b", "B16"}
	opBIC    = op3{"bic", "", 0x4e601c00, "16b", ""}
	opBIF    = op3{"bif", "VBIF", 0x6ee01c00, "16b", "B16"}
	opBIT    = op3{"bit", "VBIT", 0x6ea01c00, "16b", "B16"}
	opADD4S  = op3{"add", "VADD", 0x4ea08400, "4s", "S4"}
	opSUB4S  = op3{"sub", "VSUB", 0x6ea08400, "4s", "S4"}
	opCMTST  = op3{"cmtst", "VCMTST", 0x4ea08c00, "4s", "S4"}
	opCMEQ   = op3{"cmeq", "VCMEQ", 0x6ea08c00, "4s", "S4"}
	opTRN1S  = op3{"trn1", "VTRN1", 0x4e802800, "4s", "S4"}
	opTRN2S  = op3{"trn2", "VTRN2", 0x4e806800, "4s", "S4"}
	opTRN1D  = op3{"trn1", "VTRN1", 0x4ec02800, "2d", "D2"}
	opTRN2D  = op3{"trn2", "VTRN2", 0x4ec06800, "2d", "D2"}
	opUZP1H  = op3{"uzp1", "VUZP1", 0x4e401800, "8h", "H8"}
	opZIP1H  = op3{"zip1", "VZIP1", 0x4e403800, "8h", "H8"}
	opZIP2H  = op3{"zip2", "VZIP2", 0x4e407800, "8h", "H8"}
)

// ops3 lists the three-same operations (for the encoding tests).
var ops3 = []op3{opFADD, opFSUB, opFMUL, opFMAX, opFMAXNM, opFMIN, opFDIV, opFMLA, opFMLS, opFCMGT, opFCMEQ, opFADDP,
	opAND, opORR, opEOR, opBIC, opBIF, opBIT, opADD4S, opSUB4S, opCMTST, opCMEQ, opTRN1S, opTRN2S, opTRN1D, opTRN2D, opUZP1H, opZIP1H, opZIP2H}

// inst is d = n op m (for fmla: d += n*m; fmls: d -= n*m; bif, bit: the
// bitwise inserts).
func (o op3) inst(d, n, m V) Inst {
	check(d, n, m)
	i := Inst{Enc: o.base | rm(m) | rn(n) | rd(d),
		GNU: fmt.Sprintf("%s v%d.%s, v%d.%s, v%d.%s", o.name, d, o.arr, n, o.arr, m, o.arr)}
	if o.goName != "" {
		i.Go = fmt.Sprintf("%s V%d.%s, V%d.%s, V%d.%s", o.goName, m, o.goArr, n, o.goArr, d, o.goArr)
	}
	return i
}

// op2 is an instruction of the two-register miscellaneous class (and the
// across-lanes and scalar pairwise classes, which take the same fields):
// d = op(n). dst and src are the GNU operand forms, %d the register.
type op2 struct {
	name     string
	base     uint32
	dst, src string
}

var (
	opFRINTN  = op2{"frintn", 0x4e218800, "v%d.4s", "v%d.4s"}
	opFCVTZS  = op2{"fcvtzs", 0x4ea1b800, "v%d.4s", "v%d.4s"}
	opSCVTF   = op2{"scvtf", 0x4e21d800, "v%d.4s", "v%d.4s"}
	opFABS    = op2{"fabs", 0x4ea0f800, "v%d.4s", "v%d.4s"}
	opABS4S   = op2{"abs", 0x4ea0b800, "v%d.4s", "v%d.4s"} // int32 lanes
	opFCVTL   = op2{"fcvtl", 0x0e217800, "v%d.4s", "v%d.4h"}
	opFCVTL2  = op2{"fcvtl2", 0x4e217800, "v%d.4s", "v%d.8h"}
	opFCVTN   = op2{"fcvtn", 0x0e216800, "v%d.4h", "v%d.4s"}
	opFCVTN2  = op2{"fcvtn2", 0x4e216800, "v%d.8h", "v%d.4s"}
	opFMAXNMV = op2{"fmaxnmv", 0x6e30c800, "s%d", "v%d.4s"}
	opFADDP2S = op2{"faddp", 0x7e30d800, "s%d", "v%d.2s"}
)

var ops2 = []op2{opFRINTN, opFCVTZS, opSCVTF, opFABS, opABS4S, opFCVTL, opFCVTL2, opFCVTN, opFCVTN2, opFMAXNMV, opFADDP2S}

func (o op2) inst(d, n V) Inst {
	check(d, n)
	return Inst{Enc: o.base | rn(n) | rd(d),
		GNU: fmt.Sprintf("%s "+o.dst+", "+o.src, o.name, d, n)}
}

// opElem is a by-element instruction on four float32 lanes (C4.1.x
// Advanced SIMD vector x indexed element, sz = 0: the lane index is H:L,
// the element register M:Rm): d (+)= n * m[idx].
type opElem struct {
	name string
	base uint32
}

var (
	opFMLAe = opElem{"fmla", 0x4f801000}
	opFMULe = opElem{"fmul", 0x4f809000}
)

var opsElem = []opElem{opFMLAe, opFMULe}

func (o opElem) inst(d, n, m V, idx int) Inst {
	check(d, n, m)
	if idx < 0 || idx > 3 {
		panic(fmt.Sprintf("BUG: lane %d", idx))
	}
	l, h := uint32(idx&1), uint32(idx>>1)
	return Inst{Enc: o.base | l<<21 | rm(m) | h<<11 | rn(n) | rd(d),
		GNU: fmt.Sprintf("%s v%d.4s, v%d.4s, v%d.s[%d]", o.name, d, n, m, idx)}
}

// Shifts by an immediate on four 32-bit lanes (C4.1.x Advanced SIMD shift
// by immediate: immh:immb is 32+sh for shl, 64-sh for ushr).
func shl4s(d, n V, sh int) Inst {
	check(d, n)
	if sh < 0 || sh > 31 {
		panic("BUG: shl amount")
	}
	return Inst{Enc: 0x4f005400 | uint32(32+sh)<<16 | rn(n) | rd(d),
		GNU: fmt.Sprintf("shl v%d.4s, v%d.4s, #%d", d, n, sh),
		Go:  fmt.Sprintf("VSHL $%d, V%d.S4, V%d.S4", sh, n, d)}
}

func ushr4s(d, n V, sh int) Inst {
	check(d, n)
	if sh < 1 || sh > 32 {
		panic("BUG: ushr amount")
	}
	return Inst{Enc: 0x6f000400 | uint32(64-sh)<<16 | rn(n) | rd(d),
		GNU: fmt.Sprintf("ushr v%d.4s, v%d.4s, #%d", d, n, sh),
		Go:  fmt.Sprintf("VUSHR $%d, V%d.S4, V%d.S4", sh, n, d)}
}

// uxtl widens the low (hi: high) four 16-bit lanes of n to 32 bits (ushll
// #0).
func uxtl(d, n V, hi bool) Inst {
	check(d, n)
	q, suf, src, gsrc := uint32(0), "", "4h", "H4"
	if hi {
		q, suf, src, gsrc = 1, "2", "8h", "H8"
	}
	return Inst{Enc: 0x2f10a400 | q<<30 | rn(n) | rd(d),
		GNU: fmt.Sprintf("uxtl%s v%d.4s, v%d.%s", suf, d, n, src),
		Go:  fmt.Sprintf("VUSHLL%s $0, V%d.%s, V%d.S4", suf, n, gsrc, d)}
}

// dupElem sets every lane of d to lane idx of n; dupGP to the low 32 bits
// of a general register (number r).
func dupElem(d, n V, idx int) Inst {
	check(d, n)
	return Inst{Enc: 0x4e000400 | uint32(idx<<3|4)<<16 | rn(n) | rd(d),
		GNU: fmt.Sprintf("dup v%d.4s, v%d.s[%d]", d, n, idx),
		Go:  fmt.Sprintf("VDUP V%d.S[%d], V%d.S4", n, idx, d)}
}

func dupGP(d V, r int) Inst {
	check(d)
	return Inst{Enc: 0x4e040c00 | uint32(r&31)<<5 | rd(d),
		GNU: fmt.Sprintf("dup v%d.4s, w%d", d, r),
		Go:  fmt.Sprintf("VDUP R%d, V%d.S4", r, d)}
}

// mov copies n to d (orr d, n, n).
func mov(d, n V) Inst {
	check(d, n)
	return Inst{Enc: opORR.base | rm(n) | rn(n) | rd(d),
		GNU: fmt.Sprintf("mov v%d.16b, v%d.16b", d, n),
		Go:  fmt.Sprintf("VMOV V%d.B16, V%d.B16", n, d)}
}

// zeroV sets d to +0 (eor d, d, d).
func zeroV(d V) Inst { return opEOR.inst(d, d, d) }
