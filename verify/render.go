package verify

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/attngen/attngen/spec"
)

// This file draws a pattern: its tile classes and its kept pairs, as text
// block pictures and as PNG or SVG images. Both pictures are
// downsampled onto a grid of square cells of Cell x Cell positions; neither
// ever materializes the n x n mask. Tile classes come from
// spec.Pattern.Classify (one call per tile); kept pairs are counted exactly
// from each row's key progressions.

// ClassGrid holds the tile classes of an n x n pattern cut into tiles of
// Tile x Tile positions, downsampled onto cells of Cell x Cell positions.
type ClassGrid struct {
	N, Tile int
	Tiles   int // tiles per side: ceil(N / Tile)
	Cell    int // positions per cell side
	Cells   int // cells per side: ceil(N / Cell)
	// Bits holds, per cell (row-major, query cells down, key cells across),
	// the set {1 << class} of the classes of the tiles the cell overlaps.
	Bits []uint8
	// Count is the number of tiles of each class, indexed by spec.Class.
	Count [3]int64
}

// ClassifyGrid classifies every tile with p.Classify and records which
// classes each cell overlaps. A cell of a multiple of Tile positions holds
// whole tiles, so it is full exactly when all its tiles are full and empty
// exactly when all are empty. The cost is one Classify per tile (causally
// empty tiles are counted without a call) plus the number of cells.
func ClassifyGrid(p spec.Pattern, n, tile, cell int) *ClassGrid {
	if n < 1 || tile < 1 || cell < 1 {
		panic(fmt.Sprintf("BUG: ClassifyGrid(n=%d, tile=%d, cell=%d)", n, tile, cell))
	}
	nt, nc := picCeilDiv(n, tile), picCeilDiv(n, cell)
	g := &ClassGrid{N: n, Tile: tile, Tiles: nt, Cell: cell, Cells: nc, Bits: make([]uint8, nc*nc)}
	line := make([]uint8, nc)
	for qt := 0; qt < nt; qt++ {
		q0, q1 := qt*tile, min(n, qt*tile+tile)-1
		clear(line)
		for kt := 0; kt < nt; kt++ {
			k0, k1 := kt*tile, min(n, kt*tile+tile)-1
			if p.Causal && k0 > q1 {
				// This key tile and all later ones lie above the diagonal.
				g.Count[spec.Empty] += int64(nt - kt)
				for c := k0 / cell; c < nc; c++ {
					line[c] |= 1 << spec.Empty
				}
				break
			}
			cl := p.Classify(q0, q1, k0, k1)
			g.Count[cl]++
			for c := k0 / cell; c <= k1/cell; c++ {
				line[c] |= 1 << cl
			}
		}
		for r := q0 / cell; r <= q1/cell; r++ {
			row := g.Bits[r*nc : (r+1)*nc]
			for c := range row {
				row[c] |= line[c]
			}
		}
	}
	return g
}

// Full is the number of full tiles.
func (g *ClassGrid) Full() int64 { return g.Count[spec.FullT] }

// Partial is the number of partial tiles.
func (g *ClassGrid) Partial() int64 { return g.Count[spec.Partial] }

// Empty is the number of empty tiles.
func (g *ClassGrid) Empty() int64 { return g.Count[spec.Empty] }

// Visited is the number of non-empty tiles: those a kernel visits.
func (g *ClassGrid) Visited() int64 { return g.Count[spec.FullT] + g.Count[spec.Partial] }

// CellClass summarizes cell (r, c): FullT or Empty when all its tiles are,
// Partial otherwise. mixed reports a cell that holds both full and empty
// tiles but no partial one (possible only when downsampled).
func (g *ClassGrid) CellClass(r, c int) (cl spec.Class, mixed bool) {
	switch b := g.Bits[r*g.Cells+c]; b {
	case 1 << spec.FullT:
		return spec.FullT, false
	case 1 << spec.Empty:
		return spec.Empty, false
	case 1<<spec.FullT | 1<<spec.Empty:
		return spec.Partial, true
	}
	return spec.Partial, false
}

// Class glyphs of the text picture.
const (
	GlyphFull    = '#'
	GlyphPartial = '+'
	GlyphEmpty   = '.'
	GlyphMixed   = ':' // downsampled cell with full and empty tiles, no partial
)

// WriteText draws the grid in a frame, one line per row of cells, each cell
// repeated cw times across (2 keeps cells roughly square in a terminal).
func (g *ClassGrid) WriteText(w io.Writer, cw int) error {
	return picWriteFramed(w, g.Cells, cw, func(r, c int) string {
		cl, mixed := g.CellClass(r, c)
		switch {
		case mixed:
			return string(GlyphMixed)
		case cl == spec.FullT:
			return string(GlyphFull)
		case cl == spec.Empty:
			return string(GlyphEmpty)
		}
		return string(GlyphPartial)
	})
}

// DensityGrid holds the kept pairs of an n x n pattern per cell of
// Cell x Cell positions (the last row and column of cells may be smaller).
type DensityGrid struct {
	N     int
	Cell  int // positions per cell side
	Cells int // cells per side: ceil(N / Cell)
	Kept  []int64
}

// Density counts the kept pairs of every cell exactly, row by row from the
// pattern's key progressions (a document mask is one document spanning the
// sequence, as Keys). Step-1 runs cost O(1) each through a difference
// array; a strided progression costs the cells or elements it covers,
// whichever is fewer. Rows with two or more strided progressions are
// resolved element by element.
func Density(p spec.Pattern, n, cell int) *DensityGrid {
	if n < 1 || cell < 1 {
		panic(fmt.Sprintf("BUG: Density(n=%d, cell=%d)", n, cell))
	}
	nc := picCeilDiv(n, cell)
	d := &DensityGrid{N: n, Cell: cell, Cells: nc, Kept: make([]int64, nc*nc)}
	diff := make([]int64, nc+1)
	var buf, ivs, strided []spec.Prog
	var stamp []uint32
	var gen uint32
	for rc := 0; rc < nc; rc++ {
		acc := d.Kept[rc*nc : (rc+1)*nc]
		for i := rc * cell; i < min(n, rc*cell+cell); i++ {
			buf = p.Keys(buf[:0], i, n)
			ivs, strided = ivs[:0], strided[:0]
			for _, g := range buf {
				switch {
				case g.Lo > g.Hi:
				case g.Step == 1:
					ivs = append(ivs, g)
				default:
					strided = append(strided, g)
				}
			}
			ivs = spec.MergeRuns(ivs)
			for _, iv := range ivs {
				picAddRun(acc, diff, iv.Lo, iv.Hi, cell)
			}
			switch len(strided) {
			case 0:
			case 1:
				s := strided[0]
				picAddProg(acc, s, cell, 1)
				for _, iv := range ivs {
					if x := s.Clip(iv.Lo, iv.Hi); x.Lo <= x.Hi {
						picAddProg(acc, x, cell, -1)
					}
				}
			default:
				if stamp == nil {
					stamp = make([]uint32, n)
				}
				gen++
				for _, s := range strided {
					for j := s.Lo; j <= s.Hi; j += s.Step {
						if stamp[j] == gen {
							continue
						}
						stamp[j] = gen
						if !picInRuns(ivs, j) {
							acc[j/cell]++
						}
					}
				}
			}
		}
		var run int64
		for c := 0; c < nc; c++ {
			run += diff[c]
			acc[c] += run
			diff[c] = 0
		}
		diff[nc] = 0
	}
	return d
}

// Area is the number of (query, key) pairs in cell (r, c).
func (d *DensityGrid) Area(r, c int) int64 {
	side := func(k int) int64 { return int64(min(d.N, k*d.Cell+d.Cell) - k*d.Cell) }
	return side(r) * side(c)
}

// Frac is the fraction of cell (r, c)'s pairs that are kept.
func (d *DensityGrid) Frac(r, c int) float64 {
	return float64(d.Kept[r*d.Cells+c]) / float64(d.Area(r, c))
}

// Total is the number of kept pairs over the whole grid.
func (d *DensityGrid) Total() int64 {
	var t int64
	for _, k := range d.Kept {
		t += k
	}
	return t
}

// Density shades of the text picture, from none kept to all kept.
const (
	ShadeNone = " "
	ShadeLow  = "░" // at most 1/3 kept
	ShadeMid  = "▒" // at most 2/3 kept
	ShadeHigh = "▓" // more than 2/3, not all
	ShadeAll  = "█" // every pair kept
)

// Shade is the text shade of cell (r, c).
func (d *DensityGrid) Shade(r, c int) string {
	k, a := d.Kept[r*d.Cells+c], d.Area(r, c)
	switch {
	case k == 0:
		return ShadeNone
	case k == a:
		return ShadeAll
	case 3*k <= a:
		return ShadeLow
	case 3*k <= 2*a:
		return ShadeMid
	}
	return ShadeHigh
}

// WriteText draws the density picture in a frame, each cell repeated cw
// times across.
func (d *DensityGrid) WriteText(w io.Writer, cw int) error {
	return picWriteFramed(w, d.Cells, cw, d.Shade)
}

// writeFramed writes an n x n picture of glyphs inside a +---+ frame.
func picWriteFramed(w io.Writer, n, cw int, glyph func(r, c int) string) error {
	cw = max(cw, 1)
	bw := bufio.NewWriter(w)
	edge := "+" + strings.Repeat("-", n*cw) + "+\n"
	bw.WriteString(edge)
	for r := 0; r < n; r++ {
		bw.WriteByte('|')
		for c := 0; c < n; c++ {
			s := glyph(r, c)
			for k := 0; k < cw; k++ {
				bw.WriteString(s)
			}
		}
		bw.WriteString("|\n")
	}
	bw.WriteString(edge)
	return bw.Flush()
}

// addRun adds the positions lo..hi (one row's step-1 run) to the row of
// cells acc; whole cells between the ends go through diff.
func picAddRun(acc, diff []int64, lo, hi, cell int) {
	c0, c1 := lo/cell, hi/cell
	if c0 == c1 {
		acc[c0] += int64(hi - lo + 1)
		return
	}
	acc[c0] += int64(c0*cell + cell - lo)
	acc[c1] += int64(hi - c1*cell + 1)
	if c1 > c0+1 {
		diff[c0+1] += int64(cell)
		diff[c1] -= int64(cell)
	}
}

// addProg adds sign times the positions of g to the row of cells acc.
func picAddProg(acc []int64, g spec.Prog, cell int, sign int64) {
	c0, c1 := g.Lo/cell, g.Hi/cell
	if g.Count() <= c1-c0+1 {
		for j := g.Lo; j <= g.Hi; j += g.Step {
			acc[j/cell] += sign
		}
		return
	}
	for c := c0; c <= c1; c++ {
		lo, hi := max(g.Lo, c*cell), min(g.Hi, c*cell+cell-1)
		acc[c] += sign * int64(picFloorDiv(hi-g.Lo, g.Step)-picFloorDiv(lo-1-g.Lo, g.Step))
	}
}

// inRuns reports whether j lies in one of the sorted, disjoint runs.
func picInRuns(ivs []spec.Prog, j int) bool {
	k, _ := slices.BinarySearchFunc(ivs, j, func(iv spec.Prog, j int) int {
		if iv.Hi < j {
			return -1
		}
		if iv.Lo > j {
			return 1
		}
		return 0
	})
	return k < len(ivs) && ivs[k].Lo <= j && j <= ivs[k].Hi
}

func picFloorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func picCeilDiv(a, b int) int { return -picFloorDiv(-a, b) }

// MaskImageOptions configures WriteMaskPNG and WriteMaskSVG.
type MaskImageOptions struct {
	Name  string   // spec name, shown in the title
	Size  int      // largest plot side in pixels: 0 means 1024, at most 1024
	Notes []string // extra legend lines (ASCII)
}

// MaxMaskPlot is the largest plot side of an image; with the title and
// legend an image stays within about 1200 pixels a side.
const MaxMaskPlot = 1024

// Colors of the image: kept pairs in full tiles, kept and masked pairs in
// partial tiles (and in downsampled cells that mix classes), empty tiles.
var (
	picColFull        = color.RGBA{37, 99, 170, 255}
	picColPartialKept = color.RGBA{214, 96, 0, 255}
	picColPartialBg   = color.RGBA{253, 232, 204, 255}
	picColEmpty       = color.RGBA{255, 255, 255, 255}
	picColGrid        = color.RGBA{96, 96, 96, 255}
	picColFrame       = color.RGBA{80, 80, 80, 255}
	picColText        = color.RGBA{0, 0, 0, 255}
	picColDim         = color.RGBA{90, 90, 90, 255}
)

const picGridAlpha = 0.35 // opacity of tile grid lines over the plot

// picture is an image laid out once and drawn by either back end: the plot
// of cells, then a display list of rectangles, lines and text.
type picture struct {
	w, h         int
	plotX, plotY int
	zoom         int // pixels per cell side
	cells        int
	cellColor    []color.RGBA
	grid         []int // offsets within the plot of tile boundaries
	rects        []picRect
	lines        []picLine
	texts        []picText
}

type picRect struct {
	x, y, w, h int
	fill       color.RGBA
	stroke     bool // 1-px frame picColFrame inside the rectangle's bounds
}

type picLine struct{ x0, y0, x1, y1 int } // axis-aligned, 1 px, picColFrame

type picText struct {
	x, y   int // anchor point on the baseline
	s      string
	scale  int
	anchor int // -1 start, 0 middle, 1 end
	col    color.RGBA
}

// picLayout computes the grids and places every element.
// Cells hold at least minCell positions a side.
func picLayout(p spec.Pattern, n, tile int, opt MaskImageOptions, minCell int) *picture {
	size := opt.Size
	if size <= 0 || size > MaxMaskPlot {
		size = MaxMaskPlot
	}
	// Positions per cell: the smallest that fits, nudged up to a divisor of
	// the tile so that tile boundaries fall on cell boundaries.
	cell := max(picCeilDiv(n, size), minCell)
	if cell > 1 && tile%cell != 0 {
		for c := cell + 1; c <= 2*cell; c++ {
			if tile%c == 0 {
				cell = c
				break
			}
		}
	}
	cells := picCeilDiv(n, cell)
	zoom := max(1, size/cells)
	side := cells * zoom

	pc := &picture{zoom: zoom, cells: cells}
	cg := ClassifyGrid(p, n, tile, cell)
	dg := Density(p, n, cell)
	pc.cellColor = make([]color.RGBA, cells*cells)
	for r := 0; r < cells; r++ {
		for c := 0; c < cells; c++ {
			cl, _ := cg.CellClass(r, c)
			pc.cellColor[r*cells+c] = picCellColor(cl, dg.Frac(r, c))
		}
	}

	labelW := 7 * len(strconv.Itoa(n))
	pc.plotX, pc.plotY = max(48, labelW+16), 68
	pc.w = max(pc.plotX+side+max(16, labelW/2+6), 640)

	// Tile grid lines, where tiles are at least 4 px wide.
	px := func(pos int) int { return pos * zoom / cell }
	if px(tile) >= 4 {
		for t := tile; t < n; t += tile {
			pc.grid = append(pc.grid, px(t))
		}
	}

	// Title, mask, ticks.
	causal := "causal"
	if !p.Causal {
		causal = "non-causal"
	}
	title := fmt.Sprintf("%s: N = %d, tile = %d", opt.Name, n, tile)
	if opt.Name == "" {
		title = title[2:]
	}
	pc.text(8, 24, title, 2, -1, picColText)
	pc.text(8, 42, picFit(fmt.Sprintf("mask (%s): %s", causal, p.Mask), (pc.w-16)/7), 1, -1, picColText)
	pc.text(8, pc.plotY-7, `i\j`, 1, -1, picColDim)
	step := tile
	for px(step) < max(48, labelW+12) && step < n {
		step *= 2
	}
	for pos := 0; pos <= n; pos += step {
		o := px(pos)
		pc.lines = append(pc.lines,
			picLine{pc.plotX + o, pc.plotY - 5, pc.plotX + o, pc.plotY - 2},
			picLine{pc.plotX - 5, pc.plotY + o, pc.plotX - 2, pc.plotY + o})
		pc.text(pc.plotX+o, pc.plotY-8, strconv.Itoa(pos), 1, 0, picColDim)
		pc.text(pc.plotX-7, pc.plotY+o+4, strconv.Itoa(pos), 1, 1, picColDim)
	}
	pc.rects = append(pc.rects, picRect{pc.plotX - 1, pc.plotY - 1, side + 2, side + 2, color.RGBA{}, true})

	// Legend.
	y := pc.plotY + side + 22
	x := 8
	swatch := func(fill, inner color.RGBA, label string) {
		pc.rects = append(pc.rects, picRect{x, y - 11, 14, 14, fill, true})
		if inner != fill {
			pc.rects = append(pc.rects, picRect{x + 4, y - 7, 6, 6, inner, false})
		}
		pc.text(x+20, y, label, 1, -1, picColText)
		x += 20 + 7*len(label) + 18
	}
	swatch(picColFull, picColFull, "full tile")
	swatch(picColPartialBg, picColPartialKept, "partial tile (dark: kept, pale: masked)")
	swatch(picColEmpty, picColEmpty, "empty tile")
	y += 20
	var scale string
	switch {
	case cell == 1:
		scale = fmt.Sprintf("1 position = %d x %d px", zoom, zoom)
	case zoom == 1:
		scale = fmt.Sprintf("1 px = %d x %d positions", cell, cell)
	default:
		scale = fmt.Sprintf("%d x %d px = %d x %d positions", zoom, zoom, cell, cell)
	}
	lbl := "kept fraction per cell: 0"
	pc.text(8, y, lbl, 1, -1, picColText)
	x = 8 + 7*len(lbl) + 10
	for k := 0; k <= 8; k++ {
		pc.rects = append(pc.rects, picRect{x, y - 11, 12, 14, picCellColor(spec.Partial, float64(k)/8), false})
		x += 12
	}
	pc.rects = append(pc.rects, picRect{x - 9*12 - 1, y - 12, 9*12 + 2, 16, color.RGBA{}, true})
	grid := "no tile grid (tiles under 4 px)"
	if px(tile) >= 4 {
		grid = "lines: tile boundaries"
	}
	pc.text(x+8, y, fmt.Sprintf("1   (%s; %s)", scale, grid), 1, -1, picColText)
	y += 18
	kept := dg.Total()
	vis := cg.Visited()
	fullPct := 0.0
	if vis > 0 {
		fullPct = 100 * float64(cg.Full()) / float64(vis)
	}
	pc.text(8, y, fmt.Sprintf("tiles: %d x %d = %d; %d full, %d partial, %d empty; visited %d, %.1f%% of them full",
		cg.Tiles, cg.Tiles, cg.Tiles*cg.Tiles, cg.Full(), cg.Partial(), cg.Empty(), vis, fullPct), 1, -1, picColText)
	y += 18
	all := float64(n) * float64(n)
	line := fmt.Sprintf("kept pairs: %d of %d (density %.4f", kept, int64(n)*int64(n), float64(kept)/all)
	if p.Causal {
		line += fmt.Sprintf(", %.4f of causal", float64(kept)/(float64(n)*float64(n+1)/2))
	}
	pc.text(8, y, line+")", 1, -1, picColText)
	for _, note := range opt.Notes {
		y += 18
		pc.text(8, y, picFit(note, (pc.w-16)/7), 1, -1, picColText)
	}
	pc.h = y + 12
	return pc
}

func (pc *picture) text(x, y int, s string, scale, anchor int, col color.RGBA) {
	pc.texts = append(pc.texts, picText{x, y, s, scale, anchor, col})
}

// picFit shortens s to at most n characters.
func picFit(s string, n int) string {
	if len(s) <= n || n < 4 {
		return s
	}
	return s[:n-3] + "..."
}

// picCellColor is the color of a cell of class cl with kept fraction f: the
// class's background blended toward its kept color; any kept pair shows.
func picCellColor(cl spec.Class, f float64) color.RGBA {
	switch {
	case cl == spec.FullT:
		return picColFull
	case f <= 0:
		if cl == spec.Empty {
			return picColEmpty
		}
		return picColPartialBg
	}
	t := math.Round((0.25+0.75*min(f, 1))*64) / 64
	return picBlend(picColPartialBg, picColPartialKept, t)
}

func picBlend(a, b color.RGBA, t float64) color.RGBA {
	m := func(x, y uint8) uint8 { return uint8(math.Round(float64(x)*(1-t) + float64(y)*t)) }
	return color.RGBA{m(a.R, b.R), m(a.G, b.G), m(a.B, b.B), 255}
}

func (pc *picture) textWidth(t picText) int { return 7 * len(t.s) * t.scale }

func (pc *picture) textStart(t picText) int {
	switch t.anchor {
	case 0:
		return t.x - pc.textWidth(t)/2
	case 1:
		return t.x - pc.textWidth(t)
	}
	return t.x
}

// WriteMaskPNG draws the pattern's kept pairs per pixel cell with its tile
// classes overlaid (full tiles in one color, partial tiles in another, tile
// boundaries as lines), a title and a legend, as a PNG image of at most
// about 1200 pixels a side. The output is deterministic.
func WriteMaskPNG(w io.Writer, p spec.Pattern, n, tile int, opt MaskImageOptions) error {
	pc := picLayout(p, n, tile, opt, 1)
	img := image.NewRGBA(image.Rect(0, 0, pc.w, pc.h))
	draw.Draw(img, img.Bounds(), image.NewUniform(picColEmpty), image.Point{}, draw.Src)
	z := pc.zoom
	for r := 0; r < pc.cells; r++ {
		for c := 0; c < pc.cells; c++ {
			col := pc.cellColor[r*pc.cells+c]
			if col == picColEmpty {
				continue
			}
			rect := image.Rect(pc.plotX+c*z, pc.plotY+r*z, pc.plotX+c*z+z, pc.plotY+r*z+z)
			draw.Draw(img, rect, image.NewUniform(col), image.Point{}, draw.Src)
		}
	}
	side := pc.cells * z
	for _, o := range pc.grid {
		for k := 0; k < side; k++ {
			picGridPixel(img, pc.plotX+o, pc.plotY+k)
			if k != o {
				picGridPixel(img, pc.plotX+k, pc.plotY+o)
			}
		}
	}
	for _, rc := range pc.rects {
		if rc.fill.A != 0 {
			draw.Draw(img, image.Rect(rc.x, rc.y, rc.x+rc.w, rc.y+rc.h), image.NewUniform(rc.fill), image.Point{}, draw.Src)
		}
		if rc.stroke {
			for k := 0; k < rc.w; k++ {
				img.SetRGBA(rc.x+k, rc.y, picColFrame)
				img.SetRGBA(rc.x+k, rc.y+rc.h-1, picColFrame)
			}
			for k := 0; k < rc.h; k++ {
				img.SetRGBA(rc.x, rc.y+k, picColFrame)
				img.SetRGBA(rc.x+rc.w-1, rc.y+k, picColFrame)
			}
		}
	}
	for _, l := range pc.lines {
		for x := l.x0; x <= l.x1; x++ {
			for y := l.y0; y <= l.y1; y++ {
				img.SetRGBA(x, y, picColFrame)
			}
		}
	}
	face := basicfont.Face7x13
	for _, t := range pc.texts {
		x := pc.textStart(t)
		if t.scale <= 1 {
			d := font.Drawer{Dst: img, Src: image.NewUniform(t.col), Face: face, Dot: fixed.P(x, t.y)}
			d.DrawString(t.s)
			continue
		}
		// Draw at 1x into a mask, then scale it up pixel by pixel.
		m := image.NewAlpha(image.Rect(0, 0, 7*len(t.s), 13))
		d := font.Drawer{Dst: m, Src: image.Opaque, Face: face, Dot: fixed.P(0, 11)}
		d.DrawString(t.s)
		top := t.y - 11*t.scale
		for my := 0; my < 13; my++ {
			for mx := 0; mx < 7*len(t.s); mx++ {
				if m.AlphaAt(mx, my).A < 128 {
					continue
				}
				for dy := 0; dy < t.scale; dy++ {
					for dx := 0; dx < t.scale; dx++ {
						img.SetRGBA(x+mx*t.scale+dx, top+my*t.scale+dy, t.col)
					}
				}
			}
		}
	}
	return png.Encode(w, img)
}

func picGridPixel(img *image.RGBA, x, y int) {
	img.SetRGBA(x, y, picBlend(img.RGBAAt(x, y), picColGrid, picGridAlpha))
}

// WriteMaskSVG draws the same picture as WriteMaskPNG as SVG: cells of one color
// merged into rectangles, tile boundaries as one path, text as text. The
// output is deterministic.
func WriteMaskSVG(w io.Writer, p spec.Pattern, n, tile int, opt MaskImageOptions) error {
	// Coarsen the cells until the merged rectangles stay within budget (a
	// pattern finer than the cells, like a small dilation stride, can make
	// every cell its own rectangle).
	var pc *picture
	var cells []picRect
	for minCell := 1; ; minCell *= 2 {
		pc = picLayout(p, n, tile, opt, minCell)
		var ok bool
		cells, ok = picMergeCells(pc.cells, pc.cellColor, picColEmpty, maxSVGRects)
		if ok {
			break
		}
		if pc.cells <= 64 {
			cells, _ = picMergeCells(pc.cells, pc.cellColor, picColEmpty, len(pc.cellColor))
			break
		}
		minCell = max(minCell, n/pc.cells)
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	fmt.Fprintf(bw, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"monospace\" font-size=\"12\">\n", pc.w, pc.h, pc.w, pc.h)
	fmt.Fprintf(bw, "<rect width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", pc.w, pc.h, picHex(picColEmpty))
	fmt.Fprintf(bw, "<g shape-rendering=\"crispEdges\">\n")
	z := pc.zoom
	for _, r := range cells {
		fmt.Fprintf(bw, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n",
			pc.plotX+r.x*z, pc.plotY+r.y*z, r.w*z, r.h*z, picHex(r.fill))
	}
	fmt.Fprintf(bw, "</g>\n")
	side := pc.cells * z
	if len(pc.grid) > 0 {
		var d strings.Builder
		for _, o := range pc.grid {
			fmt.Fprintf(&d, "M%d.5 %dv%dM%d %d.5h%d", pc.plotX+o, pc.plotY, side, pc.plotX, pc.plotY+o, side)
		}
		fmt.Fprintf(bw, "<path d=\"%s\" stroke=\"%s\" stroke-opacity=\"%g\" fill=\"none\" shape-rendering=\"crispEdges\"/>\n",
			d.String(), picHex(picColGrid), picGridAlpha)
	}
	for _, rc := range pc.rects {
		if rc.fill.A != 0 {
			fmt.Fprintf(bw, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", rc.x, rc.y, rc.w, rc.h, picHex(rc.fill))
		}
		if rc.stroke {
			fmt.Fprintf(bw, "<rect x=\"%d.5\" y=\"%d.5\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"%s\"/>\n", rc.x, rc.y, rc.w-1, rc.h-1, picHex(picColFrame))
		}
	}
	for _, l := range pc.lines {
		fmt.Fprintf(bw, "<path d=\"M%d %dL%d %d\" stroke=\"%s\" transform=\"translate(0.5 0.5)\"/>\n", l.x0, l.y0, l.x1, l.y1, picHex(picColFrame))
	}
	for _, t := range pc.texts {
		anchor := map[int]string{-1: "start", 0: "middle", 1: "end"}[t.anchor]
		fmt.Fprintf(bw, "<text x=\"%d\" y=\"%d\" text-anchor=\"%s\" fill=\"%s\"", t.x, t.y, anchor, picHex(t.col))
		if t.scale > 1 {
			fmt.Fprintf(bw, " font-size=\"%d\" font-weight=\"bold\"", 11*t.scale)
		}
		bw.WriteString(">")
		if err := xml.EscapeText(bw, []byte(t.s)); err != nil {
			return err
		}
		bw.WriteString("</text>\n")
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// maxSVGRects bounds the plot rectangles of an SVG image.
const maxSVGRects = 20000

func picHex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// picMergeCells covers the cells that are not bg with rectangles of one
// color: runs along each row, merged downward with runs of equal extent and
// color on the rows below. ok is false when more than limit rectangles are
// needed. The order is deterministic (by closing row, then x).
func picMergeCells(n int, cols []color.RGBA, bg color.RGBA, limit int) (rects []picRect, ok bool) {
	var open, next []picRect // open rectangles, sorted by x
	for r := 0; r <= n; r++ {
		next = next[:0]
		k := 0
		for c := 0; r < n && c < n; {
			col := cols[r*n+c]
			e := c + 1
			for e < n && cols[r*n+e] == col {
				e++
			}
			if col != bg {
				for k < len(open) && open[k].x < c {
					rects = append(rects, open[k])
					k++
				}
				if k < len(open) && open[k].x == c && open[k].w == e-c && open[k].fill == col {
					o := open[k]
					o.h++
					next = append(next, o)
					k++
				} else {
					next = append(next, picRect{x: c, y: r, w: e - c, h: 1, fill: col})
				}
			}
			c = e
		}
		rects = append(rects, open[k:]...)
		open, next = next, open
		if len(rects)+len(open) > limit {
			return nil, false
		}
	}
	return rects, true
}
