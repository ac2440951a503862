package ptx

import (
	"fmt"
	"strings"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
)

// Head parameters (gen.Plan.HeadParams: window sizes or sink counts that
// vary by query head) reach a kernel as one more device address,
// head_params: s32 values, head-major [heads_q][n] for the plan's n
// parameters, shared by every batch element. A kernel loads the n values
// of the query head it computes into registers once (the forward, the dq
// kernel: once per CTA; the dk/dv kernel: once per query head of its
// loop over the group) and its programs read them there (Env.Heads).
// Plans without head parameters take no such parameter, and their
// kernels are unchanged.

// headParamsName is the kernel parameter that holds the head values.
const headParamsName = gpu.HeadParamsParam

// headParamsParam describes the head_params parameter of the plan's
// kernels, naming each head parameter with its range.
func (g *kit) headParamsParam() Param {
	hps := g.p.HeadParams()
	var names []string
	for _, hp := range hps {
		names = append(names, fmt.Sprintf("%s in [%d, %d]", hp.Name, hp.Min, hp.Max))
	}
	return Param{Name: headParamsName, T: U64, Doc: fmt.Sprintf("head parameters [heads_q][%d], s32, head-major: %s", len(hps), strings.Join(names, ", "))}
}

// headValues loads the values of the plan's head parameters at query head
// h (a 32-bit operand below heads_q) from head_params into fresh
// registers, which the programs rendered after it read (g.env); nothing
// for plans without head parameters. A kernel that computes several heads
// calls it once per head, before the programs of that head.
func (g *kit) headValues(h Operand) {
	hps := g.p.HeadParams()
	if len(hps) == 0 {
		return
	}
	f := g.f
	f.Comment(fmt.Sprintf("head parameters of this query head: head_params[h][0..%d]", len(hps)-1))
	a := g.wide(g.headBase, h, int64(4*len(hps)))
	g.heads = make([]HeadVal, len(hps))
	for k, hp := range hps {
		v := f.NewReg(S32)
		f.Emit(Inst{Op: OpLd, T: S32, Space: "global", Dst: []Operand{R(v)}, Src: []Operand{Addr(a.Reg, int64(4*k))}})
		g.heads[k] = HeadVal{V: R(v), Min: int64(hp.Min), Max: int64(hp.Max)}
	}
}

// env is the environment of a plan program rendered in the kernel: the
// arguments, the kernel's document or tree arrays and the current head's
// parameter values.
func (g *kit) env(args ...Operand) Env {
	return Env{Args: args, Docs: g.docRegs, Heads: g.heads}
}

// maskHeadParams are the plan's head parameters as runtime/mask describes
// them (nil: none).
func maskHeadParams(p *gen.Plan) []mask.HeadParam {
	var out []mask.HeadParam
	for _, hp := range p.HeadParams() {
		out = append(out, mask.HeadParam{Name: hp.Name, Min: hp.Min, Max: hp.Max})
	}
	return out
}
