package ptx

import (
	"fmt"

	"github.com/attngen/attngen/spec"
)

// inf stands for an unbounded key position in s32 code.
const inf = 1 << 30

// checkMask reports masks the v1 kernel cannot run.
func checkMask(m *spec.Mask) error {
	switch m.Op {
	case spec.OpDocument, spec.OpFull, spec.OpWindow, spec.OpBlock, spec.OpBridge, spec.OpGlobal, spec.OpDilated:
		return nil
	case spec.OpUnion, spec.OpIntersect:
		for _, a := range m.Args {
			if err := checkMask(a); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("ptx: mask op %s cannot be rendered", m.Op)
}

// emitHull emits the hull [lo, hi] of the keys query positions [q0, q1]
// may attend under m, per primitive in closed form (a superset of
// spec.KeySpans before clipping): union is the min/max hull, intersect the
// intersection. An empty set is [inf, -inf].
func (f *Func) emitHull(m *spec.Mask, q0, q1 Operand) (lo, hi Operand) {
	if m.Op != spec.OpUnion && m.Op != spec.OpIntersect {
		f.Comment("key hull of " + m.String())
	}
	switch m.Op {
	case spec.OpFull, spec.OpDocument:
		return I(0), I(inf)
	case spec.OpWindow:
		return f.Sub(q0, I(int64(m.Left))), f.Add(q1, I(int64(m.Right)))
	case spec.OpBlock:
		b := int64(m.Size)
		return f.MulC(f.FloorDiv(q0, b), b), f.Add(f.MulC(f.FloorDiv(q1, b), b), I(b-1))
	case spec.OpBridge:
		b := int64(m.Block)
		nlo := f.Max(I(1), f.CeilDiv(f.Sub(q0, I(int64(m.Targets-1))), b))
		nhi := f.FloorDiv(q1, b)
		l := f.Sub(f.MulC(nlo, b), I(int64(m.Sources)))
		if m.MaxDistance > 0 {
			l = f.Max(l, f.Sub(f.Max(f.MulC(nlo, b), q0), I(int64(m.MaxDistance))))
		}
		h := f.Sub(f.MulC(nhi, b), I(1))
		empty := f.Setp("gt", S32, nlo, nhi)
		return f.Selp(S32, I(inf), f.reg(S32, l), empty), f.Selp(S32, I(-inf), f.reg(S32, h), empty)
	case spec.OpGlobal:
		return I(0), I(int64(m.Tokens - 1))
	case spec.OpDilated:
		// keys i - k*stride for the allowed k: the hull of the shifts
		lo, hi = I(-inf), I(inf)
		if m.Size > 0 {
			r := int64((m.Size - 1) * m.Stride)
			lo, hi = f.Sub(q0, I(r)), f.Add(q1, I(r))
		}
		return lo, hi
	case spec.OpUnion, spec.OpIntersect:
		lo, hi = f.emitHull(m.Args[0], q0, q1)
		for _, a := range m.Args[1:] {
			l, h := f.emitHull(a, q0, q1)
			if m.Op == spec.OpUnion {
				lo, hi = f.Min(lo, l), f.Max(hi, h)
			} else {
				lo, hi = f.Max(lo, l), f.Min(hi, h)
			}
		}
		return lo, hi
	}
	panic("BUG: emitHull on unchecked mask " + m.Op.String())
}

// class values match spec.Class.
const (
	cEmpty   = int64(spec.Empty)
	cPartial = int64(spec.Partial)
	cFull    = int64(spec.FullT)
)

// classOf turns the empty and full predicates into a class register.
func (f *Func) classOf(empty, full *Reg) Operand {
	c := I(cPartial)
	if full != nil {
		c = f.Selp(S32, I(cFull), I(cPartial), *full)
	}
	if empty != nil {
		c = f.Selp(S32, I(cEmpty), f.reg(S32, c), *empty)
	}
	return c
}

// classifyDist is spec's classifyDist; lo and hi may be -inf/inf (then
// the bound is not compared).
func (f *Func) classifyDist(q0, q1, k0, k1 Operand, lo, hi, step int64) Operand {
	a, b := f.Sub(q0, k1), f.Sub(q1, k0)
	x, y := a, b
	if lo > -inf {
		x = f.Max(a, I(lo))
	}
	if hi < inf {
		y = f.Min(b, I(hi))
	}
	empty := f.Setp("gt", S32, x, y)
	if step > 1 {
		// no multiple of step in [x, y]
		empty = f.POr(empty, f.Setp("gt", S32, f.MulC(f.CeilDiv(x, step), step), y))
	}
	var full *Reg
	switch {
	case lo > -inf && hi < inf:
		p := f.PAnd(f.Setp("ge", S32, a, I(lo)), f.Setp("le", S32, b, I(hi)))
		full = &p
	case lo > -inf:
		p := f.Setp("ge", S32, a, I(lo))
		full = &p
	case hi < inf:
		p := f.Setp("le", S32, b, I(hi))
		full = &p
	}
	if step > 1 {
		// full only when the tile has one distance, a multiple of step
		p := f.PAnd(f.Setp("eq", S32, a, b), f.Setp("eq", S32, f.FloorMod(a, step), I(0)))
		if full != nil {
			p = f.PAnd(*full, p)
		}
		full = &p
	}
	return f.classOf(&empty, full)
}

// emitClassify emits the class (spec.Class values in an s32) of the tile
// of query positions [q0, q1] and key positions [k0, k1], following
// spec's Mask.classify primitive by primitive: union is the max of the
// classes, intersect the min.
func (f *Func) emitClassify(m *spec.Mask, causal bool, q0, q1, k0, k1 Operand) Operand {
	if m.Op != spec.OpUnion && m.Op != spec.OpIntersect {
		f.Comment(fmt.Sprintf("tile class of %s (causal %v)", m, causal))
	}
	switch m.Op {
	case spec.OpFull, spec.OpDocument:
		if !causal {
			return I(cFull)
		}
		return f.classifyDist(q0, q1, k0, k1, 0, inf, 1)
	case spec.OpWindow:
		lo := int64(-m.Right)
		if causal {
			lo = 0
		}
		return f.classifyDist(q0, q1, k0, k1, lo, int64(m.Left), 1)
	case spec.OpDilated:
		lo, hi := int64(-inf), int64(inf)
		if m.Size > 0 {
			hi = int64((m.Size - 1) * m.Stride)
			lo = -hi
		}
		if causal {
			lo = 0
		}
		return f.classifyDist(q0, q1, k0, k1, lo, hi, int64(m.Stride))
	case spec.OpGlobal:
		g := int64(m.Tokens)
		empty := f.Setp("gt", S32, k0, I(g-1))
		full := f.Setp("le", S32, k1, I(g-1))
		if causal {
			empty = f.POr(empty, f.Setp("gt", S32, k0, q1))
			full = f.PAnd(full, f.Setp("le", S32, k1, q0))
		}
		return f.classOf(&empty, &full)
	case spec.OpBlock:
		b := int64(m.Size)
		bq0, bq1, bk0, bk1 := f.FloorDiv(q0, b), f.FloorDiv(q1, b), f.FloorDiv(k0, b), f.FloorDiv(k1, b)
		nlo, nhi := f.Max(bq0, bk0), f.Min(bq1, bk1)
		empty := f.Setp("gt", S32, nlo, nhi)
		same := f.PAnd(f.PAnd(f.Setp("eq", S32, bq0, bq1), f.Setp("eq", S32, bk0, bk1)), f.Setp("eq", S32, bq0, bk0))
		if !causal {
			return f.classOf(&empty, &same)
		}
		ok := func(n Operand) Reg {
			nb := f.MulC(n, b)
			return f.Setp("le", S32, f.Max(nb, k0), f.Min(f.Add(nb, I(b-1)), q1))
		}
		some := f.POr(f.POr(f.Setp("ge", S32, f.Sub(nhi, nlo), I(2)), ok(nlo)), ok(nhi))
		empty = f.POr(empty, f.PNot(some))
		full := f.PAnd(same, f.Setp("le", S32, k1, q0))
		return f.classOf(&empty, &full)
	case spec.OpBridge:
		b, t, s, md := int64(m.Block), int64(m.Targets), int64(m.Sources), int64(m.MaxDistance)
		nlo := f.Max(f.Max(I(1), f.CeilDiv(f.Sub(q0, I(t-1)), b)), f.CeilDiv(f.Add(k0, I(1)), b))
		nhi := f.Min(f.FloorDiv(q1, b), f.FloorDiv(f.Add(k1, I(s)), b))
		empty := f.Setp("gt", S32, nlo, nhi)
		if md > 0 {
			fn := func(n Operand) Reg {
				nb := f.MulC(n, b)
				return f.Setp("le", S32, f.Sub(f.Max(nb, q0), f.Min(f.Sub(nb, I(1)), k1)), I(md))
			}
			some := f.POr(f.POr(f.Setp("ge", S32, f.Sub(nhi, nlo), I(2)), fn(nlo)), fn(nhi))
			empty = f.POr(empty, f.PNot(some))
		}
		n := f.FloorDiv(q0, b)
		nb := f.MulC(n, b)
		full := f.Setp("ge", S32, n, I(1))
		full = f.PAnd(full, f.Setp("eq", S32, f.FloorDiv(q1, b), n))
		full = f.PAnd(full, f.Setp("lt", S32, f.Sub(q1, nb), I(t)))
		full = f.PAnd(full, f.Setp("ge", S32, k0, f.Sub(nb, I(s))))
		full = f.PAnd(full, f.Setp("le", S32, k1, f.Sub(nb, I(1))))
		if md > 0 {
			full = f.PAnd(full, f.Setp("le", S32, f.Sub(q1, k0), I(md)))
		}
		return f.classOf(&empty, &full)
	case spec.OpUnion, spec.OpIntersect:
		c := f.emitClassify(m.Args[0], causal, q0, q1, k0, k1)
		for _, a := range m.Args[1:] {
			x := f.emitClassify(a, causal, q0, q1, k0, k1)
			if m.Op == spec.OpUnion {
				c = f.Max(c, x)
			} else {
				c = f.Min(c, x)
			}
		}
		return c
	}
	panic("BUG: emitClassify on unchecked mask " + m.Op.String())
}
