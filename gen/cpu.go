package gen

import (
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// UsesTree reports whether the plan's programs read a parent array (a
// tree mask): the run-time data its kernels take is then the tree, not
// document ids.
func (p *Plan) UsesTree() bool {
	for _, q := range []*Prog{p.Pred, p.Hull, p.Class, p.Word} {
		if q != nil && q.UsesTree() {
			return true
		}
	}
	return false
}

// HeadParams are the run-time integers, one per query head, the plan's
// programs read (an IRLoad of FieldParam+k reads HeadParams()[k]), with the ranges the spec
// declares; empty for most masks.
func (p *Plan) HeadParams() []spec.HeadParam { return p.Pattern.Params }

// Mask is the plan as the CPU runtime's compiled mask, evaluating the
// plan's programs (Prog.Eval). attngen's own verify and bench commands run
// kernels through it; generated packages run the same programs rendered as
// Go (GoMask), and tests hold the two equal. It allocates nothing per call
// and is safe for concurrent use.
func (p *Plan) Mask() mask.Mask {
	hp := p.maskParams()
	return evalMask{p, &hp}
}

// evalMask holds its head parameters as runtime/mask describes them, made
// once, so that HeadParams (which calls ask for) allocates nothing.
type evalMask struct {
	p      *Plan
	params *[]mask.HeadParam
}

// eval runs a program with its values on the stack: a small frame for
// the usual programs (zeroing it is part of every call), a larger one for
// long ones, and the heap beyond that.
func eval(p *Prog, args []int64, d *mask.Docs, res []int64) {
	switch n := len(p.Insts); {
	case n <= 32:
		var scratch [32]int64
		p.Eval(args, d, scratch[:], res)
	case n <= 256:
		var scratch [256]int64
		p.Eval(args, d, scratch[:], res)
	default:
		p.Eval(args, d, nil, res)
	}
}

func (m evalMask) Stride() int                  { return max(m.p.Layout.Stride, 1) }
func (m evalMask) UsesDocs() bool               { return m.p.Pred.UsesDocs() }
func (m evalMask) UsesTree() bool               { return m.p.UsesTree() }
func (m evalMask) HeadParams() []mask.HeadParam { return *m.params }
func (m evalMask) Score() mask.Score            { return m.p.Score.Runtime() }

// maskParams is HeadParams as runtime/mask describes them (nil: none).
func (p *Plan) maskParams() []mask.HeadParam {
	var out []mask.HeadParam
	for _, hp := range p.HeadParams() {
		out = append(out, mask.HeadParam{Name: hp.Name, Min: hp.Min, Max: hp.Max})
	}
	return out
}

func (m evalMask) Hull(q0, q1, x int, d *mask.Docs) (int, int) {
	var res [2]int64
	args := [3]int64{int64(q0), int64(q1), int64(x)}
	eval(m.p.Hull, args[:], d, res[:])
	return int(res[0]), int(res[1])
}

func (m evalMask) Class(q0, q1, k0, k1 int, d *mask.Docs) mask.Class {
	var res [1]int64
	args := [4]int64{int64(q0), int64(q1), int64(k0), int64(k1)}
	eval(m.p.Class, args[:], d, res[:])
	return mask.Class(res[0])
}

func (m evalMask) Word(i, k0, nk int, d *mask.Docs) uint64 {
	var res [1]int64
	if m.p.Word != nil {
		args := [2]int64{int64(i), int64(k0)}
		eval(m.p.Word, args[:], d, res[:])
		return uint64(res[0]) & mask.TailBits(nk-k0)
	}
	var w uint64
	for c := 0; c < min(64, nk-k0); c++ {
		args := [2]int64{int64(i), int64(k0 + c)}
		eval(m.p.Pred, args[:], d, res[:])
		if res[0] != 0 {
			w |= 1 << uint(c)
		}
	}
	return w
}
