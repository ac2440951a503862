package gen

// LowerWord compiles the predicate pred(i, j) into the CPU keep-word
// program word(i, k0) -> bits, whose bit c is pred(i, k0+c): every value
// of the predicate that depends on the key becomes either an affine
// function of the lane (±c + offset), its floor quotient or residue by a
// constant, or a 64-bit word; comparisons of those against row values are
// lane ranges (wrange) or residue classes (wstep), and logic is bitwise.
// A row-only value stays a scalar. So a row's 64 keep bits cost about as
// much as one evaluation of the predicate.
//
// It returns nil when some value of the predicate has no such form; the
// word is then the predicate evaluated per lane.
func LowerWord(pred *Prog) *Prog {
	w := &wordLowering{b: newBuilder("word", "i", "k0"), vals: make([]wval, len(pred.Insts)), docOf: map[int]int{}}
	for k, in := range pred.Insts {
		v, ok := w.lower(in)
		if !ok {
			return nil
		}
		w.vals[k] = v
	}
	r := w.vals[pred.Results[0]]
	switch r.kind {
	case wWord:
		return w.b.done(r.v)
	case wScalar:
		return w.b.done(w.b.emit(Inst{Op: IRWIf, A: r.v, B: w.b.konst(-1)}))
	}
	return nil
}

type wkind uint8

const (
	wScalar wkind = iota // a row value: v
	wAff                 // sign*c + v
	wDiv                 // floor((sign*c + v) / d)
	wMod                 // (sign*c + v) mod d
	wModMod              // ((c + v) mod d) mod d2
	wDoc                 // document id of position c + v
	wWord                // keep word v
)

type wval struct {
	kind wkind
	v    int   // value number in the word program
	sign int64 // wAff, wDiv, wMod: +1 or -1
	d    int64 // wDiv, wMod, wModMod
	d2   int64 // wModMod
}

type wordLowering struct {
	b     *builder
	vals  []wval
	docOf map[int]int // scalar value -> the position whose document id it is
}

func (w *wordLowering) lower(in Inst) (wval, bool) {
	b := w.b
	scalar := func(v int) (wval, bool) { return wval{kind: wScalar, v: v}, true }
	var a, c wval
	if in.Arity() >= 1 {
		a = w.vals[in.A]
	}
	if in.Arity() >= 2 {
		c = w.vals[in.B]
	}
	if in.Op.Word() {
		return wval{}, false
	}
	allScalar := true
	for _, x := range in.operands() {
		allScalar = allScalar && w.vals[x].kind == wScalar
	}
	switch in.Op {
	case IRArg:
		if in.Imm == 0 {
			return scalar(b.arg(0))
		}
		return wval{kind: wAff, v: b.arg(1), sign: 1}, true
	case IRConst:
		return scalar(b.konst(in.Imm))
	}
	if allScalar {
		e := in
		if in.Arity() >= 1 {
			e.A = a.v
		}
		if in.Arity() >= 2 {
			e.B = c.v
		}
		if in.Arity() >= 3 {
			e.C = w.vals[in.C].v
		}
		v := b.emit(e)
		if in.loads(FieldDocID) {
			w.docOf[v] = a.v
		}
		return scalar(v)
	}
	switch in.Op {
	case IRAdd, IRSub:
		switch {
		case a.kind == wAff && c.kind == wScalar:
			if in.Op == IRAdd {
				return wval{kind: wAff, v: b.add(a.v, c.v), sign: a.sign}, true
			}
			return wval{kind: wAff, v: b.sub(a.v, c.v), sign: a.sign}, true
		case a.kind == wScalar && c.kind == wAff:
			if in.Op == IRAdd {
				return wval{kind: wAff, v: b.add(a.v, c.v), sign: c.sign}, true
			}
			return wval{kind: wAff, v: b.sub(a.v, c.v), sign: -c.sign}, true
		case a.kind == wAff && c.kind == wAff && in.Op == IRSub && a.sign == c.sign:
			return scalar(b.sub(a.v, c.v))
		case a.kind == wAff && c.kind == wAff && in.Op == IRAdd && a.sign == -c.sign:
			return scalar(b.add(a.v, c.v))
		}
	case IRModC:
		if a.kind == wMod && a.d%in.Imm == 0 {
			// a residue of a residue by a divisor is the residue
			return wval{kind: wMod, v: a.v, sign: a.sign, d: in.Imm}, true
		}
		if a.kind == wMod && a.sign > 0 {
			return wval{kind: wModMod, v: a.v, sign: 1, d: a.d, d2: in.Imm}, true
		}
		fallthrough
	case IRDivC:
		if a.kind == wAff {
			k := wDiv
			if in.Op == IRModC {
				k = wMod
			}
			return wval{kind: k, v: a.v, sign: a.sign, d: in.Imm}, true
		}
	case IRLoad:
		if in.loads(FieldDocID) && a.kind == wAff && a.sign == 1 {
			return wval{kind: wDoc, v: a.v}, true
		}
	case IRTreeAnc:
		// the ancestors of a row among keys v + c: one word from the
		// parent array's bitsets
		if a.kind == wScalar && c.kind == wAff && c.sign == 1 {
			return wval{kind: wWord, v: b.emit(Inst{Op: IRWTree, A: a.v, B: c.v})}, true
		}
	case IRLt, IRLe, IREq:
		return w.compare(in.Op, a, c)
	case IRAnd, IROr:
		return w.logic(in.Op, a, c)
	case IRNot:
		if a.kind == wWord {
			return wval{kind: wWord, v: b.emit(Inst{Op: IRWNot, A: a.v})}, true
		}
	}
	return wval{}, false
}

// compare lowers a comparison with one lane-dependent side.
func (w *wordLowering) compare(op IROp, a, c wval) (wval, bool) {
	b := w.b
	x, s := a, c
	flipped := false
	if a.kind == wScalar {
		x, s, flipped = c, a, true
	}
	if s.kind != wScalar {
		return wval{}, false
	}
	// The lane value lies in [lo, hi]; -1 is an absent bound.
	lo, hi := -1, -1
	switch {
	case op == IREq:
		lo, hi = s.v, s.v
	case op == IRLt && !flipped: // x < s
		hi = b.addC(s.v, -1)
	case op == IRLe && !flipped: // x <= s
		hi = s.v
	case op == IRLt: // s < x
		lo = b.addC(s.v, 1)
	case op == IRLe: // s <= x
		lo = s.v
	}
	switch x.kind {
	case wAff:
		return w.laneRange(x.sign, x.v, lo, hi), true
	case wDiv:
		// floor(y/d) in [lo, hi]  <=>  y in [lo*d, hi*d + d - 1]
		if lo >= 0 {
			lo = b.mulC(lo, x.d)
		}
		if hi >= 0 {
			hi = b.addC(b.mulC(hi, x.d), x.d-1)
		}
		return w.laneRange(x.sign, x.v, lo, hi), true
	case wMod:
		if op != IREq {
			return w.periodRange(x, lo, hi), true
		}
		// (sign*c + v) mod d == s: c = sign*(s - v) mod d, when 0 <= s < d
		first := b.sub(s.v, x.v)
		if x.sign < 0 {
			first = b.sub(x.v, s.v)
		}
		ok := b.and(b.le(b.konst(0), s.v), b.lt(s.v, b.konst(x.d)))
		return wval{kind: wWord, v: b.emit(Inst{Op: IRWIf, A: ok, B: b.emit(Inst{Op: IRWStep, A: first, Imm: x.d})})}, true
	case wModMod:
		if op != IREq {
			return wval{}, false
		}
		// m = (c + v) mod d has m mod d2 == s, for 0 <= s < d2: then
		// m >= s, and m - s = (c + v - s) mod d is at most d-1-s and a
		// multiple of d2; for m < s, (c + v - s) mod d exceeds d-1-s
		ok := b.and(b.le(b.konst(0), s.v), b.lt(s.v, b.konst(x.d2)))
		bound := b.sel(ok, b.sub(b.konst(x.d-1), s.v), b.konst(-1))
		return wval{kind: wWord, v: b.emit(Inst{Op: IRWPeriod, A: b.sub(x.v, s.v), B: bound, C: b.konst(x.d2), Imm: x.d})}, true
	case wDoc:
		// ids are non-decreasing: the keys sharing position p's document
		// are the run [start(p), end(p)]
		p, known := w.docOf[s.v]
		if op != IREq || !known {
			return wval{}, false
		}
		lo := b.sub(b.load(FieldDocStart, p), x.v)
		hi := b.sub(b.load(FieldDocEnd, p), x.v)
		return wval{kind: wWord, v: b.wrange(lo, hi)}, true
	}
	return wval{}, false
}

// periodRange is the word of lanes c with m = (sign*c + v) mod d in
// [lo, hi] (-1: an absent bound), as wperiod: with the bounds clipped to
// [0, d-1], sign +1 keeps (c + v - lo) mod d <= hi - lo, sign -1 keeps
// (c - v + hi) mod d <= hi - lo (for m outside [lo, hi] both exceed
// hi - lo).
func (w *wordLowering) periodRange(x wval, lo, hi int) wval {
	b := w.b
	l, h := b.konst(0), b.konst(x.d-1)
	if lo >= 0 {
		l = b.max(l, lo)
	}
	if hi >= 0 {
		h = b.min(h, hi)
	}
	a := b.sub(x.v, l)
	if x.sign < 0 {
		a = b.sub(h, x.v)
	}
	return wval{kind: wWord, v: b.emit(Inst{Op: IRWPeriod, A: a, B: b.sub(h, l), C: b.konst(1), Imm: x.d})}
}

// laneRange is the word of lanes c with sign*c + v in [lo, hi].
func (w *wordLowering) laneRange(sign int64, v, lo, hi int) wval {
	b := w.b
	clo, chi := -1, -1
	if sign > 0 {
		if lo >= 0 {
			clo = b.sub(lo, v)
		}
		if hi >= 0 {
			chi = b.sub(hi, v)
		}
	} else {
		if hi >= 0 {
			clo = b.sub(v, hi)
		}
		if lo >= 0 {
			chi = b.sub(v, lo)
		}
	}
	return wval{kind: wWord, v: b.wrange(clo, chi)}
}

func (b *builder) wrange(lo, hi int) int {
	in := Inst{Op: IRWRange, A: lo, B: hi}
	if lo < 0 {
		in.Imm |= 1
	}
	if hi < 0 {
		in.Imm |= 2
	}
	if lo < 0 && hi < 0 {
		return b.konst(-1)
	}
	return b.emit(in)
}

// logic lowers and/or with at least one word operand.
func (w *wordLowering) logic(op IROp, a, c wval) (wval, bool) {
	b := w.b
	if a.kind == wScalar {
		a, c = c, a
	}
	switch {
	case a.kind == wWord && c.kind == wWord:
		o := IRWAnd
		if op == IROr {
			o = IRWOr
		}
		return wval{kind: wWord, v: b.emit(Inst{Op: o, A: a.v, B: c.v})}, true
	case a.kind == wWord && c.kind == wScalar:
		if op == IRAnd {
			return wval{kind: wWord, v: b.emit(Inst{Op: IRWIf, A: c.v, B: a.v})}, true
		}
		all := b.emit(Inst{Op: IRWIf, A: c.v, B: b.konst(-1)})
		return wval{kind: wWord, v: b.emit(Inst{Op: IRWOr, A: a.v, B: all})}, true
	}
	return wval{}, false
}
