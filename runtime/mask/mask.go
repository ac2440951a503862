package mask

// Class is the class of a tile of (query, key) pairs.
type Class int

const (
	Empty   Class = iota // no pair kept: never visited
	Partial              // some kept: keep words are applied
	Full                 // every pair kept: the mask is never evaluated
)

func (c Class) String() string {
	switch c {
	case Empty:
		return "empty"
	case Partial:
		return "partial"
	case Full:
		return "full"
	}
	return "Class(?)"
}

// Mask is a compiled mask on the positions of one segment (after the
// layout). Generated packages implement it with code lowered from the
// plan; attngen implements it by evaluating the plan's programs. d is nil
// unless UsesDocs.
type Mask interface {
	// Stride is 1 for the identity layout, or the residue stride:
	// positions are gathered by p mod Stride and each class is a segment.
	Stride() int
	// UsesDocs reports whether the mask needs run-time data: document
	// ids, or a parent array when it also has UsesTree (see UsesTree).
	UsesDocs() bool
	// Hull bounds the keys query positions [q0, q1] may keep: next is at
	// least x and at most the smallest kept key >= x; last is at least
	// every kept key. No kept key at or past x: next > last.
	Hull(q0, q1, x int, d *Docs) (next, last int)
	// Class classifies the tile [q0, q1] x [k0, k1] soundly: Empty and
	// Full only when true.
	Class(q0, q1, k0, k1 int, d *Docs) Class
	// Word returns the keep bits of query position i against keys k0 ..
	// k0+63 (bit c: key k0+c kept); keys at or past nk are not kept.
	Word(i, k0, nk int, d *Docs) uint64
}

// HeadParam describes a head parameter of a compiled mask: a run-time
// integer with one value per query head (Docs.Param reads the value of the
// head being computed), which must lie in [Min, Max].
type HeadParam struct {
	Name     string
	Min, Max int
}

// MaxHeadParams bounds the head parameters of one mask.
const MaxHeadParams = 8

// HeadParams returns the head parameters m reads, in the order of their
// index (Docs.Param(k) is the value of HeadParams(m)[k]): compiled masks
// of specs with head_params have a HeadParams method; nil for the others.
func HeadParams(m Mask) []HeadParam {
	if h, ok := m.(interface{ HeadParams() []HeadParam }); ok {
		return h.HeadParams()
	}
	return nil
}

// UsesTree reports whether m reads a parent array (a tree mask) rather
// than document ids: compiled masks of tree specs have a UsesTree method
// that says so; masks without one read document ids when UsesDocs.
func UsesTree(m Mask) bool {
	t, ok := m.(interface{ UsesTree() bool })
	return ok && t.UsesTree()
}

// Tile is one key tile a query tile visits.
type Tile struct {
	K     int // key tile index: keys [K*tileK, (K+1)*tileK)
	Class Class
}

// Visit appends, in increasing order, the key tiles of width tileK that
// query positions [q0, q1] of a segment with nk keys may keep, with their
// class; tiles the mask's Class calls Empty never appear. It jumps over
// key ranges the hull excludes, so its cost is proportional to the tiles
// it returns plus the jumps.
func Visit(m Mask, dst []Tile, q0, q1, nk, tileK int, d *Docs) []Tile {
	return VisitFrom(m, dst, q0, q1, 0, nk, tileK, d)
}

// VisitFrom is Visit over the nk keys at positions kb, kb+1, ...: tile K
// holds keys [kb + K*tileK, kb + (K+1)*tileK).
func VisitFrom(m Mask, dst []Tile, q0, q1, kb, nk, tileK int, d *Docs) []Tile {
	next, last := m.Hull(q0, q1, kb, d)
	last = min(last, kb+nk-1)
	for k := max(next, kb); k <= last; {
		kt := (k - kb) / tileK
		k0 := kb + kt*tileK
		k1 := min(k0+tileK, kb+nk) - 1
		if c := m.Class(q0, q1, k0, k1, d); c != Empty {
			dst = append(dst, Tile{kt, c})
		}
		k, _ = m.Hull(q0, q1, k0+tileK, d)
		k = max(k, k0+tileK)
	}
	return dst
}

// Refine computes the keep words of query positions q0 .. q0+len(words)-1
// against key tile kt (tileK <= 64 keys wide) of a segment with nk keys,
// into words (rows past q1 get 0), and returns the exact class of the
// tile: Empty when no word keeps a key, Full when every row keeps every key
// (within nk), else Partial.
func Refine(m Mask, words []uint64, q0, q1, kt, nk, tileK int, d *Docs) Class {
	return RefineFrom(m, words, q0, q1, 0, kt, nk, tileK, d)
}

// RefineFrom is Refine for key tile kt of the nk keys at positions kb,
// kb+1, ... (VisitFrom's tiles).
func RefineFrom(m Mask, words []uint64, q0, q1, kb, kt, nk, tileK int, d *Docs) Class {
	k0 := kb + kt*tileK
	nk += kb
	tail := TailBits(min(nk-k0, tileK))
	any, all := uint64(0), tail
	for r := range words {
		if q0+r > q1 {
			words[r] = 0
			continue
		}
		w := m.Word(q0+r, k0, nk, d) & tail
		words[r] = w
		any |= w
		all &= w
	}
	switch {
	case any == 0:
		return Empty
	case all == tail:
		return Full
	}
	return Partial
}

// TailBits keeps the first n keys of a tile.
func TailBits(n int) uint64 {
	if n >= 64 {
		return ^uint64(0)
	}
	if n <= 0 {
		return 0
	}
	return 1<<uint(n) - 1
}

// FloorDiv is floor(a / b) for b >= 1.
func FloorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// FloorMod is a mod b in [0, b) for b >= 1.
func FloorMod(a, b int) int {
	r := a % b
	if r < 0 {
		r += b
	}
	return r
}

// Int is 1 for true and 0 for false.
func Int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Lanes is the keep word with lanes lo .. hi set, clipped to [0, 63].
func Lanes(lo, hi int) uint64 {
	lo, hi = max(lo, 0), min(hi, 63)
	if lo > hi {
		return 0
	}
	return (^uint64(0) >> uint(63-(hi-lo))) << uint(lo)
}

// Every is the keep word with every lane congruent to a modulo step set
// (step >= 1).
func Every(a, step int) uint64 {
	a = FloorMod(a, step)
	if a >= 64 {
		return 0
	}
	w := uint64(1) << uint(a)
	for s := step; s < 64; s *= 2 {
		w |= w << uint(s)
	}
	return w
}

// Inf stands for an unbounded key position in compiled masks: above every
// position a call can have (Shape checks keep positions below 2^31 - 1).
// Compiled masks compare against it and never do arithmetic on it.
const Inf = 1<<31 - 1
