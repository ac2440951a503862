package avo

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
)

// Names of the 16-bit widening loops.
const (
	WidenBF16Name = "widenBF16AVX512"
	WidenF16Name  = "widenF16AVX512"
)

// EmitWiden adds the loops that widen 16-bit elements to float32 for the
// runtime's 16-bit inputs, func(dst *float32, src *uint16, n int) for n a
// multiple of 16: bfloat16 by zero-extending each element to 32 bits and
// shifting it into the high half (VPMOVZXWD, VPSLLD), IEEE half precision
// by VCVTPH2PS. Both conversions are exact.
func EmitWiden(ctx *build.Context) {
	for _, f16 := range []bool{false, true} {
		name := WidenBF16Name
		if f16 {
			name = WidenF16Name
		}
		ctx.Function(name)
		ctx.Attributes(attr.NOSPLIT)
		ctx.Pragma("noescape")
		ctx.SignatureExpr("func(dst *float32, src *uint16, n int)")
		what := "bfloat16"
		if f16 {
			what = "half-precision"
		}
		ctx.Doc(
			name+" writes the float32 values of the n "+what+" elements at src to dst",
			"(n a multiple of 16). It needs AVX-512 Foundation.",
		)
		dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
		src := ctx.Load(ctx.Param("src"), ctx.GP64())
		n := ctx.Load(ctx.Param("n"), ctx.GP64())
		ctx.SHRQ(op.U8(4), n)
		ctx.TESTQ(n, n)
		ctx.JZ(op.LabelRef("done"))
		ctx.Label("loop")
		x := ctx.ZMM()
		if f16 {
			ctx.VCVTPH2PS(op.Mem{Base: src}, x)
		} else {
			ctx.VPMOVZXWD(op.Mem{Base: src}, x)
			ctx.VPSLLD(op.U8(16), x, x)
		}
		ctx.VMOVUPS(x, op.Mem{Base: dst})
		ctx.ADDQ(op.U8(32), src)
		ctx.ADDQ(op.U8(64), dst)
		ctx.DECQ(n)
		ctx.JNZ(op.LabelRef("loop"))
		ctx.Label("done")
		ctx.VZEROUPPER()
		ctx.RET()
	}
}
