package avo

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
)

// Names of the 16-bit widening loops, by ISA: widenBF16AVX512,
// widenF16AVX2 and so on.
func WidenBF16Name(isa ISA) string { return "widenBF16" + isa.String() }
func WidenF16Name(isa ISA) string  { return "widenF16" + isa.String() }

// EmitWiden adds the loops of an ISA that widen 16-bit elements to float32
// for the runtime's 16-bit inputs, func(dst *float32, src *uint16, n int)
// for n a multiple of the ISA's lanes (16, 8): bfloat16 by zero-extending
// each element to 32 bits and shifting it into the high half (VPMOVZXWD,
// VPSLLD), IEEE half precision by VCVTPH2PS (F16C on AVX2). Both
// conversions are exact.
func EmitWiden(ctx *build.Context, isa ISA) {
	w := isa.lanes()
	for _, f16 := range []bool{false, true} {
		name := WidenBF16Name(isa)
		if f16 {
			name = WidenF16Name(isa)
		}
		ctx.Function(name)
		ctx.Attributes(attr.NOSPLIT)
		ctx.Pragma("noescape")
		ctx.SignatureExpr("func(dst *float32, src *uint16, n int)")
		what := "bfloat16"
		if f16 {
			what = "half-precision"
		}
		switch {
		case isa == AVX512:
			ctx.Doc(
				name+" writes the float32 values of the n "+what+" elements at src to dst",
				"(n a multiple of 16). It needs AVX-512 Foundation.",
			)
		case f16:
			ctx.Doc(
				name+" writes the float32 values of the n "+what+" elements at src to dst",
				"(n a multiple of 8). It needs AVX and F16C.",
			)
		default:
			ctx.Doc(
				name+" writes the float32 values of the n "+what+" elements at src to dst",
				"(n a multiple of 8). It needs AVX2.",
			)
		}
		dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
		src := ctx.Load(ctx.Param("src"), ctx.GP64())
		n := ctx.Load(ctx.Param("n"), ctx.GP64())
		ctx.SHRQ(op.U8(log2(w)), n)
		ctx.TESTQ(n, n)
		ctx.JZ(op.LabelRef("done"))
		ctx.Label("loop")
		x := isa.vec(ctx)
		if f16 {
			ctx.VCVTPH2PS(op.Mem{Base: src}, x)
		} else {
			ctx.VPMOVZXWD(op.Mem{Base: src}, x)
			ctx.VPSLLD(op.U8(16), x, x)
		}
		ctx.VMOVUPS(x, op.Mem{Base: dst})
		ctx.ADDQ(op.U8(uint8(2*w)), src)
		ctx.ADDQ(op.U8(uint8(4*w)), dst)
		ctx.DECQ(n)
		ctx.JNZ(op.LabelRef("loop"))
		ctx.Label("done")
		ctx.VZEROUPPER()
		ctx.RET()
	}
}
