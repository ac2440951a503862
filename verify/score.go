package verify

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/attngen/attngen/spec"
)

// Score is the score stage of a call (a spec's score section with the
// call's values), written from the published definitions, not from any
// kernel: for a kept pair of query head h at position i and key j, with
// x = scale*q.k,
//
//	soft-capping (Gemma 2):  x <- SoftCap * tanh(x / SoftCap)       (SoftCap > 0)
//	ALiBi (Press et al.):    x <- x - Slopes[h] * (i - j)           (Alibi == AlibiSigned)
//	                         x <- x - Slopes[h] * |i - j|           (Alibi == AlibiSymmetric)
//	learned sinks (gpt-oss): the row's softmax denominator gains exp(Sinks[h]),
//	                         a term with no value (Sinks not nil)
//
// in this order. Positions are absolute: query row r is i = r + SeqK -
// SeqQ. A nil *Score is no stage.
type Score struct {
	SoftCap float64
	Alibi   AlibiDistance
	Slopes  []float64 // HeadsQ slopes when Alibi is set
	Sinks   []float64 // HeadsQ sink logits, natural units; nil: none
	// CapAtCall and SlopesAtCall: the call gives the cap and the slopes
	// (Float32 returns them); otherwise the spec fixes them.
	CapAtCall, SlopesAtCall bool

	once              sync.Once // makes the float32 copies Float32 returns
	slopes32, sinks32 []float32
}

// AlibiDistance is the distance ALiBi's bias grows with.
type AlibiDistance int

const (
	AlibiNone      AlibiDistance = iota
	AlibiSigned                  // i - j
	AlibiSymmetric               // |i - j|
)

// String describes the stage in a check's messages (a Shape printed with
// %v shows it rather than a pointer): "none", or its parts.
func (sc *Score) String() string {
	if sc == nil {
		return "none"
	}
	var parts []string
	if sc.SoftCap > 0 {
		parts = append(parts, fmt.Sprintf("softcap %v", sc.SoftCap))
	}
	switch sc.Alibi {
	case AlibiSigned:
		parts = append(parts, fmt.Sprintf("alibi (i-j) slopes %v", sc.Slopes))
	case AlibiSymmetric:
		parts = append(parts, fmt.Sprintf("alibi |i-j| slopes %v", sc.Slopes))
	}
	if sc.Sinks != nil {
		parts = append(parts, fmt.Sprintf("sinks %v", sc.Sinks))
	}
	if len(parts) == 0 {
		return "none"
	}
	return "score{" + strings.Join(parts, ", ") + "}"
}

// check reports values that do not fit the shape.
func (sc *Score) check(s Shape) error {
	switch {
	case sc == nil:
		return nil
	case sc.SoftCap < 0 || math.IsNaN(sc.SoftCap) || math.IsInf(sc.SoftCap, 0):
		return fmt.Errorf("score: soft-cap %v is not a positive finite number", sc.SoftCap)
	case sc.Alibi != AlibiNone && len(sc.Slopes) != s.HeadsQ:
		return fmt.Errorf("score: %d ALiBi slopes, want HeadsQ = %d", len(sc.Slopes), s.HeadsQ)
	case sc.Sinks != nil && len(sc.Sinks) != s.HeadsQ:
		return fmt.Errorf("score: %d sink logits, want HeadsQ = %d", len(sc.Sinks), s.HeadsQ)
	}
	return nil
}

// apply returns the score of a kept pair after the stage, from x =
// scale*q.k, and its derivative with respect to x.
func (sc *Score) apply(x float64, h, i, j int) (s, dx float64) {
	if sc == nil {
		return x, 1
	}
	s, dx = x, 1
	if sc.SoftCap > 0 {
		t := math.Tanh(x / sc.SoftCap)
		s, dx = sc.SoftCap*t, 1-t*t
	}
	switch sc.Alibi {
	case AlibiSigned:
		s -= sc.Slopes[h] * float64(i-j)
	case AlibiSymmetric:
		s -= sc.Slopes[h] * math.Abs(float64(i-j))
	}
	return s, dx
}

// sink returns query head h's sink logit, -Inf without one.
func (sc *Score) sink(h int) float64 {
	if sc == nil || sc.Sinks == nil {
		return math.Inf(-1)
	}
	return sc.Sinks[h]
}

// softmax is verify's one float64 softmax: for a row's kept scores
// (scores[j] for j in kept, after the stage) and its sink logit (-Inf for
// none) it returns the shift ms and the denominator sum such that p_j =
// exp(scores[j] - ms) / sum, and the natural log-sum-exp lse = ms + log
// sum. m is the largest kept score or the sink (NaN when one is NaN); ms
// is m, or 0 when m is -Inf (every kept score -Inf, no sink). ok is false
// when the row gets output 0: nothing kept, or every weight 0; lse is
// then the sink logit (-Inf without one).
func softmax(scores []float64, kept []int, sink float64) (ms, sum, lse float64, ok bool) {
	m := sink
	for _, j := range kept {
		m = math.Max(m, scores[j])
	}
	ms = m
	if math.IsInf(m, -1) {
		ms = 0
	}
	for _, j := range kept {
		sum += math.Exp(scores[j] - ms)
	}
	if sum == 0 && !math.IsNaN(ms) {
		return ms, 0, sink, false
	}
	if !math.IsInf(sink, -1) {
		sum += math.Exp(sink - ms)
	}
	return ms, sum, ms + math.Log(sum), true
}

// softmax32 is softmax's float32 twin, for the float32 yardsticks
// (NaiveFP32, NaiveGradRounded and the sampled gradient check, which
// must agree with NaiveGradRounded bit for bit): the same rule with
// float32 sums of exponentials computed in float64 and rounded, in the
// order of kept.
func softmax32(scores []float32, kept []int, sink float32) (ms, sum, lse float32, ok bool) {
	m := sink
	for _, j := range kept {
		m = max(m, scores[j])
	}
	ms = m
	if math.IsInf(float64(m), -1) {
		ms = 0
	}
	for _, j := range kept {
		sum += float32(math.Exp(float64(scores[j] - ms)))
	}
	if sum == 0 && !math.IsNaN(float64(ms)) {
		return ms, 0, sink, false
	}
	if !math.IsInf(float64(sink), -1) {
		sum += float32(math.Exp(float64(sink - ms)))
	}
	return ms, sum, ms + float32(math.Log(float64(sum))), true
}

// hasSinks reports a stage with learned sinks.
func (sc *Score) hasSinks() bool { return sc != nil && sc.Sinks != nil }

// stageMag returns the rounding magnitude a float32 stage adds to a kept
// pair's score (in units of the rounding unit), and the magnitude of its
// derivative's rounding error, for GradMagnitude: with no stage both are
// 0; otherwise |s| + |bias| (the rounding of tanh and of the bias and its
// subtraction) and, with soft-capping, 2 t^2 + 2 |t| dx c / cap, where t
// = tanh(x / cap), dx = 1 - t^2 and c is the magnitude of x (the rounding
// of t, squared, and the error x carries into t).
func (sc *Score) stageMag(x, c float64, h, i, j int) (smag, dxe float64) {
	if sc == nil {
		return 0, 0
	}
	s, dx := sc.apply(x, h, i, j)
	smag = math.Abs(s)
	switch sc.Alibi {
	case AlibiSigned, AlibiSymmetric:
		smag += math.Abs(sc.Slopes[h] * float64(i-j))
	}
	if sc.SoftCap > 0 {
		t := math.Tanh(x / sc.SoftCap)
		dxe = 2*t*t + 2*math.Abs(t)*dx*c/sc.SoftCap
	}
	return smag, dxe
}

// AlibiSlopes returns the ALiBi slopes of n heads as the paper defines
// them: for n a power of two, the geometric sequence that starts at
// 2^(-8/n) with that ratio; otherwise the sequence of the closest power
// of two below n, followed by every other element of the sequence of twice
// that power, from its first, until there are n.
func AlibiSlopes(n int) []float64 {
	if n < 1 {
		return nil
	}
	geometric := func(k int) []float64 {
		start := math.Pow(2, -8/float64(k))
		out := make([]float64, k)
		x := start
		for h := range out {
			out[h] = x
			x *= start
		}
		return out
	}
	p := int(math.Pow(2, math.Floor(math.Log2(float64(n)))))
	out := geometric(p)
	if p == n {
		return out
	}
	extra := geometric(2 * p)
	for h := 0; len(out) < n; h += 2 {
		out = append(out, extra[h])
	}
	return out
}

// RandomScore draws a call's values (each a float32, so that kernels and
// the reference see the same numbers) for a spec's score section (nil for
// none): the spec's cap, or one drawn from [2, 60] when it is given at
// call time; the paper's slopes, or per-head slopes from [0.001, 1]; sink
// logits from N(0, 2), with one head at -Inf (no sink) and one at 12 (a
// sink that outweighs every key) when there are at least three heads.
func RandomScore(sc spec.Score, headsQ int, r *rand.Rand) *Score {
	if !sc.Active() {
		return nil
	}
	out := &Score{CapAtCall: sc.CapAtCall, SlopesAtCall: sc.Alibi && sc.SlopesAtCall}
	if sc.SoftCap {
		out.SoftCap = sc.Cap
		if sc.CapAtCall {
			out.SoftCap = float64(float32(2 + 58*r.Float64()))
		}
	}
	if sc.Alibi {
		out.Alibi = AlibiSigned
		if sc.AlibiSymmetric {
			out.Alibi = AlibiSymmetric
		}
		if sc.SlopesAtCall {
			out.Slopes = make([]float64, headsQ)
			for h := range out.Slopes {
				out.Slopes[h] = float64(float32(math.Exp(math.Log(0.001) + r.Float64()*math.Log(1000))))
			}
		} else {
			out.Slopes = AlibiSlopes(headsQ)
		}
	}
	if sc.LearnedSinks {
		out.Sinks = make([]float64, headsQ)
		for h := range out.Sinks {
			out.Sinks[h] = float64(float32(2 * r.NormFloat64()))
		}
		if headsQ >= 3 {
			out.Sinks[1] = math.Inf(-1)
			out.Sinks[2] = 12
		}
	}
	return out
}

// Float32 returns the values a call gives, as float32, as a kernel takes
// them: the cap and the slopes when they are call-time values (else 0 and
// nil), the sink logits (nil without).
func (sc *Score) Float32() (softCap float32, slopes, sinks []float32) {
	if sc == nil {
		return 0, nil, nil
	}
	f := func(x []float64) []float32 {
		if x == nil {
			return nil
		}
		out := make([]float32, len(x))
		for i, v := range x {
			out[i] = float32(v)
		}
		return out
	}
	// made once, so that a run that calls Float32 allocates nothing after
	// its first call (the values must not change after it)
	sc.once.Do(func() { sc.slopes32, sc.sinks32 = f(sc.Slopes), f(sc.Sinks) })
	if sc.CapAtCall {
		softCap = float32(sc.SoftCap)
	}
	if sc.SlopesAtCall {
		slopes = sc.slopes32
	}
	return softCap, slopes, sc.sinks32
}

// WithScore returns s with random values of p's score section
// (RandomScore) when p has one and s carries none; s as it is otherwise.
func WithScore(p spec.Pattern, s Shape, r *rand.Rand) Shape {
	if p.Score.Active() && s.Score == nil {
		s.Score = RandomScore(p.Score, s.HeadsQ, r)
	}
	return s
}

// checkScore reports a shape whose score values do not fit the pattern's
// score section: missing when the pattern has one, or of other parts
// (values without a section are the caller's explicit stage).
func checkScore(p spec.Pattern, s Shape) error {
	sc := p.Score
	switch {
	case sc.Active() && s.Score == nil:
		return fmt.Errorf("score: the pattern has a score section (%s) and the shape no values (Shape.Score)", sc)
	case sc.Active() && ((s.Score.SoftCap > 0) != sc.SoftCap || (s.Score.Alibi != AlibiNone) != sc.Alibi ||
		sc.Alibi && (s.Score.Alibi == AlibiSymmetric) != sc.AlibiSymmetric || (s.Score.Sinks != nil) != sc.LearnedSinks):
		return fmt.Errorf("score: the shape's values (%v) do not fit the pattern's score section (%s)", s.Score, sc)
	}
	return s.Score.check(s)
}
