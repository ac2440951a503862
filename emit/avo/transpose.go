package avo

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// TransposeName is the packing routine of the AVX-512 kernels.
const TransposeName = "transposeTileAVX512"

// EmitTranspose adds func(dst, src *float32, pitch, d int, scale float32):
// it writes the d x 64 transpose of 64 key rows, scaled, dst[i*64+c] =
// scale*src[c*pitch+i] for dimensions i < d (a multiple of 16) and keys c <
// 64, the kt layout of the tile ABI. It works on 16 x 16 blocks: each of 16 key rows is one
// register, and three rounds of shuffles (floats, then pairs of floats
// within 128-bit lanes, then 128-bit lanes across the register) turn them
// into 16 registers of one dimension each.
func EmitTranspose(ctx *build.Context) {
	ctx.Function(TransposeName)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(dst, src *float32, pitch, d int, scale float32)")
	ctx.Doc(
		TransposeName+" writes dst[i*64+c] = scale*src[c*pitch+i] for i < d (a",
		"multiple of 16) and c < 64: the transposed, scaled key tile of the tile",
		"kernels. It needs AVX-512 Foundation.",
	)
	dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
	src := ctx.Load(ctx.Param("src"), ctx.GP64())
	pitch := ctx.Load(ctx.Param("pitch"), ctx.GP64())
	n := ctx.Load(ctx.Param("d"), ctx.GP64())
	sx := ctx.Load(ctx.Param("scale"), ctx.XMM())
	sc := ctx.ZMM()
	ctx.VBROADCASTSS(sx, sc)
	ctx.SHLQ(op.U8(2), pitch) // bytes between key rows
	ctx.SHRQ(op.U8(4), n)     // dimension blocks
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("block")
	for kb := 0; kb < 4; kb++ {
		// row pointer of key kb*16
		rp := ctx.GP64()
		ctx.IMUL3Q(op.U32(uint32(16*kb)), pitch, rp)
		ctx.ADDQ(src, rp)
		r := make([]reg.VecVirtual, 16)
		for i := range r {
			r[i] = ctx.ZMM()
			ctx.VMOVUPS(op.Mem{Base: rp}, r[i])
			if i < 15 {
				ctx.ADDQ(pitch, rp)
			}
		}
		// floats: a[2k] = [r2k.0 r2k+1.0 r2k.1 r2k+1.1] per lane, a[2k+1] the .2/.3
		a := make([]reg.VecVirtual, 16)
		for k := 0; k < 8; k++ {
			a[2*k], a[2*k+1] = ctx.ZMM(), ctx.ZMM()
			ctx.VUNPCKLPS(r[2*k+1], r[2*k], a[2*k])
			ctx.VUNPCKHPS(r[2*k+1], r[2*k], a[2*k+1])
		}
		// pairs: b[4k+e] lane l holds rows 4k..4k+3 of dimension 4l+e
		b := make([]reg.VecVirtual, 16)
		for k := 0; k < 4; k++ {
			for e := range 4 {
				b[4*k+e] = ctx.ZMM()
			}
			ctx.VUNPCKLPD(a[4*k+2], a[4*k], b[4*k])
			ctx.VUNPCKHPD(a[4*k+2], a[4*k], b[4*k+1])
			ctx.VUNPCKLPD(a[4*k+3], a[4*k+1], b[4*k+2])
			ctx.VUNPCKHPD(a[4*k+3], a[4*k+1], b[4*k+3])
		}
		// lanes: dimension 4l+e is lane l of b[e], b[4+e], b[8+e], b[12+e]
		for e := 0; e < 4; e++ {
			c := make([]reg.VecVirtual, 4)
			for i := range c {
				c[i] = ctx.ZMM()
			}
			ctx.VSHUFF32X4(op.U8(0x44), b[4+e], b[e], c[0])
			ctx.VSHUFF32X4(op.U8(0xee), b[4+e], b[e], c[1])
			ctx.VSHUFF32X4(op.U8(0x44), b[12+e], b[8+e], c[2])
			ctx.VSHUFF32X4(op.U8(0xee), b[12+e], b[8+e], c[3])
			for l := 0; l < 4; l++ {
				x := ctx.ZMM()
				imm := uint8(0x88)
				if l%2 == 1 {
					imm = 0xdd
				}
				ctx.VSHUFF32X4(op.U8(imm), c[2+l/2], c[l/2], x)
				ctx.VMULPS(sc, x, x)
				// dimension 4l+e of this block, keys kb*16 .. kb*16+15
				ctx.VMOVUPS(x, op.Mem{Base: dst, Disp: 4 * ((4*l+e)*64 + 16*kb)})
			}
		}
	}
	ctx.ADDQ(op.U32(64), src)      // next 16 dimensions of every key row
	ctx.ADDQ(op.U32(4*16*64), dst) // next 16 rows of the tile
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("block"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()
}
