package cpu

import "math"

// The score stage of the kernels: soft-capping and ALiBi rewrite the
// tile's scores between the products and the softmax (s in log2 units,
// as the kernels hold them: scale*log2(e)*q.k). Learned sink logits join
// each row's softmax only when the row is finished (the driver), so the
// kernels never see them.

// Bits of scoreTile.flags.
const (
	scoreCap   = 1 << 0 // s <- cap*tanh(s*invCap)
	scoreAlibi = 1 << 1 // s <- s + slope[r]*(cols[c] - rows[r])
	scoreAbs   = 1 << 2 // with scoreAlibi: s <- s - slope[r]*|cols[c] - rows[r]|
)

// scoreTile is what a score kernel (tileScore, decodeScore) reads besides
// the tile ABI: its layout is part of the assembly ABI (offsets in bytes on
// the right), so fields are only ever appended.
//
// For each row r and column c, in this order:
//
//	if flags&scoreCap:   s = cap * tanh(s * invCap)
//	if flags&scoreAlibi: d = cols[c] - rows[r] (int32, exact), then
//	                     s = s + slope[r]*float32(d), or with scoreAbs
//	                     s = s - slope[r]*float32(|d|)
//
// cap and slope are in the kernels' log2 units (the model's cap and slope
// times log2(e)), invCap is 1/cap. tanh is tanh32's function (a few ulp).
// rows and slope are per tile row (a decode kernel of r rows reads the
// first r), cols per key column; positions are absolute positions minus
// one base, so they fit in int32. Masked pairs may be rewritten to
// anything: the softmax ignores them.
type scoreTile struct {
	cap    float32     // 0
	invCap float32     // 4
	flags  uint32      // 8
	_      uint32      // 12
	slope  [TQ]float32 // 16
	rows   [TQ]int32   // 208
	cols   [TK]int32   // 400
	_      [16]int32   // 656: lets a kernel load 16 int32 from any cols[c], c < TK
}

// tanh constants. Below tanhSmall, tanh is its odd Taylor polynomial to
// x^17 (the next term is below 2^-27 relative there); above, it is
// (1 - e)/(1 + e) with e = 2^(-2 log2(e) |x|), which loses at most about
// one bit to cancellation at the threshold; e underflows to 0 (tanh = 1)
// past |x| = 43.7.
const (
	tanhSmall = 0.55
	tanhT3    = -1.0 / 3
	tanhT5    = 2.0 / 15
	tanhT7    = -17.0 / 315
	tanhT9    = 62.0 / 2835
	tanhT11   = -1382.0 / 155925
	tanhT13   = 21844.0 / 6081075
	tanhT15   = -929569.0 / 638512875
	tanhT17   = 6404582.0 / 10854718875
	tanhM2L2E = -2 * math.Log2E
)

// tanh32 is tanh in float32 with an error of a few ulp, NaN for NaN and
// +-1 for +-Inf: the function every score kernel computes (its assembly
// forms are held to it by the tests), branch-free in vector form (both
// halves computed, one selected).
func tanh32(x float32) float32 {
	a := float32(math.Abs(float64(x)))
	var t float32
	if a < tanhSmall {
		z := a * a
		p := float32(tanhT17)
		p = p*z + tanhT15
		p = p*z + tanhT13
		p = p*z + tanhT11
		p = p*z + tanhT9
		p = p*z + tanhT7
		p = p*z + tanhT5
		p = p*z + tanhT3
		t = a + a*z*p
	} else {
		e := exp2Neg(a * tanhM2L2E) // NaN stays NaN, Inf gives 0
		t = (1 - e) / (1 + e)
	}
	// the sign of x on |tanh| (a bit OR in vector form)
	return math.Float32frombits(math.Float32bits(t) | math.Float32bits(x)&(1<<31))
}

// scoreGo applies the score stage to a TQ x TK tile of scores in place.
func scoreGo(s []float32, sc *scoreTile) {
	s = s[:TQ*TK]
	for r := 0; r < TQ; r++ {
		scoreRowGo(s[r*TK:(r+1)*TK], sc, r)
	}
}

// scoreRowGo applies the score stage to row r of a tile (TK scores).
func scoreRowGo(s []float32, sc *scoreTile, r int) {
	s = s[:TK]
	if sc.flags&scoreCap != 0 {
		for c, x := range s {
			s[c] = sc.cap * tanh32(x*sc.invCap)
		}
	}
	if sc.flags&scoreAlibi == 0 {
		return
	}
	sl, base := sc.slope[r], sc.rows[r]
	if sc.flags&scoreAbs != 0 {
		for c := range s {
			d := sc.cols[c] - base
			if d < 0 {
				d = -d
			}
			s[c] -= sl * float32(d)
		}
		return
	}
	for c := range s {
		s[c] += sl * float32(sc.cols[c]-base)
	}
}

// from returns st for a kernel whose row 0 is row r0 of st's tile: st
// itself for r0 = 0, else spare filled with st's values, rows and slopes
// shifted by r0.
func (st *scoreTile) from(r0 int, spare *scoreTile) *scoreTile {
	if r0 == 0 {
		return st
	}
	*spare = *st
	copy(spare.rows[:], st.rows[r0:])
	copy(spare.slope[:], st.slope[r0:])
	return spare
}
