package cpu

import (
	"math"
	"math/bits"

	"github.com/attngen/attngen/runtime/mask"
)

// The tiled backward (variants whose kernels table has gemm and bwdProb):
// the per-pair Go code of backward.go with every (query tile, key tile)
// pair done as five matrix products by the variant's gemm and one
// elementwise pass by its bwdProb (emit/avo EmitBackward; gemmK and
// bwdProbK call them). For a query tile
// of rows rows (one query head, rows pq = stride*D floats apart, read in
// place) and a key tile of nk keys (its kv head, pk floats apart):
//
//	S  = Q K^T             gemm, B = K^T packed [D][TK] (the variant's transposeTile kernel)
//	dP = dO V^T            gemm, B = V^T packed the same way
//	P  = exp(scale S - lse), dS = P (dP - delta) scale    bwdProb, masked lanes +0
//	dV += P^T dO           gemm, A = P read transposed (pass 1)
//	dK += dS^T Q           gemm, A = dS read transposed (pass 1)
//	dQ += dS K             gemm, B = the key rows in place (pass 2)
//
// dK and dV of a key tile accumulate in the worker's buffers over the query
// tiles and the heads of the group, in the order of mask.Columns, and are
// written once; dQ accumulates in place, in the order of the query tile's
// row of the schedule. Every sum has a fixed order, so the result does not
// depend on the thread count.
//
// Masked pairs: P and dS are exactly +0 there whatever S and dP hold, so
// NaN or infinite keys and values at masked positions, which reach only
// their own column of S and dP, change nothing in pass 1. dQ multiplies dS
// by the key rows themselves, and 0 times NaN is NaN: key rows of the tile
// holding a non-finite element go through a copy with those elements set
// to 0, and the terms they leave out are added back in Go for the rows
// that keep them (IEEE arithmetic through kept pairs), as the forward does
// for value rows.
//
// dV and dK multiply P and dS by the query tile's rows of dO and Q, so a
// NaN or an infinity in q or dout of a row would reach, through the 0 of
// P and dS, every key of the tile that the row masks (all of them when it
// keeps none). Backward marks once, in qbad, the rows whose q or dout
// holds one; a tile where such a row masks a key runs the two products
// on a copy of its dO (Q) rows with those elements set to 0, and adds the
// left-out terms in Go for the keys the row keeps. Finite data takes the
// products on q and dout in place.

// gemmK runs the variant's gemm: c[i*ldc+j] (+)= sum over l < k of
// a[i*sam+l*sak] * b[l*ldb+j] for i < m, j < n (a multiple of 64), adding
// when acc is set. It checks that every element it touches lies in the
// slices (a panic, not a memory error, for a bug of the caller).
func (kn *kernels) gemmK(c, a, b []float32, m, n, k, sam, sak, ldb, ldc int, acc bool) {
	if m <= 0 || n <= 0 {
		return
	}
	if n%64 != 0 || k < 0 || sam < 0 || sak < 0 || ldb < 0 || ldc < n {
		panic("BUG: gemm arguments")
	}
	_ = c[(m-1)*ldc+n-1]
	if k == 0 {
		a, b = c, c
	} else {
		_, _ = a[(m-1)*sam+(k-1)*sak], b[(k-1)*ldb+n-1]
	}
	f := 0
	if acc {
		f = 1
	}
	kn.gemm(&c[0], &a[0], &b[0], m, n, k, sam, sak, ldb, ldc, f)
}

// bwdProbK runs the variant's bwdProb on the first rows rows of s and dp
// (TK floats a row).
func (kn *kernels) bwdProbK(s, dp, lb, dl []float32, mask []uint64, rows int, c, scale float32) {
	if rows <= 0 {
		return
	}
	_, _, _, _, _ = s[rows*TK-1], dp[rows*TK-1], lb[rows-1], dl[rows-1], mask[rows-1]
	kn.bwdProb(&s[0], &dp[0], &lb[0], &dl[0], &mask[0], rows, c, scale)
}

// bwdBuffers are one worker's tiles for the tiled backward.
type bwdBuffers struct {
	dp     []float32 // [TQ][TK] dP, then dS
	dt     []float32 // [TQ][TK] the soft-cap's derivative 1 - tanh^2 of each kept score
	st     scoreTile // the score stage's positions and slopes for scoreBwd
	dk, dv []float32 // [TK][D] a key tile's gradients
	lb, dl []float32 // [TQ] lse*log2(e) and delta of the query tile's rows
	words  []uint64  // [TQ] keep words of the live rows
	qc, oc []float32 // [TQ][D] a query tile's Q and dO rows, non-finite elements of some rows zeroed
}

func (w *buffers) bwdBufs() *bwdBuffers {
	if w.bwd == nil {
		d := maxHeadDim()
		w.bwd = &bwdBuffers{dp: make([]float32, TQ*TK), dt: make([]float32, TQ*TK), dk: make([]float32, TK*d), dv: make([]float32, TK*d),
			lb: make([]float32, TQ), dl: make([]float32, TQ), words: make([]uint64, TQ),
			qc: make([]float32, TQ*d), oc: make([]float32, TQ*d)}
	}
	return w.bwd
}

// packT writes the transpose of nk rows of D floats (pitch floats apart)
// into dst [D][TK], columns past nk zero.
func (kn *kernels) packT(dst, src []float32, nk, pitch, D int) {
	if nk == TK && kn.transposeK(dst, src, pitch, D, 1) {
		return
	}
	for d := 0; d < D; d++ {
		row := dst[d*TK:][:TK]
		for c := 0; c < nk; c++ {
			row[c] = src[c*pitch+d]
		}
		clear(row[nk:])
	}
}

// rowsOf fills lb and dl of the rows rows of a query tile starting at row
// q0 ([batch, head, seq] index, rows pitch apart in rows units of 1).
func (c *bcall) rowsOf(bb *bwdBuffers, q0, rows, stride int) {
	for r := 0; r < rows; r++ {
		row := q0 + r*stride
		l := c.lse[row]
		if math.IsInf(float64(l), -1) {
			bb.lb[r], bb.dl[r] = 0, 0
			continue
		}
		bb.lb[r] = float32(float64(l) * math.Log2E)
		bb.dl[r] = c.dlt[row]
	}
}

// liveWords copies the keep words of w.mask into bb.words, 0 for rows
// whose lse is -Inf, and reports whether any pair is kept.
func (c *bcall) liveWords(w *buffers, bb *bwdBuffers, q0, rows, stride int) bool {
	var any uint64
	for r := 0; r < rows; r++ {
		x := w.mask[r]
		if x != 0 && math.IsInf(float64(c.lse[q0+r*stride]), -1) {
			x = 0
		}
		bb.words[r] = x
		any |= x
	}
	return any != 0
}

// probs computes S and dP of a query tile (rows at element offset qo, pq
// apart) against the packed key tile in w.kt, w.vt, then P into w.s and dS
// into bb.dp.
//
// With a score stage that rewrites scores, S goes through it between the
// products (query head h, row r at absolute position i0 + stride*r, key
// column x at j0 + stride*x) in the forward's float32 log2 units, and dS
// is multiplied by the soft-cap's derivative 1 - tanh^2 after bwdProb.
func (c *bcall) probs(w *buffers, bb *bwdBuffers, qo, rows, pq, h, i0, j0, stride int) {
	D := c.s.HeadDim
	c.kern.gemmK(w.s, c.q[qo:], w.kt, rows, TK, D, pq, 1, TK, TK, false)
	c.kern.gemmK(bb.dp, c.dout[qo:], w.vt, rows, TK, D, pq, 1, TK, TK, false)
	if !c.sc.modifies {
		c.kern.bwdProbK(w.s, bb.dp, bb.lb, bb.dl, bb.words, rows, c.scale*math.Log2E, c.scale)
		return
	}
	capped := c.sc.flags&scoreCap != 0
	c.kern.scoreBwdK(w.s, bb.dt, rows, c.scale*math.Log2E, c.bwdScoreTile(bb, rows, h, i0, j0, stride))
	c.kern.bwdProbK(w.s, bb.dp, bb.lb, bb.dl, bb.words, rows, 1, c.scale)
	if capped {
		for r := 0; r < rows; r++ {
			for x := bb.words[r]; x != 0; x &= x - 1 {
				k := r*TK + bits.TrailingZeros64(x)
				bb.dp[k] *= bb.dt[k]
			}
		}
	}
}

// bwdScoreTile fills bb.st for the variant's scoreBwd kernel: query head
// h's rows (row r at absolute position i0 + stride*r) against the key
// tile whose column x is at j0 + stride*x, positions from base i0.
func (c *bcall) bwdScoreTile(bb *bwdBuffers, rows, h, i0, j0, stride int) *scoreTile {
	st, sc := &bb.st, &c.sc
	st.flags, st.cap, st.invCap = sc.flags, sc.cap, 0
	if sc.cap != 0 {
		st.invCap = 1 / sc.cap
	}
	slope := float32(0)
	if sc.flags&scoreAlibi != 0 {
		slope = sc.slopes[h]
	}
	for r := 0; r < TQ; r++ {
		st.slope[r], st.rows[r] = slope, int32(stride*r)
	}
	for x := range st.cols {
		st.cols[x] = int32(j0 - i0 + stride*x)
	}
	return st
}

// keyTileAsm is keyTile with the assembly kernels; with fused set it also
// adds dS K to dQ of every pair (see columnAsm).
func (c *bcall) keyTileAsm(w *buffers, it bitem, fused bool) {
	s, D := c.s, c.s.HeadDim
	b, kvh, g, kt := int(it.b), int(it.h), c.segs[it.seg], int(it.t)
	bb := w.bwdBufs()
	group := s.HeadsQ / s.HeadsKV
	k0 := kt * TK
	nk := min(TK, g.nk-k0)
	off := g.nk - g.nq
	pk := g.stride * D
	ko := c.kvrow(b, kvh, g, k0) * D
	krows := c.k[ko:]
	c.kern.packT(w.kt[:D*TK], krows, nk, pk, D)
	c.kern.packT(w.vt[:D*TK], c.v[ko:], nk, pk, D)
	var kc []float32
	var bad uint64
	if fused {
		kc, bad = w.cleanKeys(c.kern, krows, nk, pk, D)
	}
	dk, dv := bb.dk[:nk*D], bb.dv[:nk*D]
	clear(dk)
	clear(dv)
	step := c.headStep()
	for h0 := kvh * group; h0 < (kvh+1)*group; h0 += step {
		for _, ct := range c.colsOf(b, h0)[it.seg].Of(kt) {
			if !c.words(w, b, h0, g, ct.Q, kt, ct.Class) {
				continue
			}
			rows := min(TQ, g.nq-ct.Q*TQ)
			for h := h0; h < h0+step; h++ {
				q0 := c.qrow(b, h, g, ct.Q*TQ+off)
				if !c.liveWords(w, bb, q0, rows, g.stride) {
					continue
				}
				c.rowsOf(bb, q0, rows, g.stride)
				c.probs(w, bb, q0*D, rows, g.stride*D, h, g.off+g.stride*(ct.Q*TQ+off), g.off+g.stride*k0, g.stride)
				if fix := c.tileBad(bb, q0, rows, g.stride, nk); fix != 0 {
					c.gradsClean(w, bb, dk, dv, q0*D, rows, g.stride*D, nk, fix)
				} else {
					c.kern.gemmK(dv, w.s, c.dout[q0*D:], nk, D, rows, 1, TK, g.stride*D, D, true)
					c.kern.gemmK(dk, bb.dp, c.q[q0*D:], nk, D, rows, 1, TK, g.stride*D, D, true)
				}
				if fused {
					c.dqAsm(bb, c.dq[q0*D:], rows, g.stride*D, krows, kc, pk, bad, nk)
				}
			}
		}
	}
	for j := 0; j < nk; j++ {
		copy(c.dk[ko+j*pk:][:D], dk[j*D:][:D])
		copy(c.dv[ko+j*pk:][:D], dv[j*D:][:D])
	}
}

// columnAsm is the fused backward of one kv head of one segment of one
// batch (an item of c.items3): its key tiles in increasing order, each
// with dK, dV and the dQ terms of its pairs. The query rows of the group's
// heads are this item's alone, and each row's dQ receives the key tiles in
// increasing order, as queryTileAsm adds them: the two ways give the same
// bits, so the choice between them (by thread count) cannot change the
// result.
func (c *bcall) columnAsm(w *buffers, it bitem) {
	for kt := 0; kt < c.segs[it.seg].tiles; kt++ {
		if c.keyTileUsed(int(it.b), int(it.h), int(it.seg), kt) {
			c.keyTileAsm(w, bitem{it.b, it.h, it.seg, int32(kt)}, true)
		}
	}
}

// cleanKeys returns, when some of the nk key rows at k (pitch floats
// apart) hold a NaN or an infinity (bad, as bits), a copy of the rows in
// w.vclean (D apart) with those elements 0; nil and 0 when none does.
func (w *buffers) cleanKeys(kn *kernels, k []float32, nk, pitch, D int) ([]float32, uint64) {
	bad := kn.badRows(k, nk, pitch, D)
	if bad == 0 {
		return nil, 0
	}
	kc := w.vclean[:nk*D]
	for j := 0; j < nk; j++ {
		row := kc[j*D:][:D]
		copy(row, k[j*pitch:][:D])
		if bad&(1<<uint(j)) != 0 {
			for d, x := range row {
				if x-x != 0 {
					row[d] = 0
				}
			}
		}
	}
	return kc, bad
}

// dqAsm adds dS K (dS in bb.dp, scale included) to the rows rows of dq
// (pq floats apart): K is the nk key rows at krows (pk apart), or, when
// kc is not nil, its copy with the non-finite elements of the rows in bad
// zeroed (D apart), whose left-out terms are then added for the rows that
// keep those keys.
func (c *bcall) dqAsm(bb *bwdBuffers, dq []float32, rows, pq int, krows, kc []float32, pk int, bad uint64, nk int) {
	D := c.s.HeadDim
	if kc == nil {
		c.kern.gemmK(dq, bb.dp, krows, rows, D, nk, TK, 1, pk, pq, true)
		return
	}
	c.kern.gemmK(dq, bb.dp, kc, rows, D, nk, TK, 1, D, pq, true)
	for r := 0; r < rows; r++ {
		for x := bb.words[r] & bad; x != 0; x &= x - 1 {
			j := bits.TrailingZeros64(x)
			ds := bb.dp[r*TK+j]
			dqr := dq[r*pq:][:D]
			for d, kx := range krows[j*pk:][:D] {
				if kx-kx != 0 {
					dqr[d] += ds * kx
				}
			}
		}
	}
}

// queryTileAsm is queryTile with the assembly kernels.
func (c *bcall) queryTileAsm(w *buffers, it bitem) {
	s, D := c.s, c.s.HeadDim
	b, h, g, qt := int(it.b), int(it.h), c.segs[it.seg], int(it.t)
	bb := w.bwdBufs()
	kvh := h / (s.HeadsQ / s.HeadsKV)
	off := g.nk - g.nq
	rows := min(TQ, g.nq-qt*TQ)
	q0 := c.qrow(b, h, g, qt*TQ+off)
	pq, pk := g.stride*D, g.stride*D
	c.rowsOf(bb, q0, rows, g.stride)
	for _, t := range c.colsOf(b, h)[it.seg].Row(qt) {
		if !c.words(w, b, h, g, qt, t.K, t.Class) || !c.liveWords(w, bb, q0, rows, g.stride) {
			continue
		}
		k0 := t.K * TK
		nk := min(TK, g.nk-k0)
		ko := c.kvrow(b, kvh, g, k0) * D
		krows := c.k[ko:]
		c.kern.packT(w.kt[:D*TK], krows, nk, pk, D)
		c.kern.packT(w.vt[:D*TK], c.v[ko:], nk, pk, D)
		c.probs(w, bb, q0*D, rows, pq, h, g.off+g.stride*(qt*TQ+off), g.off+g.stride*k0, g.stride)
		kc, bad := w.cleanKeys(c.kern, krows, nk, pk, D)
		c.dqAsm(bb, c.dq[q0*D:], rows, pq, krows, kc, pk, bad, nk)
	}
}

// badRows returns the rows of nk key rows (pitch floats apart) that hold
// a NaN or an infinity, as bits.
func (kn *kernels) badRows(k []float32, nk, pitch, D int) uint64 {
	if nk == TK && pitch == D {
		return kn.nonFiniteRows(k, D)
	}
	var nf uint64
	for j := 0; j < nk; j++ {
		if !allFinite(k[j*pitch:][:D]) {
			nf |= 1 << uint(j)
		}
	}
	return nf
}

// markNonFinite sets c.qbad and c.anyBad: the rows ([batch, head, seq_q])
// whose q or dout holds a NaN or an infinity, 64 rows at a time.
func (c *bcall) markNonFinite() {
	D, n := c.s.HeadDim, len(c.lse)
	c.qbad = grow(c.qbad, (n+63)/64)
	var any uint64
	for i := range c.qbad {
		r0 := i * 64
		var x uint64
		if r0+64 <= n {
			x = c.kern.nonFiniteRows(c.q[r0*D:], D) | c.kern.nonFiniteRows(c.dout[r0*D:], D)
		} else {
			for r := r0; r < n; r++ {
				if !allFinite(c.q[r*D:][:D]) || !allFinite(c.dout[r*D:][:D]) {
					x |= 1 << uint(r-r0)
				}
			}
		}
		c.qbad[i] = x
		any |= x
	}
	c.anyBad = any != 0
}

// tileBad returns, as bits, the rows of a query tile (rows rows from row
// q0, stride apart) whose q or dout holds a non-finite element and that
// mask some of the nk keys of the tile (bb.words: none kept when the row's
// lse is -Inf).
func (c *bcall) tileBad(bb *bwdBuffers, q0, rows, stride, nk int) uint64 {
	if !c.anyBad {
		return 0
	}
	tail := mask.TailBits(nk)
	var fix uint64
	for r := 0; r < rows; r++ {
		row := q0 + r*stride
		if c.qbad[row>>6]&(1<<uint(row&63)) != 0 && bb.words[r]&tail != tail {
			fix |= 1 << uint(r)
		}
	}
	return fix
}

// gradsClean adds P^T dO to dv and dS^T Q to dk (P in w.s, dS in bb.dp)
// for a query tile whose rows in fix hold a NaN or an infinity in q or
// dout (rows at element offset qo, pq apart): the products read copies of
// the dO and Q rows with those elements 0 (only the matrices where a row
// of fix has one), then the left-out terms are added for the keys each
// row keeps (IEEE arithmetic through kept pairs).
func (c *bcall) gradsClean(w *buffers, bb *bwdBuffers, dk, dv []float32, qo, rows, pq, nk int, fix uint64) {
	D := c.s.HeadDim
	var fixO, fixQ uint64
	for x := fix; x != 0; x &= x - 1 {
		r := bits.TrailingZeros64(x)
		if !allFinite(c.dout[qo+r*pq:][:D]) {
			fixO |= 1 << uint(r)
		}
		if !allFinite(c.q[qo+r*pq:][:D]) {
			fixQ |= 1 << uint(r)
		}
	}
	product := func(dst, a, src, clean []float32, fix uint64) {
		if fix == 0 {
			c.kern.gemmK(dst, a, src[qo:], nk, D, rows, 1, TK, pq, D, true)
			return
		}
		clean = clean[:rows*D]
		for r := 0; r < rows; r++ {
			row := clean[r*D:][:D]
			copy(row, src[qo+r*pq:][:D])
			if fix&(1<<uint(r)) != 0 {
				for d, x := range row {
					if x-x != 0 {
						row[d] = 0
					}
				}
			}
		}
		c.kern.gemmK(dst, a, clean, nk, D, rows, 1, TK, D, D, true)
		tail := mask.TailBits(nk)
		for x := fix; x != 0; x &= x - 1 {
			r := bits.TrailingZeros64(x)
			srow := src[qo+r*pq:][:D]
			for y := bb.words[r] & tail; y != 0; y &= y - 1 {
				j := bits.TrailingZeros64(y)
				f, drow := a[r*TK+j], dst[j*D:][:D]
				for d, e := range srow {
					if e-e != 0 {
						drow[d] += f * e
					}
				}
			}
		}
	}
	product(dv, w.s, c.dout, bb.oc, fixO)
	product(dk, bb.dp, c.q, bb.qc, fixQ)
}
