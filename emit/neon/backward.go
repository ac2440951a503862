package neon

import "fmt"

// The tiled backward's kernels (runtime/cpu/backward_tiled.go; the ABI of
// emit/avo's GemmSig and BwdProbSig).
const (
	GemmName    = "gemmNEON"
	BwdProbName = "bwdProbNEON"
)

var gemmParams = []Param{{"c", "*float32"}, {"a", "*float32"}, {"b", "*float32"}, {"m", "int"},
	{"n", "int"}, {"k", "int"}, {"sam", "int"}, {"sak", "int"}, {"ldb", "int"}, {"ldc", "int"}, {"acc", "int"}}

var bwdProbParams = []Param{{"s", "*float32"}, {"dp", "*float32"}, {"lb", "*float32"}, {"dl", "*float32"},
	{"mask", "*uint64"}, {"rows", "int"}, {"c", "float32"}, {"scale", "float32"}}

// gemmBlocks are the row blocks of gemm, largest first.
var gemmBlocks = []int{6, 4, 2, 1}

// EmitGemm returns the backward's matrix kernel: for i < m, j < n (a
// multiple of 16; the runtime passes multiples of 64)
//
//	C[i][j] (+)= sum_{l<k} A(i, l) * B[l][j]
//
// with A(i, l) at a + i*sam + l*sak, B rows ldb floats apart, C rows ldc
// apart (strides in floats), adding to C when acc != 0. Column chunks of
// 16 (outer), then row blocks of 6, 4, 2, 1 rows, then the reduction one
// step at a time: B's four vectors of the step into V24-V27 (post-indexed
// by ldb), each row's A(i, l) broadcast by LD1R (post-indexed by sak) into
// V28 or V29, four FMLAs into the row's accumulators (V(4r)..V(4r+3)). Each
// C element is one FMLA a step in order of l, so the result does not
// depend on m, n or the blocking, as emit/avo's.
//
// Registers: R0 c, R1 a, R2 b, R3 m, R4 n, R5 k, R6 sam, R7 sak, R8 ldb,
// R9 ldc (the strides in bytes), R10 acc; R11 B and R12 C of the chunk,
// R13 A and R14 C of the row block, R15 rows left, R16 chunks left, R17 the
// step count (and C's row walk), R19-R24 the A rows, R25 B's walk.
func EmitGemm() *Func {
	f := NewFunc(GemmName, gemmParams, nil,
		"gemmNEON computes C (+)= A B: c[i*ldc+j] (+)= sum over l < k of",
		"a[i*sam+l*sak] * b[l*ldb+j], for i < m and j < n (a multiple of 16),",
		"adding to c when acc != 0.")
	for i, p := range gemmParams {
		f.I("MOVD %s, R%d", f.Arg(p.Name), i)
	}
	for _, r := range []int{6, 7, 8, 9} {
		f.I("LSL $2, R%d", r)
	}
	f.I("LSR $4, R4, R16")
	f.I("CBZ R16, done")
	f.I("MOVD R2, R11")
	f.I("MOVD R0, R12")
	f.Label("chunk")
	f.I("MOVD R1, R13")
	f.I("MOVD R12, R14")
	f.I("MOVD R3, R15")
	for bi, rows := range gemmBlocks {
		name := fmt.Sprintf("b%d", rows)
		if bi == 0 {
			f.Label(name)
		}
		f.I("CMP $%d, R15", rows)
		next := "next"
		if bi+1 < len(gemmBlocks) {
			next = fmt.Sprintf("try%d", gemmBlocks[bi+1])
		}
		f.I("BLT %s", next)
		f.gemmBlock(rows, name)
		if bi == 0 {
			f.I("B %s", name)
		}
		f.Label(next)
	}
	f.I("ADD $64, R11")
	f.I("ADD $64, R12")
	f.I("SUBS $1, R16")
	f.I("BNE chunk")
	f.Label("done")
	f.I("RET")
	return f
}

// gemmBlock emits one block of rows rows at R13 (A) and R14 (C), and
// advances both and R15.
func (f *Func) gemmBlock(rows int, name string) {
	f.I("MOVD R14, R17")
	f.I("CBZ R10, %s_zero", name)
	for r := 0; r < rows; r++ {
		f.I("VLD1.P (R17)(R9), %s", vlist(V(4*r), 4))
	}
	f.I("B %s_init", name)
	f.Label(name + "_zero")
	for a := V(0); a < V(4*rows); a++ {
		f.zero(a)
	}
	f.Label(name + "_init")
	ar := []int{19, 20, 21, 22, 23, 24}
	f.I("MOVD R13, R19")
	for r := 1; r < rows; r++ {
		f.I("ADD R6, R%d, R%d", ar[r-1], ar[r])
	}
	f.I("MOVD R11, R25")
	f.I("MOVD R5, R17")
	f.I("CBZ R17, %s_store", name)
	f.Label(name + "_k")
	f.I("VLD1.P (R25)(R8), %s", vlist(24, 4))
	for r := 0; r < rows; r++ {
		x := V(28 + r%2)
		f.I("VLD1R.P (R%d)(R7), [V%d.S4]", ar[r], x)
		for j := V(0); j < 4; j++ {
			f.fmla(V(4*r)+j, 24+j, x)
		}
	}
	f.I("SUBS $1, R17")
	f.I("BNE %s_k", name)
	f.Label(name + "_store")
	f.I("MOVD R14, R17")
	for r := 0; r < rows; r++ {
		f.I("VST1.P %s, (R17)(R9)", vlist(V(4*r), 4))
	}
	for r := 0; r < rows; r++ {
		f.I("ADD R6, R13")
		f.I("ADD R9, R14")
	}
	f.I("SUB $%d, R15", rows)
}

// EmitBwdProb returns the backward's probability kernel: for each row r <
// rows of the TK-wide tiles s (scores) and dp (dP = dO V^T), with keep word
// mask[r]:
//
//	p  = exp2(c*s - lb[r])            (+0 where the word's bit is clear)
//	ds = p*scale * (dp - dl[r])       (+0 where the bit is clear)
//
// written over s and dp. c*s - lb is one fused multiply-add (FMLA onto
// -lb), clamped to at most 128 (FMIN; NaN stays NaN) so that the exponent
// add cannot wrap and 128 and up give +Inf, as emit/avo's AVX2 kernel
// does; exp2 is the tile kernel's. The lane masks come from the word as
// in the masked tile kernel (CMTST against [1 2 4 8]) and are ANDed into
// p and ds, so masked lanes are +0 whatever s and dp hold.
//
// Registers: R0 s, R1 dp, R2 lb, R3 dl, R4 mask, R5 rows, R14 the word;
// V0 -lb[r], V1 dl[r], V2 the lane mask, V3 x and p, V4 s and dp, V5-V8
// exp2's scratch; V16-V23 and V25 loadConsts', V24 = 128, V26 c, V27 scale.
func EmitBwdProb() *Func {
	f := NewFunc(BwdProbName, bwdProbParams, nil,
		"bwdProbNEON replaces, for each row r < rows of the TK-wide tiles s and",
		"dp, s by p = exp2(c*s - lb[r]) and dp by p*scale*(dp - dl[r]), both +0",
		"where bit c of mask[r] is clear.")
	for i, p := range bwdProbParams[:6] {
		f.I("MOVD %s, R%d", f.Arg(p.Name), i)
	}
	f.loadConsts(16)
	f.dupConst(24, f32bits(128), 16)
	f.I("FMOVS %s, F26", f.Arg("c"))
	f.dupE(26, 26, 0)
	f.I("FMOVS %s, F27", f.Arg("scale"))
	f.dupE(27, 27, 0)
	f.I("CBZ R5, done")
	f.Label("row")
	f.I("FMOVS.P 4(R2), F0")
	f.I("FNEGS F0, F0")
	f.dupE(0, 0, 0)
	f.I("FMOVS.P 4(R3), F1")
	f.dupE(1, 1, 0)
	f.I("MOVD.P 8(R4), R14")
	for j := 0; j < TK/4; j++ {
		r := 14
		if j > 0 {
			f.I("LSR $%d, R14, R15", 4*j)
			r = 15
		}
		f.dupR(2, r)
		f.cmtst(2, 2, vPat)
		f.I("FMOVQ %d(R0), F4", 16*j)
		f.mov(3, 0)
		f.fmla(3, 26, 4) // c*s - lb
		f.fmin(3, 3, 24)
		f.exp2(3, 5, 6, 7, 8)
		f.and(3, 3, 2)
		f.I("FMOVQ F3, %d(R0)", 16*j)
		f.I("FMOVQ %d(R1), F4", 16*j)
		f.fsub(4, 4, 1)
		f.fmul(3, 3, 27)
		f.fmul(4, 3, 4)
		f.and(4, 4, 2)
		f.I("FMOVQ F4, %d(R1)", 16*j)
	}
	f.I("ADD $%d, R0", 4*TK)
	f.I("ADD $%d, R1", 4*TK)
	f.I("SUBS $1, R5")
	f.I("BNE row")
	f.Label("done")
	f.I("RET")
	return f
}
