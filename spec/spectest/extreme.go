package spectest

import (
	"math/rand/v2"

	"github.com/attngen/attngen/spec"
)

// ExtremeValues are the integers Extreme draws parameters from: the
// smallest legal values, values around a key tile, around 2^29 (the PTX
// kernel's sequence bound), 2^30, and up to spec.MaxInt, the largest the
// parser accepts.
var ExtremeValues = []int{1, 2, 3, 63, 64, 65, 1<<29 - 1, 1 << 29, 1<<29 + 1, 1 << 30, spec.MaxInt - 2, spec.MaxInt - 1, spec.MaxInt}

// extreme draws from ExtremeValues, capped at hi (hi >= 1).
func extreme(r *rand.Rand, hi int) int {
	return min(ExtremeValues[r.IntN(len(ExtremeValues))], hi)
}

// Extreme returns a mask of one primitive op (document included) whose
// parameters are drawn from ExtremeValues (and 0 where the parser allows
// it), within the bounds the parser enforces: a window's left is at most
// spec.MaxInt-1, a bridge's targets and sources at most its block. It
// panics for an op it does not know.
func Extreme(r *rand.Rand, op spec.Op) *spec.Mask {
	orZero := func(hi int) int {
		if r.IntN(4) == 0 {
			return 0
		}
		return extreme(r, hi)
	}
	switch op {
	case spec.OpFull:
		return spec.Full()
	case spec.OpDocument:
		return spec.Document()
	case spec.OpTree:
		return spec.Tree()
	case spec.OpWindow:
		if r.IntN(3) == 0 {
			return spec.Window(extreme(r, spec.MaxInt))
		}
		return spec.WindowLR(orZero(spec.MaxInt-1), orZero(spec.MaxInt))
	case spec.OpBlock:
		return spec.BlockAt(extreme(r, spec.MaxInt), orZero(spec.MaxInt))
	case spec.OpBridge:
		b := extreme(r, spec.MaxInt)
		pick := func() int {
			if r.IntN(3) == 0 {
				return b
			}
			return extreme(r, b)
		}
		return spec.Bridge(b, pick(), pick(), orZero(spec.MaxInt))
	case spec.OpDilated:
		return spec.Dilated(extreme(r, spec.MaxInt), orZero(spec.MaxInt))
	case spec.OpGlobal:
		return spec.Global(extreme(r, spec.MaxInt))
	case spec.OpQueries, spec.OpKeys:
		for {
			from, below, stride, phase := orZero(spec.MaxInt), orZero(spec.MaxInt), 1, 0
			if r.IntN(2) == 0 {
				stride = extreme(r, spec.MaxInt)
				switch r.IntN(3) {
				case 1:
					phase = stride - 1
				case 2:
					phase = extreme(r, stride-1) % stride
				}
			}
			// the parser's rule: some position of the set lies below below
			if first := from + ((phase-from)%stride+stride)%stride; below == 0 || first < below {
				return set(op, from, below, stride, phase)
			}
		}
	case spec.OpNeighborhood:
		h := extreme(r, spec.MaxGrid)
		w := extreme(r, spec.MaxGrid/h)
		var k, d [2]int
		var c [2]bool
		for a, l := range [2]int{h, w} {
			c[a] = r.IntN(3) == 0
			k[a] = extreme(r, l)
			if !c[a] && k[a]%2 == 0 {
				k[a]--
			}
			d[a] = extreme(r, l/k[a])
		}
		if k[0] > 65 && k[1] > 1 {
			// Keys lists one progression per kernel row unless the window
			// is one column (or whole rows): keep those few
			k[0] = min(k[0], 65)
			if !c[0] && k[0]%2 == 0 {
				k[0]--
			}
		}
		return spec.Neighborhood(h, w, k[0], k[1], d[0], d[1], c[0], c[1])
	}
	panic("spectest: no extreme generator for mask op " + op.String())
}

// ExtremeMask returns a primitive of extreme parameters (never document or tree),
// or a union, intersection or complement of such masks nested up to depth
// levels.
func ExtremeMask(r *rand.Rand, depth int) *spec.Mask {
	if depth <= 0 || r.IntN(3) == 0 {
		for {
			op := spec.Op(r.IntN(int(spec.NumOps)))
			if !op.Combinator() && op != spec.OpDocument && op != spec.OpTree {
				return Extreme(r, op)
			}
		}
	}
	if r.IntN(5) == 0 {
		return spec.Not(ExtremeMask(r, depth-1))
	}
	args := make([]*spec.Mask, 1+r.IntN(3))
	for k := range args {
		args[k] = ExtremeMask(r, depth-1)
	}
	if r.IntN(2) == 0 {
		return spec.Union(args...)
	}
	return spec.Intersect(args...)
}
