package avo

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Elem is the element type of the keys and values a decode kernel reads.
type Elem int

// The element types of the decode kernels.
const (
	F32  Elem = iota // float32
	BF16             // bfloat16, widened exactly (VPMOVZXWD, VPSLLD)
	F16              // IEEE half precision, widened exactly (VCVTPH2PS)
)

// Elems lists the element types a decode kernel exists for.
var Elems = []Elem{F32, BF16, F16}

func (e Elem) String() string { return [...]string{"F32", "BF16", "F16"}[e] }

// size is the element's size in bytes.
func (e Elem) size() int {
	if e == F32 {
		return 4
	}
	return 2
}

// DecodeRows lists the row counts a decode kernel exists for.
var DecodeRows = []int{1, 2, 4, 8}

// DecodeName is the decode kernel of an ISA for keys and values of type
// e, head dimensions d and r query rows: decodeAVX512F32D128R4,
// decodeAVX2BF16D64R1, decodeAVX2F16D192V128R8 and so on.
func DecodeName(isa ISA, e Elem, d Dims, r int) string {
	return fmt.Sprintf("decode%s%s%sR%d", isa, e, d, r)
}

// DecodeSignature is the Go signature of every decode kernel.
const DecodeSignature = "func(q *float32, k, v *byte, off *int, o, m, l *float32)"

// VOffsets is where the value rows' offsets start in a decode kernel's
// off (EmitDecode): after the TK key offsets and the TK offsets of the
// next key rows.
const VOffsets = 2 * TK

// decodeShape is how a decode kernel of one ISA, head dimensions and row
// count uses its registers.
type decodeShape struct {
	keys   int   // keys per score vector (w/r)
	nv     int   // score vectors of the tile
	nq     int   // vectors per row of q and k (QK floats)
	no     int   // vectors per row of v and o (V floats)
	qMem   bool  // the score FMAs read q from memory (no room for r q registers)
	rg     int   // rows per group of the P V product
	chunks []int // vectors of o per row in each column chunk of the P V product
}

// decodeShapeOf returns the register use of a decode kernel. The score
// phase holds w accumulators (keys x rows), a key vector and, where they
// fit, the r rows' chunks of q. The P V product holds rg x cv accumulators
// (rg rows of o, cv vectors each, cv a column chunk of chunks), rg
// broadcast p and one value vector; the chunks are the o row's vectors
// split into the fewest of at most a limit, as equal as they can be:
//
//   - AVX-512 (32 registers): whole o rows (one chunk) up to 8 vectors or
//     for one row, else chunks of at most 8; as many rows as fill 16
//     registers (rg = 16/cv, rounded down to a power of two that divides r).
//   - AVX2 (16 registers): 8 accumulators, one row by chunks of at most 8
//     vectors for r = 1 (9 loads per 8 FMAs), else 2 rows by chunks of at
//     most 4 (6 loads per 8 FMAs); D = 128 and wider rows take several
//     chunks (the o row is 16 vectors).
//
// Every group and column chunk is one pass over the tile's keys: the
// first reads its part of each value row from memory, the row groups after
// it the same part again, from L1.
func decodeShapeOf(isa ISA, d Dims, r int) decodeShape {
	w := isa.lanes()
	d.check(isa)
	if w%r != 0 {
		panic(fmt.Sprintf("BUG: %s decode kernel for %s, %d rows", isa, d.doc(), r))
	}
	s := decodeShape{keys: w / r, nv: TK * r / w, nq: d.QK / w, no: d.V / w}
	if isa == AVX512 {
		most := s.no
		if r > 1 && most > 8 {
			most = 8
		}
		s.chunks = split(s.no, most, 1)
		s.rg = min(r, w/s.chunks[0])
		for s.rg&(s.rg-1) != 0 {
			s.rg-- // a power of two, which divides r
		}
		return s
	}
	s.qMem = w+r+1 > 16
	most := 4
	s.rg = 2
	if r == 1 {
		s.rg, most = 1, 8
	}
	s.chunks = split(s.no, most, 1)
	if r%s.rg != 0 || s.rg*s.chunks[0]+s.rg+1 > 16 {
		panic(fmt.Sprintf("BUG: AVX2 decode blocking %+v for %s, %d rows", s, d.doc(), r))
	}
	return s
}

// EmitDecode adds the decode kernel of an ISA for keys and values of type
// e, head dimensions d and r query rows (1, 2, 4 or 8): the tile kernel's
// online-softmax step for r rows against one whole key tile that every row
// keeps, reading the TK key and value rows in place (no packed copy) in one
// pass, so that each is read from memory once and at a steady pace.
// Decoding reads every key tile once, from memory, for a handful of rows:
// transposing and packing it costs more than the products.
//
// The ABI: q holds r query rows of d.QK float32, scaled by scale*log2(e);
// key j's row (d.QK elements) is at byte off[j] of k and its value row
// (d.V elements) at byte off[VOffsets+j] of v (any layout, each tensor
// its own: contiguous, paged, strided), for j < TK; off[TK+j] are the
// offsets of the key rows to read next (the next tile's, or these again),
// which the AVX2 one-row kernels ask the cache for (prefetch hints, never
// loaded, so any value is safe); o, m and l are the running state of
// the r rows, as in the tile ABI (o rows d.V floats apart). 16-bit rows are
// widened exactly to float32 as they are loaded. The kernel reads and
// writes r rows of o, m and l and nothing past them.
//
// Scores go in vectors of w/r keys by r rows (lane j*r + i: key j, row i;
// w = 16 lanes on AVX-512, 8 on AVX2): w accumulators; per chunk of w
// dimensions, each key's chunk and each row's chunk is loaded once (w/r + r
// loads for w products; on AVX2 with 8 rows the q chunks are FMA memory
// operands, 16 registers holding no more); then the transposing reduction
// to one vector of scores. The softmax works on those vectors as they are:
// a row's lanes are r apart, so row maxima and sums come from folding lanes
// across keys, and m, l and alpha are vectors holding each row's value in
// every lane of its residue; it computes what the tile kernel computes for
// a full tile (a row whose scores are all -Inf takes 0 as its maximum,
// keeps m = -Inf and alpha = 1). m and l are stored for the r rows only
// (an opmask on AVX-512, a store of r floats on AVX2). The P V product
// runs over the tile once per group of rows and column chunk of o (see
// decodeShapeOf), from memory the first time and from cache after: each
// key's p of the group broadcast once, each value chunk loaded once per
// group.
func EmitDecode(ctx *build.Context, c ConstTable, isa ISA, e Elem, d Dims, r int) {
	emitDecode(ctx, c, isa, e, d, r, false)
}

// emitDecode emits a decode kernel; with score, the kernel with the score
// stage (DecodeScoreSignature, EmitScoreKernels): the same kernel with the
// score pass over the score vectors before the maxima.
func emitDecode(ctx *build.Context, c ConstTable, isa ISA, e Elem, d Dims, r int, score bool) {
	g := &tileGen{ctx: ctx, isa: isa, dq: d.QK, dv: d.V, w: isa.lanes(), c: c}
	sh := decodeShapeOf(isa, d, r)
	nq, no := sh.nq, sh.no
	name := DecodeName(isa, e, d, r)
	if score {
		name = DecodeScoreName(isa, e, d, r)
	}
	ctx.Function(name)
	ctx.Pragma("noescape")
	if score {
		scoreSignature(ctx, DecodeScoreSignature)
	} else {
		ctx.SignatureExpr(DecodeSignature)
	}
	needs := "AVX-512 Foundation"
	if isa == AVX2 {
		needs = "AVX2, FMA3"
		if e == F16 {
			needs += ", F16C"
		}
	}
	doc := []string{
		fmt.Sprintf("%s is the decode kernel for %s keys and values, %s and %d", name, e, d.doc(), r),
		"query rows (" + needs + "): one online-softmax step against a whole key",
		"tile that every row keeps, key row j read in place at byte off[j] of k and",
		fmt.Sprintf("its value row at byte off[%d+j] of v.", VOffsets),
	}
	if score {
		doc[len(doc)-1] = fmt.Sprintf("its value row at byte off[%d+j] of v, with the score stage of sc (see scoreTile).", VOffsets)
	}
	ctx.Doc(doc...)
	es := e.size()
	keys := sh.keys // keys per score vector
	nv := sh.nv     // score vectors of the tile
	sbuf := ctx.AllocLocal(4 * TK * r)
	abuf := ctx.AllocLocal(4 * g.w) // alpha, lane i for row i
	// load widens the w elements at m into x.
	load := func(m op.Mem, x reg.VecVirtual) {
		switch e {
		case F32:
			ctx.VMOVUPS(m, x)
		case BF16:
			ctx.VPMOVZXWD(m, x)
			ctx.VPSLLD(op.U8(16), x, x)
		case F16:
			ctx.VCVTPH2PS(m, x)
		}
	}
	// With few keys per vector their row addresses stay in registers;
	// with 16 (one row) each load reads its key's offset.
	held := keys <= 8

	ctx.Comment("Scores: vector i holds keys i*keys .. i*keys+keys-1 by rows.")
	q := g.param("q")
	kb, op0, sp, nb := g.param("k"), g.param("off"), ctx.GP64(), ctx.GP64()
	// AVX2 asks for each value row's cache lines (into L2) as it reads the
	// key row at the same offset, so that both streams are in flight at
	// once (the P V pass then reads the tile from cache): a causal decode
	// of 32k keys, one row per job, took 10.8 ms instead of 12.4. The
	// AVX-512 kernels measured slower with it (11.3-11.9 ms against 10.4).
	var vbase reg.Register
	prefetch := g.isa == AVX2
	if prefetch {
		vbase = g.param("v")
	}
	ctx.LEAQ(sbuf, sp)
	ctx.MOVQ(op.U32(uint32(nv)), nb)
	ctx.Label("qk")
	kr := make([]reg.GPVirtual, keys)
	if held {
		for j := range kr {
			kr[j] = ctx.GP64()
			ctx.MOVQ(mem(op0, 8*j), kr[j])
			ctx.ADDQ(kb, kr[j])
		}
	}
	acc := make([]reg.VecVirtual, g.w)
	// fma adds kv times the q chunk qi (a register or memory) into acc[x],
	// the first time as a product.
	fma := func(first bool, qi op.Op, kv reg.VecVirtual, x int) {
		a := &acc[x]
		_, inMem := qi.(op.Mem)
		switch {
		case first && inMem:
			*a = g.vec()
			ctx.VMULPS(qi, kv, *a)
		case first:
			*a = g.vec()
			ctx.VMULPS(kv, qi, *a)
		case inMem:
			ctx.VFMADD231PS(qi, kv, *a)
		default:
			ctx.VFMADD231PS(kv, qi, *a)
		}
	}
	// keyChunk loads chunk ci of key j's row into a new vector (and asks
	// for the value row's lines when prefetching: the vLines lines of the
	// row spread over the nq key chunks, line x with chunk x*nq/vLines,
	// which for QK = V is every chunk that starts a line).
	vLines := (es*d.V + 63) / 64
	keyChunk := func(j, ci int, t reg.Register) reg.VecVirtual {
		kv := g.vec()
		if held {
			load(mem(kr[j], es*g.w*ci), kv)
		} else {
			load(op.Mem{Base: kb, Index: t, Scale: 1, Disp: es * g.w * ci}, kv)
		}
		for x := 0; prefetch && x < vLines; x++ {
			if x*nq/vLines != ci {
				continue
			}
			vo := ctx.GP64()
			ctx.MOVQ(mem(op0, 8*(VOffsets+j)), vo) // the value row's own offset
			ctx.PREFETCHT2(op.Mem{Base: vbase, Index: vo, Scale: 1, Disp: 64 * x})
		}
		return kv
	}
	// qChunk is chunk ci of query row i: loaded into a register, or left
	// in memory for the FMAs to read.
	qChunk := func(i, ci int, inReg bool) op.Op {
		qm := mem(q, 4*(i*d.QK+g.w*ci))
		if !inReg {
			return qm
		}
		x := g.vec()
		ctx.VMOVUPS(qm, x)
		return x
	}
	// keyOffset loads key j's offset when rows are not held in registers.
	keyOffset := func(j int) reg.Register {
		if held {
			return nil
		}
		t := ctx.GP64()
		ctx.MOVQ(mem(op0, 8*j), t)
		return t
	}
	if r == 1 || g.isa == AVX2 {
		// Key by key: each key row is read from its first byte to its last
		// before the next (one ascending stream, which the hardware
		// prefetchers follow; reading the vector's keys chunk by chunk
		// interleaves their rows), q's chunks in registers when they fit
		// beside the w accumulators (one row on AVX-512), else read from
		// memory by the FMAs. A causal decode of 32k keys, H=8, 1 thread,
		// took 8.5-10.1 ms instead of 10.3-11.7 with AVX2 at Hkv=8 (one row
		// per job) and 3.1-3.8 instead of 3.9-4.4 at Hkv=2 (four rows);
		// AVX-512 gained 3% at one row. The chunk-major order below is
		// kept for AVX-512 with several rows.
		inRegs := r == 1 && nq+g.w+1 <= g.isa.regs()
		qv := make([]op.Op, nq*r)
		for x := range qv {
			qv[x] = qChunk(x/nq, x%nq, inRegs)
		}
		for j := 0; j < keys; j++ {
			t := keyOffset(j)
			for ci := 0; ci < nq; ci++ {
				kv := keyChunk(j, ci, t)
				for i := 0; i < r; i++ {
					fma(ci == 0, qv[i*nq+ci], kv, j*r+i)
				}
			}
		}
	} else {
		for ci := 0; ci < nq; ci++ {
			qv := make([]op.Op, r)
			for i := range qv {
				qv[i] = qChunk(i, ci, !sh.qMem)
			}
			for j := 0; j < keys; j++ {
				kv := keyChunk(j, ci, keyOffset(j))
				for i, qi := range qv {
					fma(ci == 0, qi, kv, j*r+i)
				}
			}
		}
	}
	s := g.reduceVecs(acc, g.addOp)
	ctx.VMOVUPS(s, mem(sp, 0))
	ctx.ADDQ(op.U8(uint8(4*g.w)), sp)
	ctx.ADDQ(op.U8(uint8(8*keys)), op0)
	ctx.DECQ(nb)
	ctx.JNZ(op.LabelRef("qk"))
	if score {
		ctx.Comment("The score stage.")
		g.decodeScorePass(sbuf, r, nv)
	}

	ctx.Comment("Row maxima, alpha, p and l, each row's value in every lane of its residue.")
	mx := []reg.VecVirtual{g.vec(), g.vec()}
	ctx.VMOVUPS(sbuf, mx[0])
	ctx.VMOVUPS(sbuf.Offset(4*g.w), mx[1])
	for i := 2; i < nv; i++ {
		ctx.VMAXPS(sbuf.Offset(4*g.w*i), mx[i%2], mx[i%2])
	}
	ctx.VMAXPS(mx[1], mx[0], mx[0])
	mnew := mx[0]
	g.foldKeys(mnew, r, g.maxOp)
	// o, m and l are loaded here, not on entry: the score loop needs the
	// general registers for its key row addresses.
	o, m, l := g.param("o"), g.param("m"), g.param("l")
	var rowMask reg.Register
	if isa == AVX512 {
		rowMask = ctx.K()
		rm := ctx.GP32()
		ctx.MOVL(op.U32(uint32(1)<<r-1), rm)
		ctx.KMOVW(rm, rowMask)
	}
	mold := g.rowVec(m, r)
	ctx.VMAXPS(mold, mnew, mnew)
	g.storeRows(mnew, rowMask, mem(m, 0), r) // -Inf stays -Inf for a row with no finite score
	msafe, alpha := g.vec(), g.vec()
	if isa == AVX512 {
		g.alphaAVX512(mnew, mold, msafe, alpha)
	} else {
		g.alphaAVX2(mnew, mold, msafe, alpha)
	}
	ctx.VMOVUPS(alpha, abuf)
	sums := []reg.VecVirtual{nil, nil}
	for i := 0; i < nv; i++ {
		x := g.vec()
		ctx.VMOVUPS(sbuf.Offset(4*g.w*i), x)
		ctx.VSUBPS(msafe, x, x)
		g.exp2(x, nil)
		ctx.VMOVUPS(x, sbuf.Offset(4*g.w*i))
		if i < 2 {
			sums[i] = x
		} else {
			ctx.VADDPS(x, sums[i%2], sums[i%2])
		}
	}
	sum := sums[0]
	ctx.VADDPS(sums[1], sum, sum)
	g.foldKeys(sum, r, g.addOp)
	lold := g.rowVec(l, r)
	ctx.VFMADD231PS(lold, alpha, sum) // sum + alpha*l
	g.storeRows(sum, rowMask, mem(l, 0), r)

	ctx.Comment("o = alpha*o.")
	for i := 0; i < r; i++ {
		a := g.vec()
		ctx.VBROADCASTSS(abuf.Offset(4*i), a)
		for ci := 0; ci < no; ci++ {
			x := g.vec()
			ctx.VMULPS(mem(o, 4*(i*d.V+g.w*ci)), a, x)
			ctx.VMOVUPS(x, mem(o, 4*(i*d.V+g.w*ci)))
		}
	}

	rg, multi := sh.rg, len(sh.chunks) > 1
	if !multi {
		ctx.Comment("o += P V, in groups of rows, each over the whole tile.")
	} else {
		ctx.Comment("o += P V, in column chunks of o and groups of rows, each over the whole tile.")
	}
	const unroll = 4
	// With column chunks, vc and o point at the chunk's first column.
	var vc reg.Register
	if multi {
		vc = g.param("v")
	}
	// One row (the memory-bound case: no grouped heads) also asks, in its
	// P V pass, for the next tile's key rows (off[TK:]: kLines lines of
	// each row a chunk, kc at the chunk's first), so that memory stays busy
	// while this tile's values are summed from cache: a causal decode of
	// 32k keys, H=8, Hkv=8, 1 thread, took 8.6-9.0 ms instead of 9.1-10.7.
	// With four rows, compute-bound, it measured no better (3.2-3.8
	// against 2.7-3.9 ms) and is left out.
	nextK := prefetch && r == 1
	kLines := ((es*d.QK+63)/64 + len(sh.chunks) - 1) / len(sh.chunks)
	// kc is loaded once, before the chunks: each column chunk of o asks
	// for the next kLines lines of the next key rows (kc advances by them
	// after each chunk), so that the chunks together cover whole rows.
	var kc reg.Register
	if nextK {
		kc = g.param("k")
	}
	for gi, run := range runs(sh.chunks) {
		sfx, cv := runSuffix(gi), run.size
		var cn reg.Register
		if multi {
			cn = ctx.GP64()
			ctx.MOVQ(op.U32(uint32(run.count)), cn)
			ctx.Label("pvc" + sfx)
		}
		for r0 := 0; r0 < r; r0 += rg {
			var vb reg.Register
			if multi {
				vb = vc
			} else {
				vb = g.param("v")
			}
			op1, pp, n := g.param("off"), ctx.GP64(), ctx.GP64()
			ctx.LEAQ(sbuf, pp)
			ctx.MOVQ(op.U32(uint32(TK/unroll)), n)
			ov := make([][]reg.VecVirtual, rg)
			for i := range ov {
				ov[i] = make([]reg.VecVirtual, cv)
				for ci := range ov[i] {
					ov[i][ci] = g.vec()
					ctx.VMOVUPS(mem(o, 4*((r0+i)*d.V+g.w*ci)), ov[i][ci])
				}
			}
			label := fmt.Sprintf("pv%d%s", r0, sfx)
			ctx.Label(label)
			for j := 0; j < unroll; j++ {
				vp := ctx.GP64()
				ctx.MOVQ(mem(op1, 8*(VOffsets+j)), vp)
				ctx.ADDQ(vb, vp)
				pv := make([]reg.VecVirtual, rg)
				for i := range pv {
					pv[i] = g.vec()
					ctx.VBROADCASTSS(mem(pp, 4*(j*r+r0+i)), pv[i])
				}
				for ci := 0; ci < cv; ci++ {
					t := g.vec()
					load(mem(vp, es*g.w*ci), t)
					for i := range ov {
						ctx.VFMADD231PS(t, pv[i], ov[i][ci])
					}
				}
				if nextK {
					np := ctx.GP64()
					ctx.MOVQ(mem(op1, 8*(TK+j)), np)
					ctx.ADDQ(kc, np)
					for x := 0; x < kLines; x++ {
						ctx.PREFETCHT0(mem(np, 64*x))
					}
				}
			}
			ctx.ADDQ(op.U32(uint32(4*unroll*r)), pp)
			ctx.ADDQ(op.U8(8*unroll), op1)
			ctx.DECQ(n)
			ctx.JNZ(op.LabelRef(label))
			for i := range ov {
				for ci, x := range ov[i] {
					ctx.VMOVUPS(x, mem(o, 4*((r0+i)*d.V+g.w*ci)))
				}
			}
		}
		if multi {
			if nextK {
				ctx.ADDQ(op.U32(uint32(64*kLines)), kc)
			}
			ctx.ADDQ(op.U32(uint32(es*g.w*cv)), vc)
			ctx.ADDQ(op.U32(uint32(4*g.w*cv)), o)
			ctx.DECQ(cn)
			ctx.JNZ(op.LabelRef("pvc" + sfx))
		}
	}
	ctx.VZEROUPPER()
	ctx.RET()
}

// storeRows stores lanes 0 .. r-1 of x (row i in lane i) to dst, and
// nothing past them: under the opmask rowMask on AVX-512, as r floats on
// AVX2.
func (g *tileGen) storeRows(x reg.VecVirtual, rowMask reg.Register, dst op.Mem, r int) {
	ctx := g.ctx
	if g.isa == AVX512 {
		ctx.VMOVUPS(x, rowMask, dst)
		return
	}
	switch r {
	case 1:
		ctx.VMOVSS(x.AsX(), dst)
	case 2:
		ctx.VMOVSD(x.AsX(), dst)
	case 4:
		ctx.VMOVUPS(x.AsX(), dst)
	case 8:
		ctx.VMOVUPS(x, dst)
	default:
		panic(fmt.Sprintf("BUG: storeRows of %d rows", r))
	}
}

// foldKeys folds the lanes of x (lane j*r + i: key j, row i) across keys:
// every lane ends with f over the lanes of its row.
func (g *tileGen) foldKeys(x reg.VecVirtual, r int, f func(a, b, dst reg.Register)) {
	ctx := g.ctx
	for span := g.w / 2; span >= r; span /= 2 {
		t := g.vec()
		switch {
		case span == 8:
			ctx.VSHUFF32X4(op.U8(0x4e), x, x, t)
		case span == 4 && g.isa == AVX2:
			ctx.VPERM2F128(op.U8(0x01), x, x, t) // swap the 128-bit halves
		case span == 4:
			ctx.VSHUFF32X4(op.U8(0xb1), x, x, t)
		case span == 2:
			ctx.VPERMILPS(op.U8(0x4e), x, t)
		default:
			ctx.VPERMILPS(op.U8(0xb1), x, t)
		}
		f(t, x, x)
	}
}

// rowVec loads the r floats at p into a vector whose lane i holds p[i%r].
func (g *tileGen) rowVec(p reg.Register, r int) reg.VecVirtual { return g.rowVecAt(mem(p, 0), r) }

// rowVecAt is rowVec of the r floats (or int32) at p.
func (g *tileGen) rowVecAt(p op.Mem, r int) reg.VecVirtual {
	ctx := g.ctx
	x := g.vec()
	if g.isa == AVX2 {
		switch r {
		case 1:
			ctx.VBROADCASTSS(p, x)
		case 2:
			ctx.VBROADCASTSD(p, x)
		case 4:
			ctx.VBROADCASTF128(p, x)
		case 8:
			ctx.VMOVUPS(p, x)
		default:
			panic(fmt.Sprintf("BUG: rowVec of %d rows", r))
		}
		return x
	}
	switch r {
	case 1:
		ctx.VBROADCASTSS(p, x)
	case 2:
		ctx.VPBROADCASTQ(p, x)
	case 4:
		ctx.VBROADCASTF32X4(p, x)
	case 8:
		ctx.VMOVUPS(p, x.AsY())
		ctx.VSHUFF32X4(op.U8(0x44), x, x, x)
	default:
		panic(fmt.Sprintf("BUG: rowVec of %d rows", r))
	}
	return x
}
