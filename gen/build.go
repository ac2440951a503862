package gen

import "github.com/attngen/attngen/runtime/mask"

// builder appends instructions to a program, sharing common
// subexpressions and folding constants, so that a union of a block and its
// bridge computes i/b and i mod b once and bounds that do not apply
// disappear.
type builder struct {
	p    *Prog
	memo map[Inst]int
}

func newBuilder(name string, args ...string) *builder {
	return &builder{p: &Prog{Name: name, Args: args}, memo: map[Inst]int{}}
}

// arg is argument n.
func (b *builder) arg(n int) int { return b.emit(Inst{Op: IRArg, Imm: int64(n)}) }

// done sets the results and returns the program.
func (b *builder) done(results ...int) *Prog {
	b.p.Results = results
	if err := b.p.Check(); err != nil {
		panic("BUG: " + err.Error())
	}
	return b.p
}

func (b *builder) konst(v int64) int { return b.emit(Inst{Op: IRConst, Imm: v}) }

// isConst reports the value of a constant instruction.
func (b *builder) isConst(v int) (int64, bool) {
	in := b.p.Insts[v]
	return in.Imm, in.Op == IRConst
}

func (b *builder) emit(in Inst) int {
	switch in.Arity() {
	case 0:
		in.A, in.B, in.C = 0, 0, 0
	case 1:
		in.B, in.C = 0, 0
	case 2:
		in.C = 0
	}
	switch in.Op {
	case IRAdd, IREq, IRAnd, IROr, IRMin, IRMax, IRWAnd, IRWOr:
		if in.A > in.B {
			in.A, in.B = in.B, in.A
		}
	}
	if v, ok := b.fold(in); ok {
		return v
	}
	if v, ok := b.memo[in]; ok {
		return v
	}
	b.p.Insts = append(b.p.Insts, in)
	b.memo[in] = len(b.p.Insts) - 1
	return len(b.p.Insts) - 1
}

// fold evaluates an instruction whose operands are constants, and the
// identities of min, max, and, or and select with one constant operand.
func (b *builder) fold(in Inst) (int, bool) {
	if in.Op == IRArg || in.Op == IRConst || in.Op == IRLoad || in.Op.Tree() || in.Op == IRWRange {
		return 0, false
	}
	ops := in.operands()
	cs := make([]int64, len(ops))
	all := true
	for k, x := range ops {
		c, ok := b.isConst(x)
		cs[k] = c
		all = all && ok
	}
	if all && !(in.Op == IRDiv && cs[1] < 1) {
		q := &Prog{Args: nil, Insts: make([]Inst, 0, len(ops)+1)}
		for _, c := range cs {
			q.Insts = append(q.Insts, Inst{Op: IRConst, Imm: c})
		}
		e := in
		switch len(ops) {
		case 1:
			e.A = 0
		case 2:
			e.A, e.B = 0, 1
		case 3:
			e.A, e.B, e.C = 0, 1, 2
		}
		q.Insts = append(q.Insts, e)
		q.Results = []int{len(q.Insts) - 1}
		var r [1]int64
		q.Eval(nil, nil, nil, r[:])
		return b.konst(r[0]), true
	}
	constOf := func(x int) (int64, bool) { return b.isConst(x) }
	switch in.Op {
	case IRMin, IRMax, IRAnd, IROr:
		for _, pair := range [][2]int{{in.A, in.B}, {in.B, in.A}} {
			c, ok := constOf(pair[0])
			if !ok {
				continue
			}
			switch {
			case in.Op == IRMin && c >= Inf, in.Op == IRMax && c <= -Inf:
				return pair[1], true
			case in.Op == IRMin && c <= -Inf, in.Op == IRMax && c >= Inf:
				return pair[0], true
			case in.Op == IRAnd && c != 0, in.Op == IROr && c == 0:
				return pair[1], true
			case in.Op == IRAnd && c == 0, in.Op == IROr && c != 0:
				return pair[0], true
			}
		}
		if in.A == in.B && (in.Op != IRAnd && in.Op != IROr || b.boolean(in.A)) {
			// x && x is x only for a 0/1 value
			return in.A, true
		}
	case IRSelect:
		if c, ok := constOf(in.A); ok {
			if c != 0 {
				return in.B, true
			}
			return in.C, true
		}
		if in.B == in.C {
			return in.B, true
		}
	case IRWIf:
		if c, ok := constOf(in.A); ok {
			if c != 0 {
				return in.B, true
			}
			return b.konst(0), true
		}
	case IRWAnd, IRWOr:
		for _, pair := range [][2]int{{in.A, in.B}, {in.B, in.A}} {
			c, ok := constOf(pair[0])
			if !ok {
				continue
			}
			switch {
			case in.Op == IRWAnd && c == -1, in.Op == IRWOr && c == 0:
				return pair[1], true
			case in.Op == IRWAnd && c == 0, in.Op == IRWOr && c == -1:
				return pair[0], true
			}
		}
	case IRAdd, IRSub:
		if c, ok := constOf(in.B); ok && c == 0 {
			return in.A, true
		}
		if c, ok := constOf(in.A); ok && c == 0 && in.Op == IRAdd {
			return in.B, true
		}
	case IRMulC:
		if in.Imm == 1 {
			return in.A, true
		}
	case IRDivC:
		if in.Imm == 1 {
			return in.A, true
		}
	}
	return 0, false
}

// boolean reports whether value v is 0 or 1 by construction (a
// comparison or logic).
func (b *builder) boolean(v int) bool {
	switch b.p.Insts[v].Op {
	case IRLt, IRLe, IREq, IRAnd, IROr, IRNot:
		return true
	}
	return false
}

func (b *builder) add(x, y int) int { return b.emit(Inst{Op: IRAdd, A: x, B: y}) }
func (b *builder) sub(x, y int) int { return b.emit(Inst{Op: IRSub, A: x, B: y}) }
func (b *builder) addC(x int, c int64) int {
	if c < 0 {
		return b.sub(x, b.konst(-c))
	}
	return b.add(x, b.konst(c))
}
func (b *builder) mulC(x int, c int64) int { return b.emit(Inst{Op: IRMulC, A: x, Imm: c}) }
func (b *builder) divC(x int, c int64) int { return b.emit(Inst{Op: IRDivC, A: x, Imm: c}) }
func (b *builder) modC(x int, c int64) int { return b.emit(Inst{Op: IRModC, A: x, Imm: c}) }

// ceilDivC is ceil(x / c) = -floor(-x / c).
func (b *builder) ceilDivC(x int, c int64) int {
	return b.sub(b.konst(0), b.divC(b.sub(b.konst(0), x), c))
}
func (b *builder) min(x, y int) int    { return b.emit(Inst{Op: IRMin, A: x, B: y}) }
func (b *builder) max(x, y int) int    { return b.emit(Inst{Op: IRMax, A: x, B: y}) }
func (b *builder) lt(x, y int) int     { return b.emit(Inst{Op: IRLt, A: x, B: y}) }
func (b *builder) le(x, y int) int     { return b.emit(Inst{Op: IRLe, A: x, B: y}) }
func (b *builder) eq(x, y int) int     { return b.emit(Inst{Op: IREq, A: x, B: y}) }
func (b *builder) and(x, y int) int    { return b.emit(Inst{Op: IRAnd, A: x, B: y}) }
func (b *builder) or(x, y int) int     { return b.emit(Inst{Op: IROr, A: x, B: y}) }
func (b *builder) not(x int) int       { return b.emit(Inst{Op: IRNot, A: x}) }
func (b *builder) sel(c, x, y int) int { return b.emit(Inst{Op: IRSelect, A: c, B: x, C: y}) }
func (b *builder) ands(xs ...int) int {
	r := b.konst(1)
	for _, x := range xs {
		r = b.and(r, x)
	}
	return r
}

// class turns empty and full conditions into a class value (-1: no
// condition).
func (b *builder) class(empty, full int) int {
	c := b.konst(int64(mask.Partial))
	if full >= 0 {
		c = b.sel(full, b.konst(int64(mask.Full)), c)
	}
	if empty >= 0 {
		c = b.sel(empty, b.konst(int64(mask.Empty)), c)
	}
	return c
}
