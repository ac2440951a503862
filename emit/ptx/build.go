package ptx

// Builder helpers: small functions over Func that emit one or a few
// instructions, fold integer constants, and keep immediates out of first
// source positions.

func isImm(o Operand) bool { return o.Kind == KImm }

// reg returns o in a register of type t (materializing an immediate).
func (f *Func) reg(t Type, o Operand) Operand {
	if o.Kind == KReg {
		return o
	}
	r := f.NewReg(t)
	if o.Kind == KStaged && t.Size() == 4 {
		f.Emit(Inst{Op: OpLdVol, T: S32, Dst: []Operand{R(r)}, Src: []Operand{AddrSym(o.Name, o.Off)}})
		return R(r)
	}
	f.Emit(Inst{Op: OpMov, T: t, Dst: []Operand{R(r)}, Src: []Operand{o}})
	return R(r)
}

// Mov copies src into a fresh register.
func (f *Func) Mov(t Type, src Operand) Reg {
	r := f.NewReg(t)
	f.Emit(Inst{Op: OpMov, T: t, Dst: []Operand{R(r)}, Src: []Operand{src}})
	return r
}

// Set assigns src to an existing register.
func (f *Func) Set(t Type, dst Reg, src Operand) {
	f.Emit(Inst{Op: OpMov, T: t, Dst: []Operand{R(dst)}, Src: []Operand{src}})
}

// Op3 emits d = op a, b into a fresh register.
func (f *Func) Op3(op Op, t Type, a, b Operand) Operand {
	r := f.NewReg(t)
	f.Emit(Inst{Op: op, T: t, Dst: []Operand{R(r)}, Src: []Operand{f.reg(t, a), b}})
	return R(r)
}

// Into emits dst = op srcs (no folding, sources as given).
func (f *Func) Into(op Op, t Type, dst Reg, srcs ...Operand) {
	f.Emit(Inst{Op: op, T: t, Dst: []Operand{R(dst)}, Src: srcs})
}

// F emits a float op into a fresh f32 register.
func (f *Func) F(op Op, srcs ...Operand) Operand {
	r := f.NewReg(F32)
	f.Emit(Inst{Op: op, Dst: []Operand{R(r)}, Src: srcs})
	return R(r)
}

// Int arithmetic on s32 with constant folding.
func (f *Func) Add(a, b Operand) Operand {
	switch {
	case isImm(a) && isImm(b):
		return I(a.Imm + b.Imm)
	case isImm(b) && b.Imm == 0:
		return a
	case isImm(a) && a.Imm == 0:
		return b
	case isImm(a):
		a, b = b, a
	}
	return f.Op3(OpAdd, S32, a, b)
}

func (f *Func) Sub(a, b Operand) Operand {
	switch {
	case isImm(a) && isImm(b):
		return I(a.Imm - b.Imm)
	case isImm(b) && b.Imm == 0:
		return a
	}
	return f.Op3(OpSub, S32, a, b)
}

func (f *Func) MulC(a Operand, c int64) Operand {
	switch {
	case isImm(a):
		return I(a.Imm * c)
	case c == 0:
		return I(0)
	case c == 1:
		return a
	case c > 0 && c&(c-1) == 0:
		return f.Op3(OpShl, B32, a, I(int64(log2(c))))
	}
	return f.Op3(OpMulLo, S32, a, I(c))
}

func (f *Func) Min(a, b Operand) Operand {
	if isImm(a) && isImm(b) {
		return I(min(a.Imm, b.Imm))
	}
	if isImm(a) {
		a, b = b, a
	}
	return f.Op3(OpMin, S32, a, b)
}

func (f *Func) Max(a, b Operand) Operand {
	if isImm(a) && isImm(b) {
		return I(max(a.Imm, b.Imm))
	}
	if isImm(a) {
		a, b = b, a
	}
	return f.Op3(OpMax, S32, a, b)
}

func log2(c int64) int {
	n := 0
	for c > 1 {
		c >>= 1
		n++
	}
	return n
}

func floorDivI(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// FloorDiv is floor(a / c) for c >= 1, correct for negative a: an
// arithmetic shift for powers of two, else div.s32 with a correction.
func (f *Func) FloorDiv(a Operand, c int64) Operand {
	switch {
	case isImm(a):
		return I(floorDivI(a.Imm, c))
	case c == 1:
		return a
	case c&(c-1) == 0:
		return f.Op3(OpShr, S32, a, I(int64(log2(c))))
	}
	q := f.Op3(OpDiv, S32, a, I(c))
	r := f.Op3(OpRem, S32, a, I(c))
	p := f.Setp("lt", S32, r, I(0))
	f.Emit(Inst{Op: OpSub, T: S32, Guard: &p, Dst: []Operand{q}, Src: []Operand{q, I(1)}})
	return q
}

// FloorDivR is floor(a / b) for a register b >= 1 at run time: div.s32
// with a correction when the remainder is negative.
func (f *Func) FloorDivR(a, b Operand) Operand {
	q := f.Op3(OpDiv, S32, a, b)
	r := f.Op3(OpRem, S32, a, b)
	p := f.Setp("lt", S32, r, I(0))
	f.Emit(Inst{Op: OpSub, T: S32, Guard: &p, Dst: []Operand{q}, Src: []Operand{q, I(1)}})
	return q
}

// FloorMod is a mod c in [0, c) for c >= 1.
func (f *Func) FloorMod(a Operand, c int64) Operand {
	switch {
	case isImm(a):
		return I(a.Imm - c*floorDivI(a.Imm, c))
	case c == 1:
		return I(0)
	case c&(c-1) == 0:
		return f.Op3(OpAnd, B32, a, I(c-1))
	}
	r := f.Op3(OpRem, S32, a, I(c))
	p := f.Setp("lt", S32, r, I(0))
	f.Emit(Inst{Op: OpAdd, T: S32, Guard: &p, Dst: []Operand{r}, Src: []Operand{r, I(c)}})
	return r
}

// CeilDiv is ceil(a / c) = -floor(-a / c).
func (f *Func) CeilDiv(a Operand, c int64) Operand {
	if isImm(a) {
		return I(-floorDivI(-a.Imm, c))
	}
	// ceil(a/c) = floor((a + c - 1) / c)
	return f.FloorDiv(f.Add(a, I(c-1)), c)
}

var swapCmp = map[string]string{"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}

// Setp compares into a fresh predicate; an immediate first operand is
// swapped to the second position.
func (f *Func) Setp(cmp string, t Type, a, b Operand) Reg {
	if isImm(a) && !isImm(b) {
		a, b, cmp = b, a, swapCmp[cmp]
	}
	p := f.NewReg(Pred)
	f.Emit(Inst{Op: OpSetp, T: t, Cmp: cmp, Dst: []Operand{R(p)}, Src: []Operand{f.reg(t, a), b}})
	return p
}

// PAnd, POr, PNot combine predicates.
func (f *Func) PAnd(a, b Reg) Reg {
	p := f.NewReg(Pred)
	f.Emit(Inst{Op: OpAnd, T: Pred, Dst: []Operand{R(p)}, Src: []Operand{R(a), R(b)}})
	return p
}

func (f *Func) POr(a, b Reg) Reg {
	p := f.NewReg(Pred)
	f.Emit(Inst{Op: OpOr, T: Pred, Dst: []Operand{R(p)}, Src: []Operand{R(a), R(b)}})
	return p
}

func (f *Func) PNot(a Reg) Reg {
	p := f.NewReg(Pred)
	f.Emit(Inst{Op: OpNot, T: Pred, Dst: []Operand{R(p)}, Src: []Operand{R(a)}})
	return p
}

// Selp is p ? a : b into a fresh register.
func (f *Func) Selp(t Type, a, b Operand, p Reg) Operand {
	r := f.NewReg(t)
	f.Emit(Inst{Op: OpSelp, T: t, Dst: []Operand{R(r)}, Src: []Operand{a, b, R(p)}})
	return R(r)
}

// Bra branches to label, when p (or !p with neg) if p is not nil.
func (f *Func) Bra(label string, p *Reg, neg bool) {
	f.Emit(Inst{Op: OpBra, Guard: p, GuardNeg: neg, Src: []Operand{Label(label)}})
}
