package cpu

import (
	"errors"
	"fmt"
	"math"

	"github.com/attngen/attngen/runtime/mask"
)

// ErrScore: score-stage values (Args.SoftCap, Slopes, Sinks) missing, of a
// wrong length, not finite or out of range, or given to a mask whose
// stage does not take them.
var ErrScore = errors.New("bad score modification")

// scoreCall is a call's score stage with its values in the kernels' log2
// units (times log2(e)); sinks and slopes one per query head.
type scoreCall struct {
	on       bool // some part of the stage is active
	flags    uint32
	cap      float32 // log2 units
	slopes   []float32
	sinks    []float32 // log2 units, nil without learned sinks
	modifies bool      // flags != 0: the tile kernels rewrite scores
	// The same in natural units, for the backward's per-pair code.
	capN            float64
	slopesN, sinksN []float64
}

// natural returns the score s of a pair after the stage (raw: scale*q.k;
// query head h at absolute position i, key at j) and ds/draw, in float64.
func (sc *scoreCall) natural(raw float64, h, i, j int) (s, f float64) {
	s, f = raw, 1
	if sc.flags&scoreCap != 0 {
		t := math.Tanh(raw / sc.capN)
		s, f = sc.capN*t, 1-t*t
	}
	if sc.flags&scoreAlibi != 0 {
		d := float64(j - i)
		if sc.flags&scoreAbs != 0 {
			s -= sc.slopesN[h] * math.Abs(d)
		} else {
			s += sc.slopesN[h] * d
		}
	}
	return s, f
}

// checkScore validates the score values of a call of a mask with stage
// st against the shape, and fills sc (reusing its buffers).
func checkScore(sc *scoreCall, st mask.Score, s Shape, softCap float32, slopes, sinks []float32) error {
	sc.on, sc.flags, sc.cap, sc.modifies = st.Active(), 0, 0, false
	sc.slopes, sc.sinks = sc.slopes[:0], sc.sinks[:0]
	sc.slopesN, sc.sinksN, sc.capN = sc.slopesN[:0], sc.sinksN[:0], 0
	switch {
	case !st.SoftCap && softCap != 0:
		return fmt.Errorf("%w: SoftCap %g given, but the mask does not soft-cap scores (SoftCap must be 0)", ErrScore, softCap)
	case st.SoftCap && st.Cap != 0 && softCap != 0:
		return fmt.Errorf("%w: SoftCap %g given, but the spec fixes the cap at %g (SoftCap must be 0)", ErrScore, softCap, st.Cap)
	case st.SoftCap && st.Cap == 0 && !(softCap > 0 && softCap <= math.MaxFloat32/2):
		return fmt.Errorf("%w: SoftCap is %g; the mask takes its soft-cap at call time: want a finite value above 0", ErrScore, softCap)
	case slopes != nil && !(st.Alibi != mask.AlibiOff && st.SlopesAtCall):
		return fmt.Errorf("%w: %d ALiBi slopes given, but the mask does not take slopes at call time (Slopes must be nil)", ErrScore, len(slopes))
	case st.Alibi != mask.AlibiOff && st.SlopesAtCall && len(slopes) != s.HeadsQ:
		return fmt.Errorf("%w: %d ALiBi slopes given; the mask takes one per query head, HeadsQ = %d", ErrScore, len(slopes), s.HeadsQ)
	case sinks != nil && !st.LearnedSinks:
		return fmt.Errorf("%w: %d sink logits given, but the mask has no learned sinks (Sinks must be nil; StreamingLLM's sink tokens are the mask's streaming: {sinks})", ErrScore, len(sinks))
	case st.LearnedSinks && len(sinks) != s.HeadsQ:
		return fmt.Errorf("%w: %d sink logits given; the mask's learned sinks take one per query head, HeadsQ = %d", ErrScore, len(sinks), s.HeadsQ)
	}
	if st.SoftCap {
		c := st.Cap
		if c == 0 {
			c = float64(softCap)
		}
		sc.flags |= scoreCap
		sc.cap = float32(c * math.Log2E)
		sc.capN = c
	}
	if st.Alibi != mask.AlibiOff {
		sc.flags |= scoreAlibi
		if st.Alibi == mask.AlibiSymmetric {
			sc.flags |= scoreAbs
		}
		for h := 0; h < s.HeadsQ; h++ {
			v := 0.0
			if !st.SlopesAtCall {
				v = mask.AlibiSlope(h, s.HeadsQ)
			} else {
				v = float64(slopes[h])
				if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1<<20 {
					return fmt.Errorf("%w: the ALiBi slope of query head %d is %g; want a finite value of magnitude at most 2^20", ErrScore, h, v)
				}
			}
			sc.slopes = append(sc.slopes, float32(v*math.Log2E))
			sc.slopesN = append(sc.slopesN, v)
		}
	}
	if st.LearnedSinks {
		for h, v := range sinks {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 1) || math.Abs(float64(v)) > 1<<20 && !math.IsInf(float64(v), -1) {
				return fmt.Errorf("%w: the sink logit of query head %d is %g; want a finite value of magnitude at most 2^20, or -Inf (no sink)", ErrScore, h, v)
			}
			sc.sinks = append(sc.sinks, float32(float64(v)*math.Log2E))
			sc.sinksN = append(sc.sinksN, float64(v))
		}
	}
	sc.modifies = sc.flags != 0
	return nil
}

// tileScoreRows fills the rows of st for a job's query tile: each row's
// head's slope and its absolute position minus base, the absolute position
// of the tile's first segment position.
func (c *call) tileScoreRows(st *scoreTile, j job, rows int) {
	g := c.segs[j.seg]
	per := int(j.per)
	st.flags = c.sc.flags
	st.cap = c.sc.cap
	if c.sc.cap != 0 {
		st.invCap = 1 / c.sc.cap
	}
	for r := 0; r < TQ; r++ {
		if r >= rows {
			st.slope[r], st.rows[r] = 0, 0
			continue
		}
		if c.sc.flags&scoreAlibi == 0 {
			continue // positions and slopes are ALiBi's only
		}
		st.slope[r] = c.sc.slopes[int(j.h)+r/per]
		st.rows[r] = int32(g.stride * (r % per))
	}
}

// tileScoreCols fills the columns of st for key tile kt of the job's
// segment, relative to the base of tileScoreRows.
func (c *call) tileScoreCols(st *scoreTile, j job, kt int) {
	g := c.segs[j.seg]
	q0 := int(j.x0) + g.qx0
	d := g.stride * (g.kx0 + kt*TK - q0)
	for x := range st.cols {
		st.cols[x] = int32(d + g.stride*x)
	}
}

// finishSink returns the factor o is multiplied by and the natural lse of
// a row with running state (m, l) in log2 units and sink logit sk (log2
// units): with M = max(m, sk) and L = l 2^(m-M) + 2^(sk-M), out = o
// 2^(m-M)/L and lse = (M + log2 L) ln 2. A row that kept nothing (l = 0)
// gets out 0 and lse = the sink logit, natural (the call's value); NaN
// propagates.
func finishSink(m, l, sk float32, natural float64) (inv float32, lse float32) {
	if l == 0 {
		return 0, float32(natural)
	}
	mm, ll, s := float64(m), float64(l), float64(sk)
	M := math.Max(mm, s)
	if math.IsNaN(mm) || math.IsNaN(ll) {
		M = mm + ll
	}
	L := ll*math.Exp2(mm-M) + math.Exp2(s-M)
	return float32(math.Exp2(mm-M) / L), float32((M + math.Log2(L)) * math.Ln2)
}
