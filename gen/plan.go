package gen

import (
	"fmt"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// Target is what an emitter tells the planner: its name and the tile sizes
// it runs at for a head dimension. The planner decides everything else.
type Target interface {
	Name() string
	TileSizes(headDim int) (q, k int)
}

// Tiles is a Target with fixed tile sizes, for tools and tests.
type Tiles struct {
	TargetName string
	Q, K       int
}

func (t Tiles) Name() string             { return t.TargetName }
func (t Tiles) TileSizes(int) (q, k int) { return t.Q, t.K }
func (t Tiles) String() string           { return fmt.Sprintf("%s %dx%d", t.TargetName, t.Q, t.K) }

var _ Target = Tiles{}

// LayoutKind says how positions are arranged before tiling.
type LayoutKind uint8

const (
	// Identity tiles positions in order.
	Identity LayoutKind = iota
	// Residue gathers positions by i mod Stride: class c holds c, c+Stride,
	// c+2*Stride, ... in order. A dilated mask only pairs positions of one
	// class, and inside a class it is causal (or a window), so the tiles
	// visited are dense (MASKS.md section 5).
	Residue
)

func (k LayoutKind) String() string {
	if k == Residue {
		return "residue"
	}
	return "identity"
}

// Layout is a position permutation applied to queries, keys and values.
type Layout struct {
	Kind   LayoutKind
	Stride int // Residue only
}

// Plan is everything a target needs, as data: the pattern the tiles run on
// (after the layout transform), the tile sizes, the layout, and the
// programs every target renders: the partial-tile predicate, the key hull
// of a query tile, the query hull of a key tile, the tile class and the
// CPU keep word. The tile schedule of a call follows from them (Segments,
// Visit) in time proportional to the tiles visited, and so does its
// transpose, the column-wise schedule a backward pass walks
// (VisitColumn). Targets never read Source or Pattern to decide what to
// compute; those are kept for printing and for checks.
type Plan struct {
	Name    string       // spec name
	Source  spec.Pattern // the spec's mask, on absolute positions
	Pattern spec.Pattern // the mask inside one segment of the layout
	Layout  Layout
	Target  string
	TileQ   int
	TileK   int
	// HeadDim is the head dimension of q and k, HeadDimV that of v and
	// the output (equal unless the spec's head_dim is {qk, v}).
	HeadDim  int
	HeadDimV int
	Pred     *Prog // pred(i, j) -> keep: evaluated on partial tiles only, on segment positions
	Hull     *Prog // hull(q0, q1, x) -> (next, last): see mask.Mask.Hull
	QHull    *Prog // qhull(k0, k1, x) -> (next, last): the query hull of key positions [k0, k1] (LowerQHull)
	Class    *Prog // class(q0, q1, k0, k1) -> mask.Class, sound
	Word     *Prog // word(i, k0) -> keep bits of keys k0..k0+63; nil: Pred per lane
	// RowInterval: every row keeps an interval of keys (maybe empty), and
	// Hull of that row alone, hull(i, i, 0), gives its ends exactly (next >
	// last when it keeps none): a partial tile may test lo <= j <= hi per
	// element instead of Pred (RowIntervalOf).
	RowInterval bool
	// Score is the score stage every target renders between the scores
	// and the softmax (score.go); it never changes tile classes.
	Score ScoreStage
}

// Pass is one step of plan construction.
type Pass interface {
	Name() string
	Run(p *Plan) error
}

type passFunc struct {
	name string
	run  func(*Plan) error
}

func (f passFunc) Name() string      { return f.name }
func (f passFunc) Run(p *Plan) error { return f.run(p) }

// Pipeline is the declared list of passes Compile runs, in order.
var Pipeline = []Pass{
	passFunc{"layout", passLayout},
	passFunc{"tiles", passTiles},
	passFunc{"predicate", passPredicate},
	passFunc{"schedule", passSchedule},
	passFunc{"word", passWord},
}

// Compile builds the plan of a spec for a target, running Pipeline. If
// dump is not nil it is called with the plan after each pass.
func Compile(s *spec.Spec, t Target, dump func(pass string, p *Plan)) (*Plan, error) {
	if err := checkRefs(s.Pattern()); err != nil {
		return nil, fmt.Errorf("plan %s: %w", s.Name, err)
	}
	// The parser refuses such masks at their line; this is for masks built
	// in code.
	if s.Mask != nil && s.Mask.Primitives() > spec.MaxPrimitives {
		return nil, fmt.Errorf("plan %s: the mask has %d primitives, at most %d (spec.MaxPrimitives)", s.Name, s.Mask.Primitives(), spec.MaxPrimitives)
	}
	p := &Plan{Name: s.Name, Source: s.Pattern(), Pattern: s.Pattern(), Target: t.Name(), HeadDim: s.HeadDim, HeadDimV: s.HeadDimV, Score: ScoreOf(s.Score)}
	if p.HeadDimV == 0 {
		p.HeadDimV = p.HeadDim
	}
	p.TileQ, p.TileK = t.TileSizes(s.HeadDim)
	for _, ps := range Pipeline {
		if err := ps.Run(p); err != nil {
			return nil, fmt.Errorf("plan %s, pass %s: %w", s.Name, ps.Name(), err)
		}
		if dump != nil {
			dump(ps.Name(), p)
		}
	}
	return p, nil
}

// checkRefs reports a mask field naming a head parameter the pattern does
// not declare (a spec built in code with Refs but without HeadParams):
// its plan would read values no caller is asked for.
func checkRefs(p spec.Pattern) error {
	var bad error
	var walk func(m *spec.Mask)
	walk = func(m *spec.Mask) {
		for _, r := range []spec.Ref{m.LeftRef, m.RightRef, m.TokensRef} {
			if r.Set() && r.Param > len(p.Params) && bad == nil {
				bad = fmt.Errorf("mask field names head parameter %q (number %d), but the spec declares %d head parameters", r.Name, r.Param, len(p.Params))
			}
		}
		for _, a := range m.Args {
			walk(a)
		}
	}
	if p.Mask != nil {
		walk(p.Mask)
	}
	return bad
}

// passLayout chooses the residue layout for a dilated mask whose stride is
// below the key tile: inside each residue class the mask becomes causal
// attention (or a window of Size taps).
func passLayout(p *Plan) error {
	m := p.Source.Mask
	if m.Op != spec.OpDilated || m.Stride <= 1 || m.Stride >= p.TileK {
		return nil
	}
	p.Layout = Layout{Kind: Residue, Stride: m.Stride}
	inner := spec.Full()
	switch {
	case m.Size > 0 && p.Source.Causal:
		inner = spec.Window(m.Size)
	case m.Size > 0:
		inner = spec.WindowLR(m.Size-1, m.Size-1)
	}
	p.Pattern = spec.Pattern{Mask: inner, Causal: p.Source.Causal}
	return nil
}

func passTiles(p *Plan) error {
	if p.TileQ < 1 || p.TileK < 1 {
		return fmt.Errorf("target %s: tile sizes %dx%d must be positive", p.Target, p.TileQ, p.TileK)
	}
	return nil
}

func passPredicate(p *Plan) error {
	p.Pred = LowerPred(p.Pattern)
	return p.Pred.Check()
}

// passSchedule lowers the key hull, the query hull and the tile class.
func passSchedule(p *Plan) error {
	p.Hull, p.QHull, p.Class = LowerHull(p.Pattern), LowerQHull(p.Pattern), LowerClass(p.Pattern)
	p.RowInterval = RowIntervalOf(p.Pattern)
	if err := p.Hull.Check(); err != nil {
		return err
	}
	if err := p.QHull.Check(); err != nil {
		return err
	}
	return p.Class.Check()
}

// RowIntervalOf reports whether every row of the pattern keeps an
// interval of keys whose ends the key hull of the row alone gives
// exactly: window, block, bridge, global, the queries set, a keys set
// without stride and dilation by 1 are intervals per row with exact
// hulls, the causal flag cuts an interval at the row, and an intersection
// of such masks is the intersection of their intervals (its hull takes
// the largest next and the smallest last). Unions, complements, strided
// sets, neighbourhoods, trees and documents (whose hull is sound, not
// exact, around document-local positions) are not.
func RowIntervalOf(p spec.Pattern) bool { return rowInterval(p.Mask) }

func rowInterval(m *spec.Mask) bool {
	switch m.Op {
	case spec.OpFull, spec.OpWindow, spec.OpBlock, spec.OpBridge, spec.OpGlobal, spec.OpQueries:
		return true
	case spec.OpKeys, spec.OpDilated:
		return m.Stride <= 1
	case spec.OpIntersect:
		for _, a := range m.Args {
			if !rowInterval(a) {
				return false
			}
		}
		return true
	case spec.OpUnion:
		return len(m.Args) == 1 && rowInterval(m.Args[0])
	}
	return false
}

// passWord bit-slices the predicate into the CPU keep word.
func passWord(p *Plan) error {
	if p.TileK > 64 {
		return fmt.Errorf("target %s: key tiles of %d exceed the 64 keys of a keep word", p.Target, p.TileK)
	}
	p.Word = LowerWord(p.Pred)
	return nil
}

// Segment is one independent attention problem of the layout (see
// mask.Segment).
type Segment = mask.Segment

// Segments splits a call with sq queries and sk keys (sq <= sk) into the
// layout's segments. Segments without queries are left out.
func (p *Plan) Segments(sq, sk int) []Segment {
	return mask.Segments(nil, sq, sk, p.Layout.Stride)
}

// TileRef is one key tile a query tile visits.
type TileRef = mask.Tile

// Visit appends the key tiles query tile qt of a segment visits, in
// increasing order, each Full or Partial, exactly as the CPU runtime walks
// them: the hull and class programs propose tiles, and partial ones are
// refined by their keep words, so no empty tile is ever visited and a
// tile every row keeps whole is Full. docs is nil unless the mask has
// document.
func (p *Plan) Visit(dst []TileRef, seg Segment, qt int, docs *mask.Docs) []TileRef {
	r0 := qt * p.TileQ
	r1 := min(r0+p.TileQ, seg.SeqQ) - 1
	off := seg.SeqK - seg.SeqQ
	return p.VisitRange(dst, r0+off, r1+off, seg.SeqK, docs)
}

// VisitRange is Visit for query positions [q0, q1] of a segment with nk keys.
func (p *Plan) VisitRange(dst []TileRef, q0, q1, nk int, docs *mask.Docs) []TileRef {
	m := p.Mask()
	start := len(dst)
	dst = mask.Visit(m, dst, q0, q1, nk, p.TileK, docs)
	words := make([]uint64, q1-q0+1)
	k := start
	for _, t := range dst[start:] {
		if t.Class == mask.Partial {
			t.Class = mask.Refine(m, words, q0, q1, t.K, nk, p.TileK, docs)
		}
		if t.Class != mask.Empty {
			dst[k] = t
			k++
		}
	}
	return dst[:k]
}

// Columns is the column-wise schedule of a segment, what a backward pass
// walks: for each key tile, the query tiles that visit it, in increasing
// order, with exact classes (the forward schedule of Visit, refined by the
// keep words, transposed: mask.Columns). docs is nil unless the mask has
// document.
func (p *Plan) Columns(seg Segment, docs *mask.Docs) *mask.Columns {
	var rows []TileRef
	var at []int32
	for qt := 0; qt < p.QueryTiles(seg); qt++ {
		at = append(at, int32(len(rows)))
		rows = p.Visit(rows, seg, qt, docs)
	}
	at = append(at, int32(len(rows)))
	c := new(mask.Columns)
	c.Transpose(rows, at, (seg.SeqK+p.TileK-1)/p.TileK)
	return c
}

// VisitColumn appends the query tiles of a segment that key tile kt may
// need, in increasing order, each with the class program's class: the
// column-wise schedule in closed form, as a backward kernel walks it. It
// jumps over the query positions the query hull excludes, as mask.Visit
// jumps over keys, and leaves out the tiles the class program calls Empty;
// the rest are a superset of Columns' tiles, with sound classes (a Partial
// tile is not refined by keep words and may keep no pair). docs is nil
// unless the mask has document.
func (p *Plan) VisitColumn(dst []mask.ColTile, seg Segment, kt int, docs *mask.Docs) []mask.ColTile {
	k0 := kt * p.TileK
	dst, _ = p.visitColumn(dst, k0, min(k0+p.TileK, seg.SeqK)-1, seg.SeqK-seg.SeqQ, seg.SeqK, docs)
	return dst
}

// visitColumn is VisitColumn for keys [k0, k1] of a segment whose queries
// are positions [off, nk-1], tiled from off. It also returns the number of
// tiles it classified (those it returns and those found Empty).
func (p *Plan) visitColumn(dst []mask.ColTile, k0, k1, off, nk int, docs *mask.Docs) ([]mask.ColTile, int) {
	qhull := func(x int) (next, last int) {
		var res [2]int64
		args := [3]int64{int64(k0), int64(k1), int64(x)}
		eval(p.QHull, args[:], docs, res[:])
		return int(res[0]), int(res[1])
	}
	next, last := qhull(off)
	last = min(last, nk-1)
	tried := 0
	for q := max(next, off); q <= last; {
		qt := (q - off) / p.TileQ
		r0 := off + qt*p.TileQ
		r1 := min(r0+p.TileQ, nk) - 1
		var res [1]int64
		args := [4]int64{int64(r0), int64(r1), int64(k0), int64(k1)}
		eval(p.Class, args[:], docs, res[:])
		tried++
		if c := mask.Class(res[0]); c != mask.Empty {
			dst = append(dst, mask.ColTile{Q: qt, Class: c})
		}
		q, _ = qhull(r0 + p.TileQ)
		q = max(q, r0+p.TileQ)
	}
	return dst, tried
}

// QueryTiles is the number of query tiles of a segment.
func (p *Plan) QueryTiles(seg Segment) int { return (seg.SeqQ + p.TileQ - 1) / p.TileQ }

// Stats summarizes the schedule of a call.
type Stats struct {
	SeqQ, SeqK    int
	Segments      int
	QueryTiles    int
	Full, Partial int   // visited key tiles by class
	Empty         int64 // key tiles never visited
	VisitedPairs  int64 // pairs inside visited tiles
}

// Stats walks the whole schedule of a call with sq queries and sk keys
// (one document).
func (p *Plan) Stats(sq, sk int) Stats {
	st := Stats{SeqQ: sq, SeqK: sk}
	var refs []TileRef
	docs := p.oneDoc(sk)
	for _, seg := range p.Segments(sq, sk) {
		st.Segments++
		nq, nk := p.QueryTiles(seg), (seg.SeqK+p.TileK-1)/p.TileK
		st.QueryTiles += nq
		for qt := 0; qt < nq; qt++ {
			refs = p.Visit(refs[:0], seg, qt, docs)
			rows := int64(min(qt*p.TileQ+p.TileQ, seg.SeqQ) - qt*p.TileQ)
			for _, r := range refs {
				cols := int64(min(r.K*p.TileK+p.TileK, seg.SeqK) - r.K*p.TileK)
				st.VisitedPairs += rows * cols
				if r.Class == mask.Full {
					st.Full++
				} else {
					st.Partial++
				}
			}
			st.Empty += int64(nk - len(refs))
		}
	}
	return st
}

// oneDoc is the document index of a sequence of n positions in one
// document (what At assumes), or nil when the mask has no document; with
// head parameters, it carries their Max values (the unbound pattern's
// instance, which At evaluates).
func (p *Plan) oneDoc(n int) *mask.Docs {
	var d *mask.Docs
	if p.Pred.UsesDocs() {
		d, _ = mask.NewDocs(make([]int32, n))
	}
	return p.AtMax(d)
}

// AtMax returns the run-time data d (nil: none) with every head parameter
// at its Max, the instance an unbound pattern describes: a view of d
// (mask.Docs.SetHead) for plans with head parameters, d itself otherwise.
func (p *Plan) AtMax(d *mask.Docs) *mask.Docs {
	hp := p.HeadParams()
	if len(hp) == 0 {
		return d
	}
	vals := make([]int32, len(hp))
	for k, h := range hp {
		vals[k] = int32(h.Max)
	}
	v := &mask.Docs{}
	v.SetHead(d, vals)
	return v
}
