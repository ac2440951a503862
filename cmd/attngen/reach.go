package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strings"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// Limits of the reach command. The model holds two generations of S² bits
// and, while a layer runs, 2·S² more bits per distinct progression step
// (256 MiB each at S = 32768); the marginal holds layers·(D+1) counts.
const (
	reachMaxSeq    = 32768
	reachMaxLayers = 1024
	reachMaxRules  = 64 // per-phase rules printed
)

func cmdReach(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("reach", stderr)
	path := fs.String("spec", "", "spec file (YAML)")
	layers := fs.Int("layers", 4, "depth L of the stack: layer k uses schedule entry (k-1) mod len(schedule)")
	seq := fs.Int("seq", 4096, "sequence length S (positions 0..S-1)")
	maxDist := fs.Int("max-distance", 0, "largest distance D = t - s reported, 0 to S-1 (default S-1)")
	asJSON := fs.Bool("json", false, "print one JSON object (docs/reach-json.md) instead of text")
	hops := fs.Bool("hops", false, "with -json, include hop counts (per distance, and per phase when block-periodic)")
	out := fs.String("o", "", "also draw coverage against distance, one line per depth, to this .png or .svg file")
	target := fs.Int("target", -1, "target position t of a K-way boundary-copy bound (with -source and -k)")
	source := fs.Int("source", -1, "source position s of the boundary-copy bound")
	k := fs.Int("k", 0, "number K of label values of the boundary-copy bound")
	data := fs.String("data", "", "run-time data of tree or document masks: a `FILE` of S integers (parent array or document ids)")
	headsFlag := fs.String("head-params", "", "values of the spec's head_params for the head analysed: `name=value,...` (others at their max)")
	if err := parseArgs(fs, args, stdout, path); err != nil {
		return err
	}
	if err := positive("layers", *layers, "seq", *seq); err != nil {
		return err
	}
	if *seq > reachMaxSeq {
		return usagef("-seq %d is above %d: the model holds S² bits per layer generation", *seq, reachMaxSeq)
	}
	if *layers > reachMaxLayers {
		return usagef("-layers %d is above %d", *layers, reachMaxLayers)
	}
	D, given := *seq-1, false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "max-distance" })
	if given {
		D = *maxDist
	}
	switch {
	case D < 0:
		return usagef("-max-distance must be at least 0 (omit it for -seq - 1 = %d), got %d", *seq-1, D)
	case D >= *seq:
		return usagef("-max-distance %d must be less than -seq %d (distances run from 0 to S-1)", D, *seq)
	}
	var pairs []verify.Pair
	if *target >= 0 || *source >= 0 || *k != 0 {
		if *target < 0 || *source < 0 || *k == 0 {
			return usagef("the boundary-copy bound needs all of -target, -source and -k")
		}
		if *target >= *seq || *source >= *seq {
			return usagef("-target %d and -source %d must be positions below -seq %d", *target, *source, *seq)
		}
		if *k < 1 {
			return usagef("-k must be at least 1, got %d", *k)
		}
		pairs = append(pairs, verify.Pair{Target: *target, Source: *source})
	}
	if *hops && !*asJSON {
		return usagef("-hops selects extra JSON fields: use it with -json (the text output always has a hop summary)")
	}
	ext := strings.ToLower(filepath.Ext(*out))
	if *out != "" && ext != ".png" && ext != ".svg" {
		return usagef("-o %s: want a .png or .svg file", *out)
	}
	s, err := loadSpec(*path, stderr)
	if err != nil {
		return err
	}

	stack := make([]spec.Pattern, *layers)
	for l := 1; l <= *layers; l++ {
		stack[l-1] = s.LayerAt(l)
	}
	note := dataNote(s, "analysed")
	headNote, err := bindHeads(s, stack, *headsFlag)
	if err != nil {
		return err
	}
	if *data != "" {
		d, err := loadData(*data, s, *seq)
		if err != nil {
			return err
		}
		withData(stack, d)
		note = ""
	}
	if headNote != "" {
		note = strings.TrimSpace(note + "\n" + headNote)
	}
	cov, err := verify.Analyze(stack, *seq, D, pairs...)
	if err != nil {
		return err
	}
	var bound *verify.CopyBound
	if len(pairs) > 0 {
		b, err := verify.NewCopyBound(pairs[0], *k, *layers, cov.PairHops[0])
		if err != nil {
			return err
		}
		bound = &b
	}
	if *out != "" {
		if err := reachWriteCoveragePlot(*out, ext, s, cov); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(reachReport(s, cov, bound, *hops))
	}
	w := bufio.NewWriter(stdout)
	writeReachText(w, s, cov, bound, note)
	if *out != "" {
		fmt.Fprintf(w, "\nplot: %s\n", *out)
	}
	return w.Flush()
}

func reachWriteCoveragePlot(path, ext string, s *spec.Spec, cov *verify.Coverage) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	opt := verify.PlotOptions{Title: fmt.Sprintf("%s: reachability coverage, %d layers", s.Name, cov.Layers)}
	if ext == ".png" {
		err = cov.WritePNG(f, opt)
	} else {
		err = cov.WriteSVG(f, opt)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// reachScheduleNames is the schedule as written, or [mask] without one.
func reachScheduleNames(s *spec.Spec) []string {
	if len(s.Schedule) == 0 {
		return []string{"mask"}
	}
	out := make([]string, len(s.Schedule))
	for k, e := range s.Schedule {
		out[k] = e.Name
	}
	return out
}

// reachScheduleMasks maps each schedule entry name to its mask.
func reachScheduleMasks(s *spec.Spec) map[string]string {
	out := map[string]string{}
	layers := s.Layers()
	for k, name := range reachScheduleNames(s) {
		out[name] = layers[k].Mask.String()
	}
	return out
}

func writeReachText(w io.Writer, s *spec.Spec, cov *verify.Coverage, bound *verify.CopyBound, note string) {
	names := reachScheduleNames(s)
	fmt.Fprintf(w, "reach: %s (%s)\n", s.Name, s.File)
	fmt.Fprintf(w, "stack: %d layers, input side first, layer k uses schedule entry (k-1) mod %d of [%s]; seq %d, distances 0-%d\n",
		cov.Layers, len(names), strings.Join(names, ", "), cov.N, cov.MaxDistance)
	masks := reachScheduleMasks(s)
	seen := map[string]bool{}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			fmt.Fprintf(w, "  %s: %s\n", n, masks[n])
		}
	}
	if !s.Causal {
		fmt.Fprintln(w, "note: the stack is not causal; sources after the target are reachable but distances count only sources before it")
	}
	if note != "" {
		fmt.Fprintln(w, note)
	}
	if len(cov.FullLayers) > 0 {
		fmt.Fprintf(w, "note: layer%s %s full: one full causal layer makes every earlier position reachable, so binary\n"+
			"      reachability saturates from depth %d on; hybrid stacks then differ in attention mass, which\n"+
			"      this model does not measure (MASKS.md section 4)\n",
			reachPlural(len(cov.FullLayers)), reachIntList(cov.FullLayers, 8), cov.FullLayers[0])
	}

	// Coverage table: sampled distances down, sampled depths across.
	depths := verify.SampleDepths(cov.Layers, 8)
	rows := reachSampleDistances(cov.MaxDistance, 32)
	fmt.Fprintf(w, "\ncoverage: fraction of targets t in [d, %d) whose source t-d is in R_l(t)\n", cov.N)
	fmt.Fprintf(w, "hops: least depth at which some target (min) / every target (max) reaches distance d; - = not within %d layers\n", cov.Layers)
	fmt.Fprintf(w, "%8s", "distance")
	for _, l := range depths {
		fmt.Fprintf(w, " %7s", fmt.Sprintf("l=%d", l))
	}
	fmt.Fprintf(w, "  %8s %8s\n", "hops min", "hops max")
	marg := make(map[int][]float64)
	for _, l := range depths {
		marg[l] = cov.Marginal(l)
	}
	for _, d := range rows {
		fmt.Fprintf(w, "%8d", d)
		for _, l := range depths {
			fmt.Fprintf(w, " %7.4f", marg[l][d])
		}
		fmt.Fprintf(w, "  %8s %8s\n", reachHopStr(cov.MinHops(d)), reachHopStr(cov.MaxHops(d)))
	}
	var notes []string
	if len(rows) < cov.MaxDistance+1 {
		notes = append(notes, fmt.Sprintf("distances in steps of %d shown", rows[1]-rows[0]))
	}
	if len(depths) < cov.Layers {
		notes = append(notes, fmt.Sprintf("%d of %d depths shown", len(depths), cov.Layers))
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "(%s; -json lists every distance and depth)\n", strings.Join(notes, ", "))
	}

	fmt.Fprintf(w, "\nper depth: farthest distance any target reaches; all distances up to which every target reaches\n")
	fmt.Fprintf(w, "%6s %9s %9s\n", "depth", "farthest", "complete")
	for _, l := range verify.SampleDepths(cov.Layers, 16) {
		far, full := -1, -1
		for d := 0; d <= cov.MaxDistance; d++ {
			if cov.Counts[l-1][d] > 0 {
				far = d
			}
			if full == d-1 && cov.Counts[l-1][d] == cov.N-d {
				full = d
			}
		}
		fmt.Fprintf(w, "%6d %9d %9d\n", l, far, full)
	}

	switch {
	case cov.Period > 0:
		L := cov.Layers
		fmt.Fprintf(w, "\nblock-periodic: period %d (lcm of the layer periods); per-phase table C_%d(d, phi) for d = 0-%d,\n", cov.Period, L, cov.PhaseDistance)
		fmt.Fprintf(w, "read at the first target t >= d of each phase phi = t mod %d (the same at every target t >= d):\n", cov.Period)
		rules := cov.PhaseRules(L)
		for k, r := range rules {
			if k == reachMaxRules {
				fmt.Fprintf(w, "  ... (%d more rules; -json has the whole table)\n", len(rules)-k)
				break
			}
			fmt.Fprintf(w, "  phase%s %s: d %s\n", reachPlural(reachIntervalCount(r.Phases)), reachIntervals(r.Phases, 8), reachSpanList(r.Distances, 12))
		}
		fmt.Fprintf(w, "(phi is the phase; an interval end written with phi moves with it)\n")
		fmt.Fprintf(w, "Cov_%d(d), fraction of phases reaching distance d:", L)
		for _, d := range reachSampleDistances(cov.PhaseDistance, 12) {
			fmt.Fprintf(w, " %d:%.3f", d, cov.PhaseCoverage(L, d))
		}
		fmt.Fprintln(w)
	case cov.Periodic:
		fmt.Fprintf(w, "\nblock-periodic, but the lcm of the layer periods exceeds seq %d: no per-phase table\n", cov.N)
	default:
		fmt.Fprintln(w, "\nnot block-periodic (global tokens, documents or non-causal layers): no per-phase table")
	}

	if bound != nil {
		fmt.Fprintf(w, "\nboundary copy, target %d, source %d, K = %d, %d layers: ", bound.Target, bound.Source, bound.K, bound.Layers)
		if bound.Reachable {
			fmt.Fprintf(w, "source reachable at depth %d: no bound (top-1 accuracy <= 1, cross-entropy >= 0)\n", bound.Hops)
		} else {
			fmt.Fprintf(w, "source not in R_%d(target): top-1 accuracy <= 1/K = %.4g, expected cross-entropy >= log K = %.4f nats\n",
				bound.Layers, bound.MaxAccuracy, bound.MinCrossEntropy)
		}
	}
}

// reachSampleDistances returns 0..D when short, else the multiples of a round
// step (1, 2, 4, 5, 8 times a power of ten, or a power of two) giving at
// most about k rows, and D.
func reachSampleDistances(D, k int) []int {
	step := 1
	if D+1 > k+1 {
		need := (D + k - 1) / k
		step = 1 << bits.Len(uint(need-1)) // power of two >= need
		for p := 1; p <= need; p *= 10 {
			for _, m := range []int{1, 2, 4, 5, 8, 10} {
				if m*p >= need && m*p < step {
					step = m * p
				}
			}
		}
	}
	var out []int
	for d := 0; d <= D; d += step {
		out = append(out, d)
	}
	if out[len(out)-1] != D {
		out = append(out, D)
	}
	return out
}

// reachSpanList renders per-phase distance spans, writing three or more evenly
// spaced single distances as "a, b, ..., z" and at most max items.
func reachSpanList(spans []verify.PhaseSpan, max int) string {
	single := func(k int) (int, bool) {
		sp := spans[k]
		return sp.Lo.Off, sp.Lo == sp.Hi && !sp.Lo.Phi
	}
	var items []string
	for k := 0; k < len(spans); {
		a, ok := single(k)
		end := k
		if ok && k+2 < len(spans) {
			b, okb := single(k + 1)
			for j := k + 1; okb && j < len(spans); j++ {
				if v, okj := single(j); !okj || v-a != (j-k)*(b-a) {
					break
				}
				end = j
			}
		}
		if end-k >= 2 {
			b, _ := single(k + 1)
			z, _ := single(end)
			items = append(items, fmt.Sprintf("%d, %d, ..., %d", a, b, z))
			k = end + 1
			continue
		}
		items = append(items, spans[k].String())
		k++
	}
	if len(items) > max {
		items = append(items[:max], fmt.Sprintf("... (%d more)", len(items)-max))
	}
	return strings.Join(items, ", ")
}

func reachHopStr(h int) string {
	if h == verify.Unreached {
		return "-"
	}
	return fmt.Sprint(h)
}

func reachPlural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func reachIntervalCount(ivs []verify.Interval) int {
	n := 0
	for _, iv := range ivs {
		n += iv.Hi - iv.Lo + 1
	}
	return n
}

// reachIntervals renders at most max reachIntervals, then how many more.
func reachIntervals(ivs []verify.Interval, max int) string {
	if len(ivs) == 0 {
		return "none"
	}
	var parts []string
	for k, iv := range ivs {
		if k == max {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(ivs)-max))
			break
		}
		parts = append(parts, iv.String())
	}
	return strings.Join(parts, ", ")
}

func reachIntList(xs []int, max int) string {
	var parts []string
	for k, x := range xs {
		if k == max {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(xs)-max))
			break
		}
		parts = append(parts, fmt.Sprint(x))
	}
	return strings.Join(parts, ", ")
}

// reachJSON is the -json output; docs/reach-json.md describes it.
type reachJSON struct {
	Spec        string              `json:"spec"`
	File        string              `json:"file"`
	Causal      bool                `json:"causal"`
	Seq         int                 `json:"seq"`
	Layers      int                 `json:"layers"`
	MaxDistance int                 `json:"max_distance"`
	Schedule    []string            `json:"schedule"`
	Masks       map[string]string   `json:"masks"`
	FullLayers  []int               `json:"full_layers"`
	Marginal    [][]float64         `json:"marginal"`
	Periodic    bool                `json:"periodic"`
	Period      int                 `json:"period,omitempty"`
	PerPhase    *reachPerPhaseJSON  `json:"per_phase,omitempty"`
	Hops        *reachHopsJSON      `json:"hops,omitempty"`
	CopyBound   *reachCopyBoundJSON `json:"copy_bound,omitempty"`
}

type reachPerPhaseJSON struct {
	MaxDistance int              `json:"max_distance"`
	Depth       int              `json:"depth"`
	Groups      []reachGroupJSON `json:"groups"`
	Coverage    [][]float64      `json:"coverage"`
}

type reachGroupJSON struct {
	Phases    [][2]int `json:"phases"`
	Distances [][2]int `json:"distances"`
}

type reachHopsJSON struct {
	Min      []int               `json:"min"`
	Max      []int               `json:"max"`
	PerPhase []reachHopGroupJSON `json:"per_phase,omitempty"`
}

type reachHopGroupJSON struct {
	Phases [][2]int `json:"phases"`
	Runs   [][3]int `json:"runs"`
}

type reachCopyBoundJSON struct {
	Target          int     `json:"target"`
	Source          int     `json:"source"`
	K               int     `json:"k"`
	Reachable       bool    `json:"reachable"`
	Hops            int     `json:"hops"`
	MaxAccuracy     float64 `json:"max_accuracy"`
	MinCrossEntropy float64 `json:"min_cross_entropy"`
}

func reachPairsJSON(ivs []verify.Interval) [][2]int {
	out := make([][2]int, len(ivs))
	for k, iv := range ivs {
		out[k] = [2]int{iv.Lo, iv.Hi}
	}
	return out
}

func reachReport(s *spec.Spec, cov *verify.Coverage, bound *verify.CopyBound, hops bool) *reachJSON {
	r := &reachJSON{
		Spec: s.Name, File: s.File, Causal: s.Causal, Seq: cov.N, Layers: cov.Layers, MaxDistance: cov.MaxDistance,
		Schedule: reachScheduleNames(s), Masks: reachScheduleMasks(s), FullLayers: cov.FullLayers,
		Periodic: cov.Periodic, Period: cov.Period,
	}
	if r.FullLayers == nil {
		r.FullLayers = []int{}
	}
	for l := 1; l <= cov.Layers; l++ {
		r.Marginal = append(r.Marginal, cov.Marginal(l))
	}
	if cov.Period > 0 {
		pp := &reachPerPhaseJSON{MaxDistance: cov.PhaseDistance, Depth: cov.Layers, Groups: []reachGroupJSON{}}
		for _, g := range cov.PhaseGroups(cov.Layers) {
			pp.Groups = append(pp.Groups, reachGroupJSON{reachPairsJSON(g.Phases), reachPairsJSON(g.Distances)})
		}
		pp.Coverage = cov.PhaseCoverageTable()
		r.PerPhase = pp
	}
	if hops {
		h := &reachHopsJSON{Min: make([]int, cov.MaxDistance+1), Max: make([]int, cov.MaxDistance+1)}
		for d := range h.Min {
			h.Min[d], h.Max[d] = cov.MinHops(d), cov.MaxHops(d)
		}
		if cov.Period > 0 {
			for _, g := range cov.PhaseHopGroups() {
				hg := reachHopGroupJSON{Phases: reachPairsJSON(g.Phases)}
				for _, run := range g.Runs {
					hg.Runs = append(hg.Runs, [3]int{run.Lo, run.Hi, run.Hops})
				}
				h.PerPhase = append(h.PerPhase, hg)
			}
		}
		r.Hops = h
	}
	if bound != nil {
		r.CopyBound = &reachCopyBoundJSON{bound.Target, bound.Source, bound.K, bound.Reachable, bound.Hops, bound.MaxAccuracy, bound.MinCrossEntropy}
	}
	return r
}
