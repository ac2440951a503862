package cpu

import (
	"math"

	"github.com/attngen/attngen/runtime/mask"
)

func (w *buffers) run(c *call) { w.drain(c) }

// An itemSource hands out the items of a forward task, each once: a
// call's (call.claim) or those of a ragged call's rows (rowCall.claim).
type itemSource interface {
	claim() (*call, item, bool)
}

// drain runs items from src until none is left. runItem claims the next
// item itself, before its last key tiles, so that it can prefetch that
// item's query rows while the tiles run.
func (w *buffers) drain(src itemSource) {
	c, it, ok := src.claim()
	for ok {
		c, it, ok = w.runItem(c, it, src)
	}
}

// claim takes the call's next item.
func (c *call) claim() (*call, item, bool) {
	n := c.next.Add(1) - 1
	if n >= int64(len(c.items)) {
		return nil, item{}, false
	}
	return c, c.items[n], true
}

// qInPlace reports whether job j's query tile is read from q in place: TQ
// consecutive float32 rows of one head at the kernels' width.
func (c *call) qInPlace(j job) bool {
	return c.elem == F32 && int(j.nh)*int(j.per) == TQ && j.nh == 1 && c.segs[j.seg].stride == 1 && c.dd.qk == c.kd.qk && c.ls.Q.Pos == c.kd.qk
}

// prefetchQ prefetches part k of parts of the query rows of item it's job
// when they will be copied (they are not the tile in place) and are more
// than a decoding job's few: per head, rows a position stride apart.
func (c *call) prefetchQ(it item, k, parts int) {
	j := c.jobs[it.job]
	if c.kern.prefetch == nil || int(j.nh)*int(j.per) <= maxDecodeRows || c.qInPlace(j) {
		return
	}
	per := int(j.per)
	r0, r1 := k*per/parts, (k+1)*per/parts
	at0, hs, ps := c.jobRows(j, c.ls.Q)
	at0 += r0 * ps
	// heads side by side (BSHD, packed QKV): one run of them per position
	heads, n := runOf(int(j.nh), hs, c.dd.qk)
	for h := 0; h < heads; h++ {
		if c.elem == F32 {
			prefetchRows(c.kern, c.q, at0+h*hs, r1-r0, ps, n)
		} else {
			prefetchRows(c.kern, c.q16, at0+h*hs, r1-r0, ps, n)
		}
	}
}

// runOf returns how many runs nh rows of n elements, hs apart, are read
// in, and the elements of each: one run of all of them when they are
// adjacent (hs = n), else a run each.
func runOf(nh, hs, n int) (runs, elems int) {
	if hs == n {
		return 1, nh * n
	}
	return nh, n
}

// prefetchOut prefetches part k of parts of the output rows job j
// finishes when they lie apart (not consecutive rows of one head) and are
// more than a decoding job's few, so that finish writes to cache lines it
// has.
func (c *call) prefetchOut(j job, k, parts int) {
	dv := c.dd.v
	if c.kern.prefetch == nil || int(j.nh)*int(j.per) <= maxDecodeRows || c.ls.Out.Pos == dv && c.segs[j.seg].stride == 1 {
		return
	}
	per := int(j.per)
	r0, r1 := k*per/parts, (k+1)*per/parts
	at0, hs, ps := c.jobRows(j, c.ls.Out)
	at0 += r0 * ps
	heads, n := runOf(int(j.nh), hs, dv)
	for h := 0; h < heads; h++ {
		if c.out16 != nil {
			prefetchRows(c.kern, c.out16, at0+h*hs, r1-r0, ps, n)
		} else {
			prefetchRows(c.kern, c.out, at0+h*hs, r1-r0, ps, n)
		}
	}
}

// prefetchTiles is over how many of an item's last key tiles runItem
// spreads the prefetches of the next item's query rows and of its own
// output rows: a few rows before each tile, so that they arrive while the
// kernels compute instead of stalling the copies.
const prefetchTiles = 4

// rowOf returns, for row r of job j's tile, the query head and the query
// row (0-based among the call's queries).
func (c *call) rowOf(j job, r int) (head, row int) {
	g := c.segs[j.seg]
	per := int(j.per)
	head = int(j.h) + r/per
	x := int(j.x0) + r%per + g.qx0 // segment position
	return head, g.off + g.stride*x - c.qpos
}

// jobRows returns, for a tensor of strides x (q or the output), the
// offset of job j's first row (its first head, first position) and the
// steps from one of its heads to the next and from one of its positions
// to the next: row h*per + i of the job's tile is at at + h*hs + i*ps.
func (c *call) jobRows(j job, x Strides) (at, hs, ps int) {
	g := c.segs[j.seg]
	row := g.off + g.stride*(int(j.x0)+g.qx0) - c.qpos
	return int(j.b)*x.Batch + int(j.h)*x.Head + row*x.Pos, x.Head, g.stride * x.Pos
}

// qAt, outAt and lseAt are the offsets in q, the output and lse of query
// row row of head h of batch b.
func (c *call) qAt(b, h, row int) int {
	return b*c.ls.Q.Batch + h*c.ls.Q.Head + row*c.ls.Q.Pos
}

func (c *call) outAt(b, h, row int) int {
	return b*c.ls.Out.Batch + h*c.ls.Out.Head + row*c.ls.Out.Pos
}

func (c *call) lseAt(b, h, row int) int { return b*c.lseB + h*c.lseH + row }

// runItem runs the key tiles of one item over its job's query tile, then
// finishes the rows (or stores the part's state, and merges the parts if
// it is the last). It returns the next item of src, which it claims
// before the item's last prefetchTiles key tiles and whose query rows it
// prefetches then (with the output rows this item finishes), so that the
// copies after the tiles find them in cache.
func (w *buffers) runItem(c *call, it item, src itemSource) (*call, item, bool) {
	s, D, DV, dq := c.s, c.kd.qk, c.kd.v, c.dd.qk
	j := c.jobs[it.job]
	g := c.segs[j.seg]
	b, per := int(j.b), int(j.per)
	rows := int(j.nh) * per
	hk := int(j.h) / (s.HeadsQ / s.HeadsKV)
	// The query tile: the rows of q in place when they are TQ consecutive
	// rows of one head at the kernels' width, else copied (zero past the
	// tile's rows and the head dimension). The scale is in the packed keys.
	var qt0 []float32
	if c.qInPlace(j) {
		h, row := c.rowOf(j, 0)
		qt0 = c.q[c.qAt(b, h, row):][:TQ*D]
	} else {
		// w.q is zero from w.qDirty on, so only what an earlier tile wrote
		// past this one's rows is cleared (a decoding job's few rows
		// would otherwise clear the whole tile each time).
		qt0 = w.q[:TQ*D]
		if end := rows * D; w.qDirty > end {
			clear(w.q[end:w.qDirty])
		}
		w.qDirty = rows * D
		// position by position, the heads of each (adjacent in BSHD)
		at0, hs, ps := c.jobRows(j, c.ls.Q)
		for i := 0; i < per; i++ {
			for h := 0; h < int(j.nh); h++ {
				dst := qt0[(h*per+i)*D:][:D]
				at := at0 + h*hs + i*ps
				if c.elem == F32 {
					copy(dst, c.q[at:][:dq])
				} else {
					c.kern.widenRow(dst[:dq], c.q16[at:][:dq], c.elem)
				}
				clear(dst[dq:])
			}
		}
	}
	// Only the job's rows of o start at zero: the kernels leave the rows
	// past them untouched (they keep no key) or add 0 to them, and nothing
	// reads them.
	o, m, l := w.o[:TQ*DV], w.m[:TQ], w.l[:TQ]
	clear(o[:rows*DV])
	clear(l)
	for r := range m {
		m[r] = float32(math.Inf(-1))
	}
	q0 := int(j.x0) + g.qx0
	q1 := q0 + per - 1
	docs := c.docsOf(b, int(j.h)) // the job's heads have the same values
	refs := c.refs[it.r0:it.r1]
	// Decoding (few rows, each key tile read once): whole tiles that every
	// row keeps go to the decode kernels, which read the key and value rows
	// in place, with the query rows scaled, in groups of 8 rows (zero rows
	// pad the last group to 1, 2, 4 or 8).
	direct := c.direct && c.transient && rows <= maxDecodeRows && (!c.sc.modifies || c.kern.hasDecodeScore(c.kd))
	var qs []float32
	var st *scoreTile // the score stage's positions and slopes, when it rewrites scores
	if c.sc.modifies {
		st = &w.st
		c.tileScoreRows(st, j, rows)
	}
	var (
		nc    *call
		nit   item
		ahead bool // nc, nit: the next item, claimed
		nok   bool
	)
	pf := min(len(refs), prefetchTiles)
	offNext := -1 // the key tile whose key offsets w.off[offNextK:offV] hold, or -1
	for i, ref := range refs {
		if k := i - (len(refs) - pf); k >= 0 {
			// The last tiles: claim the next item and ask for its query
			// rows, and for this job's output rows, a part before each
			// tile, while the tiles run.
			if k == 0 {
				nc, nit, nok = src.claim()
				ahead = true
			}
			if nok {
				nc.prefetchQ(nit, k, pf)
			}
			if it.part < 0 {
				c.prefetchOut(j, k, pf)
			}
		}
		k0 := ref.K * TK
		class := ref.Class
		words := w.mask[:TQ]
		if class == mask.Partial {
			// exact class and keep words of the tile's positions
			class = mask.RefineFrom(c.mask, words, q0, q1, g.kx0, ref.K, g.nk, TK, docs)
			if class == mask.Empty {
				continue
			}
		}
		if st != nil && c.sc.flags&scoreAlibi != 0 {
			c.tileScoreCols(st, j, ref.K) // positions: ALiBi's only
		}
		if direct && class == mask.Full && k0+TK <= g.nk {
			n := decodeRows(rows)
			if qs == nil {
				qs = w.qs[:n*D]
				if !c.kern.scaleRowK(qs[:rows*D], qt0[:rows*D], c.scale) {
					for x, y := range qt0[:rows*D] {
						qs[x] = y * c.scale
					}
				}
				clear(qs[rows*D:])
			}
			bk := b*s.HeadsKV + hk
			if offNext == ref.K {
				copy(w.off[:TK], w.off[offNextK:offV]) // found as the previous tile's next
			} else {
				c.rowOffsets(w.off[:TK], bk, g, ref.K, false)
			}
			// The next tile's rows, which the kernels may prefetch: tile
			// K+1 when it is whole, else this one's again.
			offNext = -1
			if (ref.K+2)*TK <= g.nk {
				c.rowOffsets(w.off[offNextK:offV], bk, g, ref.K+1, false)
				offNext = ref.K + 1
			} else {
				copy(w.off[offNextK:offV], w.off[:TK])
			}
			// The value rows: at the keys' offsets, or (their own strides
			// or sizes) at their own.
			if c.sameKV {
				copy(w.off[offV:], w.off[:TK])
			} else {
				c.rowOffsets(w.off[offV:], bk, g, ref.K, true)
			}
			kb, vb := c.kvBase()
			// groups of 8 rows, the last padded to 1, 2, 4 or 8
			for r0 := 0; r0 < rows; r0 += 8 {
				n := decodeRows(min(rows-r0, 8))
				if st != nil {
					c.kern.decodeScoreRun(c.elem, qs[r0*D:], kb, vb, &w.off, o[r0*DV:], m[r0:], l[r0:], n, c.kd, st.from(r0, &w.st2))
					continue
				}
				c.kern.decodeRun(c.elem, qs[r0*D:], kb, vb, &w.off, o[r0*DV:], m[r0:], l[r0:], n, c.kd)
			}
			continue
		}
		// Keep words when the tile is partial, runs past the keys, or has
		// rows to skip (the kernels skip row blocks that keep nothing).
		var keep []uint64
		if class == mask.Partial || k0+TK > g.nk || rows < TQ {
			keep = words
			if class == mask.Full {
				tail := mask.TailBits(g.nk - k0)
				for r := 0; r < per; r++ {
					keep[r] = tail
				}
			}
			for h := 1; h < int(j.nh); h++ {
				copy(keep[h*per:(h+1)*per], keep[:per])
			}
			clear(keep[rows:])
		}
		// Whether some row masks a key of the tile (keys past the end are
		// zero, hence finite): only then can a non-finite value leak.
		masked := false
		if keep != nil {
			all := mask.TailBits(g.nk - k0)
			for _, k := range keep[:rows] {
				all &= k
			}
			masked = all != mask.TailBits(g.nk-k0)
		}
		kt, vt, nf := c.tileData(w, b, hk, g, ref.K, masked)
		// Value rows holding NaN or infinities that some row of the tile
		// masks (a full tile keeps every pair): the kernels multiply masked
		// p = 0 by v, so they run on a copy with those entries zeroed, and
		// the rows that keep the keys get their terms afterwards.
		if nf != 0 {
			all := ^uint64(0)
			for _, k := range keep[:rows] {
				all &= k
			}
			if fix := nf &^ all; fix != 0 {
				c.kern.tileRun(qt0, kt, w.sanitize(vt, fix, DV), w.s[:TQ*TK], o, m, l, keep, c.kd, st)
				w.restore(vt, fix, keep[:rows], DV)
				continue
			}
		}
		c.kern.tileRun(qt0, kt, vt, w.s[:TQ*TK], o, m, l, keep, c.kd, st)
	}
	if it.part < 0 {
		c.finish(w, j, o, m, l)
	} else {
		// A part of a split job: keep its state; the last part merges.
		ps := c.partial[int(it.part)*partSize(DV):][:partSize(DV)]
		copy(ps, o[:rows*DV])
		copy(ps[TQ*DV:], m[:rows])
		copy(ps[TQ*DV+TQ:], l[:rows])
		if c.pending[it.job].Add(1) == j.parts {
			w.merge(c, j)
		}
	}
	if !ahead {
		return src.claim()
	}
	return nc, nit, nok
}

// merge combines the parts of a split job (in part order, so the result
// does not depend on which thread ran which) and finishes its rows: with
// M the largest part maximum, l = sum_p 2^(m_p - M) l_p and o likewise
// (every factor 1 when M is -Inf).
func (w *buffers) merge(c *call, j job) {
	D := c.kd.v
	rows := int(j.nh) * int(j.per)
	o, m, l := w.o[:TQ*D], w.m[:TQ], w.l[:TQ]
	negInf := float32(math.Inf(-1))
	for r := 0; r < rows; r++ {
		mx := negInf
		for p := 0; p < int(j.parts); p++ {
			ps := c.partial[(int(j.part0)+p)*partSize(D):]
			mx = max(mx, ps[TQ*D+r])
		}
		or := o[r*D : r*D+D]
		clear(or)
		var lr float32
		for p := 0; p < int(j.parts); p++ {
			ps := c.partial[(int(j.part0)+p)*partSize(D):]
			f := float32(1)
			if mx != negInf {
				f = exp2(ps[TQ*D+r] - mx)
			}
			lr += f * ps[TQ*D+TQ+r]
			if !c.kern.addScaledK(or, ps[r*D:r*D+D], f) {
				for d, x := range ps[r*D : r*D+D] {
					or[d] += f * x
				}
			}
		}
		m[r], l[r] = mx, lr
	}
	c.finish(w, j, o, m, l)
}

// finish writes the rows of a job: out = o / l, lse = (m + log2 l) ln 2,
// or 0 and -Inf for rows that keep no key (l = 0). A 16-bit output gets
// the same float32 values rounded to the format. o's rows are the
// kernels' width; the output gets the values' head dimension of each.
func (c *call) finish(w *buffers, j job, o, m, l []float32) {
	DV, dv := c.kd.v, c.dd.v
	b := int(j.b)
	rows := int(j.nh) * int(j.per)
	lse := &w.lse // the kernels are called through the table: a stack array would escape
	sinks := c.sc.sinks
	vecLSE := c.lse != nil && len(sinks) == 0 && c.kern.lseK(lse[:], m[:TQ], l[:TQ], rows)
	// position by position, the heads of each (adjacent in BSHD)
	g := c.segs[j.seg]
	per := int(j.per)
	at0, hs, ps := c.jobRows(j, c.ls.Out)
	row0 := g.off + g.stride*(int(j.x0)+g.qx0) - c.qpos
	for x := 0; x < rows; x++ {
		i, h := x, 0
		if j.nh > 1 {
			i, h = x/int(j.nh), x%int(j.nh)
		}
		r := h*per + i
		head, row := int(j.h)+h, row0+i*g.stride
		at := at0 + h*hs + i*ps
		or := o[r*DV : r*DV+dv]
		if len(sinks) > 0 {
			// The learned sink joins the row's softmax: out = o 2^(m-M)/L.
			inv, ls := finishSink(m[r], l[r], sinks[head], c.sc.sinksN[head])
			if l[r] == 0 {
				c.clearRow(at)
			} else {
				c.writeRow(or, at, inv)
			}
			if c.lse != nil {
				c.lse[c.lseAt(b, head, row)] = ls
			}
			continue
		}
		if l[r] == 0 {
			c.clearRow(at)
			if c.lse != nil {
				c.lse[c.lseAt(b, head, row)] = float32(math.Inf(-1))
			}
			continue
		}
		c.writeRow(or, at, 1/l[r])
		switch {
		case vecLSE:
			c.lse[c.lseAt(b, head, row)] = lse[r]
		case c.lse != nil:
			c.lse[c.lseAt(b, head, row)] = float32((float64(m[r]) + math.Log2(float64(l[r]))) * math.Ln2)
		}
	}
}

// clearRow writes zeros to the output row at offset at.
func (c *call) clearRow(at int) {
	dv := c.dd.v
	if c.out16 != nil {
		clear(c.out16[at : at+dv])
	} else {
		clear(c.out[at : at+dv])
	}
}

// writeRow writes o*inv to the output row at offset at, in the output's
// format.
func (c *call) writeRow(o []float32, at int, inv float32) {
	D := len(o)
	if c.out16 != nil {
		c.kern.narrowRow(c.out16[at:at+D], o, inv, c.elem)
	} else if dst := c.out[at : at+D]; !c.kern.scaleRowK(dst, o, inv) {
		for d, x := range o {
			dst[d] = x * inv
		}
	}
}
