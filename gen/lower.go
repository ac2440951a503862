package gen

import "github.com/attngen/attngen/spec"

// LowerPred compiles a pattern into the partial-tile predicate. Common
// subexpressions are shared and constants folded, so the predicate of a
// union of a block and its bridge computes i/b, i mod b once.
func LowerPred(p spec.Pattern) *Pred {
	b := &builder{memo: map[Inst]int{}, p: &Pred{}}
	i, j := b.emit(Inst{Op: IRRow}), b.emit(Inst{Op: IRCol})
	li, lj, same := i, j, -1
	if p.Mask.HasDocument() {
		same = b.emit(Inst{Op: IREq, A: b.emit(Inst{Op: IRDocID, A: i}), B: b.emit(Inst{Op: IRDocID, A: j})})
		ds := b.emit(Inst{Op: IRDocStart, A: i})
		li, lj = b.emit(Inst{Op: IRSub, A: i, B: ds}), b.emit(Inst{Op: IRSub, A: j, B: ds})
	}
	r := b.lower(p.Mask, li, lj, same)
	if p.Causal {
		r = b.and(b.emit(Inst{Op: IRLe, A: j, B: i}), r)
	}
	// The result must be the last instruction.
	if r != len(b.p.Insts)-1 {
		b.p.Insts = append(b.p.Insts, Inst{Op: IRAnd, A: r, B: r})
	}
	return b.p
}

type builder struct {
	p    *Pred
	memo map[Inst]int
}

func (b *builder) emit(in Inst) int {
	if in.Op.Arity() < 2 {
		in.B = 0
	}
	if in.Op.Arity() < 1 {
		in.A = 0
	}
	switch in.Op {
	case IRAdd, IREq, IRAnd, IROr:
		if in.A > in.B {
			in.A, in.B = in.B, in.A
		}
	}
	if v, ok := b.memo[in]; ok {
		return v
	}
	b.p.Insts = append(b.p.Insts, in)
	b.memo[in] = len(b.p.Insts) - 1
	return len(b.p.Insts) - 1
}

func (b *builder) konst(v int) int { return b.emit(Inst{Op: IRConst, Imm: int64(v)}) }

// isConst reports the value of a constant instruction.
func (b *builder) isConst(v int) (int64, bool) {
	in := b.p.Insts[v]
	return in.Imm, in.Op == IRConst
}

func (b *builder) and(x, y int) int {
	if c, ok := b.isConst(x); ok {
		if c == 0 {
			return x
		}
		return y
	}
	if c, ok := b.isConst(y); ok {
		if c == 0 {
			return y
		}
		return x
	}
	return b.emit(Inst{Op: IRAnd, A: x, B: y})
}

func (b *builder) or(x, y int) int {
	if c, ok := b.isConst(x); ok {
		if c != 0 {
			return x
		}
		return y
	}
	if c, ok := b.isConst(y); ok {
		if c != 0 {
			return y
		}
		return x
	}
	return b.emit(Inst{Op: IROr, A: x, B: y})
}

func (b *builder) le(x, y int) int  { return b.emit(Inst{Op: IRLe, A: x, B: y}) }
func (b *builder) lt(x, y int) int  { return b.emit(Inst{Op: IRLt, A: x, B: y}) }
func (b *builder) sub(x, y int) int { return b.emit(Inst{Op: IRSub, A: x, B: y}) }

// lower emits the predicate of m on (local) positions i, j; same is the
// document-equality value (or -1 without documents).
func (b *builder) lower(m *spec.Mask, i, j, same int) int {
	switch m.Op {
	case spec.OpFull:
		return b.konst(1)
	case spec.OpDocument:
		if same < 0 {
			return b.konst(1)
		}
		return same
	case spec.OpWindow:
		d := b.sub(i, j)
		r := b.le(d, b.konst(m.Left))
		return b.and(r, b.le(b.konst(-m.Right), d))
	case spec.OpBlock:
		return b.emit(Inst{Op: IREq, A: b.emit(Inst{Op: IRDivC, A: i, Imm: int64(m.Size)}), B: b.emit(Inst{Op: IRDivC, A: j, Imm: int64(m.Size)})})
	case spec.OpBridge:
		phase := b.emit(Inst{Op: IRModC, A: i, Imm: int64(m.Block)})
		beta := b.sub(i, phase)
		r := b.and(b.lt(phase, b.konst(m.Targets)), b.lt(j, beta))
		r = b.and(r, b.le(b.sub(beta, b.konst(m.Sources)), j))
		if m.MaxDistance > 0 {
			r = b.and(r, b.le(b.sub(i, j), b.konst(m.MaxDistance)))
		}
		return r
	case spec.OpDilated:
		d := b.sub(i, j)
		r := b.emit(Inst{Op: IREq, A: b.emit(Inst{Op: IRModC, A: d, Imm: int64(m.Stride)}), B: b.konst(0)})
		if m.Size > 0 {
			reach := (m.Size - 1) * m.Stride
			r = b.and(r, b.and(b.le(d, b.konst(reach)), b.le(b.konst(-reach), d)))
		}
		return r
	case spec.OpGlobal:
		return b.lt(j, b.konst(m.Tokens))
	case spec.OpUnion, spec.OpIntersect:
		r := b.lower(m.Args[0], i, j, same)
		for _, a := range m.Args[1:] {
			x := b.lower(a, i, j, same)
			if m.Op == spec.OpUnion {
				r = b.or(r, x)
			} else {
				r = b.and(r, x)
			}
		}
		return r
	}
	panic("BUG: unknown op " + m.Op.String())
}
