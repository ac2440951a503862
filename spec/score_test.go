package spec_test

import (
	"errors"
	"testing"

	"github.com/attngen/attngen/spec"
)

// TestScoreParse: each field of the score section, its defaults (ALiBi
// symmetric exactly when the spec is not causal) and String's normal form.
func TestScoreParse(t *testing.T) {
	cases := []struct {
		src  string
		want spec.Score
		str  string
	}{
		{"score: {softcap: 50}", spec.Score{SoftCap: true, Cap: 50}, "{softcap: 50}"},
		{"score: {softcap: 30.5}", spec.Score{SoftCap: true, Cap: 30.5}, "{softcap: 30.5}"},
		{"score: {softcap: call}", spec.Score{SoftCap: true, CapAtCall: true}, "{softcap: call}"},
		{"score: {alibi: {}}", spec.Score{Alibi: true}, "{alibi: {slopes: geometric, symmetric: false}}"},
		{"score: {alibi: }", spec.Score{Alibi: true}, "{alibi: {slopes: geometric, symmetric: false}}"},
		{"score: {alibi: {slopes: call, symmetric: true}}", spec.Score{Alibi: true, SlopesAtCall: true, AlibiSymmetric: true}, "{alibi: {slopes: call, symmetric: true}}"},
		{"causal: false\nscore: {alibi: {}}", spec.Score{Alibi: true, AlibiSymmetric: true}, "{alibi: {slopes: geometric, symmetric: true}}"},
		{"causal: false\nscore: {alibi: {symmetric: false}}", spec.Score{Alibi: true}, "{alibi: {slopes: geometric, symmetric: false}}"},
		{"score: {learned_sinks: true}", spec.Score{LearnedSinks: true}, "{learned_sinks: true}"},
		{"score: {softcap: 20, alibi: {}, learned_sinks: true}", spec.Score{SoftCap: true, Cap: 20, Alibi: true, LearnedSinks: true}, "{softcap: 20, alibi: {slopes: geometric, symmetric: false}, learned_sinks: true}"},
	}
	for _, c := range cases {
		s, err := spec.Parse("t.yaml", []byte(lines("name: a", "mask: {window: {size: 8}}", c.src)))
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		got := s.Score
		got.Pos, got.CapPos, got.AlibiPos, got.SinksPos = spec.Pos{}, spec.Pos{}, spec.Pos{}, spec.Pos{}
		if got != c.want {
			t.Errorf("%q: %+v, want %+v", c.src, got, c.want)
		}
		if !s.Score.Active() || s.Score.String() != c.str {
			t.Errorf("%q: String %s, want %s", c.src, s.Score, c.str)
		}
		if p := s.Pattern(); p.Score != s.Score {
			t.Errorf("%q: Pattern's score %+v", c.src, p.Score)
		}
		for _, l := range s.Layers() {
			if l.Score.Active() {
				t.Errorf("%q: a layer carries the score section", c.src)
			}
		}
	}
	s, err := spec.Parse("t.yaml", []byte(lines("name: a", "mask: {window: {size: 8}}")))
	if err != nil || s.Score.Active() || s.Score.String() != "none" {
		t.Errorf("no score section: %+v, %v", s.Score, err)
	}
}

// TestScoreErrors: bad values are errors at their field, and the names a
// gpt-oss user might write for learned sinks say where those are.
func TestScoreErrors(t *testing.T) {
	cases := []errCase{
		{"cap zero", lines("name: a", "mask: {window: {size: 8}}", "score: {softcap: 0}"),
			[]wantErr{at(3, 18, "score.softcap: 0 is out of range")}},
		{"cap negative", lines("name: a", "mask: {window: {size: 8}}", "score: {softcap: -3}"),
			[]wantErr{at(3, 18, "score.softcap: -3 is out of range")}},
		{"cap huge", lines("name: a", "mask: {window: {size: 8}}", "score: {softcap: 1e9}"),
			[]wantErr{at(3, 18, "score.softcap: 1e9 is out of range")}},
		{"cap NaN", lines("name: a", "mask: {window: {size: 8}}", "score: {softcap: .nan}"),
			[]wantErr{at(3, 18, "score.softcap:", "not a finite number")}},
		{"cap inf", lines("name: a", "mask: {window: {size: 8}}", "score: {softcap: .inf}"),
			[]wantErr{at(3, 18, "score.softcap:", "not a finite number")}},
		{"cap string", lines("name: a", "mask: {window: {size: 8}}", `score: {softcap: "50"}`),
			[]wantErr{at(3, 18, "score.softcap: want a positive number or call")}},
		{"cap quoted call", lines("name: a", "mask: {window: {size: 8}}", `score: {softcap: "call"}`),
			[]wantErr{at(3, 18, "score.softcap: want a positive number or call")}},
		{"slopes", lines("name: a", "mask: {window: {size: 8}}", "score: {alibi: {slopes: learned}}"),
			[]wantErr{at(3, 25, `score.alibi.slopes: want geometric`, `"learned"`)}},
		{"alibi list", lines("name: a", "mask: {window: {size: 8}}", "score: {alibi: [1, 2]}"),
			[]wantErr{at(3, 16, "alibi: want a mapping")}},
		{"alibi unknown", lines("name: a", "mask: {window: {size: 8}}", "score: {alibi: {slope: 0.5}}"),
			[]wantErr{at(3, 17, `score.alibi: unknown key "slope"`)}},
		{"symmetric", lines("name: a", "mask: {window: {size: 8}}", "score: {alibi: {symmetric: yes}}"),
			[]wantErr{at(3, 28, "score.alibi.symmetric: want true or false")}},
		{"sinks", lines("name: a", "mask: {window: {size: 8}}", "score: {sinks: 4}"),
			[]wantErr{at(3, 9, `score: unknown key "sinks"`, "learned_sinks: true", "streaming: {sinks: N}")}},
		{"sink_logits", lines("name: a", "mask: {window: {size: 8}}", "score: {sink_logits: true}"),
			[]wantErr{at(3, 9, `score: unknown key "sink_logits"`, "learned_sinks")}},
		{"learned_sinks not bool", lines("name: a", "mask: {window: {size: 8}}", "score: {learned_sinks: 4}"),
			[]wantErr{at(3, 24, "score.learned_sinks: want true or false")}},
		{"empty", lines("name: a", "mask: {window: {size: 8}}", "score: {}"),
			[]wantErr{at(3, 8, "score: empty")}},
		{"not a mapping", lines("name: a", "mask: {window: {size: 8}}", "score: 50"),
			[]wantErr{at(3, 8, "score: want a mapping")}},
		{"unknown", lines("name: a", "mask: {window: {size: 8}}", "score: {temperature: 2}"),
			[]wantErr{at(3, 9, `score: unknown key "temperature" (want softcap, alibi, learned_sinks)`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := spec.Parse("t.yaml", []byte(c.src))
			var list spec.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T %v", err, err)
			}
			checkErrors(t, list, c.want)
		})
	}
}
