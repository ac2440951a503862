package ptx

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

type opcode uint8

const (
	opLdParam opcode = iota
	opMov
	opMovPack   // mov.b32 d, {a, b}
	opMovUnpack // mov.b32 {a, b}, s
	opInt2      // two-operand integer op; sub selects
	opInt1      // one-operand integer op (not, neg, abs)
	opMulWide
	opMad
	opMadWide
	opSetp
	opSelp
	opPred2 // and/or/xor .pred
	opPredNot
	opCvta
	opCvtInt   // int <- int
	opCvtIF    // f32 <- int
	opCvtFI    // int <- f32
	opCvtPack  // cvt.rn.{bf16x2,f16x2}.f32 d, a, b
	opCvtHalf  // cvt.rn.{bf16,f16}.f32 d, a
	opCvtWiden // cvt.f32.{bf16,f16} d, a
	opF2       // two-operand f32 op; sub selects
	opFma
	opF1 // neg, abs, ex2, rcp
	opLd
	opSt
	opCpAsync
	opCpCommit
	opCpWait
	opBar
	opWarpSync
	opShfl
	opMma
	opLdmatrix
	opWgmma    // wgmma.mma_async (executed when the whole warpgroup arrives)
	opWgFence  // wgmma.fence
	opWgCommit // wgmma.commit_group
	opWgWait   // wgmma.wait_group N
	opMbarInit // mbarrier.init
	opMbarArrive
	opMbarExpectTx
	opMbarWait // try_wait / test_wait; sub selects
	opMbarInval
	opBulkTensor // cp.async.bulk.tensor
	opSetmaxnreg
	opNop // fences the interpreter has nothing to do for
	opBra
	opExit
)

// sub-operations
const (
	iAdd uint8 = iota
	iSub
	iMulLo
	iMulHi
	iDiv
	iRem
	iMin
	iMax
	iAnd
	iOr
	iXor
	iShl
	iShr
	iNot
	iNeg
	iAbs
)

const (
	fAdd uint8 = iota
	fSub
	fMul
	fDiv
	fMin
	fMax
	fNeg
	fAbs
	fEx2
	fLg2
	fRcpApprox
	fRcpRN
)

const (
	cmpEq uint8 = iota
	cmpNe
	cmpLt
	cmpLe
	cmpGt
	cmpGe
	cmpEqu
	cmpNeu
	cmpLtu
	cmpLeu
	cmpGtu
	cmpGeu
	cmpNum
	cmpNan
)

var cmpNames = map[string]uint8{
	"eq": cmpEq, "ne": cmpNe, "lt": cmpLt, "le": cmpLe, "gt": cmpGt, "ge": cmpGe,
	"lo": cmpLt, "ls": cmpLe, "hi": cmpGt, "hs": cmpGe,
	"equ": cmpEqu, "neu": cmpNeu, "ltu": cmpLtu, "leu": cmpLeu, "gtu": cmpGtu, "geu": cmpGeu,
	"num": cmpNum, "nan": cmpNan,
}

const (
	rndRN uint8 = iota
	rndRZ
	rndRM
	rndRP
)

const (
	shflUp uint8 = iota
	shflDown
	shflBfly
	shflIdx
)

type space uint8

const (
	spGeneric space = iota
	spGlobal
	spShared
	spParam
)

func (s space) String() string {
	return [...]string{"generic", "global", "shared", "param"}[s]
}

// instruction flags
const (
	flFtz uint16 = 1 << iota
	flTrans
	flF16     // mma/cvt: f16 (else bf16)
	flToSpace // cvta.to.*
	flCombine // setp with a combining predicate
	flPair    // setp/shfl second destination predicate
	flWaitAll
	flZfill    // cp.async with a src-size operand
	flExpectTx // mbarrier.arrive.expect_tx
	flParity   // mbarrier wait with a phase parity (else a state token)
)

type okind uint8

const (
	oReg  okind = iota // data register
	oPred              // predicate register
	oImm
	oAddr
)

type operand struct {
	kind  okind
	neg   bool
	slot  int32
	rtyp  dtype // declared type of a register
	imm   uint64
	base  int32 // oAddr: base data register or -1
	bsize uint8 // oAddr: size of the base register
	off   int64 // oAddr: displacement (symbol offset included)
	sym   string
}

type inst struct {
	op       opcode
	sub      uint8
	cmp      uint8
	bop      uint8 // setp combining op (iAnd, iOr, iXor)
	rnd      uint8
	flags    uint16
	typ      dtype // instruction type (destination type for cvt)
	typ2     dtype // cvt source type; mma input type
	vec      uint8 // ld/st vector width, ldmatrix matrix count, cp.async size
	space    space
	guard    int32 // predicate slot or -1
	guardNeg bool
	dst      []operand
	src      []operand
	target   int     // branch target
	imm      int64   // wait_group N
	wg       *wgInfo // wgmma.mma_async details
	line     int
	text     string
	rd, wr   []int32 // data registers read and written (checked for definedness, marked defined)
	rdp, wrp []int32 // predicate registers read and written
}

// modset is the list of .modifiers after an instruction's base name.
type modset struct {
	list []string
	used []bool
}

func (m *modset) has(s string) bool {
	for i, x := range m.list {
		if x == s && !m.used[i] {
			m.used[i] = true
			return true
		}
	}
	return false
}

func (m *modset) oneOf(opts ...string) string {
	for i, x := range m.list {
		if !m.used[i] && slices.Contains(opts, x) {
			m.used[i] = true
			return x
		}
	}
	return ""
}

// types takes every type modifier, in order.
func (m *modset) types() []dtype {
	var ts []dtype
	for i, x := range m.list {
		if t, ok := dtypeNames[x]; ok && !m.used[i] {
			m.used[i] = true
			ts = append(ts, t)
		}
	}
	return ts
}

func (m *modset) unused() []string {
	var out []string
	for i, x := range m.list {
		if !m.used[i] {
			out = append(out, "."+x)
		}
	}
	return out
}

type decoder struct {
	p  *parser
	k  *Kernel
	st *rawStmt
}

func (d *decoder) fail(t token, format string, args ...any) {
	d.p.errs = append(d.p.errs, &Error{File: d.p.file, Line: t.line, Col: t.col, Text: d.st.text, Msg: fmt.Sprintf(format, args...)})
	panic(bailout{})
}

func (p *parser) decodeBody(k *Kernel, body []rawStmt) {
	type fix struct {
		pc    int
		label string
		tok   token
		text  string
	}
	var fixes []fix
	for i := range body {
		st := &body[i]
		if st.label != "" {
			if _, dup := k.labels[st.label]; dup {
				p.errAt(st.tok, "label %s defined twice", st.label)
				continue
			}
			k.labels[st.label] = len(k.code)
			continue
		}
		d := &decoder{p: p, k: k, st: st}
		func() {
			defer func() {
				if r := recover(); r != nil {
					if _, ok := r.(bailout); !ok {
						panic(r)
					}
				}
			}()
			in := d.decode()
			in.rd, in.wr, in.rdp, in.wrp = in.prepare()
			if in.op == opBra {
				fixes = append(fixes, fix{len(k.code), st.ops[0].name, st.ops[0].tok, st.text})
			}
			k.code = append(k.code, in)
		}()
	}
	for _, f := range fixes {
		pc, ok := k.labels[f.label]
		if !ok {
			p.errs = append(p.errs, &Error{File: p.file, Line: f.tok.line, Col: f.tok.col, Text: f.text, Msg: "undefined label " + f.label})
			continue
		}
		k.code[f.pc].target = pc
	}
	// falling off the end is an implicit ret
	k.code = append(k.code, inst{op: opExit, guard: -1, text: "(end of " + k.Name + ")", line: p.peekLine()})
}

func (p *parser) peekLine() int { return p.toks[max(p.pos-1, 0)].line }

func (d *decoder) nops(n ...int) {
	if !slices.Contains(n, len(d.st.ops)) {
		want := fmt.Sprint(n[0])
		if len(n) > 1 {
			want = fmt.Sprint(n[0], " or ", n[1])
		}
		d.fail(d.st.tok, "%s takes %s operands, found %d", d.base(), want, len(d.st.ops))
	}
}

func (d *decoder) base() string { b, _, _ := strings.Cut(d.st.opcode, "."); return b }

func (d *decoder) lookupReg(o rawOp) *regInfo {
	if sp, ok := specialNames[o.name]; ok {
		if d.k.special[sp] < 0 {
			d.k.special[sp] = int32(d.k.nData)
			d.k.nData++
			d.k.regNames = append(d.k.regNames, o.name)
		}
		return &regInfo{slot: d.k.special[sp], typ: tU32}
	}
	r, ok := d.k.regs[o.name]
	if !ok {
		if strings.HasPrefix(o.name, "%") && strings.Contains(o.name, ".") {
			d.fail(o.tok, "unsupported special register %s", o.name)
		}
		d.fail(o.tok, "undeclared register %s", o.name)
	}
	return r
}

// dreg decodes a destination data register compatible with want.
func (d *decoder) dreg(o rawOp, want dtype) operand {
	if o.kind != rReg || o.neg {
		d.fail(o.tok, "expected a register, found %s", d.opText(o))
	}
	if _, sp := specialNames[o.name]; sp {
		d.fail(o.tok, "special register %s is read-only", o.name)
	}
	r := d.lookupReg(o)
	if r.typ == tPred {
		d.fail(o.tok, "%s is a predicate; expected a %s register", o.name, want)
	}
	if !compatible(want, r.typ) {
		d.fail(o.tok, "register %s is %s, not compatible with %s", o.name, r.typ, want)
	}
	return operand{kind: oReg, slot: r.slot, rtyp: r.typ}
}

// wreg decodes a data register of at least want's size (ld/st/cvt relaxed rule).
func (d *decoder) wreg(o rawOp, want dtype, read bool) operand {
	if o.kind != rReg || o.neg {
		d.fail(o.tok, "expected a register, found %s", d.opText(o))
	}
	if _, sp := specialNames[o.name]; sp && !read {
		d.fail(o.tok, "special register %s is read-only", o.name)
	}
	r := d.lookupReg(o)
	ok := r.typ != tPred && (compatible(want, r.typ) ||
		want.isInt() && r.typ.isInt() && r.typ.size() > want.size())
	if !ok {
		d.fail(o.tok, "register %s is %s, not usable as %s", o.name, r.typ, want)
	}
	return operand{kind: oReg, slot: r.slot, rtyp: r.typ}
}

// src decodes a register or an immediate usable as want.
func (d *decoder) src(o rawOp, want dtype) operand {
	switch o.kind {
	case rReg:
		if o.neg {
			d.fail(o.tok, "! applies only to predicates")
		}
		r := d.lookupReg(o)
		if r.typ == tPred {
			d.fail(o.tok, "%s is a predicate; expected %s", o.name, want)
		}
		if !compatible(want, r.typ) {
			d.fail(o.tok, "register %s is %s, not compatible with %s", o.name, r.typ, want)
		}
		return operand{kind: oReg, slot: r.slot, rtyp: r.typ}
	case rInt:
		if want.class() == cFloat {
			d.fail(o.tok, "integer literal where %s is expected (write 0fXXXXXXXX)", want)
		}
		sz := want.size()
		v := o.ival
		if sz < 8 {
			hi := v >> (8 * sz)
			if hi != 0 && hi != (^uint64(0))>>(8*sz) {
				d.fail(o.tok, "literal %s does not fit %s", o.tok.s, want)
			}
			v &= 1<<(8*sz) - 1
		}
		return operand{kind: oImm, imm: v}
	case rFloat:
		switch {
		case want == tF32 || want == tB32:
			if o.f64 {
				return operand{kind: oImm, imm: uint64(math.Float32bits(float32(math.Float64frombits(o.fval))))}
			}
			return operand{kind: oImm, imm: o.fval}
		case want == tB64 && !o.f64:
			return operand{kind: oImm, imm: o.fval}
		}
		d.fail(o.tok, "floating literal where %s is expected", want)
	case rIdent:
		for _, v := range d.k.shared {
			if v.name == o.name {
				if want.size() < 4 || !want.isInt() {
					d.fail(o.tok, "address of %s needs a 32- or 64-bit integer type", o.name)
				}
				return operand{kind: oImm, imm: uint64(v.offset), sym: v.name}
			}
		}
		d.fail(o.tok, "unknown name %s", o.name)
	}
	d.fail(o.tok, "bad operand %s", d.opText(o))
	return operand{}
}

// pred decodes a predicate register, optionally allowing !p.
func (d *decoder) pred(o rawOp, allowNeg bool) operand {
	if o.kind != rReg {
		d.fail(o.tok, "expected a predicate register, found %s", d.opText(o))
	}
	r := d.lookupReg(o)
	if r.typ != tPred {
		d.fail(o.tok, "%s is %s, not a predicate", o.name, r.typ)
	}
	if o.neg && !allowNeg {
		d.fail(o.tok, "! is not allowed here")
	}
	return operand{kind: oPred, slot: r.slot, neg: o.neg}
}

// addr decodes [base+off]. sp is the state space of the access.
func (d *decoder) addr(o rawOp, sp space) operand {
	if o.kind != rAddr {
		d.fail(o.tok, "expected an address [..], found %s", d.opText(o))
	}
	a := operand{kind: oAddr, base: -1, off: o.off}
	if len(o.sub) > 0 {
		d.fail(o.tok, "a coordinate vector in an address is only for cp.async.bulk.tensor")
	}
	if o.name == "" {
		if sp == spParam {
			d.fail(o.tok, "ld.param needs a parameter name")
		}
		return a
	}
	if strings.HasPrefix(o.name, "%") {
		if sp == spParam {
			d.fail(o.tok, "ld.param needs a parameter name, not a register")
		}
		r := d.lookupReg(rawOp{kind: rReg, tok: o.tok, name: o.name})
		if r.typ == tPred || !r.typ.isInt() {
			d.fail(o.tok, "address register %s must be an integer register, is %s", o.name, r.typ)
		}
		if r.typ.size() < 4 {
			d.fail(o.tok, "address register %s is too narrow", o.name)
		}
		if r.typ.size() != 8 && sp != spShared {
			d.fail(o.tok, "%s addresses need a 64-bit register; %s is %s", sp, o.name, r.typ)
		}
		a.base, a.bsize = r.slot, uint8(r.typ.size())
		return a
	}
	if sp == spParam {
		for _, q := range d.k.Params {
			if q.Name == o.name {
				a.off += int64(q.Offset)
				a.sym = q.Name
				return a
			}
		}
		d.fail(o.tok, "unknown parameter %s", o.name)
	}
	for _, v := range d.k.shared {
		if v.name == o.name {
			if sp != spShared {
				d.fail(o.tok, "%s is a shared variable; use a .shared access", o.name)
			}
			a.off += int64(v.offset)
			a.sym = v.name
			return a
		}
	}
	for _, q := range d.k.Params {
		if q.Name == o.name {
			d.fail(o.tok, "%s is a parameter; read it with ld.param", o.name)
		}
	}
	d.fail(o.tok, "unknown name %s in address", o.name)
	return a
}

func (d *decoder) opText(o rawOp) string {
	switch o.kind {
	case rVec:
		return "a vector"
	case rAddr:
		return "an address"
	case rInt, rFloat:
		return "a literal"
	case rPair:
		return "a predicate pair"
	}
	return o.name
}

func (d *decoder) vec(o rawOp, n int) []rawOp {
	if o.kind != rVec || len(o.sub) != n {
		d.fail(o.tok, "expected a vector of %d registers", n)
	}
	return o.sub
}

func (d *decoder) oneType(m *modset, allowed ...dtype) dtype {
	ts := m.types()
	if len(ts) != 1 {
		d.fail(d.st.tok, "%s needs exactly one type", d.base())
	}
	if len(allowed) > 0 && !slices.Contains(allowed, ts[0]) {
		d.fail(d.st.tok, "%s does not support type %s", d.base(), ts[0])
	}
	return ts[0]
}

var (
	intTypes  = []dtype{tU16, tU32, tU64, tS16, tS32, tS64}
	bitTypes  = []dtype{tB16, tB32, tB64}
	int3264   = []dtype{tU32, tU64, tS32, tS64}
	cacheOps  = []string{"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "volatile", "relaxed", "weak"}
	l2Hints   = []string{"L2::64B", "L2::128B", "L2::256B"}
	ldmShapes = map[string]uint8{"x1": 1, "x2": 2, "x4": 4}
)

func (d *decoder) decode() inst {
	st := d.st
	parts := strings.Split(st.opcode, ".")
	name := parts[0]
	m := &modset{list: parts[1:], used: make([]bool, len(parts)-1)}
	in := inst{guard: -1, line: st.tok.line, text: st.text}
	if st.guard != "" {
		g := d.pred(rawOp{kind: rReg, tok: st.guardTok, name: st.guard}, false)
		in.guard, in.guardNeg = g.slot, st.guardNeg
	}
	ops := st.ops
	switch name {
	case "ld":
		if m.has("param") {
			in.op, in.space = opLdParam, spParam
			in.typ = d.oneType(m, tU32, tS32, tB32, tU64, tS64, tB64, tF32)
			d.nops(2)
			in.dst = []operand{d.wreg(ops[0], in.typ, false)}
			in.src = []operand{d.addr(ops[1], spParam)}
			break
		}
		d.ldst(&in, m, true)
	case "st":
		if m.has("param") {
			d.fail(st.tok, "st.param is not supported")
		}
		d.ldst(&in, m, false)
	case "mov":
		in.op = opMov
		in.typ = d.oneType(m, tPred, tB16, tB32, tB64, tU16, tU32, tU64, tS16, tS32, tS64, tF32)
		d.nops(2)
		switch {
		case in.typ == tPred:
			in.op = opPred2
			in.sub = iOr
			p := d.pred(ops[1], false)
			in.dst = []operand{d.pred(ops[0], false)}
			in.src = []operand{p, p}
		case ops[1].kind == rVec:
			if in.typ != tB32 && in.typ != tB64 {
				d.fail(st.tok, "packing mov needs .b32 or .b64")
			}
			half := tB16
			if in.typ == tB64 {
				half = tB32
			}
			in.op = opMovPack
			in.dst = []operand{d.dreg(ops[0], in.typ)}
			for _, e := range d.vec(ops[1], 2) {
				in.src = append(in.src, d.src(e, half))
			}
		case ops[0].kind == rVec:
			if in.typ != tB32 && in.typ != tB64 {
				d.fail(st.tok, "unpacking mov needs .b32 or .b64")
			}
			half := tB16
			if in.typ == tB64 {
				half = tB32
			}
			in.op = opMovUnpack
			for _, e := range d.vec(ops[0], 2) {
				in.dst = append(in.dst, d.dreg(e, half))
			}
			in.src = []operand{d.src(ops[1], in.typ)}
		default:
			in.dst = []operand{d.dreg(ops[0], in.typ)}
			in.src = []operand{d.src(ops[1], in.typ)}
		}
	case "add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr":
		d.arith(&in, name, m)
	case "mad":
		d.nops(4)
		if m.has("wide") {
			in.op = opMadWide
			in.typ = d.oneType(m, tU32, tS32)
			wide := tU64
			if in.typ == tS32 {
				wide = tS64
			}
			in.dst = []operand{d.dreg(ops[0], wide)}
			in.src = []operand{d.src(ops[1], in.typ), d.src(ops[2], in.typ), d.src(ops[3], wide)}
			break
		}
		if !m.has("lo") {
			d.fail(st.tok, "mad needs .lo or .wide")
		}
		in.op = opMad
		in.typ = d.oneType(m, intTypes...)
		in.dst = []operand{d.dreg(ops[0], in.typ)}
		in.src = []operand{d.src(ops[1], in.typ), d.src(ops[2], in.typ), d.src(ops[3], in.typ)}
	case "fma":
		in.op = opFma
		d.f32rnd(&in, m, "fma")
		d.nops(4)
		in.dst = []operand{d.dreg(ops[0], tF32)}
		in.src = []operand{d.src(ops[1], tF32), d.src(ops[2], tF32), d.src(ops[3], tF32)}
	case "not":
		d.nops(2)
		in.typ = d.oneType(m, tPred, tB16, tB32, tB64)
		if in.typ == tPred {
			in.op = opPredNot
			in.dst = []operand{d.pred(ops[0], false)}
			in.src = []operand{d.pred(ops[1], false)}
			break
		}
		in.op, in.sub = opInt1, iNot
		in.dst = []operand{d.dreg(ops[0], in.typ)}
		in.src = []operand{d.src(ops[1], in.typ)}
	case "neg", "abs":
		d.nops(2)
		if m.has("ftz") {
			in.flags |= flFtz
		}
		in.typ = d.oneType(m, tS16, tS32, tS64, tF32)
		if in.typ == tF32 {
			in.op, in.sub = opF1, fNeg
			if name == "abs" {
				in.sub = fAbs
			}
		} else {
			if in.flags&flFtz != 0 {
				d.fail(st.tok, ".ftz applies only to .f32")
			}
			in.op, in.sub = opInt1, iNeg
			if name == "abs" {
				in.sub = iAbs
			}
		}
		in.dst = []operand{d.dreg(ops[0], in.typ)}
		in.src = []operand{d.src(ops[1], in.typ)}
	case "ex2":
		d.nops(2)
		if !m.has("approx") {
			d.fail(st.tok, "ex2 needs .approx")
		}
		if m.has("ftz") {
			in.flags |= flFtz
		}
		in.typ = d.oneType(m, tF32)
		in.op, in.sub = opF1, fEx2
		in.dst = []operand{d.dreg(ops[0], tF32)}
		in.src = []operand{d.src(ops[1], tF32)}
	case "lg2":
		d.nops(2)
		if !m.has("approx") {
			d.fail(st.tok, "lg2 needs .approx")
		}
		if m.has("ftz") {
			in.flags |= flFtz
		}
		in.typ = d.oneType(m, tF32)
		in.op, in.sub = opF1, fLg2
		in.dst = []operand{d.dreg(ops[0], tF32)}
		in.src = []operand{d.src(ops[1], tF32)}
	case "rcp":
		d.nops(2)
		switch {
		case m.has("approx"):
			if !m.has("ftz") {
				d.fail(st.tok, "rcp.approx is supported only as rcp.approx.ftz.f32")
			}
			in.flags |= flFtz
			in.sub = fRcpApprox
		case m.has("rn"):
			in.sub = fRcpRN
		default:
			d.fail(st.tok, "rcp needs .approx.ftz or .rn")
		}
		in.op = opF1
		in.typ = d.oneType(m, tF32)
		in.dst = []operand{d.dreg(ops[0], tF32)}
		in.src = []operand{d.src(ops[1], tF32)}
	case "setp":
		d.setp(&in, m)
	case "selp":
		d.nops(4)
		in.op = opSelp
		in.typ = d.oneType(m, tB16, tB32, tB64, tU16, tU32, tU64, tS16, tS32, tS64, tF32)
		in.dst = []operand{d.dreg(ops[0], in.typ)}
		in.src = []operand{d.src(ops[1], in.typ), d.src(ops[2], in.typ), d.pred(ops[3], false)}
	case "cvta":
		d.nops(2)
		in.op = opCvta
		if m.has("to") {
			in.flags |= flToSpace
		}
		switch m.oneOf("global", "shared") {
		case "global":
			in.space = spGlobal
		case "shared":
			in.space = spShared
		default:
			d.fail(st.tok, "cvta needs .global or .shared")
		}
		if m.has("u32") {
			d.fail(st.tok, "cvta.u32 is not supported: use cvta.u64 and cvt.u32.u64")
		}
		in.typ = d.oneType(m, tU64)
		in.dst = []operand{d.dreg(ops[0], in.typ)}
		in.src = []operand{d.src(ops[1], in.typ)}
	case "cvt":
		d.cvt(&in, m)
	case "cp":
		if len(parts) > 2 && parts[1] == "async" && parts[2] == "bulk" {
			d.bulkTensor(&in, m)
			break
		}
		d.cpAsync(&in, m)
	case "bar", "barrier":
		if m.has("warp") {
			if !m.has("sync") {
				d.fail(st.tok, "expected bar.warp.sync")
			}
			d.nops(1)
			in.op = opWarpSync
			mask := d.src(ops[0], tB32)
			if mask.kind != oImm || mask.imm != 0xffffffff {
				d.fail(ops[0].tok, "bar.warp.sync supports only the full mask 0xffffffff")
			}
			break
		}
		// bar{.cta}.sync / barrier{.cta}.sync a{, b} and bar{.cta}.arrive /
		// barrier{.cta}.arrive a, b: named barrier a (0..15), b threads
		// (a multiple of the warp size; all of the CTA's when omitted);
		// bar.sync is barrier.sync.aligned
		m.has("cta")
		m.has("aligned")
		switch {
		case m.has("sync"):
			d.nops(1, 2)
		case m.has("arrive"):
			in.sub = 1
			d.nops(2)
		default:
			d.fail(st.tok, "only bar.sync, barrier.sync, bar.arrive and barrier.arrive are supported")
		}
		for i, o := range ops {
			if i < 2 {
				in.src = append(in.src, d.src(o, tU32))
			}
		}
		if len(in.src) > 0 {
			if a := in.src[0]; a.kind == oImm && a.imm > 15 {
				d.fail(ops[0].tok, "barrier %d: named barriers are 0 to 15", a.imm)
			}
		}
		if len(in.src) > 1 {
			if b := in.src[1]; b.kind == oImm && (b.imm == 0 || b.imm%32 != 0) {
				d.fail(ops[1].tok, "barrier thread count %d: it must be a positive multiple of the warp size (32)", b.imm)
			}
		}
		in.op = opBar
	case "shfl":
		d.shfl(&in, m)
	case "mma":
		d.mma(&in, m)
	case "ldmatrix":
		d.ldmatrix(&in, m)
	case "wgmma":
		d.wgmma(&in, m)
	case "mbarrier":
		d.mbarrier(&in, m)
	case "setmaxnreg":
		d.setmaxnreg(&in, m)
	case "fence":
		d.fence(&in, m)
	case "bra":
		m.has("uni")
		d.nops(1)
		if ops[0].kind != rIdent {
			d.fail(ops[0].tok, "bra needs a label")
		}
		in.op = opBra
	case "ret", "exit":
		d.nops(0)
		in.op = opExit
	default:
		d.fail(st.tok, "unknown or unsupported instruction %s", st.opcode)
	}
	if u := m.unused(); len(u) > 0 {
		d.fail(st.tok, "unsupported modifier %s on %s", strings.Join(u, ""), name)
	}
	return in
}

// f32rnd decodes the rounding and .ftz modifiers of an f32 arithmetic op.
// A rounding modifier is required: without it ptxas may contract mul and add
// into fma, which the interpreter would not reproduce.
func (d *decoder) f32rnd(in *inst, m *modset, name string) {
	if m.oneOf("rn") == "" {
		if r := m.oneOf("rz", "rm", "rp"); r != "" {
			d.fail(d.st.tok, "%s.%s: only .rn rounding is supported", name, r)
		}
		d.fail(d.st.tok, "%s.f32 needs .rn (without it ptxas may fuse mul and add into fma)", name)
	}
	if m.has("ftz") {
		in.flags |= flFtz
	}
	in.typ = d.oneType(m, tF32)
}

func (d *decoder) arith(in *inst, name string, m *modset) {
	st := d.st
	ops := st.ops
	d.nops(3)
	sub := map[string]uint8{"add": iAdd, "sub": iSub, "div": iDiv, "rem": iRem, "min": iMin, "max": iMax,
		"and": iAnd, "or": iOr, "xor": iXor, "shl": iShl, "shr": iShr}[name]
	if name == "mul" {
		switch m.oneOf("lo", "hi", "wide") {
		case "lo":
			sub = iMulLo
		case "hi":
			sub = iMulHi
		case "wide":
			in.op = opMulWide
			in.typ = d.oneType(m, tU32, tS32, tU16, tS16)
			wide := map[dtype]dtype{tU32: tU64, tS32: tS64, tU16: tU32, tS16: tS32}[in.typ]
			in.dst = []operand{d.dreg(ops[0], wide)}
			in.src = []operand{d.src(ops[1], in.typ), d.src(ops[2], in.typ)}
			return
		default:
			if slices.Contains(m.list, "f32") {
				sub = fMul
				goto float
			}
			d.fail(st.tok, "integer mul needs .lo, .hi or .wide")
		}
	}
	if slices.Contains(m.list, "f32") {
		switch name {
		case "add":
			sub = fAdd
		case "sub":
			sub = fSub
		case "div":
			sub = fDiv
		case "min":
			sub = fMin
		case "max":
			sub = fMax
		default:
			d.fail(st.tok, "%s does not support .f32", name)
		}
		goto float
	}
	in.op, in.sub = opInt2, sub
	switch name {
	case "and", "or", "xor":
		in.typ = d.oneType(m, tPred, tB16, tB32, tB64)
		if in.typ == tPred {
			in.op = opPred2
			in.dst = []operand{d.pred(ops[0], false)}
			in.src = []operand{d.pred(ops[1], false), d.pred(ops[2], false)}
			return
		}
	case "shl":
		in.typ = d.oneType(m, bitTypes...)
	case "shr":
		in.typ = d.oneType(m, tB16, tB32, tB64, tU16, tU32, tU64, tS16, tS32, tS64)
	case "div", "rem", "min", "max":
		in.typ = d.oneType(m, int3264...)
	default:
		in.typ = d.oneType(m, intTypes...)
	}
	in.dst = []operand{d.dreg(ops[0], in.typ)}
	if name == "shl" || name == "shr" {
		in.src = []operand{d.src(ops[1], in.typ), d.src(ops[2], tU32)}
	} else {
		in.src = []operand{d.src(ops[1], in.typ), d.src(ops[2], in.typ)}
	}
	return
float:
	in.op, in.sub = opF2, sub
	switch sub {
	case fMin, fMax:
		if m.has("ftz") {
			in.flags |= flFtz
		}
		in.typ = d.oneType(m, tF32)
	default:
		d.f32rnd(in, m, name)
	}
	in.dst = []operand{d.dreg(ops[0], tF32)}
	in.src = []operand{d.src(ops[1], tF32), d.src(ops[2], tF32)}
}

func (d *decoder) setp(in *inst, m *modset) {
	st := d.st
	ops := st.ops
	in.op = opSetp
	cmp := ""
	for i, x := range m.list {
		if _, ok := cmpNames[x]; ok && !m.used[i] {
			m.used[i] = true
			cmp = x
			break
		}
	}
	if cmp == "" {
		d.fail(st.tok, "setp needs a comparison (.eq, .ne, .lt, .le, .gt, .ge, ...)")
	}
	in.cmp = cmpNames[cmp]
	switch m.oneOf("and", "or", "xor") {
	case "and":
		in.flags |= flCombine
		in.bop = iAnd
	case "or":
		in.flags |= flCombine
		in.bop = iOr
	case "xor":
		in.flags |= flCombine
		in.bop = iXor
	}
	if m.has("ftz") {
		in.flags |= flFtz
	}
	in.typ = d.oneType(m, tB16, tB32, tB64, tU16, tU32, tU64, tS16, tS32, tS64, tF32)
	isF := in.typ == tF32
	switch cmp {
	case "lo", "ls", "hi", "hs":
		if in.typ.class() != cUint {
			d.fail(st.tok, "setp.%s is for unsigned types", cmp)
		}
	case "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan":
		if !isF {
			d.fail(st.tok, "setp.%s is for floating types", cmp)
		}
	case "lt", "le", "gt", "ge":
		if in.typ.class() == cBit {
			d.fail(st.tok, "setp.%s is not defined for bit types", cmp)
		}
	}
	if in.flags&flCombine != 0 {
		d.nops(4)
	} else {
		d.nops(3)
	}
	if ops[0].kind == rPair {
		in.flags |= flPair
		in.dst = []operand{d.pred(ops[0].sub[0], false), d.pred(ops[0].sub[1], false)}
	} else {
		in.dst = []operand{d.pred(ops[0], false)}
	}
	in.src = []operand{d.src(ops[1], in.typ), d.src(ops[2], in.typ)}
	if in.flags&flCombine != 0 {
		in.src = append(in.src, d.pred(ops[3], true))
	}
}

func (d *decoder) cvt(in *inst, m *modset) {
	st := d.st
	ops := st.ops
	rnd := m.oneOf("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi")
	if m.has("ftz") {
		in.flags |= flFtz
	}
	if m.has("sat") {
		d.fail(st.tok, "cvt.sat is not supported")
	}
	ts := m.types()
	if len(ts) != 2 {
		d.fail(st.tok, "cvt needs a destination and a source type")
	}
	dt, at := ts[0], ts[1]
	in.typ, in.typ2 = dt, at
	switch {
	case (dt == tBF16x2 || dt == tF16x2) && at == tF32:
		if rnd != "rn" {
			d.fail(st.tok, "cvt%s.%s.f32 needs .rn", dotted(rnd), strings.TrimPrefix(dt.String(), "."))
		}
		if m.has("relu") {
			d.fail(st.tok, ".relu is not supported")
		}
		d.nops(3)
		in.op = opCvtPack
		if dt == tF16x2 {
			in.flags |= flF16
		}
		in.dst = []operand{d.dreg(ops[0], tB32)}
		in.src = []operand{d.src(ops[1], tF32), d.src(ops[2], tF32)}
	case (dt == tBF16 || dt == tF16) && at == tF32:
		if rnd != "rn" {
			d.fail(st.tok, "cvt to %s needs .rn", dt)
		}
		d.nops(2)
		in.op = opCvtHalf
		if dt == tF16 {
			in.flags |= flF16
		}
		in.dst = []operand{d.dreg(ops[0], tB16)}
		in.src = []operand{d.src(ops[1], tF32)}
	case dt == tF32 && (at == tBF16 || at == tF16):
		if rnd != "" {
			d.fail(st.tok, "cvt.f32%s is exact; drop .%s", at, rnd)
		}
		d.nops(2)
		in.op = opCvtWiden
		if at == tF16 {
			in.flags |= flF16
		}
		in.dst = []operand{d.dreg(ops[0], tF32)}
		in.src = []operand{d.src(ops[1], tB16)}
	case dt == tF32 && at.isInt() && at.class() != cBit:
		switch rnd {
		case "rn":
			in.rnd = rndRN
		case "rz":
			in.rnd = rndRZ
		case "rm":
			in.rnd = rndRM
		case "rp":
			in.rnd = rndRP
		default:
			d.fail(st.tok, "cvt.f32 from an integer needs .rn, .rz, .rm or .rp")
		}
		d.nops(2)
		in.op = opCvtIF
		in.dst = []operand{d.dreg(ops[0], tF32)}
		if ops[1].kind == rReg {
			in.src = []operand{d.wreg(ops[1], at, true)}
		} else {
			in.src = []operand{d.src(ops[1], at)}
		}
	case at == tF32 && dt.isInt() && dt.class() != cBit:
		switch rnd {
		case "rni":
			in.rnd = rndRN
		case "rzi":
			in.rnd = rndRZ
		case "rmi":
			in.rnd = rndRM
		case "rpi":
			in.rnd = rndRP
		default:
			d.fail(st.tok, "cvt to an integer from .f32 needs .rni, .rzi, .rmi or .rpi")
		}
		d.nops(2)
		in.op = opCvtFI
		in.dst = []operand{d.wreg(ops[0], dt, false)}
		in.src = []operand{d.src(ops[1], tF32)}
	case dt.isInt() && at.isInt() && dt.class() != cBit && at.class() != cBit:
		if rnd != "" || in.flags&flFtz != 0 {
			d.fail(st.tok, "integer cvt takes no rounding or .ftz")
		}
		d.nops(2)
		in.op = opCvtInt
		in.dst = []operand{d.wreg(ops[0], dt, false)}
		in.src = []operand{d.wreg(ops[1], at, true)}
		if ops[1].kind != rReg {
			d.fail(ops[1].tok, "cvt source must be a register")
		}
	default:
		d.fail(st.tok, "unsupported conversion cvt%s%s", dt, at)
	}
	if in.flags&flFtz != 0 && in.op != opCvtFI && in.op != opCvtPack && in.op != opCvtHalf {
		d.fail(st.tok, ".ftz is meaningless here")
	}
}

func dotted(s string) string {
	if s == "" {
		return ""
	}
	return "." + s
}

// ldst decodes ld/st over .global, .shared or generic addresses.
func (d *decoder) ldst(in *inst, m *modset, load bool) {
	st := d.st
	ops := st.ops
	d.nops(2)
	switch m.oneOf("global", "shared", "local", "const") {
	case "global":
		in.space = spGlobal
	case "shared":
		in.space = spShared
	case "":
		in.space = spGeneric
	default:
		d.fail(st.tok, "only .global, .shared and generic addresses are supported")
	}
	if in.space == spShared {
		m.has("cta") // .shared::cta
	}
	for m.oneOf(cacheOps...) != "" {
	}
	m.oneOf(l2Hints...)
	in.vec = 1
	switch m.oneOf("v2", "v4") {
	case "v2":
		in.vec = 2
	case "v4":
		in.vec = 4
	}
	in.typ = d.oneType(m, tB8, tU8, tS8, tB16, tU16, tS16, tB32, tU32, tS32, tF32, tB64, tU64, tS64)
	if in.vec > 1 && in.typ.size() == 1 {
		d.fail(st.tok, "vector loads and stores of 8-bit types are not supported")
	}
	if int(in.vec)*in.typ.size() > 16 {
		d.fail(st.tok, "vector access wider than 16 bytes")
	}
	regOps := func(o rawOp) []rawOp {
		if in.vec == 1 {
			if o.kind == rVec {
				d.fail(o.tok, "scalar access with a vector operand (missing .v%d?)", len(o.sub))
			}
			return []rawOp{o}
		}
		return d.vec(o, int(in.vec))
	}
	if load {
		in.op = opLd
		for _, r := range regOps(ops[0]) {
			in.dst = append(in.dst, d.wreg(r, in.typ, false))
		}
		in.src = []operand{d.addr(ops[1], in.space)}
	} else {
		in.op = opSt
		in.dst = []operand{d.addr(ops[0], in.space)}
		for _, r := range regOps(ops[1]) {
			if r.kind == rReg {
				in.src = append(in.src, d.wreg(r, in.typ, true))
			} else {
				in.src = append(in.src, d.src(r, in.typ))
			}
		}
	}
}

func (d *decoder) cpAsync(in *inst, m *modset) {
	st := d.st
	ops := st.ops
	if !m.has("async") {
		d.fail(st.tok, "only cp.async is supported")
	}
	switch {
	case m.has("commit_group"):
		d.nops(0)
		in.op = opCpCommit
		return
	case m.has("wait_group"):
		d.nops(1)
		in.op = opCpWait
		n := d.src(ops[0], tU32)
		if n.kind != oImm || n.imm > 64 {
			d.fail(ops[0].tok, "cp.async.wait_group needs a small constant")
		}
		in.imm = int64(n.imm)
		return
	case m.has("wait_all"):
		d.nops(0)
		in.op = opCpWait
		in.flags |= flWaitAll
		return
	}
	in.op = opCpAsync
	cache := m.oneOf("ca", "cg")
	if cache == "" {
		d.fail(st.tok, "cp.async needs .ca or .cg")
	}
	if !m.has("shared") || !m.has("global") {
		d.fail(st.tok, "cp.async must be .shared.global")
	}
	m.has("cta") // .shared::cta
	m.oneOf(l2Hints...)
	d.nops(3, 4)
	sz := d.src(ops[2], tU32)
	if sz.kind != oImm || sz.imm != 4 && sz.imm != 8 && sz.imm != 16 {
		d.fail(ops[2].tok, "cp.async size must be 4, 8 or 16")
	}
	if cache == "cg" && sz.imm != 16 {
		d.fail(ops[2].tok, "cp.async.cg copies 16 bytes")
	}
	in.vec = uint8(sz.imm)
	in.dst = []operand{d.addr(ops[0], spShared)}
	in.src = []operand{d.addr(ops[1], spGlobal)}
	if len(ops) == 4 {
		in.flags |= flZfill
		in.src = append(in.src, d.src(ops[3], tU32))
	}
}

func (d *decoder) shfl(in *inst, m *modset) {
	st := d.st
	ops := st.ops
	if !m.has("sync") {
		d.fail(st.tok, "only shfl.sync is supported")
	}
	switch m.oneOf("up", "down", "bfly", "idx") {
	case "up":
		in.sub = shflUp
	case "down":
		in.sub = shflDown
	case "bfly":
		in.sub = shflBfly
	case "idx":
		in.sub = shflIdx
	default:
		d.fail(st.tok, "shfl.sync needs .up, .down, .bfly or .idx")
	}
	in.typ = d.oneType(m, tB32)
	d.nops(5)
	in.op = opShfl
	if ops[0].kind == rPair {
		in.flags |= flPair
		in.dst = []operand{d.dreg(ops[0].sub[0], tB32), d.pred(ops[0].sub[1], false)}
	} else {
		in.dst = []operand{d.dreg(ops[0], tB32)}
	}
	in.src = []operand{d.src(ops[1], tB32), d.src(ops[2], tB32), d.src(ops[3], tB32)}
	mask := d.src(ops[4], tB32)
	if mask.kind != oImm || mask.imm != 0xffffffff {
		d.fail(ops[4].tok, "shfl.sync supports only the full member mask 0xffffffff")
	}
}

func (d *decoder) mma(in *inst, m *modset) {
	st := d.st
	ops := st.ops
	for _, want := range []string{"sync", "aligned", "m16n8k16", "row", "col"} {
		if !m.has(want) {
			d.fail(st.tok, "only mma.sync.aligned.m16n8k16.row.col is supported (missing .%s)", want)
		}
	}
	ts := m.types()
	ok := len(ts) == 4 && ts[0] == tF32 && ts[3] == tF32 && ts[1] == ts[2] && (ts[1] == tBF16 || ts[1] == tF16)
	if !ok {
		d.fail(st.tok, "only .f32.bf16.bf16.f32 and .f32.f16.f16.f32 are supported")
	}
	if ts[1] == tF16 {
		in.flags |= flF16
	}
	in.op = opMma
	in.typ, in.typ2 = tF32, ts[1]
	d.nops(4)
	for _, r := range d.vec(ops[0], 4) {
		in.dst = append(in.dst, d.dreg(r, tF32))
	}
	for _, r := range d.vec(ops[1], 4) {
		in.src = append(in.src, d.dreg(r, tB32))
	}
	for _, r := range d.vec(ops[2], 2) {
		in.src = append(in.src, d.dreg(r, tB32))
	}
	for _, r := range d.vec(ops[3], 4) {
		in.src = append(in.src, d.dreg(r, tF32))
	}
}

func (d *decoder) ldmatrix(in *inst, m *modset) {
	st := d.st
	ops := st.ops
	for _, want := range []string{"sync", "aligned", "m8n8", "shared"} {
		if !m.has(want) {
			d.fail(st.tok, "expected ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16 (missing .%s)", want)
		}
	}
	m.has("cta")
	n := ldmShapes[m.oneOf("x1", "x2", "x4")]
	if n == 0 {
		d.fail(st.tok, "ldmatrix needs .x1, .x2 or .x4")
	}
	if m.has("trans") {
		in.flags |= flTrans
	}
	in.typ = d.oneType(m, tB16)
	in.op, in.vec, in.space = opLdmatrix, n, spShared
	d.nops(2)
	for _, r := range d.vec(ops[0], int(n)) {
		in.dst = append(in.dst, d.dreg(r, tB32))
	}
	in.src = []operand{d.addr(ops[1], spShared)}
}
