package spec

import (
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Score is a spec's score section: what happens to each scaled score
// scale*q.k before the softmax, in this order: soft-capping, then the
// ALiBi bias, then the learned sink logit joins the softmax (see
// docs/language.md, "Scores"). The zero value modifies nothing. Masks
// still decide which pairs are kept; a score modification never keeps or
// drops a pair.
type Score struct {
	// SoftCap: s <- c*tanh(s/c). Cap is the value when the spec fixes it,
	// 0 when it is given at call time (CapAtCall).
	SoftCap   bool
	Cap       float64
	CapAtCall bool
	// Alibi: s <- s - slope[h]*(i - j), or with AlibiSymmetric
	// s - slope[h]*|i - j|. The slopes are the ALiBi paper's geometric
	// sequence of the query head count unless SlopesAtCall.
	Alibi          bool
	AlibiSymmetric bool
	SlopesAtCall   bool
	// LearnedSinks: one logit per query head, given at call time, joins
	// each row's softmax as a term without a value (gpt-oss). Not the
	// sink tokens of streaming.
	LearnedSinks bool
	// Where each part was written (zero when absent).
	Pos, CapPos, AlibiPos, SinksPos Pos
}

// Active reports whether the section modifies anything.
func (s Score) Active() bool { return s.SoftCap || s.Alibi || s.LearnedSinks }

// String is the section in the normalized form attngen check prints.
func (s Score) String() string {
	if !s.Active() {
		return "none"
	}
	out := ""
	add := func(v string) {
		if out != "" {
			out += ", "
		}
		out += v
	}
	switch {
	case s.CapAtCall:
		add("softcap: call")
	case s.SoftCap:
		add("softcap: " + strconv.FormatFloat(s.Cap, 'g', -1, 64))
	}
	if s.Alibi {
		sl := "geometric"
		if s.SlopesAtCall {
			sl = "call"
		}
		add(fmt.Sprintf("alibi: {slopes: %s, symmetric: %v}", sl, s.AlibiSymmetric))
	}
	if s.LearnedSinks {
		add("learned_sinks: true")
	}
	return "{" + out + "}"
}

// MaxSoftCap bounds a soft-cap fixed in a spec.
const MaxSoftCap = 1e6

var scoreKeys = []string{"softcap", "alibi", "learned_sinks"}

// sinkHint is the message for the keys a gpt-oss user might write for
// learned sinks (mapping adds it to the unknown-key error).
const sinkHint = "learned per-head sink logits (gpt-oss) are written learned_sinks: true; StreamingLLM's sink tokens are the mask primitive streaming: {sinks: N}"

// unknownHints are extra words for unknown keys, by "what.key".
var unknownHints = map[string]string{
	"score.sinks":         sinkHint,
	"score.sink":          sinkHint,
	"score.sink_logits":   sinkHint,
	"score.sink_logit":    sinkHint,
	"score.attn_sinks":    sinkHint,
	"score.softcapping":   "write softcap: C",
	"score.logit_softcap": "write softcap: C",
}

// score parses the score section; causal is the spec's flag (ALiBi's
// default distance: signed when causal, symmetric otherwise).
func (p *parser) score(n *yaml.Node, causal bool) Score {
	sc := Score{Pos: p.pos(n)}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "score: want a mapping with softcap, alibi or learned_sinks, got %s", describe(n))
		return sc
	}
	fields := p.mapping(n, "score", scoreKeys)
	if v := fields["softcap"]; v != nil {
		sc.SoftCap, sc.CapPos = true, p.pos(v)
		switch {
		case v.Kind == yaml.ScalarNode && v.Tag == "!!str" && v.Value == "call" && v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0:
			sc.CapAtCall = true
		case v.Kind == yaml.ScalarNode && (v.Tag == "!!int" || v.Tag == "!!float") && v.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0:
			c, err := strconv.ParseFloat(v.Value, 64)
			switch {
			case err != nil || math.IsNaN(c) || math.IsInf(c, 0):
				p.errorf(v, "score.softcap: %s is not a finite number", describe(v))
			case c <= 0 || c > MaxSoftCap:
				p.errorf(v, "score.softcap: %s is out of range (want a cap above 0 and at most %g, or call)", bare(v.Value), MaxSoftCap)
			default:
				sc.Cap = c
			}
		default:
			p.errorf(v, "score.softcap: want a positive number or call (the cap given at each call), got %s", describe(v))
		}
	}
	if v := fields["alibi"]; v != nil {
		sc.Alibi, sc.AlibiPos, sc.AlibiSymmetric = true, p.pos(v), !causal
		switch {
		case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		case v.Kind != yaml.MappingNode:
			p.errorf(v, "alibi: want a mapping ({}, or slopes and symmetric), got %s", describe(v))
		default:
			f := p.mapping(v, "score.alibi", []string{"slopes", "symmetric"})
			if sn := f["slopes"]; sn != nil {
				if s, ok := p.str(sn, "score.alibi.slopes"); ok {
					switch s {
					case "geometric":
					case "call":
						sc.SlopesAtCall = true
					default:
						p.errorf(sn, "score.alibi.slopes: want geometric (the ALiBi paper's slopes of the query head count) or call (one slope per query head at each call), got %q", clip(s))
					}
				}
			}
			if yn := f["symmetric"]; yn != nil {
				if b, ok := p.boolean(yn, "score.alibi.symmetric"); ok {
					sc.AlibiSymmetric = b
				}
			}
		}
	}
	if v := fields["learned_sinks"]; v != nil {
		if b, ok := p.boolean(v, "score.learned_sinks"); ok {
			sc.LearnedSinks, sc.SinksPos = b, p.pos(v)
		}
	}
	if !sc.Active() && len(n.Content) == 0 {
		p.errorf(n, "score: empty; omit it, or give softcap, alibi or learned_sinks")
	}
	return sc
}
