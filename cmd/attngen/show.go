package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// maxShowTiles bounds the tiles per side: show classifies every tile.
const maxShowTiles = 1 << 14

func cmdShow(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("show", stderr)
	path := fs.String("spec", "", "spec file (YAML)")
	seq := fs.Int("seq", 4096, "sequence length N (queries = keys = N)")
	tile := fs.Int("tile", 128, "tile side T in positions, at most N")
	out := fs.String("o", "", "write an image instead of text pictures: `FILE`.png or FILE.svg")
	width := fs.Int("width", 0, "picture width: text columns (default 100), or with -o the largest plot side in pixels (default and at most 1024)")
	data := fs.String("data", "", "run-time data of a tree or document mask: a `FILE` of N integers (parent array or document ids)")
	headsFlag := fs.String("head-params", "", "values of the spec's head_params for the head drawn: `name=value,...` (others at their max)")
	if err := parseArgs(fs, args, stdout, path); err != nil {
		return err
	}
	if err := positive("seq", *seq, "tile", *tile); err != nil {
		return err
	}
	if err := atMost("seq", *seq, maxAnalysisSeq, analysisWhy); err != nil {
		return err
	}
	if *tile > *seq {
		return usagef("-tile %d is larger than -seq %d", *tile, *seq)
	}
	if tiles := (*seq-1) / *tile + 1; tiles > maxShowTiles {
		return usagef("-seq %d / -tile %d gives %d tiles a side, more than %d: use a larger tile", *seq, *tile, tiles, maxShowTiles)
	}
	if *width < 0 {
		return usagef("-width must not be negative, got %d", *width)
	}
	var format string
	if *out != "" {
		switch ext := strings.ToLower(filepath.Ext(*out)); ext {
		case ".png", ".svg":
			format = ext[1:]
		default:
			return usagef("-o %s: unknown image format %q (want .png or .svg)", *out, ext)
		}
		if *width != 0 && (*width < 16 || *width > verify.MaxMaskPlot) {
			return usagef("-width %d: with -o the plot side must be 16 to %d pixels", *width, verify.MaxMaskPlot)
		}
	} else if *width != 0 && *width < 8 {
		return usagef("-width %d: at least 8 text columns", *width)
	} else if err := atMost("width", *width, maxShowTiles, "text columns; a cell is at least one tile"); err != nil {
		return err
	}
	s, err := loadSpec(*path, stderr)
	if err != nil {
		return err
	}
	p := s.Pattern()
	n, t := *seq, *tile
	ps := []spec.Pattern{p}
	headNote, err := bindHeads(s, ps, *headsFlag)
	if err != nil {
		return err
	}
	p = ps[0]
	docNote := dataNote(s, "drawn")
	if *data != "" {
		d, err := loadData(*data, s, n)
		if err != nil {
			return err
		}
		p.Data, docNote = d, ""
	}
	if headNote != "" {
		docNote = strings.TrimSpace(docNote + "\n" + headNote)
	}

	if format != "" {
		opt := verify.MaskImageOptions{Name: s.Name, Size: *width}
		if docNote != "" {
			opt.Notes = append(opt.Notes, strings.Split(docNote, "\n")...)
		}
		var buf bytes.Buffer
		if format == "png" {
			err = verify.WriteMaskPNG(&buf, p, n, t, opt)
		} else {
			err = verify.WriteMaskSVG(&buf, p, n, t, opt)
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
			return err
		}
		cg := verify.ClassifyGrid(p, n, t, n) // counts only: one cell
		fmt.Fprintf(stdout, "%s: N = %d, tile = %d, mask: %s, causal: %v\n", s.Name, n, t, p.Mask, p.Causal)
		writeShowCounts(stdout, p, cg, n)
		if docNote != "" {
			fmt.Fprintln(stdout, docNote)
		}
		fmt.Fprintf(stdout, "wrote %s (%d bytes)\n", *out, buf.Len())
		return nil
	}

	cols := *width
	if cols == 0 {
		cols = 100
	}
	tiles := (n + t - 1) / t
	// Class picture: f x f tiles per cell, at most cols cells across.
	f := (tiles + cols - 1) / cols
	cg := verify.ClassifyGrid(p, n, t, f*t)
	// Density picture: cells aligned to the tiles, as fine as fits two
	// columns a cell: k cells per tile (k divides t) or, when the tiles do
	// not fit, the class cells.
	dcell := f * t
	if f == 1 {
		for k := min(t, cols/2/tiles); k >= 1; k-- {
			if t%k == 0 {
				dcell = t / k
				break
			}
		}
	}
	dg := verify.Density(p, n, dcell)
	cw := func(cells int) int {
		if 2*cells <= cols {
			return 2
		}
		return 1
	}

	fmt.Fprintf(stdout, "%s: N = %d, tile = %d, %d x %d tiles\n", s.Name, n, t, tiles, tiles)
	fmt.Fprintf(stdout, "mask: %s, causal: %v\n", p.Mask, p.Causal)
	if docNote != "" {
		fmt.Fprintln(stdout, docNote)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "tile classes (rows: query tiles, top down; columns: key tiles; 1 cell = %s):\n", cellWords(f, "tile"))
	if err := cg.WriteText(stdout, cw(cg.Cells)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "legend: %c full tile (mask never evaluated)  %c partial tile  %c empty tile (never visited)",
		verify.GlyphFull, verify.GlyphPartial, verify.GlyphEmpty)
	if f > 1 {
		fmt.Fprintf(stdout, "\n        a cell is %c only if all its tiles are full, %c only if all are empty; %c mixes full and empty tiles",
			verify.GlyphFull, verify.GlyphEmpty, verify.GlyphMixed)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "mask density (1 cell = %s, exact counts):\n", cellWords(dcell, "position"))
	if err := dg.WriteText(stdout, cw(dg.Cells)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "legend: '%s' none kept  %s up to 1/3  %s up to 2/3  %s more  %s all pairs kept\n\n",
		verify.ShadeNone, verify.ShadeLow, verify.ShadeMid, verify.ShadeHigh, verify.ShadeAll)
	writeShowCounts(stdout, p, cg, n)
	return nil
}

// cellWords is "1 x 1 tile" or "4 x 4 tiles".
func cellWords(k int, unit string) string {
	if k != 1 {
		unit += "s"
	}
	return fmt.Sprintf("%d x %d %s", k, k, unit)
}

// writeShowCounts prints the tile counts and kept pairs; show_test parses
// the "tiles:" line.
func writeShowCounts(w io.Writer, p spec.Pattern, cg *verify.ClassGrid, n int) {
	total := int64(cg.Tiles) * int64(cg.Tiles)
	fmt.Fprintf(w, "tiles: %d total, %d full, %d partial, %d empty\n", total, cg.Full(), cg.Partial(), cg.Empty())
	if v := cg.Visited(); v > 0 {
		fmt.Fprintf(w, "visited: %d non-empty tiles (%.1f%% of all), %d of them full (%.1f%%)\n",
			v, pct(v, total), cg.Full(), pct(cg.Full(), v))
	} else {
		fmt.Fprintln(w, "visited: no tile (every pair masked)")
	}
	kept := verify.KeptPairs(p, n, n)
	all := int64(n) * int64(n)
	fmt.Fprintf(w, "kept pairs: %d of %d (density %.6f", kept, all, float64(kept)/float64(all))
	if p.Causal {
		fmt.Fprintf(w, ", %.6f of causal", float64(kept)/(float64(n)*float64(n+1)/2))
	}
	fmt.Fprintln(w, ")")
}

func pct(a, b int64) float64 { return 100 * float64(a) / float64(b) }
