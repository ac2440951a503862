package neon

import "fmt"

// Elem is the element type of the keys and values a decode kernel reads.
type Elem int

// The element types, in runtime/cpu's order.
const (
	F32  Elem = iota // float32
	BF16             // bfloat16, widened exactly (ZIP1/ZIP2 with zero: x << 16)
	F16              // IEEE half precision, widened exactly (FCVTL, FCVTL2)
)

// Elems lists the element types a decode kernel exists for.
var Elems = []Elem{F32, BF16, F16}

func (e Elem) String() string { return [...]string{"F32", "BF16", "F16"}[e] }

// DecodeRows lists the row counts a decode kernel exists for.
var DecodeRows = []int{1, 2, 4, 8}

// DecodeName is the NEON decode kernel for keys and values of type e, head
// dimensions d and r query rows.
func DecodeName(e Elem, d Dims, r int) string {
	return fmt.Sprintf("decodeNEON%s%sR%d", e, d.suffix(), r)
}

var decodeParams = []Param{{"q", "*float32"}, {"k", "*byte"}, {"v", "*byte"}, {"off", "*int"},
	{"o", "*float32"}, {"m", "*float32"}, {"l", "*float32"}}

// loadRow loads len(dst) vectors of float32 from a key or value row:
// element e0 onwards of the row at R(ptr), 16-bit elements widened
// exactly through raw (zero holds +0 for bfloat16), two vectors a load
// (one, of 8 bytes, for the last of an odd count).
func (f *Func) loadRow(e Elem, ptr, e0 int, dst []V, raw, zero V) {
	if e == F32 {
		for i, x := range dst {
			f.I("FMOVQ %d(R%d), F%d", 4*(e0+4*i), ptr, x)
		}
		return
	}
	for i := 0; i < len(dst); i += 2 {
		if i+1 == len(dst) {
			f.I("FMOVD %d(R%d), F%d", 2*(e0+4*i), ptr, raw)
			if e == BF16 {
				f.zip1h(dst[i], zero, raw)
			} else {
				f.fcvtl(dst[i], raw, false)
			}
			break
		}
		f.I("FMOVQ %d(R%d), F%d", 2*(e0+4*i), ptr, raw)
		if e == BF16 {
			f.zip1h(dst[i], zero, raw)
			f.zip2h(dst[i+1], zero, raw)
		} else {
			f.fcvtl(dst[i], raw, false)
			f.fcvtl(dst[i+1], raw, true)
		}
	}
}

// EmitDecode returns the decode kernel for keys and values of type e, head
// dimensions d (each a multiple of 4 up to 256) and r query rows
// (emit/avo.EmitDecode's ABI: q rows of qk floats, key rows of qk
// elements, value rows of v elements, o rows of v floats): the tile
// kernel's online-softmax step for r rows against one whole key tile that
// every row keeps, key j's row at byte off[j] of k and its value row at
// byte off[2*TK+j] of v (off[TK:2*TK], the next key rows' offsets, are
// prefetch hints these kernels do not use), q scaled by scale*log2(e), o,
// m and l the rows' running state.
//
// The rows go one at a time (R8 the q row, R9 m, R10 l, R11 the o row):
//
//  1. scores, four keys an iteration (16): two accumulators a key (V0-V7)
//     over chunks of 8 dimensions (q in V8-V9, the key's chunk widened into
//     V10-V11; a last chunk of 4 uses one of each), folded by FADDP into
//     one vector of four scores, stored to a 256-byte frame buffer;
//  2. the tile kernel's softmax row (softmaxRow) on the 16 score vectors,
//     p written back to the buffer;
//  3. o += P V in chunks of 64 output columns (the last one of the v%64
//     left): up to 16 accumulators (V8-V23), four keys an iteration, their
//     p in V0 used lane by lane by FMLA (by element), each value row's
//     chunk widened into V24-V27, four vectors at a time.
//
// Each row reads the tile's keys and values once (the first from memory,
// the others from cache); the AVX-512 kernels share one pass among rows.
func EmitDecode(e Elem, d Dims, r int) *Func { return emitDecode(e, d, r, false) }

// EmitDecodeScore returns the decode kernel with the score stage
// (DecodeScoreName: emit/avo's DecodeScoreSignature, the decode ABI plus
// runtime/cpu's *scoreTile, in R7): EmitDecode's kernel with the score
// pass (decodeScorePass) on each row's scores in the buffer before its
// softmax; row i reads rows[i] and slope[i] (R20 walks them), key j
// cols[j].
func EmitDecodeScore(e Elem, d Dims, r int) *Func { return emitDecode(e, d, r, true) }

// vOffsets is where the value rows' offsets start in a decode kernel's off.
const vOffsets = 2 * TK

func emitDecode(e Elem, d Dims, r int, score bool) *Func {
	d.check()
	var f *Func
	if score {
		name := DecodeScoreName(e, d, r)
		f = NewFunc(name, append(decodeParams[:len(decodeParams):len(decodeParams)], scoreParam), nil,
			fmt.Sprintf("%s is the decode kernel with the score stage of sc for %s", name, e),
			fmt.Sprintf("keys and values, %s and %d query rows (NEON): one online-softmax step", d.text(), r),
			"against a whole key tile that every row keeps, key row j read in place at",
			"byte off[j] of k and its value row at byte off[2*TK+j] of v.")
	} else {
		name := DecodeName(e, d, r)
		f = NewFunc(name, decodeParams, nil,
			fmt.Sprintf("%s is the decode kernel for %s keys and values, %s and %d", name, e, d.text(), r),
			"query rows (NEON): one online-softmax step against a whole key tile that",
			"every row keeps, key row j read in place at byte off[j] of k and its value",
			"row at byte off[2*TK+j] of v.")
	}
	f.Frame = 4 * TK
	for i, p := range decodeParams {
		f.I("MOVD %s, R%d", f.Arg(p.Name), i)
	}
	if score {
		f.I("MOVD %s, R7", f.Arg(scoreParam.Name))
		f.I("MOVD R7, R20")
	}
	f.I("MOVD R0, R8")
	f.I("MOVD R5, R9")
	f.I("MOVD R6, R10")
	f.I("MOVD R4, R11")
	f.I("MOVD $%d, R21", r)
	f.Label("d_row")

	f.Comment("Scores of the row into the buffer, four keys an iteration.")
	keyReg := []int{12, 13, 14, 19}
	f.zero(13)
	f.I("MOVD R3, R23")
	f.I("MOVD $buf-%d(SP), R24", 4*TK)
	f.I("MOVD $%d, R22", TK/4)
	f.Label("d_qk")
	for t, kr := range keyReg {
		f.I("MOVD %d(R23), R%d", 8*t, kr)
		f.I("ADD R1, R%d", kr)
	}
	for a := V(0); a < 8; a++ {
		f.zero(a)
	}
	for c := 0; c < d.QK/8; c++ {
		f.I("FMOVQ %d(R8), F8", 32*c)
		f.I("FMOVQ %d(R8), F9", 32*c+16)
		for t, kr := range keyReg {
			f.loadRow(e, kr, 8*c, []V{10, 11}, 12, 13)
			f.fmla(V(2*t), 8, 10)
			f.fmla(V(2*t+1), 9, 11)
		}
	}
	if d.QK%8 != 0 {
		c := d.QK / 8
		f.I("FMOVQ %d(R8), F8", 32*c)
		for t, kr := range keyReg {
			f.loadRow(e, kr, 8*c, []V{10}, 12, 13)
			f.fmla(V(2*t), 8, 10)
		}
	}
	for t := V(0); t < 4; t++ {
		f.fadd(2*t, 2*t, 2*t+1)
	}
	f.faddp(14, 0, 2)
	f.faddp(15, 4, 6)
	f.faddp(14, 14, 15)
	f.I("FMOVQ.P F14, 16(R24)")
	f.I("ADD $32, R23")
	f.I("SUBS $1, R22")
	f.I("BNE d_qk")

	if score {
		f.Comment("The score stage of the row, in the buffer.")
		f.decodeScorePass()
	}
	f.Comment("Softmax of the row; p back into the buffer.")
	f.I("MOVD $buf-%d(SP), R24", 4*TK)
	for k := 0; k < 4; k++ {
		f.I("VLD1.P 64(R24), %s", vlist(V(4*k), 4))
	}
	f.loadConsts(16)
	f.softmaxRow(d.V, "d_")
	f.I("MOVD $buf-%d(SP), R24", 4*TK)
	for k := 0; k < 4; k++ {
		f.I("VST1.P %s, 64(R24)", vlist(V(4*k), 4))
	}

	f.Comment("o += P V, 64 columns a chunk, four keys an iteration.")
	f.zero(1)
	for h := 0; 64*h < d.V; h++ {
		nv := min(16, (d.V-64*h)/4) // vectors of the chunk
		for i := 0; i < nv; i++ {
			f.I("FMOVQ %d(R11), F%d", 256*h+16*i, 8+i)
		}
		f.I("ADD $%d, R3, R23", 8*vOffsets) // the value rows' offsets
		f.I("MOVD $buf-%d(SP), R24", 4*TK)
		f.I("MOVD $%d, R22", TK/4)
		label := fmt.Sprintf("d_pv%d", h)
		f.Label(label)
		f.I("FMOVQ.P 16(R24), F0")
		for t := 0; t < 4; t++ {
			f.I("MOVD %d(R23), R12", 8*t)
			f.I("ADD R2, R12")
			for qt := 0; 4*qt < nv; qt++ {
				n := min(4, nv-4*qt)
				f.loadRow(e, 12, 64*h+16*qt, []V{24, 25, 26, 27}[:n], 28, 1)
				for i := 0; i < n; i++ {
					f.fmlaE(V(8+4*qt+i), V(24+i), 0, t)
				}
			}
		}
		f.I("ADD $32, R23")
		f.I("SUBS $1, R22")
		f.I("BNE %s", label)
		for i := 0; i < nv; i++ {
			f.I("FMOVQ F%d, %d(R11)", 8+i, 256*h+16*i)
		}
	}

	f.I("ADD $%d, R8", 4*d.QK)
	f.I("ADD $4, R9")
	f.I("ADD $4, R10")
	f.I("ADD $%d, R11", 4*d.V)
	if score {
		f.I("ADD $4, R20")
	}
	f.I("SUBS $1, R21")
	f.I("BNE d_row")
	f.I("RET")
	return f
}
