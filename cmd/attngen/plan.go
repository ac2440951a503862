package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/verify"
)

func cmdPlan(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plan", stderr)
	path := fs.String("spec", "", "spec file (YAML)")
	seq := fs.Int("seq", 4096, "key length (and query length unless -seq-q is given)")
	seqQ := fs.Int("seq-q", 0, "query length (default: -seq); queries are the last positions")
	tq := fs.Int("tile-q", 64, "query tile size")
	tk := fs.Int("tile-k", 64, "key tile size")
	first := fs.Int("first", 8, "print the schedule of this many first query tiles")
	dump := fs.String("dump", "", "print the plan after this pass ("+passNames()+") and stop")
	if err := parseArgs(fs, args, stdout, path); err != nil {
		return err
	}
	if *seqQ == 0 {
		*seqQ = *seq
	}
	if err := positive("seq", *seq, "seq-q", *seqQ, "tile-q", *tq, "tile-k", *tk); err != nil {
		return err
	}
	if *first < 0 {
		return usagef("-first must not be negative, got %d", *first)
	}
	if err := planBounds(*seq, *seqQ, *tq, *tk, *first); err != nil {
		return err
	}
	if *dump != "" && !strings.Contains(","+passNames()+",", ","+*dump+",") {
		return usagef("-dump %q: no such pass (want one of %s)", *dump, passNames())
	}
	s, err := loadSpec(*path, stderr)
	if err != nil {
		return err
	}
	var dumped bool
	p, err := gen.Compile(s, gen.Tiles{TargetName: "generic", Q: *tq, K: *tk}, func(pass string, p *gen.Plan) {
		if pass == *dump {
			fmt.Fprintf(stdout, "# after pass %s\n", pass)
			if p.Pred == nil {
				fmt.Fprintf(stdout, "plan %s\ntarget %s\nhead_dim %d\ntiles %d %d\nsource causal=%v %s\nlayout %s %d\npattern causal=%v %s\n",
					p.Name, p.Target, p.HeadDim, p.TileQ, p.TileK, p.Source.Causal, p.Source.Mask, p.Layout.Kind, p.Layout.Stride, p.Pattern.Causal, p.Pattern.Mask)
			} else {
				fmt.Fprint(stdout, p.Text(0, 0, 0))
			}
			dumped = true
		}
	})
	if err != nil {
		return err
	}
	if dumped {
		return nil
	}
	fmt.Fprint(stdout, p.Text(*seqQ, *seq, *first))
	kept := verify.KeptPairs(s.Pattern(), *seqQ, *seq)
	st := p.Stats(*seqQ, *seq)
	fmt.Fprintf(stdout, "# kept pairs %d, density %.6f of all pairs; visited tiles hold %.4f kept pairs per pair computed\n",
		kept, float64(kept)/float64(*seqQ)/float64(*seq), float64(kept)/float64(max(st.VisitedPairs, 1)))
	return nil
}

// Bounds of the analysis commands, so that each finishes in seconds on a
// small machine: check and show count kept pairs row by row (O(seq) rows,
// each a few progressions), plan walks every tile of the grid, which is the
// costlier, so it has a lower -seq and a cap on the tiles.
const (
	maxAnalysisSeq = 1 << 22 // check, show
	maxPlanSeq     = 1 << 18
	maxPlanTiles   = 1 << 24 // query tiles x key tiles
	maxPlanFirst   = 1 << 16
	analysisWhy    = "check and show count the kept pairs row by row; a longer sequence would take minutes"
)

// planBounds refuses plan sizes that would run for minutes, before any
// work; the products are formed only once each factor is known to be small.
func planBounds(seq, seqQ, tq, tk, first int) error {
	if err := atMost("seq", seq, maxPlanSeq, "plan walks every tile of the grid; a longer sequence would take minutes"); err != nil {
		return err
	}
	if seqQ > seq {
		return usagef("-seq-q %d exceeds -seq %d (queries are the last -seq-q of the keys)", seqQ, seq)
	}
	if err := atMost("tile-q", tq, maxPlanSeq, "a tile is at most the longest sequence plan takes"); err != nil {
		return err
	}
	if err := atMost("tile-k", tk, maxPlanSeq, "a tile is at most the longest sequence plan takes"); err != nil {
		return err
	}
	if err := atMost("first", first, maxPlanFirst, "query tiles whose schedule is printed"); err != nil {
		return err
	}
	nq, nk := (seqQ-1)/tq+1, (seq-1)/tk+1 // both at most maxPlanSeq: the product fits
	if nq*nk > maxPlanTiles {
		return usagef("-seq-q %d, -seq %d with -tile-q %d, -tile-k %d give %d x %d tiles, more than %d in all (plan walks every tile): use larger tiles or a shorter sequence",
			seqQ, seq, tq, tk, nq, nk, maxPlanTiles)
	}
	return nil
}

func passNames() string {
	var names []string
	for _, p := range gen.Pipeline {
		names = append(names, p.Name())
	}
	return strings.Join(names, ",")
}
