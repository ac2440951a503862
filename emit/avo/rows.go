package avo

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
)

// Names of the AVX-512 row helpers of the driver.
const (
	ScaleRowName    = "scaleRowAVX512"
	NonFiniteName   = "nonFiniteRowsAVX512"
	nonFiniteExpBit = 0x7f800000
)

// EmitRowHelpers adds two loops the driver runs on whole rows, which Go
// would run one element at a time:
//
//   - scaleRowAVX512(dst, src *float32, n int, s float32): dst[i] =
//     src[i]*s for n a multiple of 16 (the output rows, o/l);
//   - nonFiniteRowsAVX512(v *float32, d int) uint64: bit r set when row r of
//     the TK rows of d floats at v (d a multiple of 16) holds a NaN or an
//     infinity, that is an element whose exponent bits are all ones (the
//     value rows of a partial tile, see the masked non-finite rule).
func EmitRowHelpers(ctx *build.Context) {
	ctx.Function(ScaleRowName)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(dst, src *float32, n int, s float32)")
	ctx.Doc(
		ScaleRowName+" writes dst[i] = src[i]*s for i < n (a multiple of 16). It",
		"needs AVX-512 Foundation.",
	)
	dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
	src := ctx.Load(ctx.Param("src"), ctx.GP64())
	n := ctx.Load(ctx.Param("n"), ctx.GP64())
	sx := ctx.Load(ctx.Param("s"), ctx.XMM())
	sc := ctx.ZMM()
	ctx.VBROADCASTSS(sx, sc)
	ctx.SHRQ(op.U8(4), n)
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("loop")
	x := ctx.ZMM()
	ctx.VMULPS(op.Mem{Base: src}, sc, x)
	ctx.VMOVUPS(x, op.Mem{Base: dst})
	ctx.ADDQ(op.U8(64), src)
	ctx.ADDQ(op.U8(64), dst)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("loop"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()

	ctx.Function(NonFiniteName)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(v *float32, d int) uint64")
	ctx.Doc(
		NonFiniteName+" returns the rows of the TK rows of d floats at v (d a",
		"multiple of 16) that hold a NaN or an infinity, as bits. It needs AVX-512",
		"Foundation.",
	)
	v := ctx.Load(ctx.Param("v"), ctx.GP64())
	d := ctx.Load(ctx.Param("d"), ctx.GP64())
	ctx.SHRQ(op.U8(4), d) // vectors per row
	e, eg := ctx.ZMM(), ctx.GP32()
	ctx.MOVL(op.U32(nonFiniteExpBit), eg)
	ctx.VPBROADCASTD(eg, e)
	res, r := ctx.GP64(), ctx.GP64()
	ctx.XORQ(res, res)
	ctx.XORQ(r, r)
	ctx.Label("row")
	acc := ctx.K()
	ctx.KXORW(acc, acc, acc)
	c := ctx.GP64()
	ctx.MOVQ(d, c)
	ctx.Label("vec")
	t, k := ctx.ZMM(), ctx.K()
	ctx.VPANDD(op.Mem{Base: v}, e, t)
	ctx.VPCMPEQD(e, t, k) // exponent all ones: NaN or infinity
	ctx.KORW(k, acc, acc)
	ctx.ADDQ(op.U8(64), v)
	ctx.DECQ(c)
	ctx.JNZ(op.LabelRef("vec"))
	bits := ctx.GP32()
	ctx.KMOVW(acc, bits)
	ctx.TESTL(bits, bits)
	ctx.JZ(op.LabelRef("next"))
	ctx.BTSQ(r, res)
	ctx.Label("next")
	ctx.INCQ(r)
	ctx.CMPQ(r, op.U8(TK))
	ctx.JNE(op.LabelRef("row"))
	ctx.Store(res, ctx.ReturnIndex(0))
	ctx.VZEROUPPER()
	ctx.RET()
}
