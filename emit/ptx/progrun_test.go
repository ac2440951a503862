package ptx

import (
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// progHeads are the head parameters a program run by progKernel reads:
// their declared ranges and, with imm, fixed values rendered as
// immediates; without imm the kernel takes head_params and case c reads
// the values of head c, loaded by the kernels' own code (fwd.headValues).
type progHeads struct {
	params []spec.HeadParam
	imm    []int64
}

// progKernel renders program p into a kernel that runs one case per
// thread: it reads the arguments not bound in bind (s32, in Args order)
// from in, renders p with bound arguments as immediates, and writes each
// result as an s32 and then the first result as a predicate (0 or 1) to
// out. With docs the kernel takes the three document arrays.
func progKernel(p *gen.Prog, bind map[int]int64, docs bool) (string, error) {
	return progKernelHeads(p, bind, docs, nil)
}

// progKernelHeads is progKernel for a program that reads head parameters
// (heads; nil: none).
func progKernelHeads(p *gen.Prog, bind map[int]int64, docs bool, heads *progHeads) (string, error) {
	f := NewFunc("prog")
	f.Params = []Param{{Name: "in", T: U64}, {Name: "out", T: U64}, {Name: "cases", T: U32}}
	tree := docs && p.UsesTree()
	switch {
	case tree:
		f.Params = append(f.Params, treeParams...)
	case docs:
		f.Params = append(f.Params, docParams...)
	}
	g := &kit{f: f}
	loadHeads := heads != nil && heads.imm == nil
	if loadHeads {
		g.p = &gen.Plan{Pattern: spec.Pattern{Params: heads.params}}
		f.Params = append(f.Params, g.headParamsParam())
	}
	in, out := g.global("in"), g.global("out")
	cases := g.param("cases", U32)
	env := Env{}
	switch {
	case tree:
		lo, off, anc, info := g.global("tree_lo"), g.global("tree_off"), g.global("tree_anc"), g.global("tree_info")
		env.Docs = &DocRegs{Tree: &TreeRegs{Lo: lo.Reg, Off: off.Reg, Anc: anc.Reg, Info: info.Reg}}
	case docs:
		id, start, end := g.global("doc_id"), g.global("doc_start"), g.global("doc_end")
		env.Docs = &DocRegs{ID: id.Reg, Start: start.Reg, End: end.Reg}
	}
	tid := f.Add(f.MulC(g.special("%ctaid.x"), 128), g.special("%tid.x"))
	done := f.NewLabel("done")
	past := f.Setp("ge", S32, tid, cases)
	f.Bra(done, &past, false)
	switch {
	case loadHeads:
		g.headBase = g.global(headParamsName)
		g.headValues(tid) // case c computes "head" c
		env.Heads = g.heads
	case heads != nil:
		for k, v := range heads.imm {
			env.Heads = append(env.Heads, HeadVal{V: I(v), Min: int64(heads.params[k].Min), Max: int64(heads.params[k].Max)})
		}
	}
	nin := len(p.Args) - len(bind)
	ia := g.wide(in, tid, int64(4*max(nin, 1)))
	x := 0
	for n := range p.Args {
		if v, ok := bind[n]; ok {
			env.Args = append(env.Args, I(v))
			continue
		}
		r := f.NewReg(S32)
		f.Emit(Inst{Op: OpLd, T: S32, Space: "global", Dst: []Operand{R(r)}, Src: []Operand{Addr(ia.Reg, int64(4*x))}})
		env.Args = append(env.Args, R(r))
		x++
	}
	res, err := RenderProg(f, p, env, nil)
	if err != nil {
		return "", err
	}
	nout := len(p.Results) + 1
	oa := g.wide(out, tid, int64(4*nout))
	outs := []Operand{}
	for _, v := range res {
		outs = append(outs, f.IntOf(v))
	}
	outs = append(outs, f.Selp(S32, I(1), I(0), f.PredOf(res[0])))
	for k, o := range outs {
		f.Emit(Inst{Op: OpSt, T: S32, Space: "global", Dst: []Operand{Addr(oa.Reg, int64(4*k))}, Src: []Operand{f.reg(S32, o)}})
	}
	f.Place(done)
	f.Emit(Inst{Op: OpRet})
	return (&Module{SM: 80, Funcs: []*Func{f}}).Text()
}

// checkProg runs p under the interpreter on every case (full argument
// lists; bound arguments must equal bind in every case) and compares each
// result with Prog.Eval. ids are the document ids (nil: no documents), or
// the parent array of a program that reads a tree. It
// returns the number of mismatches, reporting the first few.
// progInputs packs the unbound arguments of every case as 32-bit words,
// max(unbound, 1) of them a case: the input layout of progKernel.
func progInputs(p *gen.Prog, bind map[int]int64, cases [][]int64) []uint32 {
	nin := max(len(p.Args)-len(bind), 1)
	in := make([]uint32, nin*len(cases))
	for c, args := range cases {
		x := 0
		for n, a := range args {
			if _, ok := bind[n]; !ok {
				in[nin*c+x] = uint32(int32(a))
				x++
			}
		}
	}
	return in
}

func checkProg(t *testing.T, p *gen.Prog, bind map[int]int64, ids []int32, cases [][]int64) int {
	t.Helper()
	return checkProgHeads(t, p, bind, ids, cases, nil, nil)
}

// checkProgHeads is checkProg for a program that reads head parameters:
// heads as progKernelHeads takes them, and vals[c] the values of case c
// (heads.imm in every case when set).
func checkProgHeads(t *testing.T, p *gen.Prog, bind map[int]int64, ids []int32, cases [][]int64, heads *progHeads, vals [][]int32) int {
	t.Helper()
	// whole warps: pad with copies of the last case (the interpreter wants
	// warp-uniform branches)
	n := len(cases)
	for len(cases)%128 != 0 {
		cases = append(cases, cases[n-1])
		if vals != nil {
			vals = append(vals, vals[n-1])
		}
	}
	if !p.UsesDocs() {
		ids = nil // a program that reads no run-time data takes none
	}
	text, err := progKernelHeads(p, bind, ids != nil, heads)
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	mod, err := ptxi.Parse(p.Name+".ptx", text)
	if err != nil {
		t.Fatalf("%s: %v\n%s", p.Name, err, text)
	}
	in := progInputs(p, bind, cases)
	dev := ptxi.NewDevice()
	alloc := func(n int) uint64 {
		a, err := dev.Alloc(max(n, 4))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	nout := len(p.Results) + 1
	ia, oa := alloc(4*len(in)), alloc(4*nout*len(cases))
	if err := dev.WriteU32(ia, in); err != nil {
		t.Fatal(err)
	}
	args := []any{ia, oa, uint32(len(cases))}
	var docs *mask.Docs
	switch {
	case ids != nil && p.UsesTree():
		// ids is a parent array
		if docs, err = mask.NewTree(ids); err != nil {
			t.Fatal(err)
		}
		for _, a := range treeArrays(t, dev, alloc, ids) {
			args = append(args, a)
		}
	case ids != nil:
		if docs, err = mask.NewDocs(ids); err != nil {
			t.Fatal(err)
		}
		for _, a := range docArrays(t, dev, alloc, ids) {
			args = append(args, a)
		}
	}
	if heads != nil && heads.imm == nil {
		var hv []uint32
		for _, v := range vals {
			for _, x := range v {
				hv = append(hv, uint32(x))
			}
		}
		ha := alloc(4 * len(hv))
		if err := dev.WriteU32(ha, hv); err != nil {
			t.Fatal(err)
		}
		args = append(args, ha)
	}
	if _, err := dev.Launch(mod, "prog", [3]int{(len(cases) + 127) / 128, 1, 1}, [3]int{128, 1, 1}, 0, args...); err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	out, err := dev.ReadU32(oa, nout*len(cases))
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	res := make([]int64, len(p.Results))
	for c, a := range cases[:n] {
		d := docs
		if heads != nil {
			var v []int32
			if heads.imm == nil {
				v = vals[c]
			} else {
				v = make([]int32, len(heads.imm))
				for k, x := range heads.imm {
					v[k] = int32(x)
				}
			}
			d = &mask.Docs{}
			d.SetHead(docs, v)
		}
		p.Eval(a, d, nil, res)
		got := out[nout*c : nout*c+nout]
		for r := range res {
			if int64(int32(got[r])) != res[r] {
				if bad < 6 {
					t.Errorf("%s%v (bound %v): result %d = %d, Eval gives %d", p.Name, a, bind, r, int32(got[r]), res[r])
				}
				bad++
			}
		}
		if want := b2i(res[0] != 0); int64(got[len(res)]) != want {
			if bad < 6 {
				t.Errorf("%s%v (bound %v): result 0 as a predicate = %d, want %d", p.Name, a, bind, got[len(res)], want)
			}
			bad++
		}
	}
	return bad
}
