package ptx

import "math"

// halfVal is a decoded bf16 or f16 operand of mma: value = sig * 2^q.
type halfVal struct {
	v   float64 // exact value
	sig int64   // signed integer significand (implicit bit included)
	q   int32   // exponent of the significand's last bit
	e   int32   // exponent as the tensor core aligns it (subnormals: the minimum normal exponent)
	cls uint8   // 0 zero, 1 finite, 2 infinite, 3 NaN
}

func signed(neg bool, m int64) int64 {
	if neg {
		return -m
	}
	return m
}

func decodeBF16(h uint16) halfVal {
	e := int32(h>>7) & 0xff
	m := int64(h & 0x7f)
	neg := h&0x8000 != 0
	v := float64(math.Float32frombits(uint32(h) << 16))
	switch {
	case e == 0xff && m != 0:
		return halfVal{v: v, cls: 3}
	case e == 0xff:
		return halfVal{v: v, cls: 2}
	case e == 0 && m == 0:
		return halfVal{v: v, e: zeroExp}
	case e == 0:
		return halfVal{v: v, sig: signed(neg, m), q: -126 - 7, e: -126, cls: 1}
	}
	return halfVal{v: v, sig: signed(neg, m|0x80), q: e - 127 - 7, e: e - 127, cls: 1}
}

func decodeF16(h uint16) halfVal {
	e := int32(h>>10) & 0x1f
	m := int64(h & 0x3ff)
	neg := h&0x8000 != 0
	v := float64(math.Float32frombits(f16ToF32(h)))
	switch {
	case e == 0x1f && m != 0:
		return halfVal{v: math.NaN(), cls: 3}
	case e == 0x1f:
		return halfVal{v: v, cls: 2}
	case e == 0 && m == 0:
		return halfVal{v: v, e: zeroExp}
	case e == 0:
		return halfVal{v: v, sig: signed(neg, m), q: -14 - 10, e: -14, cls: 1}
	}
	return halfVal{v: v, sig: signed(neg, m|0x400), q: e - 15 - 10, e: e - 15, cls: 1}
}

// truncShift returns x * 2^-s truncated toward zero, for s >= -11 and
// |x| < 2^40 (branch-free: the signs of the terms are random).
func truncShift(x int64, s int32) int64 {
	m := x >> 63
	ax := (x ^ m) - m
	r := (ax << 11) >> uint(min(s+11, 63))
	return (r ^ m) - m
}

// zeroExp is the alignment exponent given to zero operands: far below any
// real one, so that a zero product never sets emax.
const zeroExp = -1 << 20

// pow2 is 2^k for k in float64's normal range.
func pow2(k int32) float64 { return math.Float64frombits(uint64(k+1023) << 52) }

// halfVec is 16 operands of one A row or B column, as arrays.
type halfVec struct {
	sig [16]int64
	e   [16]int32
	v   [16]float64
}

// mmaDotVec is one element of mma.sync.m16n8k16 with f32 accumulation, as the
// H200 computes it (bit-exact on all 2 x 256 recorded cases):
//
//   - the 16 products a_k*b_k are exact;
//   - if any input is NaN, a product is inf*0, or infinities of both signs
//     meet, the result is the canonical NaN; otherwise any infinity wins;
//   - the alignment exponent emax is the largest of exp(c) and, over the
//     nonzero products, exp(a_k)+exp(b_k) (input exponents, not the
//     normalized product's; subnormals count as the minimum normal exponent);
//   - c and every product are truncated toward zero to a multiple of
//     2^(emax-25), i.e. f32 precision at emax plus two extra bits;
//   - the truncated terms are summed exactly and the sum rounded toward zero
//     to f32.
//
// All 16 products and c are summed in one step (no intermediate rounding).
// Not covered by the goldens and so unverified: zero and subnormal results,
// subnormal inputs, and overflow (which round-toward-zero sends to the
// largest finite value).
func mmaDotVec(c uint32, a, b *halfVec, frac int32, special bool) uint32 {
	cf := float64(math.Float32frombits(c))
	if special || c&0x7f800000 == 0x7f800000 {
		s := cf
		for k := 0; k < 16; k++ {
			s += a.v[k] * b.v[k]
		}
		if s != s {
			return canonNaN
		}
		return math.Float32bits(float32(s))
	}
	emax := int32(zeroExp)
	var csig int64
	var ce int32
	if c&0x7fffffff != 0 {
		e := int32(c>>23) & 0xff
		m := int64(c & 0x7fffff)
		if e == 0 {
			e = 1
		} else {
			m |= 0x800000
		}
		ce = e - 127
		emax = ce
		csig = signed(c>>31 != 0, m)
	}
	var pe [16]int32
	for k := 0; k < 16; k++ {
		pe[k] = a.e[k] + b.e[k]
		emax = max(emax, pe[k])
	}
	if emax < zeroExp/2 {
		// every term is zero: IEEE signed-zero sum
		s := cf
		for k := 0; k < 16; k++ {
			s += a.v[k] * b.v[k]
		}
		return math.Float32bits(float32(s))
	}
	lsb := emax - 25 // weight of the last kept bit
	sum := truncShift(csig, lsb-(ce-23))
	base := lsb + 2*frac
	for k := 0; k < 16; k++ {
		sum += truncShift(a.sig[k]*b.sig[k], base-pe[k])
	}
	if sum == 0 {
		return 0
	}
	return math.Float32bits(rzF32(float64(sum) * pow2(lsb)))
}

// mmaWarp executes mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: a holds
// 4 registers per lane, b 2, c 4 (lane-major: a[lane*4+i]); d receives 4 per
// lane. Fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k16"): with
// g = lane/4 and t = lane%4, A register i holds row g+8*(i&1), columns
// 2t+8*(i>>1) and +1 (low half first); B register i holds rows 2t+8i and +1
// of column g; C/D register i holds row g+8*(i>>1), column 2t+(i&1).
func mmaWarp(a *[128]uint32, b *[64]uint32, c *[128]uint32, d *[128]uint32, f16 bool) {
	dec, frac := decodeBF16, int32(7)
	if f16 {
		dec, frac = decodeF16, 10
	}
	var A [16]halfVec // rows
	var B [8]halfVec  // columns
	var C [16][8]uint32
	var rowSp [16]bool
	var colSp [8]bool
	put := func(v *halfVec, k int, h uint16) bool {
		x := dec(h)
		v.sig[k], v.e[k], v.v[k] = x.sig, x.e, x.v
		return x.cls >= 2
	}
	for lane := 0; lane < 32; lane++ {
		g, t := lane>>2, lane&3
		for i := 0; i < 4; i++ {
			w := a[lane*4+i]
			row, col := g+8*(i&1), 2*t+8*(i>>1)
			s0, s1 := put(&A[row], col, uint16(w)), put(&A[row], col+1, uint16(w>>16))
			rowSp[row] = rowSp[row] || s0 || s1
		}
		for i := 0; i < 2; i++ {
			w := b[lane*2+i]
			k := 2*t + 8*i
			s0, s1 := put(&B[g], k, uint16(w)), put(&B[g], k+1, uint16(w>>16))
			colSp[g] = colSp[g] || s0 || s1
		}
		for i := 0; i < 4; i++ {
			C[g+8*(i>>1)][2*t+(i&1)] = c[lane*4+i]
		}
	}
	for lane := 0; lane < 32; lane++ {
		g, t := lane>>2, lane&3
		for i := 0; i < 4; i++ {
			row, col := g+8*(i>>1), 2*t+(i&1)
			d[lane*4+i] = mmaDotVec(C[row][col], &A[row], &B[col], frac, rowSp[row] || colSp[col])
		}
	}
}
