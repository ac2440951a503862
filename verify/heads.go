package verify

import (
	"fmt"
	"math/rand/v2"

	"github.com/attngen/attngen/spec"
)

// A pattern with head parameters (spec.Pattern.Params: window sizes or
// sink counts that vary by query head) computes, at query head h, the
// pattern bound to head h's values, Shape.HeadParams[h*n : h*n+n] for n
// parameters. Every function here that evaluates the mask per row binds
// it per head this way.

// heads is the pattern each query head of a call computes.
type heads struct {
	p     spec.Pattern
	bound []spec.Pattern // per query head; nil: p at every head
}

// at is the pattern query head h computes.
func (x heads) at(h int) spec.Pattern {
	if x.bound == nil {
		return x.p
	}
	return x.bound[h]
}

// row is the pattern lse row `row` ([batch, heads_q, seq_q] index)
// computes.
func (x heads) row(s Shape, row int) spec.Pattern { return x.at(row / s.SeqQ % s.HeadsQ) }

// checkHeads reports head parameter values that do not fit the pattern
// and the shape: HeadsQ values of each parameter, within its range, and
// none for a pattern without parameters.
func checkHeads(p spec.Pattern, s Shape) error {
	_, err := headsOf(p, s)
	return err
}

// headsOf binds the pattern for each query head of s.
func headsOf(p spec.Pattern, s Shape) (heads, error) {
	n := len(p.Params)
	if n == 0 {
		if len(s.HeadParams) > 0 {
			return heads{p: p}, fmt.Errorf("%d head parameter values given, but the mask takes no head parameters", len(s.HeadParams))
		}
		return heads{p: p}, nil
	}
	if len(s.HeadParams) != n*s.HeadsQ {
		return heads{p: p}, fmt.Errorf("%d head parameter values, want %d (%d parameters for each of HeadsQ = %d heads)", len(s.HeadParams), n*s.HeadsQ, n, s.HeadsQ)
	}
	x := heads{p: p, bound: make([]spec.Pattern, s.HeadsQ)}
	vals := make([]int, n)
	for h := range x.bound {
		for k := range vals {
			vals[k] = int(s.HeadParams[h*n+k])
		}
		b, err := p.Bind(vals)
		if err != nil {
			return heads{p: p}, fmt.Errorf("query head %d: %v", h, err)
		}
		x.bound[h] = b
	}
	return x, nil
}

// mustHeads is headsOf for callers whose inputs were checked already
// (checkHeads): on bad values every head computes p unbound.
func mustHeads(p spec.Pattern, s Shape) heads {
	x, _ := headsOf(p, s)
	return x
}

// RandomHeadParams draws head parameter values for a pattern with head
// parameters, head-major ([heads][len(p.Params)], as Shape.HeadParams
// takes them), for calls of n keys: each value is its parameter's Min
// one time in four, its Max one in four, otherwise uniform in [Min,
// min(Max, Min+2n)] (larger values act like Max). Head 0 takes every
// Min and the last head every Max, so that a call of two heads or more
// has both ends. nil for a pattern without parameters.
func RandomHeadParams(p spec.Pattern, r *rand.Rand, heads, n int) []int32 {
	np := len(p.Params)
	if np == 0 {
		return nil
	}
	out := make([]int32, heads*np)
	for h := 0; h < heads; h++ {
		for k, hp := range p.Params {
			v := hp.Min + r.IntN(min(hp.Max, hp.Min+2*n)-hp.Min+1)
			switch {
			case h == 0:
				v = hp.Min
			case h == heads-1 && heads > 1:
				v = hp.Max
			case r.IntN(4) == 0:
				v = hp.Min
			case r.IntN(3) == 0:
				v = hp.Max
			}
			out[h*np+k] = int32(v)
		}
	}
	return out
}

// WithHeadParams returns s with random head parameter values for p
// (RandomHeadParams) when p has parameters and s carries none; s as it is
// otherwise.
func WithHeadParams(p spec.Pattern, s Shape, r *rand.Rand) Shape {
	if len(p.Params) > 0 && s.HeadParams == nil {
		s.HeadParams = RandomHeadParams(p, r, s.HeadsQ, s.SeqK)
	}
	return s
}
