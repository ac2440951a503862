package gen

import (
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// headExternal is a FlexAttention mask_mod that reads the head index h,
// re-implemented from its published meaning: per-head tensors indexed by
// h, next to the attngen spec with head parameters that language.md maps
// it to and the values per head (vals[h] in the order of head_params).
type headExternal struct {
	name   string
	spec   string // head_params and mask, YAML
	vals   [][]int
	keep   func(h, q, kv int) bool
	causal bool
}

func headExternals() []headExternal {
	var out []headExternal
	// A window per head: (q >= kv) & (q - kv < window[h]), MoA-style
	// spans; 1 and a window longer than the sequence at the ends.
	win := []int{1, 3, 64, 65, 200, 4096}
	out = append(out, headExternal{
		name:   "mask_mod q - kv < window[h]",
		spec:   "head_params: {window: {min: 1, max: 4096}}\nmask: {window: {size: window}}\n",
		vals:   [][]int{{1}, {3}, {64}, {65}, {200}, {4096}},
		keep:   func(h, q, kv int) bool { return q >= kv && q-kv < win[h] },
		causal: true,
	})
	// DuoAttention: retrieval heads attend to everything (causal),
	// streaming heads to sinks[h] first tokens and a recent window.
	sinks := []int{4, 0, 16, 1, 0}
	recent := []int{32, 100, 64, 1, 1 << 20}
	streaming := []bool{true, true, true, true, false}
	vals := make([][]int, len(sinks))
	for h := range sinks {
		vals[h] = []int{sinks[h], recent[h]}
	}
	out = append(out, headExternal{
		name: "DuoAttention heads (streaming: kv < sinks[h] or q - kv < recent[h]; retrieval: causal)",
		spec: "head_params: {sinks: {min: 0, max: 64}, recent: {min: 1, max: 1048576}}\nmask: {streaming: {sinks: sinks, window: recent}}\n",
		vals: vals,
		keep: func(h, q, kv int) bool {
			if !streaming[h] {
				return q >= kv
			}
			return q >= kv && (kv < sinks[h] || q-kv < recent[h])
		},
		causal: true,
	})
	// Not causal: an asymmetric band per head, |left[h], right[h]|.
	left, right := []int{0, 5, 31}, []int{7, 0, 100}
	out = append(out, headExternal{
		name:   "mask_mod -right[h] <= q - kv <= left[h] (bidirectional band per head)",
		spec:   "causal: false\nhead_params: {l: {min: 0, max: 40}, r: {min: 0, max: 100}}\nmask: {window: {left: l, right: r}}\n",
		vals:   [][]int{{0, 7}, {5, 0}, {31, 100}},
		keep:   func(h, q, kv int) bool { return q-kv <= left[h] && kv-q <= right[h] },
		causal: false,
	})
	return out
}

// TestExternalHeadMasks: each per-head mask_mod agrees, head by head and
// pair by pair, with the spec bound to that head's values (At, Keys), with
// the plan's programs reading the values at run time (keep words), and
// the plan's tile classes are sound for it.
func TestExternalHeadMasks(t *testing.T) {
	for _, e := range headExternals() {
		src := "name: ext\nhead_dim: 64\n" + e.spec
		s, err := spec.Parse("ext.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if s.Causal != e.causal {
			t.Fatalf("%s: causal %v", e.name, s.Causal)
		}
		plan, err := Compile(s, CPUTarget, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := plan.Mask()
		if got := len(mask.HeadParams(m)); got != len(s.HeadParams) {
			t.Fatalf("%s: compiled mask has %d head parameters", e.name, got)
		}
		for h, vals := range e.vals {
			pat, err := s.Pattern().Bind(vals)
			if err != nil {
				t.Fatalf("%s head %d: %v", e.name, h, err)
			}
			d := headDocs(nil, vals)
			for _, sz := range [][2]int{{1, 1}, {130, 130}, {200, 200}, {1, 150}, {50, 170}} {
				sq, sk := sz[0], sz[1]
				var progs []spec.Prog
				for row := 0; row < sq; row++ {
					i := spec.Row(row, sq, sk)
					dense := make([]bool, sk)
					progs = pat.Keys(progs[:0], i, sk)
					for _, g := range progs {
						for j := g.Lo; j <= g.Hi; j += g.Step {
							dense[j] = true
						}
					}
					for k0 := 0; k0 < sk; k0 += 64 {
						w := m.Word(i, k0, sk, d)
						for j := k0; j < min(k0+64, sk); j++ {
							want := e.keep(h, i, j)
							if pat.At(i, j) != want || dense[j] != want || (w>>uint(j-k0)&1 != 0) != want {
								t.Fatalf("%s head %d %v: sq %d sk %d (%d, %d): external %v, At %v, Keys %v, word %v",
									e.name, h, vals, sq, sk, i, j, want, pat.At(i, j), dense[j], w>>uint(j-k0)&1 != 0)
							}
						}
					}
				}
				for q0 := sk - sq; q0 < sk; q0 += 16 {
					q1 := min(q0+15, sk-1)
					for k0 := 0; k0 < sk; k0 += 16 {
						k1 := min(k0+15, sk-1)
						kept, total := countKept(q0, q1, k0, k1, func(i, j int) bool { return e.keep(h, i, j) })
						switch c := m.Class(q0, q1, k0, k1, d); {
						case c == spec.Empty && kept > 0, c == spec.FullT && kept < total:
							t.Fatalf("%s head %d: tile [%d,%d]x[%d,%d] is %v, %d of %d kept", e.name, h, q0, q1, k0, k1, c, kept, total)
						case c == spec.Partial && (kept == 0 || kept == total) && len(s.Mask.Args) == 0:
							t.Fatalf("%s head %d: primitive tile [%d,%d]x[%d,%d] partial, %d of %d kept", e.name, h, q0, q1, k0, k1, kept, total)
						}
					}
				}
			}
		}
	}
}
