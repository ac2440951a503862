package spec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

// TestHeadParamsParse: declared parameters are recorded in order, fields
// that name them carry Refs, the unbound mask takes every field at its
// parameter's max, String prints the names, and Bind gives each head's
// concrete mask.
func TestHeadParamsParse(t *testing.T) {
	src := lines(
		"name: h",
		"head_params:",
		"  window: {min: 1, max: 4096}",
		"  sinks: {min: 0, max: 16}",
		"  right: {min: 2, max: 5}",
		"mask:",
		"  union:",
		"    - global: {tokens: sinks}",
		"    - window: {size: window}",
		"    - intersect: [{window: {left: 3, right: right}}, {streaming: {sinks: sinks, window: 7}}]",
	)
	s, err := spec.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.HeadParams) != 3 || s.HeadParams[0] != (spec.HeadParam{Name: "window", Min: 1, Max: 4096, Pos: s.HeadParams[0].Pos}) || s.HeadParams[1].Name != "sinks" || s.HeadParams[1].Min != 0 {
		t.Fatalf("head params %+v", s.HeadParams)
	}
	p := s.Pattern()
	if len(p.Params) != 3 {
		t.Fatalf("pattern params %+v", p.Params)
	}
	want := "{union: [{global: {tokens: sinks}}, {window: {size: window}}, {intersect: [{window: {left: 3, right: right}}, {union: [{global: {tokens: sinks}}, {window: {size: 7}}]}]}]}"
	if got := s.Mask.String(); got != want {
		t.Errorf("String = %s\nwant     %s", got, want)
	}
	// the unbound instance: every field at its max
	if !p.At(5000, 5000-4095) || p.At(5000, 5000-4096) && !p.At(5000, 15) || !p.At(5000, 15) || p.At(5000, 16) {
		t.Error("the unbound pattern is not the instance at every max")
	}
	b, err := p.Bind([]int{10, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	if b.HasParams() || b.Mask.HasRefs() {
		t.Error("a bound pattern still has parameters")
	}
	if got, want := b.Mask.String(), "{union: [{global: {tokens: 0}}, {window: {size: 10}}, {intersect: [{window: {left: 3, right: 2}}, {union: [{global: {tokens: 0}}, {window: {size: 7}}]}]}]}"; got != want {
		t.Errorf("bound: %s\nwant   %s", got, want)
	}
	if b.At(100, 0) || !b.At(100, 91) || b.At(100, 90) {
		t.Error("bound pattern: window 10, no sinks, not as evaluated")
	}
	// the unbound pattern is unchanged by Bind
	if s.Mask.String() != want && !p.At(5000, 15) {
		t.Error("Bind changed the unbound pattern")
	}
	for _, vals := range [][]int{{0, 0, 2}, {10, 17, 2}, {10, 0, 6}, {10, 0}, {1, 2, 3, 4}} {
		if _, err := p.Bind(vals); err == nil {
			t.Errorf("Bind(%v) accepted", vals)
		}
	}
	if got := spec.HeadParamsYAML(s.HeadParams); got != "head_params: {window: {min: 1, max: 4096}, sinks: {min: 0, max: 16}, right: {min: 2, max: 5}}\n" {
		t.Errorf("HeadParamsYAML = %q", got)
	}
	// extra masks of a schedule take the declarations too; the spec's own
	// pattern without refs carries none
	s2, err := spec.Parse("t.yaml", []byte(lines("name: h", "head_params: {w: {min: 1, max: 9}}", "masks: {m: {window: {size: w}}}", "schedule: [mask, m]", "mask: {window: {size: 4}}")))
	if err != nil {
		t.Fatal(err)
	}
	if l := s2.Layers(); len(l[0].Params) != 0 || len(l[1].Params) != 1 {
		t.Errorf("layers' params: %d and %d, want 0 and 1", len(l[0].Params), len(l[1].Params))
	}
}

// TestHeadParamsErrors: every misuse is an error at the field it names.
func TestHeadParamsErrors(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []wantErr
	}{
		{"undeclared", lines("name: a", "head_params: {w: {min: 1, max: 4}}", "mask: {union: [{window: {size: w}}, {window: {size: v}}]}"),
			[]wantErr{at(3, 53, "mask.union[1].window.size: want an integer or a head parameter (w)", `"v"`)}},
		{"none declared", lines("name: a", "mask: {window: {size: w}}"),
			[]wantErr{at(2, 23, "mask.window.size: want an integer or a head parameter", "no head_params are declared")}},
		{"unused", lines("name: a", "head_params: {w: {min: 1, max: 4}, x: {min: 1, max: 2}}", "mask: {window: {size: w}}"),
			[]wantErr{at(2, 36, "head_params.x: declared but no mask field takes it")}},
		{"min above max", lines("name: a", "head_params: {w: {min: 5, max: 4}}", "mask: {window: {size: w}}"),
			[]wantErr{at(2, 18, "head_params.w: min 5 exceeds max 4")},
		},
		{"window size may be 0", lines("name: a", "head_params: {w: {min: 0, max: 4}}", "mask: {window: {size: w}}"),
			[]wantErr{at(3, 23, "mask.window.size: head parameter w may be 0 (its min), want at least 1")}},
		{"left beyond range", lines("name: a", "head_params: {w: {min: 0, max: 2147483647}}", "mask: {window: {left: w, right: 0}}"),
			[]wantErr{at(3, 23, "mask.window.left: head parameter w may be 2147483647 (its max), want at most 2147483646")}},
		{"missing max", lines("name: a", "head_params: {w: {min: 1}}", "mask: {window: {size: w}}"),
			[]wantErr{at(2, 18, "head_params.w: missing parameter max")}},
		{"negative", lines("name: a", "head_params: {w: {min: -1, max: 3}}", "mask: {global: {tokens: w}}"),
			[]wantErr{at(2, 24, "head_params.w.min: -1 is out of range")}},
		{"bad name", lines("name: a", "head_params: {2w: {min: 1, max: 3}}", "mask: {window: {size: 3}}"),
			[]wantErr{at(2, 15, `head_params: name "2w" is not an identifier`)}},
		{"duplicate ignoring case", lines("name: a", "head_params: {w: {min: 1, max: 3}, W: {min: 1, max: 3}}", "mask: {window: {size: w}}"),
			[]wantErr{at(2, 36, `head_params: duplicate name "W"`)}},
		{"not a mapping", lines("name: a", "head_params: [w]", "mask: {window: {size: 3}}"),
			[]wantErr{at(2, 14, "head_params: want a mapping")}},
		{"empty", lines("name: a", "head_params: {}", "mask: {window: {size: 3}}"),
			[]wantErr{at(2, 14, "head_params: empty")}},
		{"not a field that takes one", lines("name: a", "head_params: {w: {min: 1, max: 3}}", "mask: {union: [{window: {size: w}}, {block: {size: w}}]}"),
			[]wantErr{at(3, 52, "mask.union[1].block.size: want an integer")}},
		{"quoted name is a string", lines("name: a", "head_params: {w: {min: 1, max: 3}}", `mask: {window: {size: "w"}}`),
			[]wantErr{at(2, 15, "head_params.w: declared but no mask field takes it"), at(3, 23, "mask.window.size: want an integer")}},
	}
	many := "name: a\nhead_params: {"
	for k := 0; k < spec.MaxHeadParams+1; k++ {
		if k > 0 {
			many += ", "
		}
		many += "p" + string(rune('a'+k)) + ": {min: 1, max: 2}"
	}
	many += "}\nmask: {window: {size: pa}}\n"
	cases = append(cases, struct {
		name string
		src  string
		want []wantErr
	}{"too many", many, nil})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := spec.Parse("t.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("parsed: %s", s.Mask)
			}
			var list spec.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T %v", err, err)
			}
			if c.want == nil {
				if !strings.Contains(err.Error(), "more than 8 parameters") {
					t.Errorf("got %v", err)
				}
				return
			}
			checkErrors(t, list, c.want)
		})
	}
}
