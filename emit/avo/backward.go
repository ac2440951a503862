package avo

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Names of the AVX-512 backward kernels.
const (
	GemmName     = "gemmAVX512"
	BwdProbName  = "bwdProbAVX512"
	GemmSig      = "func(c, a, b *float32, m, n, k, sam, sak, ldb, ldc, acc int)"
	BwdProbSig   = "func(s, dp, lb, dl *float32, mask *uint64, rows int, c, scale float32)"
	gemmColBytes = 4 * 64 // one column chunk: 4 zmm
)

// gemmRowBlocks are the row blocks of gemmAVX512, largest first: a block of
// 6 rows x 4 zmm is 24 accumulators, 4 streamed vectors and one broadcast
// register; the smaller ones take the rows a multiple of 6 leaves.
var gemmRowBlocks = []int{6, 4, 2, 1}

// EmitBackward adds the two kernels of the AVX-512 backward (see
// runtime/cpu/backward_amd64.go): the strided matrix product EmitGemm and
// the elementwise probability and dS kernel EmitBwdProb.
func EmitBackward(ctx *build.Context, c ConstTable) {
	EmitGemm(ctx, c)
	EmitBwdProb(ctx, c)
}

// EmitGemm adds gemmAVX512 (signature GemmSig): for i < m, j < n (a
// multiple of 64):
//
//	C[i][j] (+)= sum_{l<k} A(i, l) * B[l][j]
//
// with A(i, l) the float32 at a + i*sam + l*sak (strides in floats, so A
// may be row-major, sak = 1, or transposed, sam = 1), B rows ldb floats
// apart and C rows ldc apart; acc != 0 adds to C, acc = 0 overwrites it.
// The loops: column chunks of 64 (outer, so the chunk of B stays in L1),
// then row blocks of 6, 4, 2 or 1 rows, then the reduction, one step at a
// time: 4 vectors of B loaded, then per row one broadcast of A and 4 FMAs.
// Each C element is the sum in order of l, one FMA a step, so the result
// does not depend on m, n or the blocking.
func EmitGemm(ctx *build.Context, c ConstTable) {
	ctx.Function(GemmName)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr(GemmSig)
	ctx.Doc(
		GemmName+" computes C (+)= A B: c[i*ldc+j] (+)= sum over l < k of",
		"a[i*sam+l*sak] * b[l*ldb+j], for i < m and j < n (a multiple of 64),",
		"adding to c when acc != 0. It needs AVX-512 Foundation.",
	)
	ccol, chunks := ctx.AllocLocal(8), ctx.AllocLocal(8)
	param := func(name string) op.Mem {
		b, err := ctx.Param(name).Resolve()
		if err != nil {
			panic(err)
		}
		return b.Addr
	}
	bytesOf := func(name string) reg.GPVirtual {
		r := ctx.GP64()
		ctx.MOVQ(param(name), r)
		ctx.SHLQ(op.U8(2), r)
		return r
	}
	sam, sak, ldb := bytesOf("sam"), bytesOf("sak"), bytesOf("ldb")
	s3, s5 := ctx.GP64(), ctx.GP64()
	ctx.LEAQ(op.Mem{Base: sam, Index: sam, Scale: 2}, s3)
	ctx.LEAQ(op.Mem{Base: sam, Index: sam, Scale: 4}, s5)
	bcol := ctx.GP64()
	ctx.MOVQ(param("b"), bcol)
	{
		x := ctx.GP64()
		ctx.MOVQ(param("c"), x)
		ctx.MOVQ(x, ccol)
		n := ctx.GP64()
		ctx.MOVQ(param("n"), n)
		ctx.SHRQ(op.U8(6), n)
		ctx.MOVQ(n, chunks)
		ctx.TESTQ(n, n)
		ctx.JZ(op.LabelRef("done"))
	}
	ctx.Label("chunk")
	arow, crow, mrem := ctx.GP64(), ctx.GP64(), ctx.GP64()
	ctx.MOVQ(param("a"), arow)
	ctx.MOVQ(ccol, crow)
	ctx.MOVQ(param("m"), mrem)
	ctx.Label("rows")
	for _, r := range gemmRowBlocks[:len(gemmRowBlocks)-1] {
		ctx.CMPQ(mrem, op.U8(uint8(r)))
		ctx.JAE(op.LabelRef(fmt.Sprintf("blk%d", r)))
	}
	ctx.TESTQ(mrem, mrem)
	ctx.JZ(op.LabelRef("chunk_next"))
	// The blocks in increasing size, 1 first: the fall-through above.
	for i := len(gemmRowBlocks) - 1; i >= 0; i-- {
		rows := gemmRowBlocks[i]
		pfx := fmt.Sprintf("blk%d", rows)
		ctx.Label(pfx)
		acc := make([][4]reg.VecVirtual, rows)
		z := ctx.ZMM()
		zero(ctx, c, AVX512, z)
		for r := range acc {
			for j := range acc[r] {
				acc[r][j] = ctx.ZMM()
				ctx.VMOVAPS(z, acc[r][j])
			}
		}
		ap, bp, kk := ctx.GP64(), ctx.GP64(), ctx.GP64()
		ctx.MOVQ(arow, ap)
		ctx.MOVQ(bcol, bp)
		ctx.MOVQ(param("k"), kk)
		ctx.TESTQ(kk, kk)
		ctx.JZ(op.LabelRef(pfx + "_store"))
		ctx.Label(pfx + "_k")
		var bv [4]reg.VecVirtual
		for j := range bv {
			bv[j] = ctx.ZMM()
			ctx.VMOVUPS(op.Mem{Base: bp, Disp: 64 * j}, bv[j])
		}
		for r := range acc {
			x := ctx.ZMM()
			ctx.VBROADCASTSS(rowAddr(ap, sam, s3, s5, r), x)
			for j := range bv {
				ctx.VFMADD231PS(bv[j], x, acc[r][j])
			}
		}
		ctx.ADDQ(sak, ap)
		ctx.ADDQ(ldb, bp)
		ctx.DECQ(kk)
		ctx.JNZ(op.LabelRef(pfx + "_k"))
		ctx.Label(pfx + "_store")
		ldc := ctx.GP64()
		ctx.MOVQ(param("ldc"), ldc)
		ctx.SHLQ(op.U8(2), ldc)
		cp := ctx.GP64()
		ctx.MOVQ(crow, cp)
		ctx.CMPQ(param("acc"), op.U8(0))
		ctx.JE(op.LabelRef(pfx + "_put"))
		for r := range acc {
			for j := range acc[r] {
				ctx.VADDPS(op.Mem{Base: cp, Disp: 64 * j}, acc[r][j], acc[r][j])
			}
			if r < rows-1 {
				ctx.ADDQ(ldc, cp)
			}
		}
		ctx.MOVQ(crow, cp)
		ctx.Label(pfx + "_put")
		for r := range acc {
			for j := range acc[r] {
				ctx.VMOVUPS(acc[r][j], op.Mem{Base: cp, Disp: 64 * j})
			}
			ctx.ADDQ(ldc, cp)
		}
		ctx.MOVQ(cp, crow)
		switch rows {
		case 6:
			ctx.ADDQ(s5, arow)
			ctx.ADDQ(sam, arow)
		case 4, 2, 1:
			ctx.LEAQ(op.Mem{Base: arow, Index: sam, Scale: uint8(rows)}, arow)
		default:
			panic("BUG: row block")
		}
		ctx.SUBQ(op.U8(uint8(rows)), mrem)
		ctx.JMP(op.LabelRef("rows"))
	}
	ctx.Label("chunk_next")
	ctx.ADDQ(op.U32(gemmColBytes), bcol)
	{
		x := ctx.GP64()
		ctx.MOVQ(ccol, x)
		ctx.ADDQ(op.U32(gemmColBytes), x)
		ctx.MOVQ(x, ccol)
	}
	ctx.DECQ(chunks)
	ctx.JNZ(op.LabelRef("chunk"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()
}

// rowAddr is the address of row r of a block whose row 0 is at ap, rows
// sam bytes apart (s3 = 3 sam, s5 = 5 sam).
func rowAddr(ap, sam, s3, s5 reg.Register, r int) op.Mem {
	switch r {
	case 0:
		return op.Mem{Base: ap}
	case 1, 2, 4:
		return op.Mem{Base: ap, Index: sam, Scale: uint8(r)}
	case 3:
		return op.Mem{Base: ap, Index: s3, Scale: 1}
	case 5:
		return op.Mem{Base: ap, Index: s5, Scale: 1}
	}
	panic("BUG: row address")
}

// EmitBwdProb adds bwdProbAVX512 (signature BwdProbSig): for each row r <
// rows of the TK-wide tiles s (scores S = Q K^T) and dp (dP = dO V^T), with
// keep word mask[r]:
//
//	p  = exp2(c*s - lb[r])            (0 where the word's bit is clear)
//	ds = p*scale * (dp - dl[r])       (0 where the bit is clear)
//
// written over s and dp. c is scale*log2(e) and lb[r] = lse[r]*log2(e), so
// p = exp(scale*S - lse); dl[r] is delta of the row. Masked lanes are
// exactly +0 whatever s and dp hold there (NaN included): exp2 takes the
// word as its opmask and the product is zero-masked. exp2 is the tile
// kernels' (NaN propagating, below 2^-125 flushed to +0).
func EmitBwdProb(ctx *build.Context, c ConstTable) {
	ctx.Function(BwdProbName)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr(BwdProbSig)
	ctx.Doc(
		BwdProbName+" replaces, for each row r < rows of the TK-wide tiles s and",
		"dp, s by p = exp2(c*s - lb[r]) and dp by p*scale*(dp - dl[r]), both +0",
		"where bit c of mask[r] is clear. It needs AVX-512 Foundation.",
	)
	g := &tileGen{ctx: ctx, isa: AVX512, w: 16, c: c}
	s := ctx.Load(ctx.Param("s"), ctx.GP64())
	dp := ctx.Load(ctx.Param("dp"), ctx.GP64())
	lb := ctx.Load(ctx.Param("lb"), ctx.GP64())
	dl := ctx.Load(ctx.Param("dl"), ctx.GP64())
	mk := ctx.Load(ctx.Param("mask"), ctx.GP64())
	n := ctx.Load(ctx.Param("rows"), ctx.GP64())
	cx := ctx.Load(ctx.Param("c"), ctx.XMM())
	sx := ctx.Load(ctx.Param("scale"), ctx.XMM())
	cv, sv := ctx.ZMM(), ctx.ZMM()
	ctx.VBROADCASTSS(cx, cv)
	ctx.VBROADCASTSS(sx, sv)
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("row")
	lv, dv := ctx.ZMM(), ctx.ZMM()
	ctx.VBROADCASTSS(op.Mem{Base: lb}, lv)
	ctx.VBROADCASTSS(op.Mem{Base: dl}, dv)
	for j := 0; j < TK/16; j++ {
		k := ctx.K()
		ctx.KMOVW(op.Mem{Base: mk, Disp: 2 * j}, k)
		x := ctx.ZMM()
		ctx.VMOVUPS(op.Mem{Base: s, Disp: 64 * j}, x)
		ctx.VFMSUB213PS(lv, cv, x) // x = c*s - lb
		g.exp2(x, k)
		ctx.VMOVUPS(x, op.Mem{Base: s, Disp: 64 * j})
		t := ctx.ZMM()
		ctx.VMOVUPS(op.Mem{Base: dp, Disp: 64 * j}, t)
		ctx.VSUBPS(dv, t, t)
		ctx.VMULPS(sv, x, x)
		ctx.VMULPS_Z(t, x, k, t)
		ctx.VMOVUPS(t, op.Mem{Base: dp, Disp: 64 * j})
	}
	ctx.ADDQ(op.U32(4*TK), s)
	ctx.ADDQ(op.U32(4*TK), dp)
	ctx.ADDQ(op.U8(4), lb)
	ctx.ADDQ(op.U8(4), dl)
	ctx.ADDQ(op.U8(8), mk)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("row"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()
}
