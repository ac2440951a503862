package spec_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic, hang or
// overflow the stack. A spec it accepts must be normalized, render to a mask
// that parses back Equal, and evaluate; an input it refuses must come back as
// an ErrorList of positioned, one-line messages in file order.
//
// The committed corpus (testdata/fuzz/FuzzParse) holds the examples,
// malformed specs, deep nesting, alias bombs, huge integers and odd unicode;
// the error cases of parse_test.go and the example files are added here.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("examples/*.yaml")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	for _, c := range errCases {
		if len(c.src) <= 4096 {
			f.Add([]byte(c.src))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := spec.Parse("f.yaml", data)
		if err != nil {
			if s != nil {
				t.Fatalf("spec and error together: %v", err)
			}
			checkErrorList(t, err)
			return
		}
		checkSpec(t, s)
	})
}

func checkErrorList(t *testing.T, err error) {
	t.Helper()
	var list spec.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %T %v, want a spec.ErrorList", err, err)
	}
	if len(list) == 0 {
		t.Fatalf("empty ErrorList")
	}
	for k, e := range list {
		if e == nil {
			t.Fatalf("error %d is nil", k)
		}
		if e.Pos.File != "f.yaml" || e.Pos.Line < 1 || e.Pos.Col < 1 {
			t.Errorf("error %d at %q:%d:%d: %s", k, e.Pos.File, e.Pos.Line, e.Pos.Col, e.Msg)
		}
		if strings.TrimSpace(e.Msg) == "" || strings.ContainsAny(e.Msg, "\n\r") {
			t.Errorf("error %d at %s: message %q is empty or not one line", k, e.Pos, e.Msg)
		}
		// Parse turns a panic into this message; any is a bug.
		if strings.Contains(e.Msg, "cannot parse YAML") {
			t.Errorf("recovered panic: %s", e)
		}
		if k > 0 {
			p := list[k-1].Pos
			if p.Line > e.Pos.Line || p.Line == e.Pos.Line && p.Col > e.Pos.Col {
				t.Errorf("errors out of order: %s before %s", p, e.Pos)
			}
		}
	}
}

func checkSpec(t *testing.T, s *spec.Spec) {
	t.Helper()
	if s.Mask == nil {
		t.Fatalf("spec without a mask")
	}
	if s.HeadDim < 1 || s.HeadDim > spec.MaxHeadDim {
		t.Errorf("head_dim %d", s.HeadDim)
	}
	if s.Name == "" {
		t.Errorf("empty name")
	}
	checkMask(t, "mask", s.Mask, s.Causal, s.HeadParams...)
	for _, n := range s.MaskNames() {
		m := s.Masks[n]
		if m == nil {
			t.Fatalf("masks.%s is nil", n)
		}
		checkMask(t, "masks."+n, m, s.Causal, s.HeadParams...)
	}
	layers := s.Layers()
	if len(layers) == 0 {
		t.Fatalf("no layers")
	}
	for k, l := range layers {
		if l.Mask == nil {
			t.Fatalf("layer %d (%v) has no mask", k, s.Schedule)
		}
	}
	_ = s.LayerAt(len(layers) + 1)
}

func checkMask(t *testing.T, what string, m *spec.Mask, causal bool, params ...spec.HeadParam) {
	t.Helper()
	checkNormal(t, what, m)
	str := m.String()
	if !m.HasRefs() {
		params = nil // a schedule's other masks need not name the parameters
	}
	r, err := reparse(m, causal, params...)
	if err != nil {
		t.Fatalf("%s: %s does not parse back: %v", what, str, err)
	}
	if !r.Mask.Equal(m) {
		t.Fatalf("%s: %s parses back to %s", what, str, r.Mask)
	}
	// Evaluate on small tiles; only the absence of a panic is checked here
	// (classify_test.go checks the classes).
	p := spec.Pattern{Mask: m, Causal: causal}
	for _, tile := range [][4]int{{0, 0, 0, 0}, {0, 7, 0, 7}, {8, 15, 0, 7}, {3, 17, 5, 11}, {0, 15, 16, 31}, {100, 131, 64, 95}} {
		_ = p.Classify(tile[0], tile[1], tile[2], tile[3])
	}
	for i := 0; i < 12; i++ {
		for j := 0; j < 12; j++ {
			_ = p.At(i, j)
		}
	}
	_ = fmt.Sprint(p)
}
