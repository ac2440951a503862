package gen

import (
	"strings"
	"testing"
)

// TestBackwardPackageAPI: every generated package has BackArgs and
// BackwardArgs, which pass the strides, per-row lengths and positions
// (and a {qk, v} spec's HeadDimV) to the runtime's BackwardArgs; the
// positional Backward of a {qk, v} spec runs the backward with HeadDimV
// instead of refusing it; the packages type-check against the runtime.
func TestBackwardPackageAPI(t *testing.T) {
	for _, c := range []struct {
		src   string
		split bool
	}{
		{"name: split\nhead_dim: {qk: 40, v: 96}\nmask: {window: {size: 30}}\n", true},
		{"name: splitdocs\nhead_dim: {qk: 192, v: 128}\nmask: {intersect: [{document: {}}, {window: {size: 30}}]}\n", true},
		{"name: plain\nhead_dim: 64\nmask: {window: {size: 30}}\n", false},
	} {
		s, files, pkg := checkedPackage(t, c.src)
		for _, name := range []string{"BackArgs", "BackwardArgs", "BackwardArgsVariant"} {
			if pkg.Scope().Lookup(name) == nil {
				t.Errorf("%s: no %s", s.Name, name)
			}
		}
		api := string(files["attention.go"])
		back := api[strings.Index(api, "func BackwardArgsVariant"):]
		if !strings.Contains(back, "cpu.BackArgs{\n\t\tDQ: a.DQ, DK: a.DK, DV: a.DV, DOut: a.DOut, Q: a.Q, K: a.K, V: a.V, Out: a.Out, LSE: a.LSE,") ||
			!strings.Contains(back, "Layout: a.Layout, SeqLensQ: a.SeqLensQ, SeqLensK: a.SeqLensK, QPos: a.QPos, KPos: a.KPos") {
			t.Errorf("%s: BackwardArgsVariant does not pass the layout, lengths and positions:\n%s", s.Name, back)
		}
		if strings.Contains(api, "the backward runs one head dimension") {
			t.Errorf("%s: Backward refuses the split head dimension", s.Name)
		}
		bv := api[strings.Index(api, "func BackwardVariant"):]
		bv = bv[:strings.Index(bv, "\n}\n")]
		if got := strings.Contains(bv, "HeadDimV: HeadDimV") && strings.Contains(back, "HeadDimV: HeadDimV"); got != c.split {
			t.Errorf("%s: Backward and BackwardArgs pass HeadDimV: %v, want %v:\n%s", s.Name, got, c.split, bv)
		}
	}
}
