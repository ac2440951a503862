package avo

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// TransposeName is the packing routine of an ISA's kernels:
// transposeTileAVX512, transposeTileAVX2.
func TransposeName(isa ISA) string { return "transposeTile" + isa.String() }

// EmitTranspose adds func(dst, src *float32, pitch, d int, scale float32)
// of an ISA: it writes the d x 64 transpose of 64 key rows, scaled,
// dst[i*64+c] = scale*src[c*pitch+i] for dimensions i < d (a multiple of
// the ISA's lanes, 16 or 8) and keys c < 64, the kt layout of the tile
// ABI. It works on w x w blocks: each of w key rows is one register, and
// three rounds of shuffles (floats, then pairs of floats within 128-bit
// lanes, then 128-bit lanes across the register) turn them into w
// registers of one dimension each. AVX-512 takes 16 x 16 blocks (VUNPCK,
// VUNPCK*PD, VSHUFF32X4), AVX2 8 x 8 blocks (transposeAVX2).
func EmitTranspose(ctx *build.Context, isa ISA) {
	name := TransposeName(isa)
	ctx.Function(name)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(dst, src *float32, pitch, d int, scale float32)")
	if isa == AVX2 {
		ctx.Doc(
			name+" writes dst[i*64+c] = scale*src[c*pitch+i] for i < d (a",
			"multiple of 8) and c < 64: the transposed, scaled key tile of the tile",
			"kernels. It needs AVX2.",
		)
		transposeAVX2(ctx)
		return
	}
	ctx.Doc(
		name+" writes dst[i*64+c] = scale*src[c*pitch+i] for i < d (a",
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

// transposeAVX2 is the body of transposeTileAVX2: per block of 8
// dimensions (the loop) and 8 keys (unrolled), 8 key rows loaded times
// scale, then VUNPCKLPS/VUNPCKHPS (pairs of rows: [a0 b0 a1 b1] and [a2 b2
// a3 b3] in each 128-bit lane), VSHUFPS (quads of rows: one dimension of
// rows 0-3 or 4-7 in each lane) and VPERM2F128 (the lanes of rows 0-3 and
// 4-7 joined): 8 registers of one dimension each, 8 keys apiece.
func transposeAVX2(ctx *build.Context) {
	dst := ctx.Load(ctx.Param("dst"), ctx.GP64())
	src := ctx.Load(ctx.Param("src"), ctx.GP64())
	pitch := ctx.Load(ctx.Param("pitch"), ctx.GP64())
	n := ctx.Load(ctx.Param("d"), ctx.GP64())
	sx := ctx.Load(ctx.Param("scale"), ctx.XMM())
	sc := ctx.YMM()
	ctx.VBROADCASTSS(sx, sc)
	ctx.SHLQ(op.U8(2), pitch) // bytes between key rows
	ctx.SHRQ(op.U8(3), n)     // dimension blocks
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("block")
	rp := ctx.GP64()
	ctx.MOVQ(src, rp)
	for kb := 0; kb < TK/8; kb++ {
		r := make([]reg.VecVirtual, 8)
		for i := range r {
			r[i] = ctx.YMM()
			ctx.VMULPS(op.Mem{Base: rp}, sc, r[i])
			ctx.ADDQ(pitch, rp) // ends at the next block's first row
		}
		// a[2k], a[2k+1]: rows 2k, 2k+1 interleaved, dimensions 0,1 | 4,5 and 2,3 | 6,7
		a := make([]reg.VecVirtual, 8)
		for k := 0; k < 4; k++ {
			a[2*k], a[2*k+1] = ctx.YMM(), ctx.YMM()
			ctx.VUNPCKLPS(r[2*k+1], r[2*k], a[2*k])
			ctx.VUNPCKHPS(r[2*k+1], r[2*k], a[2*k+1])
		}
		// b[4h+e]: rows 4h..4h+3 of dimension e (low lane) and e+4 (high lane)
		b := make([]reg.VecVirtual, 8)
		for h := 0; h < 2; h++ {
			for e := range 4 {
				b[4*h+e] = ctx.YMM()
			}
			lo, hi := a[4*h], a[4*h+1]     // rows 4h, 4h+1
			lo2, hi2 := a[4*h+2], a[4*h+3] // rows 4h+2, 4h+3
			ctx.VSHUFPS(op.U8(0x44), lo2, lo, b[4*h])
			ctx.VSHUFPS(op.U8(0xee), lo2, lo, b[4*h+1])
			ctx.VSHUFPS(op.U8(0x44), hi2, hi, b[4*h+2])
			ctx.VSHUFPS(op.U8(0xee), hi2, hi, b[4*h+3])
		}
		for e := 0; e < 4; e++ {
			x, y := ctx.YMM(), ctx.YMM()
			ctx.VPERM2F128(op.U8(0x20), b[4+e], b[e], x) // dimension e, keys 8kb .. 8kb+7
			ctx.VPERM2F128(op.U8(0x31), b[4+e], b[e], y) // dimension e+4
			ctx.VMOVUPS(x, op.Mem{Base: dst, Disp: 4 * (e*TK + 8*kb)})
			ctx.VMOVUPS(y, op.Mem{Base: dst, Disp: 4 * ((e+4)*TK + 8*kb)})
		}
	}
	ctx.ADDQ(op.U32(32), src)     // next 8 dimensions of every key row
	ctx.ADDQ(op.U32(4*8*TK), dst) // next 8 rows of the tile
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("block"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()
}
