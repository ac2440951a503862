package cpu

import (
	"math"
	"math/bits"
)

// tileGo is the pure-Go microkernel: it computes exactly the function the
// ABI in doc.go describes, for one TQ×TK tile with head dimensions d (any
// multiples of 4 up to maxKernelDim). It
// runs wherever the assembly cannot: other architectures, the purego
// build tag, CPUs without the instructions.
//
// It works in three passes over the tile:
//
//  1. scores: s = q·kt, four keys at a time: the four kt columns are
//     packed into a contiguous [d][4] buffer (kt's rows are 256 bytes
//     apart: read in place, each d step would touch a new cache line, all
//     in a few cache sets), then every pair of rows that keeps one of the
//     four keys runs mma2x4;
//  2. softmax, row by row: the new maximum over the kept scores, alpha,
//     p = 2^(s-mnew) written over s (0 where masked), l, and o scaled by
//     alpha;
//  3. output: o += p·v, four output columns at a time, packed the same
//     way from v, each pair of rows looping only over the range of keys
//     the pair keeps.
//
// mma2x4 holds a 2×4 block of accumulators in locals. Where multiply-adds
// fuse (arm64, GOAMD64=v3) it needs no temporaries and runs about twice as
// fast as with separate multiplies and adds (GOAMD64=v1), where the Go
// scheduler computes all eight products before the eight adds and spills
// a few of them; the loop is bound by the two scalar floating-point ports
// there anyway. Larger blocks spill more on amd64 and measured slower.
//
// Rows that keep no key in the tile are left untouched. A row whose kept
// scores are all -Inf or NaN and that has no state yet (mnew = -Inf) takes
// 0 as its maximum, as the assembly does: p is 0 for -Inf and NaN for NaN.
// Masked scores are never read, so s may hold anything on entry.
func tileGo(q, kt, v, s, o, m, l []float32, mask []uint64, d dims) {
	tileScoreGo(q, kt, v, s, o, m, l, mask, d, nil)
}

// tileScoreGo is tileGo with the score stage (scoreTile) applied between
// the scores and the softmax; sc == nil is tileGo.
func tileScoreGo(q, kt, v, s, o, m, l []float32, mask []uint64, dd dims, sc *scoreTile) {
	if dd.qk%4 != 0 || dd.v%4 != 0 || dd.qk < 4 || dd.v < 4 || dd.qk > maxKernelDim || dd.v > maxKernelDim {
		panic("kernel: tileGo: head dimensions must be multiples of 4 up to maxKernelDim")
	}
	d, dv := dd.qk, dd.v
	q = q[:TQ*d]
	kt = kt[:d*TK]
	v = v[:TK*dv]
	s = s[:TQ*TK]
	o = o[:TQ*dv]
	m = m[:TQ]
	l = l[:TQ]

	var keep [TQ]uint64
	if mask == nil {
		for r := range keep {
			keep[r] = ^uint64(0)
		}
	} else {
		copy(keep[:], mask[:TQ])
	}
	var all uint64
	for _, k := range keep {
		all |= k
	}
	if all == 0 {
		return // nothing kept: no row changes
	}

	// Pass 1: scores, for the key columns each row pair keeps.
	var kb [maxKernelDim][4]float32
	kp := kb[:d]
	for c := 0; c < TK; c += 4 {
		if all>>uint(c)&0xF == 0 {
			continue
		}
		for i := range kp {
			kp[i] = *(*[4]float32)(kt[i*TK+c:])
		}
		for r := 0; r < TQ; r += 2 {
			if (keep[r]|keep[r+1])>>uint(c)&0xF == 0 {
				continue
			}
			s0 := (*[4]float32)(s[r*TK+c:])
			s1 := (*[4]float32)(s[(r+1)*TK+c:])
			*s0, *s1 = [4]float32{}, [4]float32{}
			mma2x4(q[r*d:(r+1)*d], q[(r+1)*d:(r+2)*d], kp, s0, s1)
		}
	}

	if sc != nil {
		scoreGo(s, sc)
	}

	// Pass 2: online softmax, row by row.
	negInf := float32(math.Inf(-1))
	for r := range keep {
		k := keep[r]
		if k == 0 {
			// Nothing kept: the state does not change, but p must read
			// as zeros in pass 3 where the other row of the pair keeps
			// keys.
			clear(s[r*TK : (r+1)*TK])
			continue
		}
		sr := (*[TK]float32)(s[r*TK:])
		mr := m[r]
		mx := mr
		if k == ^uint64(0) {
			for _, x := range sr {
				if x > mx {
					mx = x
				}
			}
		} else {
			for b := k; b != 0; b &= b - 1 {
				if x := sr[bits.TrailingZeros64(b)&(TK-1)]; x > mx {
					mx = x
				}
			}
		}
		// mx = -Inf: every kept score is -Inf or NaN and the row has no
		// state. Like the assembly, use 0 as the maximum: p is 0 for -Inf
		// and NaN for NaN, and m stays -Inf.
		ms := mx
		if mx == negInf {
			ms = 0
		}
		var sum0, sum1 float32
		if k == ^uint64(0) {
			for c := 0; c < TK; c += 2 {
				p0 := exp2Neg(sr[c] - ms)
				p1 := exp2Neg(sr[c+1] - ms)
				sr[c], sr[c+1] = p0, p1
				sum0 += p0
				sum1 += p1
			}
		} else {
			for c := range sr {
				p := float32(0)
				if k>>uint(c)&1 != 0 {
					p = exp2Neg(sr[c] - ms)
				}
				sr[c] = p
				sum0 += p
			}
		}
		sum := sum0 + sum1
		a := float32(1) // mr == mx, or no state yet: alpha is exactly 1
		if mr != mx && mx != negInf {
			// mr = -Inf gives 0 (as does mr so far below mx that alpha
			// underflows); 0*o keeps a NaN of o, as in the assembly.
			a = exp2Neg(mr - mx)
		}
		if a == 1 {
			l[r] += sum
		} else {
			l[r] = a*l[r] + sum
			or := o[r*dv : (r+1)*dv]
			for i := range or {
				or[i] *= a
			}
		}
		m[r] = mx
	}

	// Pass 3: o += p·v, over the key range each row pair keeps.
	all = 0
	for _, k := range keep {
		all |= k
	}
	if all == 0 {
		return
	}
	lo := bits.TrailingZeros64(all)
	hi := TK - bits.LeadingZeros64(all)
	var vb [TK][4]float32
	vp := vb[lo:hi]
	for j := 0; j < dv; j += 4 {
		for i := range vp {
			vp[i] = *(*[4]float32)(v[(lo+i)*dv+j:])
		}
		for r := 0; r < TQ; r += 2 {
			u := keep[r] | keep[r+1]
			if u == 0 {
				continue
			}
			a := bits.TrailingZeros64(u)
			b := TK - bits.LeadingZeros64(u)
			mma2x4(s[r*TK+a:r*TK+b], s[(r+1)*TK+a:(r+1)*TK+b], vb[a:b],
				(*[4]float32)(o[r*dv+j:]), (*[4]float32)(o[(r+1)*dv+j:]))
		}
	}
}

// exp2Neg is 2^x for x <= 0 (or NaN), flushing results below 2^-126 to 0.
func exp2Neg(x float32) float32 {
	if x < -126 {
		return 0
	}
	return exp2Core(x)
}

// mma2x4 adds to a 2×4 block c the product of two rows a0, a1 (length n)
// and an n×4 block b: c_i[j] += sum_k a_i[k] * b[k][j].
func mma2x4(a0, a1 []float32, b [][4]float32, c0, c1 *[4]float32) {
	a1 = a1[:len(a0)]
	b = b[:len(a0)]
	x00, x01, x02, x03 := c0[0], c0[1], c0[2], c0[3]
	x10, x11, x12, x13 := c1[0], c1[1], c1[2], c1[3]
	for k, y0 := range a0 {
		w := &b[k]
		y1 := a1[k]
		w0, w1, w2, w3 := w[0], w[1], w[2], w[3]
		x00 += y0 * w0
		x01 += y0 * w1
		x02 += y0 * w2
		x03 += y0 * w3
		x10 += y1 * w0
		x11 += y1 * w1
		x12 += y1 * w2
		x13 += y1 * w3
	}
	c0[0], c0[1], c0[2], c0[3] = x00, x01, x02, x03
	c1[0], c1[1], c1[2], c1[3] = x10, x11, x12, x13
}
