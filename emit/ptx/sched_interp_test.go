package ptx

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// schedKernel evaluates, per thread, one case (q0, q1, k0, k1, n) read from
// an s32 array: the tile class, the clipped key hull, and the predicate at
// (q0, k0) and (q1, k1).
func schedKernel(p *gen.Plan) (string, error) {
	f := NewFunc("sched")
	f.Params = []Param{{Name: "in", T: U64}, {Name: "out", T: U64}, {Name: "cases", T: U32}}
	f.DynShared = ""
	g := &fwd{f: f}
	in, out := g.global("in"), g.global("out")
	cases := g.param("cases", U32)
	tid := f.Add(f.MulC(g.special("%ctaid.x"), 128), g.special("%tid.x"))
	done := f.NewLabel("done")
	past := f.Setp("ge", S32, tid, cases)
	f.Bra(done, &past, false)
	ia := g.wide(in, tid, 20)
	var v [5]Operand
	for x := range v {
		r := f.NewReg(S32)
		f.Emit(Inst{Op: OpLd, T: S32, Space: "global", Dst: []Operand{R(r)}, Src: []Operand{Addr(ia.Reg, int64(4*x))}})
		v[x] = R(r)
	}
	q0, q1, k0, k1, n := v[0], v[1], v[2], v[3], v[4]
	cls := f.emitClassify(p.Pattern.Mask, p.Pattern.Causal, q0, q1, k0, k1)
	lo, hi := f.emitHull(p.Pattern.Mask, q0, q1)
	lo = f.Max(lo, I(0))
	hi = f.Min(hi, f.Sub(n, I(1)))
	if p.Pattern.Causal {
		hi = f.Min(hi, q1)
	}
	p0, err := LowerPred(f, p.Pred, PredEnv{Row: q0, Col: k0})
	if err != nil {
		return "", err
	}
	p1, err := LowerPred(f, p.Pred, PredEnv{Row: q1, Col: k1})
	if err != nil {
		return "", err
	}
	oa := g.wide(out, tid, 20)
	for x, o := range []Operand{cls, lo, hi, f.Selp(S32, I(1), I(0), p0), f.Selp(S32, I(1), I(0), p1)} {
		f.Emit(Inst{Op: OpSt, T: S32, Space: "global", Dst: []Operand{Addr(oa.Reg, int64(4*x))}, Src: []Operand{f.reg(S32, o)}})
	}
	f.Place(done)
	f.Emit(Inst{Op: OpRet})
	return (&Module{Funcs: []*Func{f}}).Text()
}

var schedMasks = []struct {
	name   string
	m      *spec.Mask
	causal bool
}{
	{"full", spec.Full(), true},
	{"full_nc", spec.Full(), false},
	{"block48", spec.Block(48), true},
	{"block40_nc", spec.Block(40), false},
	{"pbb", spec.Union(spec.Block(64), spec.Bridge(64, 8, 8, 0)), true},
	{"sebridge", spec.Union(spec.Block(50), spec.Bridge(50, 10, 50, 0)), true},
	{"bridge_only", spec.Bridge(32, 4, 8, 0), true},
	{"bridge_md", spec.Bridge(48, 16, 48, 20), true},
	{"window40", spec.Window(40), true},
	{"window_lr", spec.WindowLR(30, 20), false},
	{"streaming", spec.Union(spec.Global(4), spec.Window(50)), true},
	{"global_nc", spec.Global(7), false},
	{"intersect", spec.Intersect(spec.Block(96), spec.Window(70)), true},
	{"dilated100", spec.Dilated(100, 0), true},
	{"dilated70_nc", spec.Dilated(70, 3), false},
	{"dilated_mix", spec.Union(spec.Dilated(7, 4), spec.Window(9)), true},
	{"nested", spec.Union(spec.Intersect(spec.Block(30), spec.Window(20)), spec.Global(3), spec.Bridge(30, 5, 7, 0)), true},
}

// TestInterpSchedule checks the kernel's closed-form tile code against
// spec and gen on random tiles: the class equals spec's Classify exactly,
// the hull holds every key the rows keep (brute force), and the predicate equals gen's Eval.
func TestInterpSchedule(t *testing.T) {
	const cases = 1024
	for _, mk := range schedMasks {
		t.Run(mk.name, func(t *testing.T) {
			p, err := gen.Compile(&spec.Spec{Name: mk.name, Mask: mk.m, Causal: mk.causal, HeadDim: 64}, Sm80, nil)
			if err != nil {
				t.Fatal(err)
			}
			text, err := schedKernel(p)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := ptxi.Parse(mk.name, text)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(mk.name))))
			in := make([]uint32, 5*cases)
			for c := 0; c < cases; c++ {
				q0 := rng.IntN(400)
				q1 := q0 + rng.IntN(70)
				k0 := rng.IntN(q1 + 40)
				k1 := k0 + rng.IntN(70)
				n := k1 + 1 + rng.IntN(100)
				copy(in[5*c:], []uint32{uint32(q0), uint32(q1), uint32(k0), uint32(k1), uint32(n)})
			}
			dev := ptxi.NewDevice()
			ia, _ := dev.Alloc(4 * len(in))
			oa, _ := dev.Alloc(4 * len(in))
			if err := dev.WriteU32(ia, in); err != nil {
				t.Fatal(err)
			}
			if _, err := dev.Launch(mod, "sched", [3]int{cases / 128, 1, 1}, [3]int{128, 1, 1}, 0, ia, oa, uint32(cases)); err != nil {
				t.Fatal(err)
			}
			out, err := dev.ReadU32(oa, len(in))
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			report := func(format string, args ...any) {
				if bad < 8 {
					t.Errorf(format, args...)
				}
				bad++
			}
			for c := 0; c < cases; c++ {
				q0, q1, k0, k1, n := int(in[5*c]), int(in[5*c+1]), int(in[5*c+2]), int(in[5*c+3]), int(in[5*c+4])
				o := out[5*c : 5*c+5]
				where := fmt.Sprintf("q [%d, %d] k [%d, %d]", q0, q1, k0, k1)
				if want := p.Pattern.Classify(q0, q1, k0, k1); spec.Class(o[0]) != want {
					report("%s: class %v, spec says %v", where, spec.Class(o[0]), want)
				}
				lo, hi := int(int32(o[1])), int(int32(o[2]))
				if c < 200 {
					// every kept key of the tile's rows lies in the hull
					for j := 0; j < n; j++ {
						for i := q0; i <= q1 && (j < lo || j > hi); i++ {
							if p.Pattern.At(i, j) {
								report("%s n %d: hull [%d, %d] misses key %d of row %d", where, n, lo, hi, j, i)
								break
							}
						}
					}
				}
				if want := p.Pred.Eval(q0, k0, nil); (o[3] == 1) != want {
					report("%s: predicate at (%d, %d) = %d, gen says %v", where, q0, k0, o[3], want)
				}
				if want := p.Pred.Eval(q1, k1, nil); (o[4] == 1) != want {
					report("%s: predicate at (%d, %d) = %d, gen says %v", where, q1, k1, o[4], want)
				}
			}
		})
	}
}
