package verify

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/attngen/attngen/spec"
)

// This file is the reachability model of MASKS.md section 4: the structural
// dependency sets of a stack of attention layers,
//
//	R_0(t) = {t}
//	R_l(t) = R_{l-1}(t) ∪ ⋃ { R_{l-1}(s) : M_l(t, s) },
//
// layer 1 nearest the input. Reach computes them exactly by that recursion,
// one generation (depth) at a time; Analyze derives coverage tables and hop
// counts from it; BruteReach is the slow, obvious version kept to check it.

// Unreached is the hop count of a pair that no depth computed so far
// connects.
const Unreached = -1

// MaxHopLayers bounds the stack depth when Reach records hop counts (they
// are stored in 16 bits).
const MaxHopLayers = math.MaxUint16 - 1

// reachChunk is the number of entries of a residue class summarised by one
// prefix/suffix run of a progIndex.
const reachChunk = 16

// Reach is the reachability model of one layer stack over the positions
// [0, N). It holds two generations of dependency sets, R_{l-1} and R_l, each
// as N bitsets of N bits (2·N²/8 bytes in all: 16 MiB at N = 8192), and
// advances one layer at a time.
//
// A layer is applied row by row from the progressions of spec.Pattern.Keys:
// R_l(t) is R_{l-1}(t) ORed with R_{l-1}(s) over every key progression s of
// row t. A progression longer than a chunk is ORed in O(1) bitset ORs through
// a range-OR index built per layer for its step: for each residue class mod
// the step, prefix- and suffix-ORs within chunks of 16 entries and a sparse
// table of whole-chunk ORs: at most four ORs for a progression that crosses
// a chunk boundary, at most 16 for one inside a chunk. A layer with one step
// costs about 2.1·N bitset ORs to index (and another 2·N bitsets of memory
// while it runs) and a few ORs per row.
//
// Document masks are analysed as one document spanning the sequence (as
// spec.Pattern.At and Keys evaluate them). Non-causal layers are allowed:
// sets may then hold positions after the target.
//
// A Reach is not safe for concurrent use; Advance itself uses all CPUs.
type Reach struct {
	layers []spec.Pattern
	n      int
	words  int // uint64 words per bitset
	depth  int

	cur, prev []uint64 // R_depth and R_{depth-1}, row t at [t*words, (t+1)*words)
	hops      []uint16 // hops[t*n+s]: least depth with s in R(t), 0xffff unreached; nil unless recorded

	spare [][]uint64  // generation-sized buffers kept for the next layer's indexes
	progs []spec.Prog // scratch: key progressions of every row of the layer being applied
	off   []int       // row t's progressions are progs[off[t]:off[t+1]]
}

// NewReach returns the model of the stack whose layer k (1-based) is
// layers[k-1], over positions [0, n), at depth 0 (R_0(t) = {t}).
func NewReach(layers []spec.Pattern, n int) (*Reach, error) {
	if n < 1 {
		return nil, fmt.Errorf("reach: sequence length %d: want at least 1", n)
	}
	for k, p := range layers {
		if p.Mask == nil {
			return nil, fmt.Errorf("reach: layer %d has no mask", k+1)
		}
	}
	words := (n + 63) / 64
	r := &Reach{layers: layers, n: n, words: words}
	r.cur = make([]uint64, n*words)
	for t := 0; t < n; t++ {
		r.cur[t*words+t/64] = 1 << (t % 64)
	}
	return r, nil
}

// RecordHops makes the model record, for every pair (t, s), the least depth
// l with s in R_l(t), so that Hops and Reachable answer for every depth up
// to Depth. It costs 2·N² bytes and must be called at depth 0.
func (r *Reach) RecordHops() error {
	if r.depth != 0 {
		return errors.New("reach: RecordHops must be called at depth 0")
	}
	if len(r.layers) > MaxHopLayers {
		return fmt.Errorf("reach: hop counts are recorded for at most %d layers, got %d", MaxHopLayers, len(r.layers))
	}
	if r.hops == nil {
		r.hops = make([]uint16, r.n*r.n)
		for k := range r.hops {
			r.hops[k] = math.MaxUint16
		}
		for t := 0; t < r.n; t++ {
			r.hops[t*r.n+t] = 0
		}
	}
	return nil
}

// N is the number of positions.
func (r *Reach) N() int { return r.n }

// Layers is the depth of the whole stack, len(layers).
func (r *Reach) Layers() int { return len(r.layers) }

// Depth is the number of layers applied so far: the sets held are R_Depth.
func (r *Reach) Depth() int { return r.depth }

// Layer returns the pattern of layer k (1-based).
func (r *Reach) Layer(k int) spec.Pattern { return r.layers[k-1] }

// Reachable reports whether s is in R_l(t). Without recorded hop counts l
// must be Depth or Depth-1 (the two generations held); with them any l in
// [0, Depth]. Other depths panic, as do positions outside [0, N).
func (r *Reach) Reachable(l, t, s int) bool {
	r.checkPos(t, s)
	switch {
	case r.hops != nil && l >= 0 && l <= r.depth:
		return int(r.hops[t*r.n+s]) <= l
	case l == r.depth:
		return r.bit(r.cur, t, s)
	case l == r.depth-1 && l >= 0:
		return r.bit(r.prev, t, s)
	}
	panic(fmt.Sprintf("reach: depth %d not held (model at depth %d, hop counts recorded: %v)", l, r.depth, r.hops != nil))
}

// Hops is the least depth l <= Depth with s in R_l(t) (0 when s == t), or
// Unreached. It needs RecordHops.
func (r *Reach) Hops(t, s int) int {
	if r.hops == nil {
		panic("reach: Hops needs RecordHops")
	}
	r.checkPos(t, s)
	if h := r.hops[t*r.n+s]; h != math.MaxUint16 {
		return int(h)
	}
	return Unreached
}

func (r *Reach) checkPos(t, s int) {
	if t < 0 || t >= r.n || s < 0 || s >= r.n {
		panic(fmt.Sprintf("reach: pair (%d, %d) outside [0, %d)", t, s, r.n))
	}
}

func (r *Reach) bit(g []uint64, t, s int) bool {
	return g[t*r.words+s/64]>>(s%64)&1 != 0
}

func (r *Reach) row(g []uint64, t int) []uint64 { return g[t*r.words : (t+1)*r.words] }

// Sources appends the members of R_Depth(t) to dst in increasing order.
func (r *Reach) Sources(dst []int, t int) []int {
	return reachBits(dst, r.row(r.cur, t), nil)
}

// Added appends to dst, in increasing order, the sources that the last layer
// applied added for target t: R_Depth(t) minus R_{Depth-1}(t). At depth 0 it
// is R_0(t) = {t}.
func (r *Reach) Added(dst []int, t int) []int {
	if r.depth == 0 {
		return append(dst, t)
	}
	return reachBits(dst, r.row(r.cur, t), r.row(r.prev, t))
}

// Count is |R_Depth(t)|.
func (r *Reach) Count(t int) int {
	c := 0
	for _, w := range r.row(r.cur, t) {
		c += bits.OnesCount64(w)
	}
	return c
}

// reachBits appends the positions set in a and not in b (b may be nil).
func reachBits(dst []int, a, b []uint64) []int {
	for k, w := range a {
		if b != nil {
			w &^= b[k]
		}
		for w != 0 {
			dst = append(dst, k*64+bits.TrailingZeros64(w))
			w &= w - 1
		}
	}
	return dst
}

// AdvanceTo applies layers until the depth is l (at most Layers).
func (r *Reach) AdvanceTo(l int) {
	for r.depth < l && r.Advance() {
	}
}

// Advance applies the next layer, R_{l-1} -> R_l. It returns false, doing
// nothing, when every layer has been applied.
func (r *Reach) Advance() bool {
	if r.depth >= len(r.layers) {
		return false
	}
	p := r.layers[r.depth]
	n, w := r.n, r.words

	// The key progressions of every row, and which steps need an index.
	r.progs, r.off = r.progs[:0], r.off[:0]
	need := map[int]bool{}
	for t := 0; t < n; t++ {
		r.off = append(r.off, len(r.progs))
		r.progs = p.Keys(r.progs, t, n)
		for _, g := range r.progs[r.off[t]:] {
			if g.Count() > reachChunk {
				need[g.Step] = true
			}
		}
	}
	r.off = append(r.off, len(r.progs))

	if r.prev == nil {
		r.prev = make([]uint64, n*w)
	}
	// The generation being replaced becomes the output buffer.
	old, next := r.cur, r.prev
	idx := map[int]*progIndex{}
	take := func(size int) []uint64 { // the smallest spare buffer that fits
		best := -1
		for k, b := range r.spare {
			if cap(b) >= size && (best < 0 || cap(b) < cap(r.spare[best])) {
				best = k
			}
		}
		if best < 0 {
			return make([]uint64, size)
		}
		b := r.spare[best]
		r.spare = append(r.spare[:best], r.spare[best+1:]...)
		return b[:size]
	}
	for st := range need {
		idx[st] = newProgIndex(old, n, w, st, take)
	}
	reachParallel(n, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			dst := next[t*w : (t+1)*w]
			copy(dst, old[t*w:(t+1)*w])
			for _, g := range r.progs[r.off[t]:r.off[t+1]] {
				if ix := idx[g.Step]; ix != nil && g.Count() > 2 {
					ix.or(dst, g)
					continue
				}
				for s := g.Lo; s <= g.Hi; s += g.Step {
					reachOr(dst, old[s*w:(s+1)*w])
				}
			}
		}
	})
	r.prev, r.cur = old, next
	r.depth++
	for _, ix := range idx { // reuse, rather than collect, the big buffers
		r.spare = append(r.spare, ix.pre, ix.suf, ix.sparseBuf)
	}

	if r.hops != nil {
		h := uint16(r.depth)
		reachParallel(n, func(lo, hi int) {
			var buf []int
			for t := lo; t < hi; t++ {
				buf = r.Added(buf[:0], t)
				for _, s := range buf {
					r.hops[t*n+s] = h
				}
			}
		})
	}
	return true
}

// reachOr sets dst |= src.
func reachOr(dst, src []uint64) {
	src = src[:len(dst)]
	for k := range dst {
		dst[k] |= src[k]
	}
}

// reachParallel runs fn over [0, n) split into contiguous ranges, one goroutine
// per CPU.
func reachParallel(n int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/64))
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := 0; k < workers; k++ {
		lo, hi := n*k/workers, n*(k+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}

// progIndex answers ORs of the rows of one generation over arithmetic
// progressions of one step in O(1) bitset ORs. Positions are laid out class
// by class (residue mod step), entry k of class c being position c+k·step;
// each class is cut into chunks of reachChunk entries. pre holds, for every
// entry, the OR from its chunk's start to it; suf the OR from it to its
// chunk's end; sparse[c][h-1] the ORs of 2^h consecutive whole chunks of
// class c (level 0 is the chunk's last pre entry).
type progIndex struct {
	step, words int
	g           []uint64 // the generation indexed
	start       []int    // start[c]: index of class c's first entry; start[step] = n
	pre, suf    []uint64
	sparse      [][][]uint64
	sparseBuf   []uint64 // backing store of sparse
}

// newProgIndex indexes generation g for one step, taking its buffers from
// take(words) (their contents are overwritten).
func newProgIndex(g []uint64, n, w, step int, take func(int) []uint64) *progIndex {
	ix := &progIndex{step: step, words: w, g: g, start: make([]int, step+1)}
	for c := 0; c < step; c++ {
		ix.start[c+1] = ix.start[c] + ix.classLen(c, n)
	}
	ix.pre, ix.suf = take(n*w), take(n*w)
	// Sparse levels h >= 1 of every class, laid out in one buffer.
	ix.sparse = make([][][]uint64, step)
	rows := 0
	spOff := make([]int, step)
	for c := 0; c < step; c++ {
		spOff[c] = rows
		nch := (ix.start[c+1] - ix.start[c] + reachChunk - 1) / reachChunk
		for h := 1; 1<<h <= nch; h++ {
			rows += nch - 1<<h + 1
		}
	}
	ix.sparseBuf = take(rows * w)
	reachParallel(step, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			ix.buildClass(g, c, ix.sparseBuf[spOff[c]*w:])
		}
	})
	return ix
}

func (ix *progIndex) classLen(c, n int) int {
	if c >= n {
		return 0
	}
	return (n - c + ix.step - 1) / ix.step
}

func (ix *progIndex) rowOf(buf []uint64, e int) []uint64 {
	return buf[e*ix.words : (e+1)*ix.words]
}

// buildClass fills the prefix, suffix and sparse rows of class c, the
// sparse levels from buf.
func (ix *progIndex) buildClass(g []uint64, c int, buf []uint64) {
	w, base, m := ix.words, ix.start[c], ix.start[c+1]-ix.start[c]
	src := func(k int) []uint64 { p := c + k*ix.step; return g[p*w : (p+1)*w] }
	for k0 := 0; k0 < m; k0 += reachChunk {
		k1 := min(k0+reachChunk, m) // the chunk is [k0, k1)
		for k := k0; k < k1; k++ {
			d := ix.rowOf(ix.pre, base+k)
			copy(d, src(k))
			if k > k0 {
				reachOr(d, ix.rowOf(ix.pre, base+k-1))
			}
		}
		for k := k1 - 1; k >= k0; k-- {
			d := ix.rowOf(ix.suf, base+k)
			copy(d, src(k))
			if k < k1-1 {
				reachOr(d, ix.rowOf(ix.suf, base+k+1))
			}
		}
	}
	nch := (m + reachChunk - 1) / reachChunk
	var levels [][]uint64
	for h := 1; 1<<h <= nch; h++ {
		cnt := nch - 1<<h + 1
		lv := buf[: cnt*w : cnt*w]
		buf = buf[cnt*w:]
		for q := 0; q < cnt; q++ {
			d := lv[q*w : (q+1)*w]
			copy(d, ix.chunkOR(c, levels, h-1, q))
			reachOr(d, ix.chunkOR(c, levels, h-1, q+1<<(h-1)))
		}
		levels = append(levels, lv)
	}
	ix.sparse[c] = levels
}

// chunkOR is the OR of chunks [q, q+2^h) of class c.
func (ix *progIndex) chunkOR(c int, levels [][]uint64, h, q int) []uint64 {
	if h == 0 {
		last := min((q+1)*reachChunk, ix.start[c+1]-ix.start[c]) - 1
		return ix.rowOf(ix.pre, ix.start[c]+last)
	}
	return levels[h-1][q*ix.words : (q+1)*ix.words]
}

// or sets dst |= OR of the rows of positions g.Lo, g.Lo+step, ..., <= g.Hi.
func (ix *progIndex) or(dst []uint64, g spec.Prog) {
	c := g.Lo % ix.step
	a, b := g.Lo/ix.step, (g.Hi-c)/ix.step // entries [a, b] of class c
	base := ix.start[c]
	qa, qb := a/reachChunk, b/reachChunk
	if qa == qb {
		switch {
		case a%reachChunk == 0:
			reachOr(dst, ix.rowOf(ix.pre, base+b))
		case b%reachChunk == reachChunk-1 || base+b == ix.start[c+1]-1:
			reachOr(dst, ix.rowOf(ix.suf, base+a))
		default:
			for s := g.Lo; s <= g.Hi; s += ix.step {
				reachOr(dst, ix.g[s*ix.words:(s+1)*ix.words])
			}
		}
		return
	}
	reachOr(dst, ix.rowOf(ix.suf, base+a))
	reachOr(dst, ix.rowOf(ix.pre, base+b))
	if qb-qa >= 2 {
		lo, hi := qa+1, qb-1
		h := bits.Len(uint(hi-lo+1)) - 1
		levels := ix.sparse[c]
		reachOr(dst, ix.chunkOR(c, levels, h, lo))
		reachOr(dst, ix.chunkOR(c, levels, h, hi-1<<h+1))
	}
}

// Pair is a (target, source) pair of positions.
type Pair struct{ Target, Source int }

// Coverage is what Analyze measures of a layer stack at every depth
// l = 1..Layers, for backward distances d = 0..MaxDistance (source s = t-d;
// sources after the target, which only non-causal layers reach, are not
// counted).
type Coverage struct {
	N, Layers, MaxDistance int

	// Counts[l-1][d] is the number of targets t with d <= t < N and t-d in
	// R_l(t). Marginal divides it by N-d.
	Counts [][]int

	// Periodic reports that every layer is causal and block-periodic
	// (spec.Mask.Period). Then a path from t to s = t-d stays inside [s, t],
	// the stack is invariant under shifts by the lcm P of the layer periods,
	// and whether t-d is in R_l(t) depends only on (d, t mod P) for t >= d.
	Periodic bool
	// Period is that lcm P when Periodic and P <= N, else 0 (no per-phase
	// table).
	Period int
	// PhaseDistance is the largest distance of the per-phase tables,
	// min(MaxDistance, N-Period), or -1 without tables. The table entry
	// C_l(d, phi) is read at the target t = d + ((phi-d) mod P), the first
	// t >= d of phase phi: equivalently at the pair whose source
	// (phi-d) mod P lies in the first period [0, P). That target is below N
	// for every phase exactly when d <= N-P, which makes every row of the
	// table up to PhaseDistance complete; by the shift invariance every
	// other target t >= d of the phase gives the same answer.
	PhaseDistance int
	phaseHops     []int32 // [d*Period+phi]: least depth, Unreached

	// FullLayers lists the depths whose mask is full. One full causal layer
	// makes every earlier position reachable, so from there on binary
	// reachability saturates and stacks differ only in attention mass
	// (MASKS.md section 4), which this model does not measure.
	FullLayers []int

	// Pairs are the pairs Analyze was asked about; PairHops[k] is the least
	// depth l <= Layers with Pairs[k].Source in R_l(Pairs[k].Target), or
	// Unreached.
	Pairs    []Pair
	PairHops []int
}

// Analyze runs the reachability model of the stack (layer k is layers[k-1])
// over positions [0, n) through every layer and collects its coverage for
// distances up to maxDistance (0 <= maxDistance < n), per-phase tables when
// the stack is block-periodic, and the hop counts of the given pairs.
func Analyze(layers []spec.Pattern, n, maxDistance int, pairs ...Pair) (*Coverage, error) {
	if len(layers) == 0 {
		return nil, errors.New("reach: no layers")
	}
	r, err := NewReach(layers, n)
	if err != nil {
		return nil, err
	}
	if maxDistance < 0 || maxDistance >= n {
		return nil, fmt.Errorf("reach: max distance %d outside [0, %d)", maxDistance, n)
	}
	for _, p := range pairs {
		if p.Target < 0 || p.Target >= n || p.Source < 0 || p.Source >= n {
			return nil, fmt.Errorf("reach: pair (target %d, source %d) outside [0, %d)", p.Target, p.Source, n)
		}
	}
	c := &Coverage{N: n, Layers: len(layers), MaxDistance: maxDistance, PhaseDistance: -1,
		Pairs: append([]Pair(nil), pairs...), PairHops: make([]int, len(pairs))}
	for k, p := range layers {
		if p.Mask.Op == spec.OpFull {
			c.FullLayers = append(c.FullLayers, k+1)
		}
	}
	var period int
	period, c.Periodic = StackPeriod(layers, n)
	if c.Periodic && period <= n {
		c.Period = period
		c.PhaseDistance = min(maxDistance, n-period)
		c.phaseHops = make([]int32, (c.PhaseDistance+1)*period)
		for k := range c.phaseHops {
			c.phaseHops[k] = Unreached
		}
		for phi := 0; phi < period; phi++ {
			c.phaseHops[phi] = 0
		}
	}
	for k, p := range pairs {
		c.PairHops[k] = Unreached
		if p.Target == p.Source {
			c.PairHops[k] = 0
		}
	}

	running := make([]int, maxDistance+1)
	running[0] = n
	var buf []int
	P := c.Period
	for r.Advance() {
		l := r.Depth()
		for t := 0; t < n; t++ {
			buf = r.Added(buf[:0], t)
			// Sources ascend: distances t-s descend.
			for k := len(buf) - 1; k >= 0; k-- {
				s := buf[k]
				d := t - s
				if d < 0 {
					continue
				}
				if d > maxDistance {
					break
				}
				running[d]++
				if s < P && d <= c.PhaseDistance {
					c.phaseHops[d*P+t%P] = int32(l)
				}
			}
		}
		c.Counts = append(c.Counts, append([]int(nil), running...))
		for k, p := range pairs {
			if c.PairHops[k] == Unreached && r.Reachable(l, p.Target, p.Source) {
				c.PairHops[k] = l
			}
		}
	}
	return c, nil
}

// StackPeriod returns the lcm of the layer periods and true when every layer
// is causal and block-periodic (spec.Mask.Period); a period larger than limit
// is returned as limit+1.
func StackPeriod(layers []spec.Pattern, limit int) (int, bool) {
	p := 1
	for _, l := range layers {
		q, ok := l.Period()
		if !ok || !l.Causal {
			return 0, false
		}
		if p <= limit {
			p = p / reachGCD(p, q) * q
		}
		if p > limit {
			p = limit + 1
		}
	}
	return p, true
}

func reachGCD(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Marginal returns, for depth l (1..Layers), the fraction of targets t with
// d <= t < N whose source t-d is in R_l(t), for d = 0..MaxDistance.
func (c *Coverage) Marginal(l int) []float64 {
	out := make([]float64, c.MaxDistance+1)
	for d, k := range c.Counts[l-1] {
		out[d] = float64(k) / float64(c.N-d)
	}
	return out
}

// MinHops is the least depth at which some target t >= d reaches t-d (0 for
// d = 0), or Unreached within Layers.
func (c *Coverage) MinHops(d int) int {
	if d == 0 {
		return 0
	}
	for l := 1; l <= c.Layers; l++ {
		if c.Counts[l-1][d] > 0 {
			return l
		}
	}
	return Unreached
}

// MaxHops is the least depth at which every target t >= d reaches t-d: the
// largest hop count over targets, or Unreached when some target does not
// reach within Layers.
func (c *Coverage) MaxHops(d int) int {
	if d == 0 {
		return 0
	}
	for l := 1; l <= c.Layers; l++ {
		if c.Counts[l-1][d] == c.N-d {
			return l
		}
	}
	return Unreached
}

// PhaseHops is h(d, phi), the least depth l <= Layers at which C_l(d, phi)
// holds, or Unreached; phi is taken mod Period and d must be in
// [0, PhaseDistance].
func (c *Coverage) PhaseHops(d, phi int) int {
	if d < 0 || d > c.PhaseDistance {
		panic(fmt.Sprintf("reach: distance %d outside the per-phase table [0, %d]", d, c.PhaseDistance))
	}
	return int(c.phaseHops[d*c.Period+((phi%c.Period)+c.Period)%c.Period])
}

// Phase is C_l(d, phi): whether a target of phase phi (mod Period) reaches
// the source d positions back within l layers (see PhaseDistance).
func (c *Coverage) Phase(l, d, phi int) bool {
	h := c.PhaseHops(d, phi)
	return h != Unreached && h <= l
}

// PhaseCoverage is Cov_l(d), the fraction of the Period phases at which
// distance d is reachable within l layers.
func (c *Coverage) PhaseCoverage(l, d int) float64 {
	k := 0
	for phi := 0; phi < c.Period; phi++ {
		if c.Phase(l, d, phi) {
			k++
		}
	}
	return float64(k) / float64(c.Period)
}

// PhaseCoverageTable returns Cov_l(d) for every depth and every distance of
// the per-phase table: out[l-1][d], d = 0..PhaseDistance (nil without a
// table).
func (c *Coverage) PhaseCoverageTable() [][]float64 {
	if c.Period == 0 {
		return nil
	}
	// first[h]: the phases of distance d first reached at depth h.
	out := make([][]float64, c.Layers)
	for l := range out {
		out[l] = make([]float64, c.PhaseDistance+1)
	}
	first := make([]int, c.Layers+1)
	for d := 0; d <= c.PhaseDistance; d++ {
		clear(first)
		for _, h := range c.phaseHops[d*c.Period : (d+1)*c.Period] {
			if h != Unreached {
				first[h]++
			}
		}
		k := first[0]
		for l := 1; l <= c.Layers; l++ {
			k += first[l]
			out[l-1][d] = float64(k) / float64(c.Period)
		}
	}
	return out
}

// Interval is the closed integer range [Lo, Hi].
type Interval struct{ Lo, Hi int }

func (iv Interval) String() string {
	if iv.Lo == iv.Hi {
		return fmt.Sprint(iv.Lo)
	}
	return fmt.Sprintf("%d-%d", iv.Lo, iv.Hi)
}

// PhaseGroup is a set of phases whose per-phase rows are identical, and that
// row as the intervals of reachable distances.
type PhaseGroup struct {
	Phases    []Interval
	Distances []Interval
}

// PhaseGroups returns the per-phase table at depth l as groups of phases
// with identical rows (distances 0..PhaseDistance), ordered by first phase.
func (c *Coverage) PhaseGroups(l int) []PhaseGroup {
	rows := make([][]Interval, c.Period)
	for phi := range rows {
		var row []Interval
		for d := 0; d <= c.PhaseDistance; d++ {
			if !c.Phase(l, d, phi) {
				continue
			}
			if k := len(row) - 1; k >= 0 && row[k].Hi == d-1 {
				row[k].Hi = d
			} else {
				row = append(row, Interval{d, d})
			}
		}
		rows[phi] = row
	}
	return reachGroupRows(rows, func(ph []Interval, row []Interval) PhaseGroup { return PhaseGroup{ph, row} })
}

// PhaseEnd is an endpoint of a PhaseSpan: Off, plus the phase phi when Phi.
type PhaseEnd struct {
	Off int
	Phi bool
}

func (e PhaseEnd) String() string {
	switch {
	case !e.Phi:
		return fmt.Sprint(e.Off)
	case e.Off == 0:
		return "phi"
	case e.Off > 0:
		return fmt.Sprintf("(phi+%d)", e.Off)
	}
	return fmt.Sprintf("(phi%d)", e.Off)
}

// At is the endpoint's value at phase phi.
func (e PhaseEnd) At(phi int) int {
	if e.Phi {
		return e.Off + phi
	}
	return e.Off
}

// PhaseSpan is a distance interval whose endpoints may move with the phase.
type PhaseSpan struct{ Lo, Hi PhaseEnd }

func (s PhaseSpan) String() string {
	if s.Lo == s.Hi {
		return s.Lo.String()
	}
	return s.Lo.String() + "-" + s.Hi.String()
}

// PhaseRule says that every phase of Phases reaches exactly the distances
// of Distances evaluated at that phase (within 0..PhaseDistance).
type PhaseRule struct {
	Phases    []Interval
	Distances []PhaseSpan
}

// PhaseRules is the per-phase table at depth l in a form short enough to
// read for long periods: runs of consecutive phases whose rows keep their
// shape while each interval endpoint either stays put or moves with the
// phase (block: "phases 0-255: d 0-phi"), runs with identical rules
// grouped. Runs are found greedily from phase 0 up; the rules reproduce
// PhaseGroups exactly.
func (c *Coverage) PhaseRules(l int) []PhaseRule {
	var rows [][]Interval
	for _, g := range c.PhaseGroups(l) {
		for _, ph := range g.Phases {
			for phi := ph.Lo; phi <= ph.Hi; phi++ {
				for len(rows) <= phi {
					rows = append(rows, nil)
				}
				rows[phi] = g.Distances
			}
		}
	}
	ends := func(row []Interval) []int {
		out := make([]int, 0, 2*len(row))
		for _, iv := range row {
			out = append(out, iv.Lo, iv.Hi)
		}
		return out
	}
	const (
		undecided = iota
		fixed
		moving
	)
	type run struct {
		lo    int
		spans []PhaseSpan
	}
	var runs []run
	finish := func(lo int, first []int, kind []int) {
		spans := make([]PhaseSpan, len(first)/2)
		for k := range first {
			e := PhaseEnd{Off: first[k]}
			if kind[k] == moving {
				e = PhaseEnd{Off: first[k] - lo, Phi: true}
			}
			if k%2 == 0 {
				spans[k/2].Lo = e
			} else {
				spans[k/2].Hi = e
			}
		}
		runs = append(runs, run{lo, spans})
	}
	var reps []int
	for lo := 0; lo < len(rows); {
		first := ends(rows[lo])
		kind := make([]int, len(first))
		prev, hi := first, lo
		for hi+1 < len(rows) {
			next := ends(rows[hi+1])
			if len(next) != len(prev) {
				break
			}
			nk := append([]int(nil), kind...)
			ok := true
			for k := range next {
				switch next[k] - prev[k] {
				case 0:
					ok = ok && kind[k] != moving
					nk[k] = fixed
				case 1:
					ok = ok && kind[k] != fixed
					nk[k] = moving
				default:
					ok = false
				}
			}
			if !ok {
				break
			}
			kind, prev, hi = nk, next, hi+1
		}
		finish(lo, first, kind)
		reps = append(reps, hi)
		lo = hi + 1
	}
	// Group runs with identical rules.
	var out []PhaseRule
	index := map[string]int{}
	for k, r := range runs {
		key := fmt.Sprint(r.spans)
		g, ok := index[key]
		if !ok {
			g = len(out)
			index[key] = g
			out = append(out, PhaseRule{Distances: r.spans})
		}
		if ph := out[g].Phases; len(ph) > 0 && ph[len(ph)-1].Hi == r.lo-1 {
			ph[len(ph)-1].Hi = reps[k]
		} else {
			out[g].Phases = append(ph, Interval{r.lo, reps[k]})
		}
	}
	return out
}

// HopRun says that the distances Lo..Hi have hop count Hops (Unreached
// included).
type HopRun struct{ Lo, Hi, Hops int }

// PhaseHopGroup is a set of phases whose hop counts h(d, phi) agree for all
// distances of the table, and those counts as runs.
type PhaseHopGroup struct {
	Phases []Interval
	Runs   []HopRun
}

// PhaseHopGroups returns h(d, phi) for d = 0..PhaseDistance as runs of equal
// hop counts, phases with identical rows grouped, ordered by first phase.
func (c *Coverage) PhaseHopGroups() []PhaseHopGroup {
	rows := make([][]HopRun, c.Period)
	for phi := range rows {
		var row []HopRun
		for d := 0; d <= c.PhaseDistance; d++ {
			h := c.PhaseHops(d, phi)
			if k := len(row) - 1; k >= 0 && row[k].Hops == h {
				row[k].Hi = d
			} else {
				row = append(row, HopRun{d, d, h})
			}
		}
		rows[phi] = row
	}
	return reachGroupRows(rows, func(ph []Interval, row []HopRun) PhaseHopGroup { return PhaseHopGroup{ph, row} })
}

// reachGroupRows groups indices with equal rows (equal fmt renderings), in
// order of first index, each group's indices as intervals.
func reachGroupRows[R, G any](rows []R, mk func([]Interval, R) G) []G {
	group := map[string]int{}
	var reps []int // first index of each group
	var members [][]Interval
	for i, row := range rows {
		key := fmt.Sprint(row)
		g, ok := group[key]
		if !ok {
			g = len(reps)
			group[key] = g
			reps = append(reps, i)
			members = append(members, nil)
		}
		if m := members[g]; len(m) > 0 && m[len(m)-1].Hi == i-1 {
			m[len(m)-1].Hi = i
		} else {
			members[g] = append(m, Interval{i, i})
		}
	}
	out := make([]G, len(reps))
	for k, rep := range reps {
		out[k] = mk(members[k], rows[rep])
	}
	return out
}

// CopyBound is the K-way boundary-copy bound of MASKS.md section 4 for one
// (target, source) pair and a stack of Layers layers: when the label is
// planted only at a source outside R_L(target), the prediction at the target
// is independent of it, so for every choice of weights top-1 accuracy is at
// most 1/K and the expected cross-entropy at least log K nats. When the
// source is reachable the bound is vacuous (accuracy 1, cross-entropy 0).
type CopyBound struct {
	Target, Source, K, Layers int
	Reachable                 bool
	Hops                      int     // least depth reaching the source, or Unreached
	MaxAccuracy               float64 // upper bound on top-1 accuracy
	MinCrossEntropy           float64 // lower bound on expected cross-entropy, nats
}

// NewCopyBound states the bound for a pair whose hop count within a stack of
// the given depth is hops (Unreached when not within it), with k >= 1 label
// values.
func NewCopyBound(p Pair, k, layers, hops int) (CopyBound, error) {
	if k < 1 {
		return CopyBound{}, fmt.Errorf("reach: K = %d: want at least 1 label value", k)
	}
	b := CopyBound{Target: p.Target, Source: p.Source, K: k, Layers: layers, Hops: hops,
		Reachable: hops != Unreached && hops <= layers, MaxAccuracy: 1}
	if !b.Reachable {
		b.Hops = Unreached
		b.MaxAccuracy = 1 / float64(k)
		b.MinCrossEntropy = math.Log(float64(k))
	}
	return b, nil
}

// BruteReach computes R_l(t) for l = 0..len(layers) with plain boolean sets
// and spec.Pattern.At, straight from the recursion: out[l][t][s] reports
// whether s is in R_l(t). It costs O(L·n³) and exists to check Reach.
func BruteReach(layers []spec.Pattern, n int) [][][]bool {
	out := make([][][]bool, len(layers)+1)
	out[0] = make([][]bool, n)
	for t := range out[0] {
		out[0][t] = make([]bool, n)
		out[0][t][t] = true
	}
	for l := 1; l <= len(layers); l++ {
		prev, m := out[l-1], layers[l-1]
		cur := make([][]bool, n)
		for t := 0; t < n; t++ {
			cur[t] = append([]bool(nil), prev[t]...)
			for s := 0; s < n; s++ {
				if !m.At(t, s) {
					continue
				}
				for u, ok := range prev[s] {
					if ok {
						cur[t][u] = true
					}
				}
			}
		}
		out[l] = cur
	}
	return out
}

// BruteCounts is Coverage.Counts computed from BruteReach: out[l-1][d] is
// the number of targets t, d <= t < n, with t-d in R_l(t).
func BruteCounts(layers []spec.Pattern, n, maxDistance int) [][]int {
	sets := BruteReach(layers, n)
	out := make([][]int, len(layers))
	for l := 1; l <= len(layers); l++ {
		out[l-1] = make([]int, maxDistance+1)
		for d := 0; d <= maxDistance; d++ {
			for t := d; t < n; t++ {
				if sets[l][t][t-d] {
					out[l-1][d]++
				}
			}
		}
	}
	return out
}

// PlotOptions are the knobs of Coverage.WritePNG and WriteSVG.
type PlotOptions struct {
	Title  string // drawn at the top; empty: "reachability coverage"
	Depths []int  // depths to draw (1..Layers); nil: SampleDepths(Layers, 10)
}

// SampleDepths returns at most k depths out of 1..L, evenly spaced and
// always including 1 and L (all of them when L <= k).
func SampleDepths(L, k int) []int {
	var out []int
	switch {
	case L <= k:
		for l := 1; l <= L; l++ {
			out = append(out, l)
		}
	case k <= 1:
		out = []int{L}
	default:
		for i := 0; i < k; i++ {
			l := 1 + int(math.Round(float64(i)*float64(L-1)/float64(k-1)))
			if len(out) == 0 || out[len(out)-1] != l {
				out = append(out, l)
			}
		}
	}
	return out
}

// Plot layout, in pixels.
const (
	plotW, plotH           = 960, 560
	plotLeft, plotRight    = 80, 780
	plotTop, plotBottom    = 60, 480
	plotLegendX, plotCurve = 800, 2
)

var plotColors = []color.RGBA{
	{0x1f, 0x77, 0xb4, 255}, {0xff, 0x7f, 0x0e, 255}, {0x2c, 0xa0, 0x2c, 255}, {0xd6, 0x27, 0x28, 255},
	{0x94, 0x67, 0xbd, 255}, {0x8c, 0x56, 0x4b, 255}, {0xe3, 0x77, 0xc2, 255}, {0x7f, 0x7f, 0x7f, 255},
	{0xbc, 0xbd, 0x22, 255}, {0x17, 0xbe, 0xcf, 255},
}

// plotPicture is the coverage plot in device-independent form: the same
// lines and texts are drawn by WritePNG and WriteSVG.
type plotPicture struct {
	lines []plotLine // axes, ticks, grid, legend swatches, curves
	texts []plotText
}

type plotLine struct {
	pts   [][2]float64
	col   color.RGBA
	width int
}

type plotText struct {
	x, y   int
	s      string
	anchor int // -1 left, 0 centre, 1 right
	col    color.RGBA
}

func (c *Coverage) plotPicture(opt PlotOptions) (*plotPicture, error) {
	depths := opt.Depths
	if depths == nil {
		depths = SampleDepths(c.Layers, len(plotColors))
	}
	for _, l := range depths {
		if l < 1 || l > c.Layers {
			return nil, fmt.Errorf("reach: plot depth %d outside [1, %d]", l, c.Layers)
		}
	}
	if len(depths) > len(plotColors) {
		return nil, fmt.Errorf("reach: at most %d depths per plot, got %d", len(plotColors), len(depths))
	}
	title := opt.Title
	if title == "" {
		title = "reachability coverage"
	}
	black, grid := color.RGBA{0, 0, 0, 255}, color.RGBA{0xdd, 0xdd, 0xdd, 255}
	pic := &plotPicture{}
	xmax := float64(max(c.MaxDistance, 1))
	px := func(d float64) float64 { return plotLeft + d/xmax*(plotRight-plotLeft) }
	py := func(v float64) float64 { return plotBottom - v*(plotBottom-plotTop) }
	line := func(col color.RGBA, width int, pts ...[2]float64) {
		pic.lines = append(pic.lines, plotLine{pts, col, width})
	}
	text := func(x, y int, anchor int, format string, args ...any) {
		pic.texts = append(pic.texts, plotText{x, y, fmt.Sprintf(format, args...), anchor, black})
	}
	for k := 0; k <= 5; k++ { // y: 0, 0.2, ..., 1
		v := float64(k) / 5
		y := py(v)
		line(grid, 1, [2]float64{plotLeft, y}, [2]float64{plotRight, y})
		line(black, 1, [2]float64{plotLeft - 5, y}, [2]float64{plotLeft, y})
		text(plotLeft-8, int(y)+4, 1, "%.1f", v)
	}
	step := plotTickStep(c.MaxDistance)
	for d := 0; d <= c.MaxDistance; d += step {
		x := px(float64(d))
		line(grid, 1, [2]float64{x, plotTop}, [2]float64{x, plotBottom})
		line(black, 1, [2]float64{x, plotBottom}, [2]float64{x, plotBottom + 5})
		text(int(x), plotBottom+20, 0, "%d", d)
	}
	line(black, 1, [2]float64{plotLeft, plotTop}, [2]float64{plotLeft, plotBottom}, [2]float64{plotRight, plotBottom})
	text((plotLeft+plotRight)/2, 30, 0, "%s", title)
	text((plotLeft+plotRight)/2, plotBottom+50, 0, "distance d = t - s (source s = t - d), seq %d", c.N)
	text(plotLeft-70, plotTop-14, -1, "fraction of targets t >= d with t-d in R_l(t)")
	text(plotLegendX, plotTop+4, -1, "depth (layers) l")
	// Deepest first: coverage only grows with depth, so each shallower curve
	// lies on or under the deeper ones and stays visible where they part.
	for k := len(depths) - 1; k >= 0; k-- {
		l := depths[k]
		col := plotColors[k]
		var pts [][2]float64
		for _, p := range plotEnvelope(c.Marginal(l), plotRight-plotLeft) {
			pts = append(pts, [2]float64{px(p[0]), py(p[1])})
		}
		line(col, plotCurve, pts...)
	}
	for k, l := range depths {
		y := float64(plotTop + 24 + 20*k)
		line(plotColors[k], 3, [2]float64{plotLegendX, y - 4}, [2]float64{plotLegendX + 24, y - 4})
		pic.texts = append(pic.texts, plotText{plotLegendX + 32, int(y), fmt.Sprintf("l = %d", l), -1, black})
	}
	y := plotTop + 24 + 20*len(depths) + 10
	text(plotLegendX, y, -1, "equal curves overlap,")
	text(plotLegendX, y+16, -1, "shallowest on top")
	if len(c.FullLayers) > 0 {
		text(plotLegendX, y+40, -1, "full layers saturate")
		text(plotLegendX, y+56, -1, "reachability")
	}
	return pic, nil
}

// plotTickStep is a 1-2-5 step giving at most 10 ticks over [0, D].
func plotTickStep(D int) int {
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if D/(m*p) <= 10 {
				return m * p
			}
		}
	}
}

// plotEnvelope returns the points (d, y) of a curve for a plot width
// columns wide: every point when there are few, else per column the first,
// lowest, highest and last value in distance order, so that oscillating
// curves (dilation) keep their full swing.
func plotEnvelope(ys []float64, width int) [][2]float64 {
	if len(ys) <= 2*width {
		out := make([][2]float64, len(ys))
		for d, y := range ys {
			out[d] = [2]float64{float64(d), y}
		}
		return out
	}
	var out [][2]float64
	for lo := 0; lo < len(ys); {
		col := lo * width / len(ys)
		hi := lo
		for hi+1 < len(ys) && (hi+1)*width/len(ys) == col {
			hi++
		}
		mn, mx := lo, lo
		for d := lo; d <= hi; d++ {
			if ys[d] < ys[mn] {
				mn = d
			}
			if ys[d] > ys[mx] {
				mx = d
			}
		}
		picks := []int{lo, mn, mx, hi}
		slices.Sort(picks)
		for k, d := range picks {
			if k == 0 || d != picks[k-1] {
				out = append(out, [2]float64{float64(d), ys[d]})
			}
		}
		lo = hi + 1
	}
	return out
}

// WritePNG draws the marginal coverage against distance, one line per depth
// (see PlotOptions), with axes, ticks and a legend, as a PNG image.
func (c *Coverage) WritePNG(w io.Writer, opt PlotOptions) error {
	pic, err := c.plotPicture(opt)
	if err != nil {
		return err
	}
	img := image.NewRGBA(image.Rect(0, 0, plotW, plotH))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.RGBA{255, 255, 255, 255}), image.Point{}, draw.Src)
	for _, l := range pic.lines {
		for k := 1; k < len(l.pts); k++ {
			plotSegment(img, l.pts[k-1], l.pts[k], l.col, l.width)
		}
		if len(l.pts) == 1 {
			plotSegment(img, l.pts[0], l.pts[0], l.col, l.width)
		}
	}
	face := basicfont.Face7x13
	for _, t := range pic.texts {
		x := t.x
		switch t.anchor {
		case 0:
			x -= 7 * len(t.s) / 2
		case 1:
			x -= 7 * len(t.s)
		}
		d := font.Drawer{Dst: img, Src: image.NewUniform(t.col), Face: face, Dot: fixed.P(x, t.y)}
		d.DrawString(t.s)
	}
	return png.Encode(w, img)
}

// plotSegment draws a line of the given width from a to b.
func plotSegment(img *image.RGBA, a, b [2]float64, col color.RGBA, width int) {
	dx, dy := b[0]-a[0], b[1]-a[1]
	n := int(math.Ceil(math.Max(math.Abs(dx), math.Abs(dy)))) + 1
	for k := 0; k <= n; k++ {
		f := float64(k) / float64(n)
		x := int(math.Round(a[0] + f*dx - float64(width-1)/2))
		y := int(math.Round(a[1] + f*dy - float64(width-1)/2))
		for i := 0; i < width; i++ {
			for j := 0; j < width; j++ {
				img.SetRGBA(x+i, y+j, col)
			}
		}
	}
}

// WriteSVG draws the same picture as WritePNG as SVG.
func (c *Coverage) WriteSVG(w io.Writer, opt PlotOptions) error {
	pic, err := c.plotPicture(opt)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(bw, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", plotW, plotH)
	for _, l := range pic.lines {
		bw.WriteString(`<polyline fill="none" stroke-linejoin="round" points="`)
		for k, p := range l.pts {
			if k > 0 {
				bw.WriteByte(' ')
			}
			bw.WriteString(strconv.FormatFloat(p[0], 'f', 1, 64))
			bw.WriteByte(',')
			bw.WriteString(strconv.FormatFloat(p[1], 'f', 1, 64))
		}
		fmt.Fprintf(bw, "\" stroke=\"#%02x%02x%02x\" stroke-width=\"%d\"/>\n", l.col.R, l.col.G, l.col.B, l.width)
	}
	anchors := map[int]string{-1: "start", 0: "middle", 1: "end"}
	for _, t := range pic.texts {
		fmt.Fprintf(bw, "<text x=\"%d\" y=\"%d\" font-family=\"monospace\" font-size=\"12\" text-anchor=\"%s\" fill=\"#%02x%02x%02x\">",
			t.x, t.y, anchors[t.anchor], t.col.R, t.col.G, t.col.B)
		xml.EscapeText(bw, []byte(t.s))
		bw.WriteString("</text>\n")
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
}
