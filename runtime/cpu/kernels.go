package cpu

import (
	"math/bits"
	"unsafe"
)

// kernels is one CPU variant's kernels: every routine the runtime runs in
// a variant's own instructions, as one value. A variant is an entry of
// Targets plus the kernels value archKernels returns for it
// (kernels_amd64.go, kernels_arm64.go); the runtime calls only through
// this table, never an ISA by name. Every field but tile may be nil (or,
// for the arrays, hold nil entries): the runtime then runs its Go code for
// that step, which computes the same values.
type kernels struct {
	// tile is the forward microkernel (the tile ABI of the package
	// documentation) for every pair of head dimensions the variant has
	// (byDims; the pure-Go one runs any).
	tile tileFunc
	// tileScore is the microkernel with the score stage (score.go); nil:
	// the runtime runs tileScoreGo for tiles whose scores are modified.
	tileScore tileScoreFunc
	// byDims holds the assembly kernels of each pair of head dimensions
	// the variant is written for; a call of other dimensions runs the
	// smallest pair that holds it, on zero-padded tiles (kernelDims).
	byDims []dimKernels
	// tanh is the score stage's vector tanh on its own (dst[i] =
	// tanh(src[i]) for n a multiple of lanes), for the tests that measure
	// it; no call runs it.
	tanh func(dst, src *float32, n int)
	// gemm and bwdProb are the tiled backward's kernels (backward_tiled.go);
	// without them the backward runs its pure-Go per-pair path.
	gemm    func(c, a, b *float32, m, n, k, sam, sak, ldb, ldc, acc int)
	bwdProb func(s, dp, lb, dl *float32, mask *uint64, rows int, c, scale float32)
	// scoreBwd is the tiled backward's score stage (emit/avo.EmitScoreBwd):
	// the first rows rows of TK scores S at s become the stage of c*S in
	// place, and with scoreCap dt gets 1 - tanh^2 of each (see scoreBwdK).
	scoreBwd func(s, dt *float32, rows int, c float32, sc *scoreTile)
	// The row helpers take whole multiples of lanes floats (n, d below).
	lanes int
	// scaleRow sets dst[i] = src[i]*s for i < n.
	scaleRow func(dst, src *float32, n int, s float32)
	// addScaled adds src[i]*s to dst[i] for i < n, the product rounded
	// first (Go's dst[i] += src[i]*s where Go does not fuse it).
	addScaled func(dst, src *float32, n int, s float32)
	// lse sets dst[i] = (m[i] + log2(l[i])) * ln 2 for i < n.
	lse func(dst, m, l *float32, n int)
	// nonFinite returns the rows of a TK x d value tile holding a NaN or an
	// infinity, as bits.
	nonFinite func(v *float32, d int) uint64
	// narrow[e] rounds src[i]*s to e (BF16, F16) as f32toBF16 and f32toF16
	// do, bit for bit; widen[e] widens n elements of e exactly.
	narrow [3]func(dst *uint16, src *float32, n int, s float32)
	widen  [3]func(dst *float32, src *uint16, n int)
	// transpose writes kt[i*TK+c] = scale*k[c*pitch+i] for a whole key
	// tile (c < TK, i < d).
	transpose func(kt, k *float32, pitch, d int, scale float32)
	// prefetch asks for the cache lines of the n bytes at p + r*pitch for
	// r < rows (pitch in bytes, n > 0) without waiting for them: the rows
	// of a query tile that is copied, or of an output tile, when they lie
	// apart (BSHD). It changes no value; without it nothing is prefetched.
	prefetch func(p *byte, rows, pitch, n int)
	// peak is the FMA peak loop of the variant's vectors (peakFlops FLOPs
	// an iteration); readSum sums n floats (a multiple of readBlock) at
	// the read-bandwidth probe's pace. Both are probes for benchmarks, not
	// part of any call.
	peak      func(n int)
	peakFlops int
	readSum   func(p *float32, n int) float32
	readBlock int
}

// dims are the head dimensions of a kernel: qk of q and k, v of v and
// the output.
type dims struct{ qk, v int }

// square returns the dims of one head dimension d for q, k and v.
func square(d int) dims { return dims{d, d} }

// dimKernels are a variant's kernels for one pair of head dimensions.
type dimKernels struct {
	dims
	tile      asmFunc
	tileScore asmScoreFunc
	// decode holds the decode kernels (emit/avo.EmitDecode's ABI) by
	// element type and rows (1, 2, 4, 8); decodeScore are the decode
	// kernels with the score stage, indexed likewise. Either may be all
	// nil: without them a call decodes through the tile path.
	decode      [3][4]decodeKernel
	decodeScore [3][4]decodeScoreKernel
}

// at returns the kernels of dimensions d, or nil.
func (k *kernels) at(d dims) *dimKernels { return find(k.byDims, d) }

// find returns the kernels of dimensions d in ks, or nil.
func find(ks []dimKernels, d dims) *dimKernels {
	for i := range ks {
		if ks[i].dims == d {
			return &ks[i]
		}
	}
	return nil
}

// kernelDims returns the dimensions a call of head dimensions d runs its
// tiles at: d itself where the variant has kernels of d (or is the
// pure-Go one, which runs any), else the pair of the variant's kernels
// that holds d with the fewest padded elements (q, k and v are
// zero-padded into it: the extra terms of each dot product are exact
// zeros, and the extra output columns are dropped), else d, which the
// portable tile kernel then runs (tileRun). ok is false for a variant
// without a tile kernel.
func (k *kernels) kernelDims(d dims) (dims, bool) {
	if k.tile == nil {
		return dims{}, false
	}
	if len(k.byDims) == 0 || k.at(d) != nil {
		return d, true
	}
	best, cost := d, -1
	for _, x := range k.byDims {
		if x.qk >= d.qk && x.v >= d.v {
			if c := x.qk + x.v; cost < 0 || c < cost {
				best, cost = x.dims, c
			}
		}
	}
	return best, true
}

// asmFunc is the pointer ABI of every assembly tile kernel.
type asmFunc func(q, kt, v, s, o, m, l *float32, mask *uint64)

// asmTile adapts the assembly tile kernels of ks to tileFunc.
func asmTile(ks []dimKernels) tileFunc {
	return func(q, kt, v, s, o, m, l []float32, mask []uint64, d dims) {
		f := dimsOf(ks, d).tile
		var mp *uint64
		if mask != nil {
			mp = &mask[0]
		}
		f(&q[0], &kt[0], &v[0], &s[0], &o[0], &m[0], &l[0], mp)
	}
}

// asmScoreFunc is the pointer ABI of every assembly tile kernel with the
// score stage.
type asmScoreFunc func(q, kt, v, s, o, m, l *float32, mask *uint64, sc *scoreTile)

// asmTileScore adapts the assembly tile kernels with the score stage of
// ks to tileScoreFunc.
func asmTileScore(ks []dimKernels) tileScoreFunc {
	return func(q, kt, v, s, o, m, l []float32, mask []uint64, d dims, sc *scoreTile) {
		f := dimsOf(ks, d).tileScore
		var mp *uint64
		if mask != nil {
			mp = &mask[0]
		}
		f(&q[0], &kt[0], &v[0], &s[0], &o[0], &m[0], &l[0], mp, sc)
	}
}

// dimsOf returns the kernels of dimensions d in ks; the driver asks only
// for dimensions kernelDims gave it.
func dimsOf(ks []dimKernels, d dims) *dimKernels {
	if x := find(ks, d); x != nil {
		return x
	}
	panic("cpu: no kernel for these head dimensions")
}

// maxKernelDim is the largest head dimension of any kernel.
const maxKernelDim = 256

// goKernels is the pure-Go variant: the portable microkernel and Go for
// everything else.
var goKernels = &kernels{tile: tileGo, tileScore: tileScoreGo, lanes: 1, peak: peakGo, peakFlops: 12 * 2}

// kernelsOf returns the kernels of a variant, if this build and machine
// run it.
func kernelsOf(v Variant) (*kernels, bool) {
	if v == PureGo {
		return goKernels, true
	}
	k := archKernels(v)
	return k, k != nil
}

// tileFor returns the microkernel of a variant, if this build and machine
// can run it.
func tileFor(v Variant) (tileFunc, bool) {
	k, ok := kernelsOf(v)
	if !ok {
		return nil, false
	}
	return k.tile, true
}

// whole reports whether n floats are a non-empty whole number of the
// row helpers' vectors.
func (k *kernels) whole(n int) bool { return n > 0 && k.lanes > 0 && n%k.lanes == 0 }

// hasDecode reports whether the variant has decode kernels of dimensions
// d.
func (k *kernels) hasDecode(d dims) bool {
	x := k.at(d)
	return x != nil && x.decode[F32][0] != nil
}

// decodeOffsets are the byte offsets a decode kernel reads a key tile's
// rows at (the decode ABI's off): [0, TK) the key rows' in k, [TK, 2TK)
// those of the key rows to read next (the next tile's, or these again:
// prefetch hints, never loaded), [2TK, 3TK) the value rows' in v, so
// that keys and values of their own strides or sizes are read in place.
type decodeOffsets [3 * TK]int

// Where decodeOffsets' parts start.
const (
	offNextK = TK
	offV     = 2 * TK
)

// decodeRun runs the decode kernel of elem, d and rows (1, 2, 4 or 8) on
// k and v (the first elements of the caller's k and v; every key offset
// in off[:TK] must lie in k and every value offset in off[offV:] in v,
// each with a whole row after it; off[offNextK:offV] are prefetch hints).
func (k *kernels) decodeRun(elem Elem, q []float32, kb, vb unsafe.Pointer, off *decodeOffsets, o, m, l []float32, rows int, d dims) {
	_, _, _, _ = q[rows*d.qk-1], o[rows*d.v-1], m[rows-1], l[rows-1]
	f := dimsOf(k.byDims, d).decode[elem][bits.TrailingZeros(uint(rows))]
	f(&q[0], (*byte)(kb), (*byte)(vb), &off[0], &o[0], &m[0], &l[0])
}

// hasDecodeScore reports whether the variant has decode kernels with the
// score stage of dimensions d.
func (k *kernels) hasDecodeScore(d dims) bool {
	x := k.at(d)
	return x != nil && x.decodeScore[F32][0] != nil
}

// decodeScoreRun is decodeRun with the score stage of sc (rows[i] and
// slope[i] of the rows i < rows, cols[j] of the keys j < TK).
func (k *kernels) decodeScoreRun(elem Elem, q []float32, kb, vb unsafe.Pointer, off *decodeOffsets, o, m, l []float32, rows int, d dims, sc *scoreTile) {
	_, _, _, _ = q[rows*d.qk-1], o[rows*d.v-1], m[rows-1], l[rows-1]
	f := dimsOf(k.byDims, d).decodeScore[elem][bits.TrailingZeros(uint(rows))]
	f(&q[0], (*byte)(kb), (*byte)(vb), &off[0], &o[0], &m[0], &l[0], sc)
}

// scoreBwdK runs the variant's scoreBwd (which the tiled backward requires
// for a stage that rewrites scores) on the first rows rows of s (rows of
// TK scores in natural units, S = Q K^T), if it has one, and reports
// whether it did: s becomes the score stage of c*S (log2 units
// with c = scale*log2(e); bwdProb then takes c = 1), and with scoreCap dt
// (laid out like s) gets the factor 1 - tanh^2 in [0, 1] (0 for NaN) by
// which dS is multiplied through the cap; without scoreCap dt is not
// written.
func (k *kernels) scoreBwdK(s, dt []float32, rows int, c float32, sc *scoreTile) bool {
	if k.scoreBwd == nil || rows <= 0 {
		return k.scoreBwd != nil
	}
	_, _ = s[rows*TK-1], dt[rows*TK-1]
	k.scoreBwd(&s[0], &dt[0], rows, c, sc)
	return true
}

// prefetchRows prefetches the n elements at x[at], x[at+pitch], ... (rows
// rows) when the variant has the loop; every row must lie in x.
func prefetchRows[T float32 | uint16](k *kernels, x []T, at, rows, pitch, n int) {
	if k.prefetch == nil || rows <= 0 || n <= 0 {
		return
	}
	_ = x[at+(rows-1)*pitch+n-1]
	es := int(unsafe.Sizeof(x[0]))
	k.prefetch((*byte)(unsafe.Pointer(&x[at])), rows, es*pitch, es*n)
}

// scaleRowK sets dst = src*s with the variant's kernel when it has one
// for len(src) floats, and reports whether it did.
func (k *kernels) scaleRowK(dst, src []float32, s float32) bool {
	n := len(src)
	if k.scaleRow == nil || !k.whole(n) || len(dst) < n {
		return false
	}
	k.scaleRow(&dst[0], &src[0], n, s)
	return true
}

// addScaledK adds src*s to dst with k's kernel when it has one for
// len(src) floats, and reports whether it did.
func (k *kernels) addScaledK(dst, src []float32, s float32) bool {
	n := len(src)
	if k.addScaled == nil || !k.whole(n) || len(dst) < n {
		return false
	}
	k.addScaled(&dst[0], &src[0], n, s)
	return true
}

// lseK sets dst[i] = (m[i] + log2(l[i])) * ln2 for the first n rows (rows
// past n up to the next whole vector are computed too, so len(m), len(l)
// and len(dst) must cover them) and reports whether it did.
func (k *kernels) lseK(dst, m, l []float32, n int) bool {
	if k.lse == nil || n <= 0 {
		return false
	}
	n = (n + k.lanes - 1) / k.lanes * k.lanes
	if n > len(m) || n > len(l) || n > len(dst) {
		return false
	}
	k.lse(&dst[0], &m[0], &l[0], n)
	return true
}

// nonFiniteK is nonFiniteRows with the variant's kernel, if it has one.
func (k *kernels) nonFiniteK(v []float32, d int) (uint64, bool) {
	if k.nonFinite == nil || !k.whole(d) || len(v) < TK*d {
		return 0, false
	}
	return k.nonFinite(&v[0], d), true
}

// narrowK writes dst = src*s rounded to elem (BF16 or F16) with the
// variant's kernel, if it has one for len(src) floats, and reports whether
// it did; the result is f32toBF16 or f32toF16 of each product, bit for bit.
func (k *kernels) narrowK(dst []uint16, src []float32, s float32, elem Elem) bool {
	n := len(src)
	f := k.narrow[elem]
	if f == nil || !k.whole(n) || len(dst) < n {
		return false
	}
	f(&dst[0], &src[0], n, s)
	return true
}

// widenK widens 16-bit elements with the variant's kernel, if it has one
// for len(src) elements, and reports whether it did.
func (k *kernels) widenK(dst []float32, src []uint16, elem Elem) bool {
	n := len(src)
	f := k.widen[elem]
	if f == nil || !k.whole(n) || len(dst) < n {
		return false
	}
	f(&dst[0], &src[0], n)
	return true
}

// transposeK transposes a whole key tile (64 rows, pitch floats apart),
// times scale, into kt with the variant's kernel, if it has one for d, and
// reports whether it did.
func (k *kernels) transposeK(kt, src []float32, pitch, d int, scale float32) bool {
	if k.transpose == nil || !k.whole(d) || len(kt) < d*TK || len(src) < (TK-1)*pitch+d {
		return false
	}
	k.transpose(&kt[0], &src[0], pitch, d, scale)
	return true
}

// peakLoopOf returns the FMA peak loop of a variant's vectors and its
// FLOPs an iteration (peakLoop's where the variant has none here).
func peakLoopOf(v Variant) (func(int), int) {
	if k, ok := kernelsOf(v); ok && k.peak != nil {
		return k.peak, k.peakFlops
	}
	return peakLoop()
}

// peakLoop is the peak loop of the widest vectors this machine runs.
func peakLoop() (func(int), int) {
	for _, t := range Targets {
		if k, ok := kernelsOf(t.Variant); ok && k.peak != nil {
			return k.peak, k.peakFlops
		}
	}
	return peakGo, 12 * 2
}

// readSum returns the widest read loop this machine runs, wrapped to sum a
// whole slice: the kernel takes whole blocks, Go the few floats after them.
func readSum() func([]float32) float32 {
	for _, t := range Targets {
		if k, ok := kernelsOf(t.Variant); ok && k.readSum != nil {
			return func(s []float32) float32 {
				whole := len(s) / k.readBlock * k.readBlock
				var sum float32
				if whole > 0 {
					sum = k.readSum(&s[0], whole)
				}
				return sum + readSumGo(s[whole:])
			}
		}
	}
	return readSumGo
}

// scoreTileK returns the variant's microkernel with the score stage, or
// the pure-Go one.
func (k *kernels) scoreTileK() tileScoreFunc {
	if k.tileScore != nil {
		return k.tileScore
	}
	return tileScoreGo
}

// tileRun runs the tile kernel of dimensions d, or with a score stage (st
// not nil) the variant's score tile kernel; dimensions the variant has no
// kernel of run the portable one.
func (k *kernels) tileRun(q, kt, v, s, o, m, l []float32, mask []uint64, d dims, st *scoreTile) {
	if len(k.byDims) > 0 && k.at(d) == nil {
		tileScoreGo(q, kt, v, s, o, m, l, mask, d, st)
		return
	}
	if st == nil {
		k.tile(q, kt, v, s, o, m, l, mask, d)
		return
	}
	k.scoreTileK()(q, kt, v, s, o, m, l, mask, d, st)
}
