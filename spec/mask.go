package spec

import (
	"fmt"
	"strings"

	"github.com/attngen/attngen/runtime/mask"
)

// Op names a node of the normalized mask tree. Shorthands (pbb, se_bridge,
// streaming, strided, prefix_lm, chunked, ...) never appear here: the
// parser lowers them.
type Op uint8

const (
	OpFull         Op = iota // true
	OpWindow                 // i-Left <= j <= i+Right
	OpBlock                  // floor((j-Offset)/Size) == floor((i-Offset)/Size)
	OpBridge                 // phi(i) < Targets, beta(i)-Sources <= j < beta(i), i-j <= MaxDistance if set
	OpDilated                // (i-j) mod Stride == 0, |i-j|/Stride <= Size-1 if Size set
	OpGlobal                 // j < Tokens
	OpDocument               // doc(i) == doc(j), ids given at run time
	OpQueries                // i in the set (Lo <= i < Below, i mod Stride == Phase): rows on one side
	OpKeys                   // j in the set (Lo <= j < Below, j mod Stride == Phase): keys on one side
	OpNeighborhood           // NATTEN over a Grid[0] x Grid[1] grid of tokens (i = row*Grid[1] + col)
	OpTree                   // j is i or an ancestor of i in a parent array given at run time
	OpUnion                  // OR of Args
	OpIntersect              // AND of Args
	OpNot                    // NOT of Args[0] (the causal flag stays ANDed outside)
	numOps
)

// NumOps is the number of mask ops: every op below it must be parsed,
// printed, classified and lowered by gen (tests loop up to it).
const NumOps = numOps

// Combinator reports whether the op combines other masks (its Args).
func (o Op) Combinator() bool { return o == OpUnion || o == OpIntersect || o == OpNot }

var opNames = [...]string{"full", "window", "block", "bridge", "dilated", "global", "document", "queries", "keys", "neighborhood", "tree", "union", "intersect", "not"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Mask is one node of a normalized mask. Only the fields of its Op are
// meaningful; the others are zero.
type Mask struct {
	Op Op

	Left, Right int // window: keys i-Left .. i+Right (a causal window of size W is Left=W-1, Right=0)
	Size        int // block: block size; dilated: number of taps (0 = unbounded)
	Offset      int // block: blocks start at Offset + k*Size (as written; only Offset mod Size matters)
	Block       int // bridge: block size b
	Targets     int // bridge: first Targets phases of each block receive bridge edges
	Sources     int // bridge: from the last Sources positions of the previous block
	MaxDistance int // bridge: i-j <= MaxDistance (0 = unset)
	Stride      int // dilated; queries, keys: the set's step (>= 1)
	Tokens      int // global: j < Tokens
	Lo          int // queries, keys: first position of the set
	Below       int // queries, keys: positions of the set are below it (0 = unbounded)
	Phase       int // queries, keys: positions p of the set have p mod Stride == Phase, 0 <= Phase < Stride

	// LeftRef, RightRef and TokensRef are set when Left, Right or Tokens
	// is a head parameter (params.go): the field then holds the value at
	// the parameter's Max, and Pattern.Bind gives each head's.
	LeftRef, RightRef, TokensRef Ref

	// neighborhood, per axis (0: rows, 1: columns): the grid's extent,
	// the kernel (neighbours along the axis), the dilation, and whether
	// the axis is causal.
	Grid, Kernel, Dilation [2]int
	AxisCausal             [2]bool

	Args []*Mask // union, intersect: the operands; not: the one operand

	// Pos is where the node (or the shorthand it was lowered from) was written.
	Pos Pos
	// From names the shorthand this node was lowered from ("pbb", ...), or "".
	From string
}

// Full, Window, ... construct normalized nodes; they are convenient in tests
// and in code that builds masks without a spec file.
func Full() *Mask                    { return &Mask{Op: OpFull} }
func Window(size int) *Mask          { return &Mask{Op: OpWindow, Left: size - 1} }
func WindowLR(left, right int) *Mask { return &Mask{Op: OpWindow, Left: left, Right: right} }
func Block(size int) *Mask           { return &Mask{Op: OpBlock, Size: size} }

// BlockAt is a block mask whose blocks start at offset + k*size.
func BlockAt(size, offset int) *Mask { return &Mask{Op: OpBlock, Size: size, Offset: offset} }

func Bridge(block, targets, sources, maxDistance int) *Mask {
	return &Mask{Op: OpBridge, Block: block, Targets: targets, Sources: sources, MaxDistance: maxDistance}
}
func Dilated(stride, size int) *Mask { return &Mask{Op: OpDilated, Stride: stride, Size: size} }
func Global(tokens int) *Mask        { return &Mask{Op: OpGlobal, Tokens: tokens} }
func Document() *Mask                { return &Mask{Op: OpDocument} }
func Tree() *Mask                    { return &Mask{Op: OpTree} }
func Union(args ...*Mask) *Mask      { return &Mask{Op: OpUnion, Args: args} }
func Intersect(args ...*Mask) *Mask  { return &Mask{Op: OpIntersect, Args: args} }
func Not(arg *Mask) *Mask            { return &Mask{Op: OpNot, Args: []*Mask{arg}} }

// Neighborhood is NATTEN's neighbourhood attention over an h x w grid of
// tokens (token i = row*w + col): kernel kh x kw, dilation dh x dw, causal
// per axis (see natten.go for the meaning).
func Neighborhood(h, w, kh, kw, dh, dw int, causalH, causalW bool) *Mask {
	return &Mask{Op: OpNeighborhood, Grid: [2]int{h, w}, Kernel: [2]int{kh, kw}, Dilation: [2]int{dh, dw}, AxisCausal: [2]bool{causalH, causalW}}
}

// QuerySet and KeySet are the one-sided masks: the rows (queries) or the
// keys p with from <= p < below (below 0: no bound) and p mod stride ==
// phase (stride below 1 is 1).
func QuerySet(from, below, stride, phase int) *Mask {
	return set(OpQueries, from, below, stride, phase)
}
func KeySet(from, below, stride, phase int) *Mask { return set(OpKeys, from, below, stride, phase) }

func set(op Op, from, below, stride, phase int) *Mask {
	return &Mask{Op: op, Lo: from, Below: below, Stride: max(stride, 1), Phase: phase}
}

// inSet reports whether position x is in the set of a queries or keys node.
func (m *Mask) inSet(x int) bool {
	return x >= m.Lo && (m.Below == 0 || x < m.Below) && mod(x-m.Phase, m.Stride) == 0
}

// String renders the mask as one line of flow YAML that the parser reads back
// to the same tree (shorthands appear expanded).
func (m *Mask) String() string {
	var b strings.Builder
	m.write(&b)
	return b.String()
}

func (m *Mask) write(b *strings.Builder) {
	switch m.Op {
	case OpFull:
		b.WriteString("{full: {}}")
	case OpWindow:
		switch {
		case m.Right == 0 && !m.RightRef.Set() && m.LeftRef.Set() && m.LeftRef.Add == -1:
			fmt.Fprintf(b, "{window: {size: %s}}", m.LeftRef.Name)
		case m.Right == 0 && !m.RightRef.Set() && !m.LeftRef.Set():
			fmt.Fprintf(b, "{window: {size: %d}}", m.Left+1)
		default:
			// a size parameter (Add -1) always has a constant right of 0
			fmt.Fprintf(b, "{window: {left: %s, right: %s}}", field(m.Left, m.LeftRef), field(m.Right, m.RightRef))
		}
	case OpBlock:
		if m.Offset != 0 {
			fmt.Fprintf(b, "{block: {size: %d, offset: %d}}", m.Size, m.Offset)
		} else {
			fmt.Fprintf(b, "{block: {size: %d}}", m.Size)
		}
	case OpBridge:
		fmt.Fprintf(b, "{bridge: {block: %d, targets: %d, sources: %d", m.Block, m.Targets, m.Sources)
		if m.MaxDistance > 0 {
			fmt.Fprintf(b, ", max_distance: %d", m.MaxDistance)
		}
		b.WriteString("}}")
	case OpDilated:
		fmt.Fprintf(b, "{dilated: {stride: %d", m.Stride)
		if m.Size > 0 {
			fmt.Fprintf(b, ", size: %d", m.Size)
		}
		b.WriteString("}}")
	case OpGlobal:
		fmt.Fprintf(b, "{global: {tokens: %s}}", field(m.Tokens, m.TokensRef))
	case OpDocument:
		b.WriteString("{document: {}}")
	case OpTree:
		b.WriteString("{tree: {}}")
	case OpQueries, OpKeys:
		fmt.Fprintf(b, "{%s: {", m.Op)
		sep := ""
		field := func(name string, v int) {
			fmt.Fprintf(b, "%s%s: %d", sep, name, v)
			sep = ", "
		}
		if m.Lo != 0 {
			field("from", m.Lo)
		}
		if m.Below != 0 {
			field("below", m.Below)
		}
		if m.Stride > 1 {
			field("stride", m.Stride)
			if m.Phase != 0 {
				field("phase", m.Phase)
			}
		}
		b.WriteString("}}")
	case OpNeighborhood:
		fmt.Fprintf(b, "{neighborhood: {grid: [%d, %d], kernel: [%d, %d]", m.Grid[0], m.Grid[1], m.Kernel[0], m.Kernel[1])
		if m.Dilation != [2]int{1, 1} {
			fmt.Fprintf(b, ", dilation: [%d, %d]", m.Dilation[0], m.Dilation[1])
		}
		if m.AxisCausal != [2]bool{} {
			fmt.Fprintf(b, ", causal: [%v, %v]", m.AxisCausal[0], m.AxisCausal[1])
		}
		b.WriteString("}}")
	case OpNot:
		b.WriteString("{not: ")
		m.Args[0].write(b)
		b.WriteString("}")
	case OpUnion, OpIntersect:
		fmt.Fprintf(b, "{%s: [", m.Op)
		for k, a := range m.Args {
			if k > 0 {
				b.WriteString(", ")
			}
			a.write(b)
		}
		b.WriteString("]}")
	default:
		panic("BUG: unknown op " + m.Op.String())
	}
}

// Equal reports whether two masks are the same tree (positions ignored).
func (m *Mask) Equal(o *Mask) bool {
	if m.Op != o.Op || m.Left != o.Left || m.Right != o.Right || m.Size != o.Size ||
		m.Block != o.Block || m.Targets != o.Targets || m.Sources != o.Sources ||
		m.MaxDistance != o.MaxDistance || m.Stride != o.Stride || m.Tokens != o.Tokens ||
		m.Lo != o.Lo || m.Below != o.Below || m.Phase != o.Phase || m.Offset != o.Offset ||
		m.Grid != o.Grid || m.Kernel != o.Kernel || m.Dilation != o.Dilation || m.AxisCausal != o.AxisCausal ||
		m.LeftRef != o.LeftRef || m.RightRef != o.RightRef || m.TokensRef != o.TokensRef ||
		len(m.Args) != len(o.Args) {
		return false
	}
	for k := range m.Args {
		if !m.Args[k].Equal(o.Args[k]) {
			return false
		}
	}
	return true
}

// Primitives counts the primitives of m: its leaves, shorthands expanded.
func (m *Mask) Primitives() int {
	if len(m.Args) == 0 {
		return 1
	}
	n := 0
	for _, a := range m.Args {
		n += a.Primitives()
	}
	return n
}

// HasDocument reports whether the mask mentions document anywhere.
func (m *Mask) HasDocument() bool {
	if m.Op == OpDocument {
		return true
	}
	for _, a := range m.Args {
		if a.HasDocument() {
			return true
		}
	}
	return false
}

// HasTree reports whether the mask mentions tree anywhere.
func (m *Mask) HasTree() bool {
	if m.Op == OpTree {
		return true
	}
	for _, a := range m.Args {
		if a.HasTree() {
			return true
		}
	}
	return false
}

// HasData reports whether the mask reads data given at run time (document
// ids or a parent array).
func (m *Mask) HasData() bool { return m.HasDocument() || m.HasTree() }

// Period returns the smallest p such that the mask is invariant under
// shifting both positions by p (M(i+p, j+p) == M(i, j) for all i, j >= 0),
// as far as the structure shows it. ok is false when the mask is not
// periodic (global tokens, documents).
func (m *Mask) Period() (p int, ok bool) {
	switch m.Op {
	case OpFull, OpWindow, OpDilated:
		return 1, true
	case OpBlock:
		return m.Size, true
	case OpBridge:
		return m.Block, true
	case OpGlobal, OpDocument, OpNeighborhood, OpTree:
		return 0, false
	case OpQueries, OpKeys:
		// a bound breaks the shift invariance; the residue alone keeps it
		if m.Lo != 0 || m.Below != 0 {
			return 0, false
		}
		return m.Stride, true
	case OpUnion, OpIntersect, OpNot:
		p = 1
		for _, a := range m.Args {
			q, ok := a.Period()
			if !ok {
				return 0, false
			}
			p = lcm(p, q)
		}
		return p, true
	}
	panic("BUG: unknown op " + m.Op.String())
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }

// floorDiv and mod are floored (mod is never negative); b >= 1.
func floorDiv(a, b int) int { return mask.FloorDiv(a, b) }

func mod(a, b int) int { return mask.FloorMod(a, b) }

func ceilDiv(a, b int) int { return -floorDiv(-a, b) }

// eval evaluates the node at (i, j); positions may be document-local.
// causal is ANDed into every leaf (AND distributes over both combinators).
// t is the parent array of a tree mask, or nil: a tree without one is a
// single chain (every position is the parent of the next).
func (m *Mask) eval(i, j int, causal bool, sameDoc bool, t *Docs) bool {
	if causal && j > i {
		return false
	}
	switch m.Op {
	case OpFull:
		return true
	case OpWindow:
		return i-m.Left <= j && j <= i+m.Right
	case OpBlock:
		return floorDiv(i-m.Offset, m.Size) == floorDiv(j-m.Offset, m.Size)
	case OpBridge:
		beta := floorDiv(i, m.Block) * m.Block
		if i-beta >= m.Targets || j >= beta || j < beta-m.Sources {
			return false
		}
		return m.MaxDistance == 0 || i-j <= m.MaxDistance
	case OpDilated:
		d := i - j
		if d < 0 {
			d = -d
		}
		if d%m.Stride != 0 {
			return false
		}
		return m.Size == 0 || d/m.Stride <= m.Size-1
	case OpGlobal:
		return j < m.Tokens
	case OpDocument:
		return sameDoc
	case OpQueries:
		return m.inSet(i)
	case OpKeys:
		return m.inSet(j)
	case OpNeighborhood:
		return m.neighbors(i, j)
	case OpTree:
		if t == nil {
			return 0 <= j && j <= i
		}
		return t.TreeAnc(i, j)
	case OpNot:
		// causal is ANDed above and inside alike: for j <= i the operand
		// answers its own predicate, so this is causal AND NOT operand
		return !m.Args[0].eval(i, j, causal, sameDoc, t)
	case OpUnion:
		for _, a := range m.Args {
			if a.eval(i, j, causal, sameDoc, t) {
				return true
			}
		}
		return false
	case OpIntersect:
		for _, a := range m.Args {
			if !a.eval(i, j, causal, sameDoc, t) {
				return false
			}
		}
		return true
	}
	panic("BUG: unknown op " + m.Op.String())
}
