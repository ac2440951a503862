package gen

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

// TestTextRoundTrip: the printed plan parses back to the same plan, stats
// and schedule, for every example spec.
func TestTextRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("../spec/examples/*.yaml")
	for _, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(s, Tiles{"generic", 64, 64}, nil)
		if err != nil {
			t.Fatal(err)
		}
		text := p.Text(1000, 1500, 6)
		d, err := ParseText(text)
		if err != nil {
			t.Fatalf("%s: %v\n%s", f, err, text)
		}
		q := d.Plan
		if q.Name != p.Name || q.Target != p.Target || q.TileQ != p.TileQ || q.TileK != p.TileK || q.HeadDim != p.HeadDim ||
			q.Layout != p.Layout || !q.Source.Mask.Equal(p.Source.Mask) || q.Source.Causal != p.Source.Causal ||
			!q.Pattern.Mask.Equal(p.Pattern.Mask) || q.Pattern.Causal != p.Pattern.Causal || !sameProgs(p, q) || q.Score != p.Score {
			t.Fatalf("%s: plan changed through text:\n%s", f, text)
		}
		if d.Stats != p.Stats(1000, 1500) {
			t.Fatalf("%s: stats %+v, want %+v", f, d.Stats, p.Stats(1000, 1500))
		}
		seg := p.Segments(1000, 1500)[0]
		for qt, refs := range d.First {
			want := p.Visit(nil, seg, qt, p.oneDoc(seg.SeqK))
			if !reflect.DeepEqual(refs, append([]TileRef{}, want...)) {
				t.Fatalf("%s: q tile %d: %v, want %v", f, qt, refs, want)
			}
		}
		if q2 := strings.Replace(text, "tiles 64 64", "tiles 64", 1); q2 != text {
			if _, err := ParseText(q2); err == nil {
				t.Fatalf("%s: malformed text accepted", f)
			}
		}
	}
}

func sameProgs(a, b *Plan) bool {
	pa, pb := a.Programs(), b.Programs()
	for k := range pa {
		if (pa[k].prog == nil) != (pb[k].prog == nil) || pa[k].prog != nil && pa[k].prog.String() != pb[k].prog.String() {
			return false
		}
	}
	return true
}

// TestScoreText: every score stage prints and parses back, and bad score
// lines are errors.
func TestScoreText(t *testing.T) {
	base := "name: s\nmask: {window: {size: 8}}\n"
	for _, sc := range []string{"", "score: {softcap: 50}", "score: {softcap: call}", "score: {alibi: {}}",
		"score: {alibi: {slopes: call, symmetric: true}}", "score: {learned_sinks: true}",
		"score: {softcap: 2.5, alibi: {slopes: call}, learned_sinks: true}"} {
		s, err := spec.Parse("t.yaml", []byte(base+sc+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(s, Tiles{"generic", 64, 64}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.Score != ScoreOf(s.Score) || p.Score.Active() != (sc != "") {
			t.Fatalf("%q: plan stage %+v", sc, p.Score)
		}
		text := p.Text(100, 100, 1)
		d, err := ParseText(text)
		if err != nil {
			t.Fatalf("%q: %v\n%s", sc, err, text)
		}
		if d.Plan.Score != p.Score {
			t.Fatalf("%q: stage %+v after the text, want %+v", sc, d.Plan.Score, p.Score)
		}
		if rt := p.Score.Runtime(); rt.Active() != p.Score.Active() || rt.Cap != p.Score.Cap || rt.LearnedSinks != p.Score.LearnedSinks {
			t.Fatalf("%q: runtime stage %+v", sc, rt)
		}
		if !p.Score.Active() {
			continue
		}
		for _, bad := range []string{"softcap=0", "softcap=x", "alibi=up", "slopes=learned", "sinks"} {
			if _, err := ParseText(strings.Replace(text, "score "+p.Score.String(), "score "+bad, 1)); err == nil {
				t.Errorf("score %s accepted", bad)
			}
		}
	}
}

// TestHeadDimText: head_dim {qk, v} reaches the plan and survives its
// text; one size gives equal dims.
func TestHeadDimText(t *testing.T) {
	for _, c := range []struct {
		src   string
		qk, v int
	}{{"head_dim: 96", 96, 96}, {"head_dim: {qk: 192, v: 128}", 192, 128}, {"", 128, 128}} {
		s, err := spec.Parse("t.yaml", []byte("name: s\nmask: {window: {size: 8}}\n"+c.src+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(s, Tiles{"generic", 64, 64}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.HeadDim != c.qk || p.HeadDimV != c.v {
			t.Fatalf("%q: plan dims %d, %d", c.src, p.HeadDim, p.HeadDimV)
		}
		d, err := ParseText(p.Text(100, 100, 1))
		if err != nil {
			t.Fatal(err)
		}
		if d.Plan.HeadDim != c.qk || d.Plan.HeadDimV != c.v {
			t.Fatalf("%q: dims %d, %d after the text", c.src, d.Plan.HeadDim, d.Plan.HeadDimV)
		}
	}
}
