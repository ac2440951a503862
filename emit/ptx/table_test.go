package ptx

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderTable renders one instruction per op through the op table.
func TestRenderTable(t *testing.T) {
	r := func(c Type, id int) Operand { return R(Reg{T: c, ID: id}) }
	p := Reg{T: Pred, ID: 2}
	cases := []struct {
		in   Inst
		want string
	}{
		{Inst{Op: OpLdParam, T: U64, Dst: []Operand{r(B64, 1)}, Src: []Operand{AddrSym("q", 0)}}, "ld.param.u64 %rd1, [q];"},
		{Inst{Op: OpMov, T: U32, Dst: []Operand{r(B32, 1)}, Src: []Operand{Special("%tid.x")}}, "mov.u32 %r1, %tid.x;"},
		{Inst{Op: OpMadLo, T: S32, Dst: []Operand{r(B32, 1)}, Src: []Operand{r(B32, 2), I(3), r(B32, 4)}}, "mad.lo.s32 %r1, %r2, 3, %r4;"},
		{Inst{Op: OpMadWide, T: U32, Dst: []Operand{r(B64, 1)}, Src: []Operand{r(B32, 2), I(3), r(B64, 4)}}, "mad.wide.u32 %rd1, %r2, 3, %rd4;"},
		{Inst{Op: OpSetp, T: S32, Cmp: "le", Dst: []Operand{R(p)}, Src: []Operand{r(B32, 1), I(-5)}}, "setp.le.s32 %p2, %r1, -5;"},
		{Inst{Op: OpSub, T: S32, Guard: &p, GuardNeg: true, Dst: []Operand{r(B32, 1)}, Src: []Operand{r(B32, 1), I(1)}}, "@!%p2 sub.s32 %r1, %r1, 1;"},
		{Inst{Op: OpCvtWide, T: U64, T2: U32, Dst: []Operand{r(B64, 0)}, Src: []Operand{r(B32, 0)}}, "cvt.u64.u32 %rd0, %r0;"},
		{Inst{Op: OpCvtPack, T: BF16x2, Dst: []Operand{r(B32, 0)}, Src: []Operand{r(F32, 1), r(F32, 0)}}, "cvt.rn.bf16x2.f32 %r0, %f1, %f0;"},
		{Inst{Op: OpCpAsync, Dst: []Operand{Addr(Reg{T: B32, ID: 3}, 272)}, Src: []Operand{Addr(Reg{T: B64, ID: 4}, 0), I(16), r(B32, 5)}}, "cp.async.cg.shared.global [%r3+272], [%rd4], 16, %r5;"},
		{Inst{Op: OpLdmatrixT, Dst: []Operand{Vec(Reg{B32, 0}, Reg{B32, 1}, Reg{B32, 2}, Reg{B32, 3})}, Src: []Operand{Addr(Reg{T: B32, ID: 9}, 32)}}, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r0, %r1, %r2, %r3}, [%r9+32];"},
		{Inst{Op: OpMma, T: F16, Dst: []Operand{Vec(Reg{F32, 0}, Reg{F32, 1}, Reg{F32, 2}, Reg{F32, 3})}, Src: []Operand{Vec(Reg{B32, 0}, Reg{B32, 1}, Reg{B32, 2}, Reg{B32, 3}), Vec(Reg{B32, 4}, Reg{B32, 5}), Vec(Reg{F32, 0}, Reg{F32, 1}, Reg{F32, 2}, Reg{F32, 3})}}, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, {%f0, %f1, %f2, %f3};"},
		{Inst{Op: OpShflBfly, Dst: []Operand{r(F32, 1)}, Src: []Operand{r(F32, 0), I(2), I(31), I(0xffffffff)}}, "shfl.sync.bfly.b32 %f1, %f0, 2, 31, 4294967295;"},
		{Inst{Op: OpSelp, T: F32, Dst: []Operand{r(F32, 1)}, Src: []Operand{r(F32, 0), Fimm(float32(negInf.F)), R(p)}}, "selp.f32 %f1, %f0, 0fFF800000, %p2;"},
		{Inst{Op: OpEx2, Dst: []Operand{r(F32, 1)}, Src: []Operand{r(F32, 0)}}, "ex2.approx.ftz.f32 %f1, %f0;"},
		{Inst{Op: OpLg2, Dst: []Operand{r(F32, 1)}, Src: []Operand{r(F32, 0)}}, "lg2.approx.ftz.f32 %f1, %f0;"},
		{Inst{Op: OpSt, T: F32, Space: "global", Dst: []Operand{Addr(Reg{T: B64, ID: 2}, 0)}, Src: []Operand{r(F32, 0)}}, "st.global.f32 [%rd2], %f0;"},
		{Inst{Op: OpBitcast, Dst: []Operand{r(B32, 0)}, Src: []Operand{r(F32, 0)}}, "mov.b32 %r0, %f0;"},
	}
	for _, c := range cases {
		f := NewFunc("k")
		f.Emit(c.in)
		if err := Legalize(f); err != nil {
			t.Errorf("%s: %v", c.want, err)
			continue
		}
		var b strings.Builder
		if err := render(&b, &c.in); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(b.String()); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

var ptxDir = flag.String("ptxdir", "", "write the forward kernels of the example specs (bf16 and f16, sm_80 and sm_90a) into this folder, for GPU checks")

// TestWritePTX writes the example kernels when -ptxdir is given.
func TestWritePTX(t *testing.T) {
	if *ptxDir == "" {
		t.Skip("no -ptxdir")
	}
	for _, name := range exampleNames(t) {
		for _, tg := range DefaultTargets {
			k, err := GenerateForward(examplePlan(t, name), Config{Target: tg})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(*ptxDir, k.Name+"_"+tg.Elem+".ptx")
			if err := os.WriteFile(path, []byte(k.PTX), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// the sm_90a kernels (their runner must make the tensor maps of
		// Forward.TensorMaps)
		for _, tg := range []Target{SM90a, f16SM90a} {
			_, p := hopperPlan(t, filepath.Join("../../spec/examples", name+".yaml"), tg)
			k, err := GenerateForward(p, Config{Target: tg})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(*ptxDir, k.Name+"_"+tg.Elem+"_sm90a.ptx")
			if err := os.WriteFile(path, []byte(k.PTX), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
