// Package spec owns the meaning of a mask: the YAML spec language, its
// validation, the normalized mask tree, exact evaluation and tile
// classification. It knows nothing of any target's tile sizes, registers,
// PTX or avo.
//
// # Spec files
//
// Parse and ParseFile read the spec format of docs/language.md (name, mask,
// causal, head_dim, schedule, masks). The problems of a file are reported
// at once as an ErrorList of file:line:col: message entries naming the
// field: the first MaxErrors in file order, then one entry counting the
// rest. ParseFile refuses files larger than MaxFileSize (1 MiB) without
// reading past that.
// Shorthands (pbb, se_bridge, streaming, strided, prefix_lm, chunked,
// longformer, bigbird) are lowered to unions and intersections of primitives while
// parsing, so a Mask never holds one; so are the forms of global beyond
// tokens (positions, ranges, stride, rows: keys and queries sets) and
// dilated with a phase (a keys set). Specs are bounded:
// integers at most MaxInt (positions are 32-bit in kernels), nesting at most
// MaxDepth, a mask at most MaxPrimitives primitives once shorthands are
// expanded (Mask.Primitives counts them; a bigbird window too large is
// refused before its blocks are built), and YAML aliases are refused, so
// no input can exhaust time, memory or stack.
//
// Choices the contract leaves open, fixed here:
//   - window {size: W} is the causal window j in [i-W+1, i] whatever the
//     causal flag; window {left, right} is j in [i-left, i+right].
//   - dilated without causal is symmetric: |i-j| mod stride == 0 and, with
//     size, |i-j|/stride <= size-1.
//   - document may only be the whole mask or an operand of the top-level
//     intersect, so every kept pair lies in one document and
//     document-local positions are well defined. Document ids are
//     non-decreasing (one run per document). At and Classify treat the
//     sequence as one document; AtDocs and ClassifyDocs take the ids.
//   - tree keeps key j for query i when j is i or an ancestor of i in a
//     parent array given at run time (NewTree: each parent before its
//     child, -1 for a root). It combines with anything at absolute
//     positions but not with document in one spec. At and Classify treat
//     a tree as one chain (causal attention); AtDocs and ClassifyDocs, or
//     a Pattern whose Data is set, take the parent array.
//   - head_params declares run-time integers with one value per query head
//     (params.go: HeadParam, Ref); window's size, left and right, global's
//     tokens and streaming's sinks and window may name one instead of a
//     constant. Query head h computes the mask with its own values
//     (Pattern.Bind); an unbound pattern (At, Keys, Classify) evaluates
//     every such field at its parameter's Max.
//   - head_dim defaults to 128 and may be 1 to MaxHeadDim here, one size
//     or {qk: D1, v: D2} (HeadDim, HeadDimV); the
//     targets a package is generated for say which sizes they run, and
//     their errors point at the head_dim line (HeadDimPos).
//   - causal defaults to true.
//   - neighborhood is NATTEN's rule (natten.go); tokens at or past H*W are
//     outside the grid and keep nothing. Unless it is causal along both
//     axes, a spec holding it must write causal out (false: NATTEN; true:
//     cut at the flattened diagonal).
//
// # Evaluation and classification
//
// A Pattern is a mask plus its causal flag. At(i, j) evaluates it exactly on
// absolute positions (Row maps a query row to its bottom-right aligned
// position). Keys lists the keys of one row as arithmetic progressions, for
// counting and reachability without an S x S matrix.
//
// Classify(q0, q1, k0, k1) returns Empty, Partial or FullT for a tile by
// interval arithmetic, in time independent of the tile's size. Each
// primitive, with the causal flag folded in, is classified exactly: full,
// window and dilated through the interval of distances i-j the tile covers
// (every distance in [q0-k1, q1-k0] occurs in a rectangle), global through
// its key bound, block and bridge through the range of blocks both sides of
// the tile touch, checking only the first and last of them (the blocks in
// between are always non-empty), queries and keys through the first and
// last position of their set inside the tile's rows or columns, neighborhood
// through the at most three rectangles of grid cells each side of the tile
// covers and, per axis, the distances each zone of queries (window at the
// start, centred, at the end) keeps (capped by the causal class, soundly,
// when the causal flag cuts a neighborhood that is not causal along both
// axes: ExactClass). Combinators are sound but can be
// conservative: a union is Full when an operand is, and an intersection is
// Empty when an operand is, so a union of partial operands that together
// cover the tile (block with its bridge at a block boundary, window with a
// dilated pattern) or an intersection of partial operands that never meet
// (block with bridge, two windows that miss each other) is reported
// Partial. The property tests measure how often that happens on random
// nested masks (well under 1% of random tiles).
//
// This package is the meaning and the independent oracle; it is not what
// kernels run. gen lowers the same definitions into the plan's programs
// (its lowering table is the other place a primitive is written), and
// tests hold the two equal pair by pair. Class and Docs are runtime/mask's
// types, shared so that every layer reads the same values. A new
// primitive is added here (tree, parser, At, Keys, Classify, String) and in
// gen's lowering table; NumOps ends the op list and tests loop up to it.
package spec
