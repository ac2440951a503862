package mask

import "math"

// Alibi is the distance an ALiBi bias grows with (Score.Alibi).
type Alibi uint8

const (
	AlibiOff       Alibi = iota
	AlibiSigned          // bias -slope*(i - j)
	AlibiSymmetric       // bias -slope*|i - j|
)

// Score is the score stage of a compiled mask (a spec's score section):
// what a kernel does to each kept pair's scaled score s = scale*q.k before
// the softmax, in this order: soft-capping, s <- Cap*tanh(s/Cap); the ALiBi
// bias of the query head's slope, at absolute positions i and j; then the
// query head's learned sink logit joins the row's softmax as a term with
// no value. Cap is 0 when the call gives it; the slopes come from the call
// when SlopesAtCall, else from AlibiSlopes(HeadsQ); sink logits always
// come from the call. The zero value is no stage.
type Score struct {
	SoftCap      bool
	Cap          float64
	Alibi        Alibi
	SlopesAtCall bool
	LearnedSinks bool
}

// Active reports whether the stage changes anything.
func (s Score) Active() bool { return s.SoftCap || s.Alibi != AlibiOff || s.LearnedSinks }

// ScoreOf returns the score stage of m: compiled masks of specs with a
// score section have a Score method; the zero Score for the others.
func ScoreOf(m Mask) Score {
	if s, ok := m.(interface{ Score() Score }); ok {
		return s.Score()
	}
	return Score{}
}

// AlibiSlopes returns the geometric ALiBi slopes of n query heads (Press
// et al., "Train Short, Test Long"; BLOOM and MPT compute them so): with n
// a power of two, head h (from 0) gets 2^(-8(h+1)/n). Otherwise, with p
// the largest power of two below n, the first p heads get the slopes of p
// heads and the other n - p heads the odd-numbered slopes of 2p heads:
// 2^(-8(2k+1)/(2p)) for k = 0, 1, ... n-p-1.
func AlibiSlopes(n int) []float64 {
	if n <= 0 {
		return nil
	}
	out := make([]float64, n)
	for h := range out {
		out[h] = AlibiSlope(h, n)
	}
	return out
}

// AlibiSlope is AlibiSlopes(n)[h], without allocating.
func AlibiSlope(h, n int) float64 {
	p := 1
	for p <= n/2 {
		p *= 2
	}
	if h < p {
		return math.Exp2(-8 * float64(h+1) / float64(p))
	}
	return math.Exp2(-8 * float64(2*(h-p)+1) / float64(2*p))
}
