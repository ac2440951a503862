package ptx

import "math"

// zeroExp is the alignment exponent given to zero operands: far below any
// real one, so that a zero product never sets emax.
const zeroExp = -1 << 20

// halfVec holds the 16 operands of one A row or one B column of mma.
type halfVec struct {
	v [16]float64 // exact values
	e [16]int32   // exponents as the tensor core aligns them
}

// decodeBF16 returns a bf16's exact value, its alignment exponent (the
// unbiased exponent; subnormals count as the minimum normal exponent, zeros
// as zeroExp) and whether it is infinite or NaN.
func decodeBF16(h uint16) (float64, int32, bool) {
	v := float64(math.Float32frombits(uint32(h) << 16))
	switch e := int32(h>>7) & 0xff; {
	case e == 0xff:
		return v, 0, true
	case h&0x7fff == 0:
		return v, zeroExp, false
	case e == 0:
		return v, -126, false
	default:
		return v, e - 127, false
	}
}

// decodeF16 is decodeBF16 for IEEE binary16.
func decodeF16(h uint16) (float64, int32, bool) {
	v := float64(math.Float32frombits(f16ToF32(h)))
	switch e := int32(h>>10) & 0x1f; {
	case e == 0x1f:
		return v, 0, true
	case h&0x7fff == 0:
		return v, zeroExp, false
	case e == 0:
		return v, -14, false
	default:
		return v, e - 15, false
	}
}

// pow2 is 2^k for k in float64's normal range.
func pow2(k int32) float64 { return math.Float64frombits(uint64(k+1023) << 52) }

// mmaDot is one element of mma.sync.m16n8k16 with f32 accumulation, as the
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
//
// special reports that a or b holds an infinity or NaN.
func mmaDot(c uint32, a, b *halfVec, special bool) uint32 {
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
	if c&0x7fffffff != 0 {
		emax = max(int32(c>>23)&0xff, 1) - 127
	}
	for k := 0; k < 16; k++ {
		emax = max(emax, a.e[k]+b.e[k])
	}
	if emax < zeroExp/2 {
		// every term is zero: IEEE signed-zero sum
		s := cf
		for k := 0; k < 16; k++ {
			s += a.v[k] * b.v[k]
		}
		return math.Float32bits(float32(s))
	}
	// Scaled so that the last kept bit has weight 1, every term is exact in
	// float64 and below 2^28; converting to int64 truncates toward zero.
	scale := pow2(25 - emax)
	sum := int64(cf * scale)
	for k := 0; k < 16; k++ {
		sum += int64(a.v[k] * b.v[k] * scale)
	}
	if sum == 0 {
		return 0
	}
	return math.Float32bits(rzF32(float64(sum) * pow2(emax-25)))
}

// mmaWarp executes mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: a holds
// 4 registers per lane, b 2, c 4 (lane-major: a[lane*4+i]); d receives 4 per
// lane. Fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k16"): with
// g = lane/4 and t = lane%4, A register i holds row g+8*(i&1), columns
// 2t+8*(i>>1) and +1 (low half first); B register i holds rows 2t+8i and +1
// of column g; C/D register i holds row g+8*(i>>1), column 2t+(i&1).
func mmaWarp(a *[128]uint32, b *[64]uint32, c *[128]uint32, d *[128]uint32, f16 bool) {
	dec := decodeBF16
	if f16 {
		dec = decodeF16
	}
	var A [16]halfVec // rows
	var B [8]halfVec  // columns
	var rowSp [16]bool
	var colSp [8]bool
	for lane := 0; lane < 32; lane++ {
		g, t := lane>>2, lane&3
		for i := 0; i < 4; i++ {
			w := a[lane*4+i]
			row, col := g+8*(i&1), 2*t+8*(i>>1)
			r := &A[row]
			var s0, s1 bool
			r.v[col], r.e[col], s0 = dec(uint16(w))
			r.v[col+1], r.e[col+1], s1 = dec(uint16(w >> 16))
			rowSp[row] = rowSp[row] || s0 || s1
		}
		for i := 0; i < 2; i++ {
			w := b[lane*2+i]
			k := 2*t + 8*i
			col := &B[g]
			var s0, s1 bool
			col.v[k], col.e[k], s0 = dec(uint16(w))
			col.v[k+1], col.e[k+1], s1 = dec(uint16(w >> 16))
			colSp[g] = colSp[g] || s0 || s1
		}
	}
	for lane := 0; lane < 32; lane++ {
		g, t := lane>>2, lane&3
		for i := 0; i < 4; i++ {
			row, col := g+8*(i>>1), 2*t+(i&1)
			d[lane*4+i] = mmaDot(c[lane*4+i], &A[row], &B[col], rowSp[row] || colSp[col])
		}
	}
}
