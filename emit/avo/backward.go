package avo

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Signatures of the backward kernels (the same for both ISAs).
const (
	GemmSig    = "func(c, a, b *float32, m, n, k, sam, sak, ldb, ldc, acc int)"
	BwdProbSig = "func(s, dp, lb, dl *float32, mask *uint64, rows int, c, scale float32)"
)

// GemmName is the Go name of the backward's matrix kernel for an ISA:
// gemmAVX512 or gemmAVX2.
func GemmName(isa ISA) string { return "gemm" + isa.String() }

// BwdProbName is the Go name of the backward's elementwise kernel for an
// ISA: bwdProbAVX512 or bwdProbAVX2.
func BwdProbName(isa ISA) string { return "bwdProb" + isa.String() }

// gemmBlocking is the register blocking of gemm for an ISA: the row blocks,
// largest first, and the column chunk (vecs vectors of the ISA).
//
// AVX-512: a block of 6 rows x 4 zmm (64 columns) is 24 accumulators, 4
// streamed vectors loaded first and one broadcast register (29 live); the
// smaller blocks take the rows a multiple of 6 leaves.
//
// AVX2: 3 rows x 4 ymm (32 columns) is 12 accumulators; per step the 3
// rows are broadcast into 3 registers, then each streamed vector is loaded
// into the 16th register and used by 3 FMAs (the tile kernel's AVX2
// blocking): 7 loads per 12 FMAs and exactly 16 live registers. 4 rows x
// 3 ymm would need a column chunk of 24, which 64 is not a multiple of.
func gemmBlocking(isa ISA) (rows []int, vecs int, bFirst bool) {
	if isa == AVX512 {
		return []int{6, 4, 2, 1}, 4, true
	}
	return []int{3, 2, 1}, 4, false
}

// EmitBackward adds the kernels of the tiled backward for both ISAs (see
// runtime/cpu/backward_tiled.go): the strided matrix product EmitGemm and
// the elementwise probability and dS kernel EmitBwdProb.
func EmitBackward(ctx *build.Context, c ConstTable) {
	for _, isa := range ISAs {
		EmitGemm(ctx, c, isa)
		EmitBwdProb(ctx, c, isa)
	}
}

// EmitGemm adds the gemm kernel of isa (GemmName, signature GemmSig): for
// i < m, j < n (a multiple of 64):
//
//	C[i][j] (+)= sum_{l<k} A(i, l) * B[l][j]
//
// with A(i, l) the float32 at a + i*sam + l*sak (strides in floats, so A
// may be row-major, sak = 1, or transposed, sam = 1), B rows ldb floats
// apart and C rows ldc apart; acc != 0 adds to C, acc = 0 overwrites it.
// The loops: column chunks of 4 vectors (64 columns on AVX-512, 32 on
// AVX2; outer, so the chunk of B stays in L1), then row blocks
// (gemmBlocking), then the reduction, one step at a time: per step each
// row's value of A broadcast and one FMA per accumulator. Each C element
// is the sum in order of l, one FMA a step, so the result does not depend
// on m, n or the blocking.
func EmitGemm(ctx *build.Context, c ConstTable, isa ISA) {
	blocks, vecs, bFirst := gemmBlocking(isa)
	w := isa.lanes()
	colBytes := 4 * w * vecs
	name := GemmName(isa)
	ctx.Function(name)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr(GemmSig)
	ctx.Doc(
		name+" computes C (+)= A B: c[i*ldc+j] (+)= sum over l < k of",
		"a[i*sam+l*sak] * b[l*ldb+j], for i < m and j < n (a multiple of 64),",
		"adding to c when acc != 0. It needs "+isa.requires()+".",
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
	var s3, s5 reg.GPVirtual
	if blocks[0] > 4 {
		s3, s5 = ctx.GP64(), ctx.GP64()
		ctx.LEAQ(op.Mem{Base: sam, Index: sam, Scale: 2}, s3)
		ctx.LEAQ(op.Mem{Base: sam, Index: sam, Scale: 4}, s5)
	}
	bcol := ctx.GP64()
	ctx.MOVQ(param("b"), bcol)
	{
		x := ctx.GP64()
		ctx.MOVQ(param("c"), x)
		ctx.MOVQ(x, ccol)
		n := ctx.GP64()
		ctx.MOVQ(param("n"), n)
		ctx.SHRQ(op.U8(log2(w*vecs)), n)
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
	for _, r := range blocks[:len(blocks)-1] {
		ctx.CMPQ(mrem, op.U8(uint8(r)))
		ctx.JAE(op.LabelRef(fmt.Sprintf("blk%d", r)))
	}
	ctx.TESTQ(mrem, mrem)
	ctx.JZ(op.LabelRef("chunk_next"))
	// The blocks in increasing size, 1 first: the fall-through above.
	for i := len(blocks) - 1; i >= 0; i-- {
		rows := blocks[i]
		pfx := fmt.Sprintf("blk%d", rows)
		ctx.Label(pfx)
		acc := make([][]reg.VecVirtual, rows)
		z := isa.vec(ctx)
		zero(ctx, c, isa, z)
		for r := range acc {
			acc[r] = make([]reg.VecVirtual, vecs)
			for j := range acc[r] {
				acc[r][j] = isa.vec(ctx)
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
		if bFirst {
			bv := make([]reg.VecVirtual, vecs)
			for j := range bv {
				bv[j] = isa.vec(ctx)
				ctx.VMOVUPS(op.Mem{Base: bp, Disp: 4 * w * j}, bv[j])
			}
			for r := range acc {
				x := isa.vec(ctx)
				ctx.VBROADCASTSS(rowAddr(ap, sam, s3, s5, r), x)
				for j := range bv {
					ctx.VFMADD231PS(bv[j], x, acc[r][j])
				}
			}
		} else {
			xs := make([]reg.VecVirtual, rows)
			for r := range xs {
				xs[r] = isa.vec(ctx)
				ctx.VBROADCASTSS(rowAddr(ap, sam, s3, s5, r), xs[r])
			}
			for j := 0; j < vecs; j++ {
				y := isa.vec(ctx)
				ctx.VMOVUPS(op.Mem{Base: bp, Disp: 4 * w * j}, y)
				for r := range xs {
					ctx.VFMADD231PS(y, xs[r], acc[r][j])
				}
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
				ctx.VADDPS(op.Mem{Base: cp, Disp: 4 * w * j}, acc[r][j], acc[r][j])
			}
			if r < rows-1 {
				ctx.ADDQ(ldc, cp)
			}
		}
		ctx.MOVQ(crow, cp)
		ctx.Label(pfx + "_put")
		for r := range acc {
			for j := range acc[r] {
				ctx.VMOVUPS(acc[r][j], op.Mem{Base: cp, Disp: 4 * w * j})
			}
			ctx.ADDQ(ldc, cp)
		}
		ctx.MOVQ(cp, crow)
		switch rows {
		case 6:
			ctx.ADDQ(s5, arow)
			ctx.ADDQ(sam, arow)
		case 3:
			ctx.LEAQ(op.Mem{Base: arow, Index: sam, Scale: 2}, arow)
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
	ctx.ADDQ(op.U32(uint32(colBytes)), bcol)
	{
		x := ctx.GP64()
		ctx.MOVQ(ccol, x)
		ctx.ADDQ(op.U32(uint32(colBytes)), x)
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

// EmitBwdProb adds the probability kernel of isa (BwdProbName, signature
// BwdProbSig): for each row r < rows of the TK-wide tiles s (scores S = Q
// K^T) and dp (dP = dO V^T), with keep word mask[r]:
//
//	p  = exp2(c*s - lb[r])            (0 where the word's bit is clear)
//	ds = p*scale * (dp - dl[r])       (0 where the bit is clear)
//
// written over s and dp. c is scale*log2(e) and lb[r] = lse[r]*log2(e), so
// p = exp(scale*S - lse); dl[r] is delta of the row. Masked lanes are
// exactly +0 whatever s and dp hold there (NaN included): on AVX-512 exp2
// takes the word as its opmask and the product is zero-masked; on AVX2 the
// word's bits are tested against the constant bit patterns (as the AVX2
// tile kernel does) and both results are ANDed with the lane mask. exp2 is
// the tile kernels' (NaN propagating, below 2^-125 flushed to +0); AVX2
// first clamps its argument to at most 128 (the exponent-field add would
// wrap above), so that any argument from 128 up, +Inf included, gives +Inf
// (AVX-512's VSCALEFPS gives +Inf above 128 and NaN for +Inf itself; kept
// arguments are at most about 0 when lse is the forward's).
func EmitBwdProb(ctx *build.Context, c ConstTable, isa ISA) {
	name := BwdProbName(isa)
	ctx.Function(name)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr(BwdProbSig)
	ctx.Doc(
		name+" replaces, for each row r < rows of the TK-wide tiles s and",
		"dp, s by p = exp2(c*s - lb[r]) and dp by p*scale*(dp - dl[r]), both +0",
		"where bit c of mask[r] is clear. It needs "+isa.requires()+".",
	)
	w := isa.lanes()
	g := &tileGen{ctx: ctx, isa: isa, w: w, c: c}
	s := ctx.Load(ctx.Param("s"), ctx.GP64())
	dp := ctx.Load(ctx.Param("dp"), ctx.GP64())
	lb := ctx.Load(ctx.Param("lb"), ctx.GP64())
	dl := ctx.Load(ctx.Param("dl"), ctx.GP64())
	mk := ctx.Load(ctx.Param("mask"), ctx.GP64())
	n := ctx.Load(ctx.Param("rows"), ctx.GP64())
	cx := ctx.Load(ctx.Param("c"), ctx.XMM())
	sx := ctx.Load(ctx.Param("scale"), ctx.XMM())
	cv, sv := g.vec(), g.vec()
	ctx.VBROADCASTSS(cx, cv)
	ctx.VBROADCASTSS(sx, sv)
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("row")
	lv, dv := g.vec(), g.vec()
	ctx.VBROADCASTSS(op.Mem{Base: lb}, lv)
	ctx.VBROADCASTSS(op.Mem{Base: dl}, dv)
	if isa == AVX512 {
		for j := 0; j < TK/w; j++ {
			k := ctx.K()
			ctx.KMOVW(op.Mem{Base: mk, Disp: 2 * j}, k)
			x := ctx.ZMM()
			ctx.VMOVUPS(op.Mem{Base: s, Disp: 4 * w * j}, x)
			ctx.VFMSUB213PS(lv, cv, x) // x = c*s - lb
			g.exp2(x, k)
			ctx.VMOVUPS(x, op.Mem{Base: s, Disp: 4 * w * j})
			t := ctx.ZMM()
			ctx.VMOVUPS(op.Mem{Base: dp, Disp: 4 * w * j}, t)
			ctx.VSUBPS(dv, t, t)
			ctx.VMULPS(sv, x, x)
			ctx.VMULPS_Z(t, x, k, t)
			ctx.VMOVUPS(t, op.Mem{Base: dp, Disp: 4 * w * j})
		}
	} else {
		// The two dwords of the keep word, each in every lane; lane i of
		// vector j keeps its key when bit 8(j%4)+i of dword j/4 is set.
		lo, hi := g.vec(), g.vec()
		ctx.VPBROADCASTD(op.Mem{Base: mk}, lo)
		ctx.VPBROADCASTD(op.Mem{Base: mk, Disp: 4}, hi)
		for j := 0; j < TK/w; j++ {
			word := lo
			if j >= 4 {
				word = hi
			}
			pat := c.slot(kPat0 + j%4)
			keep := g.vec()
			ctx.VPAND(pat, word, keep)
			ctx.VPCMPEQD(pat, keep, keep) // all ones where kept
			x, top := g.vec(), g.vec()
			ctx.VMOVUPS(op.Mem{Base: s, Disp: 4 * w * j}, x)
			ctx.VFMSUB213PS(lv, cv, x) // x = c*s - lb
			ctx.VMOVUPS(c.slot(kExpMax), top)
			ctx.VMINPS(x, top, x) // min(x, 128), NaN stays NaN
			g.exp2(x, nil)
			ctx.VANDPS(keep, x, x) // +0 where masked
			ctx.VMOVUPS(x, op.Mem{Base: s, Disp: 4 * w * j})
			t := g.vec()
			ctx.VMOVUPS(op.Mem{Base: dp, Disp: 4 * w * j}, t)
			ctx.VSUBPS(dv, t, t)
			ctx.VMULPS(sv, x, x)
			ctx.VMULPS(t, x, t)
			ctx.VANDPS(keep, t, t) // +0 where masked, whatever dp held
			ctx.VMOVUPS(t, op.Mem{Base: dp, Disp: 4 * w * j})
		}
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
