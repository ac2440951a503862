package verify_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// stackDepth and stackSeq are what attngen verify uses: a 3-layer stack at
// its default -dep-seq of 70.
const (
	stackDepth = 3
	stackSeq   = 70
)

// exactRun is a layer computed by the float64 reference, rounded to float32
// only at its outputs.
func exactRun(p spec.Pattern) verify.Run {
	return func(out, lse, q, k, v []float32, _ []int32, s verify.Shape) error {
		ref, refLSE, err := verify.Reference(p, nil, q, k, v, s)
		if err != nil {
			return err
		}
		for x := range ref {
			out[x] = float32(ref[x])
		}
		for x := range refLSE {
			lse[x] = float32(refLSE[x])
		}
		return nil
	}
}

// predRun is a float64 layer of one batch and one head that keeps the pair
// (row i, key j) exactly when keep(i, j): it lets a test build a kernel that
// is wrong on purpose.
func predRun(keep func(i, j int) bool) verify.Run {
	return func(out, lse, q, k, v []float32, _ []int32, s verify.Shape) error {
		if s.Batch != 1 || s.HeadsQ != 1 || s.HeadsKV != 1 {
			return fmt.Errorf("predRun wants one batch and one head, got %+v", s)
		}
		D := s.HeadDim
		w := make([]float64, s.SeqK)
		for r := 0; r < s.SeqQ; r++ {
			i := r + s.SeqK - s.SeqQ
			top := math.Inf(-1)
			for j := range w {
				w[j] = math.Inf(-1)
				if !keep(i, j) {
					continue
				}
				dot := 0.0
				for d := 0; d < D; d++ {
					dot += float64(q[r*D+d]) * float64(k[j*D+d])
				}
				w[j] = dot * s.EffScale()
				top = max(top, w[j])
			}
			for d := 0; d < D; d++ {
				out[r*D+d] = 0
			}
			if math.IsInf(top, -1) {
				lse[r] = float32(top)
				continue
			}
			total := 0.0
			for j := range w {
				if !math.IsInf(w[j], -1) {
					w[j] = math.Exp(w[j] - top)
					total += w[j]
				}
			}
			lse[r] = float32(top + math.Log(total))
			for d := 0; d < D; d++ {
				acc := 0.0
				for j := range w {
					if !math.IsInf(w[j], -1) {
						acc += w[j] * float64(v[j*D+d])
					}
				}
				out[r*D+d] = float32(acc / total)
			}
		}
		return nil
	}
}

// cpuRun adapts a CPU variant running a pattern's compiled plan to
// verify.Run, exactly as attngen verify does (cmd/attngen/verify.go).
func cpuRun(t *testing.T, p spec.Pattern, headDim int, variant cpu.Variant) verify.Run {
	t.Helper()
	plan, err := gen.Compile(&spec.Spec{Name: "verify", Mask: p.Mask, Causal: p.Causal, HeadDim: headDim}, gen.CPUTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := plan.Mask()
	return func(out, lse, q, k, v []float32, docs []int32, s verify.Shape) error {
		return cpu.Forward(m, variant, out, lse, q, k, v, docs, cpu.Shape{
			Batch: s.Batch, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: s.SeqQ, SeqK: s.SeqK,
			HeadDim: s.HeadDim, Scale: float32(s.Scale),
		})
	}
}

// stackSpecs are the specs attngen verify failed on (issue 8, item 3) and
// the shipped examples: causal windows of sizes 6 to 24, non-causal windows
// with left and right, dilated masks, causal and not.
func stackSpecs(t *testing.T) []*spec.Spec {
	t.Helper()
	var out []*spec.Spec
	add := func(name string, causal bool, m *spec.Mask) {
		out = append(out, &spec.Spec{Name: name, Mask: m, Causal: causal, HeadDim: 64})
	}
	for w := 6; w <= 24; w++ {
		add(fmt.Sprintf("window%d", w), true, spec.Window(w))
	}
	for _, lr := range [][2]int{{0, 1}, {1, 0}, {2, 3}, {5, 2}, {4, 4}, {7, 11}, {12, 12}, {20, 3}, {0, 30}} {
		add(fmt.Sprintf("window_l%d_r%d", lr[0], lr[1]), false, spec.WindowLR(lr[0], lr[1]))
	}
	for _, sn := range [][2]int{{2, 0}, {3, 0}, {8, 0}, {4, 5}, {3, 12}, {16, 32}} {
		add(fmt.Sprintf("dilated%d_%d", sn[0], sn[1]), true, spec.Dilated(sn[0], sn[1]))
		add(fmt.Sprintf("dilated%d_%d_noncausal", sn[0], sn[1]), false, spec.Dilated(sn[0], sn[1]))
	}
	files, err := filepath.Glob("../spec/examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no spec/examples/*.yaml found")
	}
	for _, f := range files {
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// stackOf returns the first stackDepth layers of s as attngen verify builds
// them, or false when a layer has a document mask (the CLI skips those); a
// tree layer gets a random parent array of stackSeq positions.
func stackOf(s *spec.Spec) ([]spec.Pattern, bool) {
	var layers []spec.Pattern
	r := rand.New(rand.NewPCG(7, 8))
	for l := 1; l <= stackDepth; l++ {
		p := s.LayerAt(l)
		if p.Mask.HasDocument() {
			return nil, false
		}
		if p.Mask.HasTree() {
			d, err := spec.NewTree(verify.RandomTree(r, stackSeq))
			if err != nil {
				panic(err)
			}
			p.Data = d
		}
		if p.HasParams() {
			// one head's random values: the layer is the bound mask
			vals := verify.RandomHeadParams(p, r, 3, stackSeq)
			n := len(p.Params)
			iv := make([]int, n)
			for k := range iv {
				iv[k] = int(vals[n+k])
			}
			b, err := p.Bind(iv)
			if err != nil {
				panic(err)
			}
			p = b
		}
		layers = append(layers, p)
	}
	return layers, true
}

// TestCheckStackExact: correct float64 layers pass the stack check on every
// spec, for several seeds (attngen verify draws a fresh seed per run).
func TestCheckStackExact(t *testing.T) {
	seeds := 2
	if testing.Short() {
		seeds = 1
	}
	for _, s := range stackSpecs(t) {
		layers, ok := stackOf(s)
		if !ok {
			continue
		}
		runs := make([]verify.Run, len(layers))
		for k, p := range layers {
			runs[k] = exactRun(p)
		}
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			r := rand.New(rand.NewPCG(seed, 0x73746b))
			if err := verify.CheckStack(layers, runs, stackSeq, s.HeadDim, r); err != nil {
				t.Errorf("%s (%s), seed %d: %v", s.Name, s.Mask, seed, err)
			}
		}
	}
}

// TestCheckStackCPU: the float32 CPU kernels, built and called as attngen
// verify builds and calls them, pass the stack check on every spec and on
// every variant this machine runs.
func TestCheckStackCPU(t *testing.T) {
	seeds := 2
	if testing.Short() {
		seeds = 1
	}
	for _, tg := range cpu.Targets {
		if !cpu.Supported(tg.Variant) {
			continue
		}
		for _, s := range stackSpecs(t) {
			layers, ok := stackOf(s)
			if !ok {
				continue
			}
			runs := make([]verify.Run, len(layers))
			for k, p := range layers {
				runs[k] = cpuRun(t, p, s.HeadDim, tg.Variant)
			}
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				r := rand.New(rand.NewPCG(seed, 0x637075))
				if err := verify.CheckStack(layers, runs, stackSeq, s.HeadDim, r); err != nil {
					t.Errorf("%s: %s (%s), seed %d: %v", tg.Name, s.Name, s.Mask, seed, err)
				}
			}
		}
	}
}

// bruteStack is the reachability of a stack of layers given as predicates,
// computed by the recursion of the model: reach[t][s] is s in R_L(t).
func bruteStack(keep []func(i, j int) bool, n int) [][]bool {
	cur := make([][]bool, n)
	for t := range cur {
		cur[t] = make([]bool, n)
		cur[t][t] = true
	}
	for _, m := range keep {
		next := make([][]bool, n)
		for t := range next {
			next[t] = append([]bool(nil), cur[t]...)
			for s := 0; s < n; s++ {
				if m(t, s) {
					for u, ok := range cur[s] {
						if ok {
							next[t][u] = true
						}
					}
				}
			}
		}
		cur = next
	}
	return cur
}

func sameReach(a, b [][]bool) bool {
	for t := range a {
		for s := range a[t] {
			if a[t][s] != b[t][s] {
				return false
			}
		}
	}
	return true
}

// wrongStack returns runs for layers where layer bad (0-based) flips the
// pair (i, j): drops it if the mask keeps it, attends to it if not. It also
// reports whether the flip changes R_L of the stack, which is when the stack
// check must notice it.
func wrongStack(layers []spec.Pattern, bad, i, j, n int) ([]verify.Run, bool) {
	keep := make([]func(int, int) bool, len(layers))
	runs := make([]verify.Run, len(layers))
	for k, p := range layers {
		keep[k] = p.At
		if k == bad {
			keep[k] = func(a, b int) bool { return p.At(a, b) != (a == i && b == j) }
		}
		runs[k] = predRun(keep[k])
	}
	return runs, !sameReach(bruteStack(keep, n), verify.BruteReach(layers, n)[len(layers)])
}

// TestCheckStackWrongLayer: a layer that drops one kept pair, or attends to
// one masked key, is rejected by the stack check whenever the flip changes
// which inputs reach which outputs (for a window the pairs at the window's
// edge, where the reach of three layers has a single path), and passes when
// it does not (other paths carry the same dependency); the correct predicate
// layers pass.
func TestCheckStackWrongLayer(t *testing.T) {
	type flip struct {
		name       string
		layers     []spec.Pattern
		bad, i, j  int
		mustMatter bool // the flip is chosen to change R_3
	}
	w12 := spec.Pattern{Mask: spec.Window(12), Causal: true}
	lr := spec.Pattern{Mask: spec.WindowLR(5, 2), Causal: false}
	dil := spec.Pattern{Mask: spec.Dilated(8, 0), Causal: true}
	win3 := []spec.Pattern{w12, w12, w12}
	flips := []flip{
		// R_3(51) of window 12 holds 18 by one path only: 51 <- 40 <- 29 <- 18.
		{"window12 drops edge pair, layer 1", win3, 0, 29, 18, true},
		{"window12 drops edge pair, layer 2", win3, 1, 40, 29, true},
		{"window12 drops edge pair, layer 3", win3, 2, 51, 40, true},
		// Attending one key past the edge reaches a source beyond R_3.
		{"window12 adds masked key, layer 1", win3, 0, 29, 17, true},
		{"window12 adds masked key, layer 2", win3, 1, 40, 28, true},
		{"window12 adds masked key, layer 3", win3, 2, 51, 39, true},
		{"window12 adds future key, layer 2", win3, 1, 40, 41, true},
		// A pair in the middle of the window: other paths remain.
		{"window12 drops inner pair", win3, 1, 40, 35, false},
		{"window l5 r2 drops edge pair", []spec.Pattern{lr, lr, lr}, 1, 30, 25, true},
		{"window l5 r2 adds masked key", []spec.Pattern{lr, lr, lr}, 2, 30, 33, true},
		{"dilated 8 drops a pair", []spec.Pattern{dil, dil, dil}, 0, 16, 8, false},
		{"dilated 8 adds a key off the stride", []spec.Pattern{dil, dil, dil}, 2, 60, 59, true},
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, f := range flips {
		runs, matters := wrongStack(f.layers, f.bad, f.i, f.j, stackSeq)
		if f.mustMatter && !matters {
			t.Fatalf("%s: test setup: the flip does not change R_3", f.name)
		}
		err := verify.CheckStack(f.layers, runs, stackSeq, 64, r)
		switch {
		case matters && err == nil:
			t.Errorf("%s: the wrong stack passed the check", f.name)
		case !matters && err != nil:
			t.Errorf("%s: the flip leaves R_3 unchanged, yet the check failed: %v", f.name, err)
		case err != nil && !strings.Contains(err.Error(), "changing input"):
			t.Errorf("%s: failed for another reason: %v", f.name, err)
		}
	}
	// Random flips on random windows: the check fails exactly when R_3
	// changes.
	for iter := 0; iter < 30; iter++ {
		p := spec.Pattern{Mask: spec.Window(2 + r.IntN(23)), Causal: true}
		if r.IntN(2) == 0 {
			p = spec.Pattern{Mask: spec.WindowLR(r.IntN(15), r.IntN(15)), Causal: false}
		}
		layers := []spec.Pattern{p, p, p}
		i, j := r.IntN(stackSeq), r.IntN(stackSeq)
		bad := r.IntN(3)
		runs, matters := wrongStack(layers, bad, i, j, stackSeq)
		err := verify.CheckStack(layers, runs, stackSeq, 64, r)
		if matters != (err != nil) {
			t.Errorf("%v, layer %d flips (%d, %d): R_3 changes: %v, check error: %v", p, bad+1, i, j, matters, err)
		}
	}
	// The same predicate layers without a flip pass.
	for _, layers := range [][]spec.Pattern{win3, {lr, lr, lr}, {dil, dil, dil}} {
		runs := make([]verify.Run, len(layers))
		for k, p := range layers {
			runs[k] = predRun(p.At)
		}
		if err := verify.CheckStack(layers, runs, stackSeq, 64, r); err != nil {
			t.Errorf("%v: correct predicate layers: %v", layers[0], err)
		}
	}
}

// TestCheckStackBadInput: arguments CheckStack cannot use, or a stack whose
// dependencies float32 cannot resolve, are errors, never panics or hours of
// work.
func TestCheckStackBadInput(t *testing.T) {
	w := spec.Pattern{Mask: spec.Window(4), Causal: true}
	full := spec.Pattern{Mask: spec.Full(), Causal: false}
	run := exactRun(w)
	r := rand.New(rand.NewPCG(7, 8))
	three := func(p spec.Pattern) []spec.Pattern { return []spec.Pattern{p, p, p} }
	runs3 := []verify.Run{run, run, run}
	cases := []struct {
		name   string
		layers []spec.Pattern
		runs   []verify.Run
		n, d   int
		r      *rand.Rand
		want   string
	}{
		{"runs short", three(w), runs3[:2], 10, 4, r, "one run per layer"},
		{"no layers", nil, nil, 10, 4, r, "no layers"},
		{"nil rand", three(w), runs3, 10, 4, nil, "nil random source"},
		{"nil run", three(w), []verify.Run{run, nil, run}, 10, 4, r, "layer 2 has no run"},
		{"nil mask", []spec.Pattern{w, {}, w}, runs3, 10, 4, r, "layer 2 has no mask"},
		{"n 0", three(w), runs3, 0, 4, r, "at least 1"},
		{"d negative", three(w), runs3, 10, -1, r, "at least 1"},
		{"n huge", three(w), runs3, math.MaxInt, 64, r, "limit 2^40"},
		{"d huge", three(w), runs3, 10, math.MaxInt / 2, r, "limit 2^40"},
		{"too deep to resolve", []spec.Pattern{full, full, full, full, full, full, full, full}, make([]verify.Run, 8), 100, 4, r, "float32 resolution"},
	}
	for k := range cases[len(cases)-1].runs {
		cases[len(cases)-1].runs[k] = exactRun(full)
	}
	for _, c := range cases {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			return verify.CheckStack(c.layers, c.runs, c.n, c.d, c.r)
		}()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
