package gen

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// ScoreStage is the plan's score stage: what every target does to a kept
// pair's scaled score s = scale*q.k between the product and the softmax,
// in this order (docs/language.md, "Scores"):
//
//  1. soft-capping: s <- cap*tanh(s/cap);
//  2. ALiBi: s <- s - slope[h]*(i - j) (AlibiSigned) or s - slope[h]*|i -
//     j| (AlibiSymmetric), i and j absolute positions of the layout's
//     sequence (not document-local), h the query head;
//  3. learned sinks: each row's softmax denominator gains exp(sink[h] -
//     m), a term with no value; lse includes it.
//
// The stage never changes which pairs are kept: masks alone decide the
// tiles visited and their classes. The zero value is no stage.
type ScoreStage struct {
	SoftCap bool
	// Cap is the cap fixed by the spec; 0 with SoftCap: the call gives it.
	Cap   float64
	Alibi mask.Alibi
	// SlopesAtCall: the call gives one slope per query head; otherwise
	// AlibiSlopes(HeadsQ).
	SlopesAtCall bool
	// LearnedSinks: the call gives one sink logit per query head.
	LearnedSinks bool
}

// ScoreOf is the stage of a spec's score section.
func ScoreOf(s spec.Score) ScoreStage {
	st := ScoreStage{SoftCap: s.SoftCap, LearnedSinks: s.LearnedSinks}
	if s.SoftCap && !s.CapAtCall {
		st.Cap = s.Cap
	}
	if s.Alibi {
		st.Alibi = mask.AlibiSigned
		if s.AlibiSymmetric {
			st.Alibi = mask.AlibiSymmetric
		}
		st.SlopesAtCall = s.SlopesAtCall
	}
	return st
}

// Active reports whether the stage changes any score.
func (s ScoreStage) Active() bool { return s.SoftCap || s.Alibi != mask.AlibiOff || s.LearnedSinks }

// Modifies reports whether the stage rewrites kept scores (soft-cap or
// ALiBi), as opposed to only adding sink terms at the end of each row.
func (s ScoreStage) Modifies() bool { return s.SoftCap || s.Alibi != mask.AlibiOff }

// String is the stage as the plan text writes it, "" for none.
func (s ScoreStage) String() string {
	var f []string
	if s.SoftCap {
		if s.Cap == 0 {
			f = append(f, "softcap=call")
		} else {
			f = append(f, "softcap="+strconv.FormatFloat(s.Cap, 'g', -1, 64))
		}
	}
	if s.Alibi != mask.AlibiOff {
		kind := "signed"
		if s.Alibi == mask.AlibiSymmetric {
			kind = "symmetric"
		}
		slopes := "geometric"
		if s.SlopesAtCall {
			slopes = "call"
		}
		f = append(f, "alibi="+kind, "slopes="+slopes)
	}
	if s.LearnedSinks {
		f = append(f, "learned_sinks")
	}
	return strings.Join(f, " ")
}

// parseScore reads String's form back.
func parseScore(fields []string) (ScoreStage, error) {
	var s ScoreStage
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "softcap":
			s.SoftCap = true
			if v != "call" {
				c, err := strconv.ParseFloat(v, 64)
				if err != nil || !(c > 0) || math.IsInf(c, 0) {
					return s, fmt.Errorf("bad softcap %q", v)
				}
				s.Cap = c
			}
		case "alibi":
			switch v {
			case "signed":
				s.Alibi = mask.AlibiSigned
			case "symmetric":
				s.Alibi = mask.AlibiSymmetric
			default:
				return s, fmt.Errorf("bad alibi %q", v)
			}
		case "slopes":
			switch v {
			case "geometric":
			case "call":
				s.SlopesAtCall = true
			default:
				return s, fmt.Errorf("bad slopes %q", v)
			}
		case "learned_sinks":
			s.LearnedSinks = true
		default:
			return s, fmt.Errorf("unknown score field %q", f)
		}
	}
	return s, nil
}

// AlibiSlopes returns the geometric ALiBi slopes of n query heads
// (mask.AlibiSlopes, which the runtime uses).
func AlibiSlopes(n int) []float64 { return mask.AlibiSlopes(n) }

// Runtime is the stage as runtime/mask describes it to the kernels.
func (s ScoreStage) Runtime() mask.Score {
	return mask.Score{SoftCap: s.SoftCap, Cap: s.Cap, Alibi: s.Alibi, SlopesAtCall: s.SlopesAtCall, LearnedSinks: s.LearnedSinks}
}
