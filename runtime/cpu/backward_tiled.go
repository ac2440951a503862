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
// of rows rows (one query head, its rows of q and dout read in place
// through their strides: a segment's consecutive rows are stride*Pos
// floats apart) and a key tile of nk keys (its kv head, likewise):
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
// row of the schedule.
//
// The products with head-dimension columns (dV, dK, dQ) run 64 columns at
// a time: for a head size that is not a multiple of 64 (any multiple of
// 8 up to 256 runs here) the B operand (dO, Q or K rows) is copied into
// the worker's buffers with zero columns up to padDim, dK and dV
// accumulate padDim wide, and dQ rows go through a padded copy (copied
// in, accumulated, copied out). Each column of a product depends on that
// column of B only, so the padding changes no bit of the others. Every sum has a fixed order, so the result does not
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
	dk, dv []float32 // [TK][padDim(D)] a key tile's gradients
	lb, dl []float32 // [TQ] lse*log2(e) and delta of the query tile's rows
	words  []uint64  // [TQ] keep words of the live rows
	qc, oc []float32 // [TQ][padDim(D)] a query tile's Q and dO rows, padded with zeros, non-finite elements of some rows zeroed
	dqp    []float32 // [TQ][padDim(D)] a query tile's dQ rows, padded with zeros
}

func (w *buffers) bwdBufs() *bwdBuffers {
	if w.bwd == nil {
		d := maxHeadDim()
		w.bwd = &bwdBuffers{dp: make([]float32, TQ*TK), dt: make([]float32, TQ*TK), dk: make([]float32, TK*d), dv: make([]float32, TK*d),
			lb: make([]float32, TQ), dl: make([]float32, TQ), words: make([]uint64, TQ),
			qc: make([]float32, TQ*d), oc: make([]float32, TQ*d), dqp: make([]float32, TQ*d)}
	}
	return w.bwd
}

// padDim is d rounded up to the 64 columns the products run at a time.
func padDim(d int) int { return (d + 63) &^ 63 }

// qtile is where a query tile's rows are: the element offsets of its first
// row in q (and dq) and in out (and dout), and the rows' pitches there.
type qtile struct{ qo, oo, pq, po int }

// tileOf returns the query tile of query head h of batch b whose first
// row is row, its rows stride rows apart.
func (c *bcall) tileOf(b, h, row, stride int) qtile {
	return qtile{c.qAt(b, h, row), c.oAt(b, h, row), stride * c.ls.Q.Pos, stride * c.ls.Out.Pos}
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

// rowsOf fills lb and dl of the rows rows of a query tile whose first
// row has lse index l0, the others stride apart.
func (c *bcall) rowsOf(bb *bwdBuffers, l0, rows, stride int) {
	for r := 0; r < rows; r++ {
		row := l0 + r*stride
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
// whose lse is -Inf (lse indices from l0, stride apart), and reports
// whether any pair is kept.
func (c *bcall) liveWords(w *buffers, bb *bwdBuffers, l0, rows, stride int) bool {
	var any uint64
	for r := 0; r < rows; r++ {
		x := w.mask[r]
		if x != 0 && math.IsInf(float64(c.lse[l0+r*stride]), -1) {
			x = 0
		}
		bb.words[r] = x
		any |= x
	}
	return any != 0
}

// probs computes S and dP of a query tile (qt) against the packed key
// tile in w.kt, w.vt, then P into w.s and dS into bb.dp.
//
// With a score stage that rewrites scores, S goes through it between the
// products (query head h, row r at absolute position i0 + stride*r, key
// column x at j0 + stride*x) in the forward's float32 log2 units, and dS
// is multiplied by the soft-cap's derivative 1 - tanh^2 after bwdProb.
func (c *bcall) probs(w *buffers, bb *bwdBuffers, qt qtile, rows, h, i0, j0, stride int) {
	D, DV := c.s.HeadDim, c.dvd
	c.kern.gemmK(w.s, c.q[qt.qo:], w.kt, rows, TK, D, qt.pq, 1, TK, TK, false)
	c.kern.gemmK(bb.dp, c.dout[qt.oo:], w.vt, rows, TK, DV, qt.po, 1, TK, TK, false)
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
	s, D, DV := c.s, c.s.HeadDim, c.dvd
	Dp, DVp := padDim(D), padDim(DV)
	b, kvh, g, kt := int(it.b), int(it.h), c.segs[it.seg], int(it.t)
	bb := w.bwdBufs()
	group := s.HeadsQ / s.HeadsKV
	k0 := kt * TK
	nk := min(TK, g.nk-k0)
	ki := c.kIdx(g, k0)
	ko, vo := c.kAt(b, kvh, ki), c.vAt(b, kvh, ki)
	pk, pv := g.stride*c.ls.K.Pos, g.stride*c.ls.V.Pos
	krows := c.k[ko:]
	c.kern.packT(w.kt[:D*TK], krows, nk, pk, D)
	c.kern.packT(w.vt[:DV*TK], c.v[vo:], nk, pv, DV)
	var kr keyRows
	if fused {
		kr = w.keyRowsOf(c.kern, krows, nk, pk, D)
	}
	dk, dv := bb.dk[:nk*Dp], bb.dv[:nk*DVp]
	clear(dk)
	clear(dv)
	step := c.headStep()
	for h0 := kvh * group; h0 < (kvh+1)*group; h0 += step {
		for _, ct := range c.schedOf(b, h0)[it.seg].Of(kt) {
			if !c.words(w, b, h0, g, ct.Q, kt, ct.Class) {
				continue
			}
			x0 := ct.Q * TQ
			rows := min(TQ, g.nq-x0)
			row0 := c.qRow(g, x0)
			for h := h0; h < h0+step; h++ {
				l0 := c.lAt(b, h, row0)
				if !c.liveWords(w, bb, l0, rows, g.stride) {
					continue
				}
				c.rowsOf(bb, l0, rows, g.stride)
				qt := c.tileOf(b, h, row0, g.stride)
				c.probs(w, bb, qt, rows, h, qAbs(g, x0), g.keyAbs(k0), g.stride)
				fix := c.tileBad(bb, l0, rows, g.stride, nk)
				c.grads(w, bb, dk, dv, qt, rows, nk, fix)
				if fused {
					c.dqAsm(bb, qt, rows, krows, pk, kr, nk)
				}
			}
		}
	}
	for j := 0; j < nk; j++ {
		copy(c.dk[ko+j*pk:][:D], dk[j*Dp:][:D])
		copy(c.dv[vo+j*pv:][:DV], dv[j*DVp:][:DV])
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

// keyRows are the key rows dQ += dS K multiplies: the tile's rows in
// place (k, ld = their pitch), or a copy in w.vclean, ld = padDim(D)
// apart, padded with zeros, with the non-finite elements of the rows in
// bad (as bits) zeroed.
type keyRows struct {
	k   []float32
	ld  int
	bad uint64
}

// keyRowsOf returns the keyRows of the nk key rows at k (pitch floats
// apart): in place when they are finite and D is a multiple of 64.
func (w *buffers) keyRowsOf(kn *kernels, k []float32, nk, pitch, D int) keyRows {
	bad := kn.badRows(k, nk, pitch, D)
	Dp := padDim(D)
	if bad == 0 && Dp == D {
		return keyRows{k, pitch, 0}
	}
	kc := w.vclean[:nk*Dp]
	for j := 0; j < nk; j++ {
		row := kc[j*Dp:][:Dp]
		copy(row, k[j*pitch:][:D])
		clear(row[D:])
		if bad&(1<<uint(j)) != 0 {
			for d, x := range row[:D] {
				if x-x != 0 {
					row[d] = 0
				}
			}
		}
	}
	return keyRows{kc, Dp, bad}
}

// dqAsm adds dS K (dS in bb.dp, scale included) to the rows rows of dq
// of query tile qt: K is kr (the nk key rows at krows, pk apart, or their
// copy), and the terms a copy left out (non-finite elements of the rows
// in kr.bad) are then added for the rows that keep those keys. A head
// size that is not a multiple of 64 accumulates in a padded copy of the
// dq rows.
func (c *bcall) dqAsm(bb *bwdBuffers, qt qtile, rows int, krows []float32, pk int, kr keyRows, nk int) {
	D := c.s.HeadDim
	Dp := padDim(D)
	dq, pq := c.dq[qt.qo:], qt.pq
	if Dp == D {
		c.kern.gemmK(dq, bb.dp, kr.k, rows, D, nk, TK, 1, kr.ld, pq, true)
	} else {
		acc := bb.dqp[:rows*Dp]
		for r := 0; r < rows; r++ {
			row := acc[r*Dp:][:Dp]
			copy(row, dq[r*pq:][:D])
			clear(row[D:])
		}
		c.kern.gemmK(acc, bb.dp, kr.k, rows, Dp, nk, TK, 1, kr.ld, Dp, true)
		for r := 0; r < rows; r++ {
			copy(dq[r*pq:][:D], acc[r*Dp:][:D])
		}
	}
	if kr.bad == 0 {
		return
	}
	for r := 0; r < rows; r++ {
		for x := bb.words[r] & kr.bad; x != 0; x &= x - 1 {
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
	s, D, DV := c.s, c.s.HeadDim, c.dvd
	b, h, g, qt := int(it.b), int(it.h), c.segs[it.seg], int(it.t)
	bb := w.bwdBufs()
	kvh := h / (s.HeadsQ / s.HeadsKV)
	x0 := qt * TQ
	rows := min(TQ, g.nq-x0)
	row0 := c.qRow(g, x0)
	l0 := c.lAt(b, h, row0)
	tile := c.tileOf(b, h, row0, g.stride)
	pk, pv := g.stride*c.ls.K.Pos, g.stride*c.ls.V.Pos
	c.rowsOf(bb, l0, rows, g.stride)
	for _, t := range c.schedOf(b, h)[it.seg].Row(qt) {
		if !c.words(w, b, h, g, qt, t.K, t.Class) || !c.liveWords(w, bb, l0, rows, g.stride) {
			continue
		}
		k0 := t.K * TK
		nk := min(TK, g.nk-k0)
		ki := c.kIdx(g, k0)
		ko, vo := c.kAt(b, kvh, ki), c.vAt(b, kvh, ki)
		krows := c.k[ko:]
		c.kern.packT(w.kt[:D*TK], krows, nk, pk, D)
		c.kern.packT(w.vt[:DV*TK], c.v[vo:], nk, pv, DV)
		c.probs(w, bb, tile, rows, h, qAbs(g, x0), g.keyAbs(k0), g.stride)
		kr := w.keyRowsOf(c.kern, krows, nk, pk, D)
		c.dqAsm(bb, tile, rows, krows, pk, kr, nk)
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

// markNonFinite sets c.qbad and c.anyBad: the rows (by lse index) whose
// q or dout holds a NaN or an infinity.
func (c *bcall) markNonFinite() {
	s, D, DV := c.s, c.s.HeadDim, c.dvd
	c.qbad = grow(c.qbad, (c.lseLen()+63)/64)
	clear(c.qbad)
	var any uint64
	mark := func(li int) {
		c.qbad[li>>6] |= 1 << uint(li&63)
		any = 1
	}
	// whole blocks of 64 contiguous rows through the variant's scan
	fast := c.ls.Q.Pos == D && c.ls.Out.Pos == DV
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsQ; h++ {
			row := 0
			for ; fast && row+64 <= s.SeqQ; row += 64 {
				x := c.kern.nonFiniteRows(c.q[c.qAt(b, h, row):], D) | c.kern.nonFiniteRows(c.dout[c.oAt(b, h, row):], DV)
				for ; x != 0; x &= x - 1 {
					mark(c.lAt(b, h, row+bits.TrailingZeros64(x)))
				}
			}
			for ; row < s.SeqQ; row++ {
				if !allFinite(c.q[c.qAt(b, h, row):][:D]) || !allFinite(c.dout[c.oAt(b, h, row):][:DV]) {
					mark(c.lAt(b, h, row))
				}
			}
		}
	}
	c.anyBad = any != 0
}

// tileBad returns, as bits, the rows of a query tile (rows rows from lse
// index l0, stride apart) whose q or dout holds a non-finite element and
// that mask some of the nk keys of the tile (bb.words: none kept when the
// row's lse is -Inf).
func (c *bcall) tileBad(bb *bwdBuffers, l0, rows, stride, nk int) uint64 {
	if !c.anyBad {
		return 0
	}
	tail := mask.TailBits(nk)
	var fix uint64
	for r := 0; r < rows; r++ {
		row := l0 + r*stride
		if c.qbad[row>>6]&(1<<uint(row&63)) != 0 && bb.words[r]&tail != tail {
			fix |= 1 << uint(r)
		}
	}
	return fix
}

// grads adds P^T dO to dv and dS^T Q to dk (P in w.s, dS in bb.dp; dk
// and dv padDim(D) and padDim(DV) floats a row) for query tile qt, whose
// rows in fix hold a NaN or an infinity in q or dout (see product).
func (c *bcall) grads(w *buffers, bb *bwdBuffers, dk, dv []float32, qt qtile, rows, nk int, fix uint64) {
	D, DV := c.s.HeadDim, c.dvd
	var fixO, fixQ uint64
	for x := fix; x != 0; x &= x - 1 {
		r := bits.TrailingZeros64(x)
		if !allFinite(c.dout[qt.oo+r*qt.po:][:DV]) {
			fixO |= 1 << uint(r)
		}
		if !allFinite(c.q[qt.qo+r*qt.pq:][:D]) {
			fixQ |= 1 << uint(r)
		}
	}
	c.product(bb, dv, w.s, c.dout[qt.oo:], qt.po, DV, bb.oc, rows, nk, fixO)
	c.product(bb, dk, bb.dp, c.q[qt.qo:], qt.pq, D, bb.qc, rows, nk, fixQ)
}

// product adds a^T src to dst (a: [rows][TK], P or dS; src: rows rows of
// W floats, ps apart; dst: nk rows of padDim(W) floats). The product reads
// src in place when W is a multiple of 64 and no row is in fix; else a
// copy in clean, padded with zeros, with the non-finite elements of the
// rows in fix zeroed, whose left-out terms are then added for the keys
// each such row keeps (IEEE arithmetic through kept pairs).
func (c *bcall) product(bb *bwdBuffers, dst, a, src []float32, ps, W int, clean []float32, rows, nk int, fix uint64) {
	Wp := padDim(W)
	if fix == 0 && Wp == W {
		c.kern.gemmK(dst, a, src, nk, W, rows, 1, TK, ps, W, true)
		return
	}
	clean = clean[:rows*Wp]
	for r := 0; r < rows; r++ {
		row := clean[r*Wp:][:Wp]
		copy(row, src[r*ps:][:W])
		clear(row[W:])
		if fix&(1<<uint(r)) != 0 {
			for d, x := range row[:W] {
				if x-x != 0 {
					row[d] = 0
				}
			}
		}
	}
	c.kern.gemmK(dst, a, clean, nk, Wp, rows, 1, TK, Wp, Wp, true)
	tail := mask.TailBits(nk)
	for x := fix; x != 0; x &= x - 1 {
		r := bits.TrailingZeros64(x)
		srow := src[r*ps:][:W]
		for y := bb.words[r] & tail; y != 0; y &= y - 1 {
			j := bits.TrailingZeros64(y)
			f, drow := a[r*TK+j], dst[j*Wp:][:W]
			for d, e := range srow {
				if e-e != 0 {
					drow[d] += f * e
				}
			}
		}
	}
}
