package spectest

import (
	"math/rand/v2"

	"github.com/attngen/attngen/spec"
)

// Primitive returns a random primitive (never document or tree) with parameters
// scaled to sequences of about n positions.
func Primitive(r *rand.Rand, n int) *spec.Mask {
	for {
		op := spec.Op(r.IntN(int(spec.NumOps)))
		if !op.Combinator() && op != spec.OpDocument && op != spec.OpTree {
			return Of(r, op, n)
		}
	}
}

// Of returns a random mask of one primitive op (document included) with
// parameters scaled to sequences of about n positions. It panics for an op
// it does not know, so a primitive added to spec without a generator here
// fails the tests that draw random masks.
func Of(r *rand.Rand, op spec.Op, n int) *spec.Mask {
	n = max(n, 2)
	switch op {
	case spec.OpFull:
		return spec.Full()
	case spec.OpDocument:
		return spec.Document()
	case spec.OpTree:
		return spec.Tree()
	case spec.OpWindow:
		if r.IntN(3) == 0 {
			return spec.WindowLR(r.IntN(n/2+1), r.IntN(n/2+1))
		}
		return spec.Window(1 + r.IntN(n/2+1))
	case spec.OpBlock:
		b, o := 1+r.IntN(n/2+1), 0
		if r.IntN(2) == 0 {
			o = r.IntN(2*b + 1)
		}
		return spec.BlockAt(b, o)
	case spec.OpBridge:
		b := 1 + r.IntN(n/2+1)
		md := 0
		if r.IntN(3) == 0 {
			md = 1 + r.IntN(2*b)
		}
		return spec.Bridge(b, 1+r.IntN(b), 1+r.IntN(b), md)
	case spec.OpDilated:
		size := 0
		if r.IntN(2) == 0 {
			size = 1 + r.IntN(6)
		}
		stride := 1 + r.IntN(8)
		if r.IntN(4) == 0 {
			stride = 1 + r.IntN(n) // at least a key tile now and then: the identity layout
		}
		return spec.Dilated(stride, size)
	case spec.OpGlobal:
		return spec.Global(1 + r.IntN(n/4+1))
	case spec.OpQueries, spec.OpKeys:
		from, below, stride, phase := 0, 0, 1, 0
		if r.IntN(2) == 0 {
			from = r.IntN(n)
		}
		if r.IntN(3) == 0 {
			stride = 2 + r.IntN(8)
			phase = r.IntN(stride)
		}
		if r.IntN(2) == 0 {
			// past the set's first position, so that the parser takes it
			first := from + ((phase-from)%stride+stride)%stride
			below = first + 1 + r.IntN(n)
		}
		return set(op, from, below, stride, phase)
	case spec.OpNeighborhood:
		// about n cells, now and then fewer (positions past the grid) or
		// one row or column
		w := 1 + r.IntN(8)
		if r.IntN(5) == 0 {
			w = 1 + r.IntN(n)
		}
		h := max(1, (n+r.IntN(n/2+1)-n/4)/w)
		return NeighborhoodIn(r, h, w)
	}
	panic("spectest: no random generator for mask op " + op.String())
}

// NeighborhoodIn returns a random neighborhood mask over an h x w grid:
// per axis a random causal flag, a kernel (odd unless causal) and a
// dilation with kernel*dilation within the extent.
func NeighborhoodIn(r *rand.Rand, h, w int) *spec.Mask {
	var k, d [2]int
	var c [2]bool
	for a, l := range [2]int{h, w} {
		c[a] = r.IntN(3) == 0
		k[a] = 1 + r.IntN(l)
		if !c[a] && k[a]%2 == 0 {
			k[a]--
		}
		d[a] = 1
		if r.IntN(2) == 0 {
			d[a] = 1 + r.IntN(l/k[a])
		}
	}
	return spec.Neighborhood(h, w, k[0], k[1], d[0], d[1], c[0], c[1])
}

// set is spec.QuerySet or spec.KeySet.
func set(op spec.Op, from, below, stride, phase int) *spec.Mask {
	if op == spec.OpQueries {
		return spec.QuerySet(from, below, stride, phase)
	}
	return spec.KeySet(from, below, stride, phase)
}

// Mask returns a random mask: a primitive, or a union, intersection or
// complement of random masks nested up to depth levels.
func Mask(r *rand.Rand, n, depth int) *spec.Mask {
	if depth <= 0 || r.IntN(3) == 0 {
		return Primitive(r, n)
	}
	if r.IntN(5) == 0 {
		return spec.Not(Mask(r, n, depth-1))
	}
	args := make([]*spec.Mask, 1+r.IntN(3))
	for k := range args {
		args[k] = Mask(r, n, depth-1)
	}
	if r.IntN(2) == 0 {
		return spec.Union(args...)
	}
	return spec.Intersect(args...)
}

// Pattern returns a random mask with a random causal flag.
func Pattern(r *rand.Rand, n, depth int) spec.Pattern {
	return spec.Pattern{Mask: Mask(r, n, depth), Causal: r.IntN(4) != 0}
}

// Parents returns a random parent array of n positions for a tree mask:
// a committed prefix of random length (a chain, each position the parent
// of the next), then tree nodes whose parents are drawn among earlier
// positions, most often the prefix's last position or a recent node (as in
// speculative-decoding trees), sometimes any earlier position, sometimes
// -1 (a new root).
func Parents(r *rand.Rand, n int) []int32 {
	p := make([]int32, n)
	prefix := r.IntN(n + 1)
	if r.IntN(4) == 0 {
		prefix = n - r.IntN(min(n, 8)+1)
	}
	for i := range p {
		switch k := r.IntN(10); {
		case i < prefix:
			p[i] = int32(i - 1)
		case k == 0:
			p[i] = -1
		case k <= 3 && prefix > 0:
			p[i] = int32(prefix - 1)
		case k <= 7 && i > prefix:
			p[i] = int32(prefix + r.IntN(i-prefix))
		default:
			p[i] = int32(r.IntN(i+1) - 1)
		}
	}
	return p
}
