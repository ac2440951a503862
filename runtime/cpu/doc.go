// Package cpu is attngen's CPU attention runtime, which every generated
// package imports (with runtime/mask): the driver (ForwardArgs and the
// functions that call it: shapes, workspace, goroutines, the tile walk of
// the plan), the per-tile microkernels (AVX-512 and AVX2 Go assembly
// written by emit/avo, arm64 NEON assembly written by emit/neon, and a
// pure-Go path computing the same function),
// the exp2 they share, the variants as values (Targets, each with one
// table of its kernels, kernels.go) and the FMA-peak and read-bandwidth
// probes benchmarks measure beside the kernels. It imports only the standard library, x/sys and
// runtime/mask. A generated package contributes only its compiled mask (a
// mask.Mask written from the plan); attngen's own verify and bench
// commands run this package with the plan evaluated directly, and tests
// hold the two masks equal, so what is tested here is what users run.
//
// # Entry points
//
// ForwardArgs is the general entry point: an Args holds q, k and v as
// float32 (Elem F32) or as bf16 or f16 bits (Q16, K16, V16), the output as
// float32 (Out) or, for 16-bit inputs, in their format (Out16), the
// optional float32 lse, document ids or a tree's parent array (Tree), the
// values of the mask's head parameters (HeadParams), a Paged cache
// description (the zero value: contiguous), the Shape, the strides of each
// tensor (Layout; layout.go), ragged rows and positions (SeqLensQ,
// SeqLensK, QPos, KPos) and the head dimension of v (HeadDimV), so every
// combination is one call. validate.go checks it all before anything is
// written; a call with per-row lengths or positions runs each batch row as
// the call of that row alone (its bits are that call's), the rows' items
// dispatched to the workers together (rowCall).
// Forward, ForwardPaged and Forward16 fill an Args and call it. It checks
// the Args before it touches anything: slices of the other element type,
// both outputs or an unknown Elem wrap ErrShape; no output or a short one
// ErrShort; document ids given to a mask without documents ErrDocument;
// a parent array given to a mask without a tree, of a wrong length or with
// a parent not before its child ErrTree; head parameter values missing,
// neither HeadsQ nor 1 long, outside their range, or given to a mask without head
// parameters ErrHeadParam;
// an output (Out or Out16, or lse) overlapping an input, the document ids,
// the page table or the other output ErrAlias. Inputs are widened and
// pages gathered as tiles are packed (below), whatever their type, so a
// 16-bit paged cache takes the same paths as a float32 one.
//
// # Head parameters
//
// A mask may read head parameters (mask.HeadParams: window sizes or sink
// counts that differ between query heads, one value per head). Query head
// h then computes the mask with the values at h: the call copies the
// values and hands the mask, for each (document row, query head), a
// mask.Docs view (SetHead) with that row's data and that head's values,
// so the tile walk (mask.Visit, mask.Columns) is per document row and
// query head instead of per document row. The key tiles a kv head packs
// are shared by its query heads through one slot map per (document row,
// kv head), numbering the union of the tiles its query heads visit. A job
// holds the rows of several query heads only when they have the same
// values (they keep the same pairs); the others run a job each. The
// backward walks each head's own schedule and sums the heads' dK and dV
// in a fixed order (head by head), so results still do not depend on the
// thread count. Forward, Forward16, ForwardPaged and Backward take no
// values: a mask with head parameters goes through ForwardArgs and
// BackwardHeads.
//
// # Score stage
//
// A compiled mask may declare a score stage (mask.ScoreOf: a spec's score
// section): soft-capping, ALiBi and learned sinks. The call's values
// (Args.SoftCap, Slopes, Sinks; BackArgs likewise) are checked against it
// before anything is written (ErrScore) and held in the kernels' log2
// units. Soft-capping and ALiBi rewrite scores inside the kernels (the
// score kernels below: the driver fills a scoreTile with each row's head
// slope and absolute position and each key column's position, per tile);
// a learned sink joins a row's softmax when the row is finished: with M =
// max(m, sink), out = o 2^(m-M) / (l 2^(m-M) + 2^(sink-M)) and lse = (M +
// log2 of that sum) ln 2, so a row that keeps no key gets out 0 and lse =
// the sink. The stage never changes the schedule. The backward recomputes
// P through the same stage (scoreBwd), multiplies dS by the soft-cap's
// derivative, and writes dsink[h] = -sum over head h's rows of p_sink *
// delta when BackArgs.DSinks is given (rows that keep no key have delta 0).
//
// # Backward
//
// Backward computes dq, dk and dv from dout, q, k, v and the forward's out
// and lse (FlashAttention-2 style: delta = rowsum(dout*out); per key tile,
// over the query tiles of mask.Columns, the forward schedule transposed, P
// = exp(S - lse) is recomputed for dV and dK; dQ gathers dS K). It
// validates its arguments like Forward, and BackwardArgs takes the
// forward's shapes (BackArgs): HeadDimV, strides (every tensor read and
// written in place through them, so any layout gives the contiguous
// call's bits), and per-row lengths and positions (each batch row runs as
// the backward call of that row alone, one after the other; gradient rows
// past a row's lengths are 0 and nothing there is read; the schedule is
// mask.VisitFrom's at the rows' absolute positions, transposed). The AVX512 variant (and Auto where
// it is the best) runs each (query tile, key tile) pair as five products
// by one strided AVX-512 matrix kernel (gemmAVX512: S = Q K^T, dP = dO V^T,
// dV += P^T dO, dK += dS^T Q, dQ += dS K, with K and V transposed into
// [D][TK] tiles by transposeTileAVX512) and one
// elementwise kernel (bwdProbAVX512: P = exp2(c S - lse log2 e) and dS = P
// (dP - delta) scale, the keep words as opmasks, masked lanes exactly 0),
// all written by emit/avo; a head size that is not a multiple of 64 (any
// multiple of 8 up to 256 runs tiled) goes through rows padded with zeros
// in the worker's buffers. The AVX2 variant runs the same schedule with
// its own two kernels (gemmAVX2, 3 rows x 4 ymm register blocks in 16
// registers; bwdProbAVX2, the keep words tested against bit patterns and
// ANDed into P and dS, so masked lanes are exactly 0 there too;
// transposeTileAVX2). The NEON variant (arm64) runs it with gemmNEON (6
// rows x 4 vectors, A broadcast by LD1R) and bwdProbNEON (lane masks by
// CMTST, ANDed in). With at
// least as many (batch, kv head, segment) items as
// threads it is one pass per item, the key tiles in order, dQ added as it
// goes; otherwise a first pass per key tile (dK, dV) and a second per
// query tile (dQ, recomputing S and dP); both add every dQ row's terms in
// key tile order, so they give the same bits and the result does not
// depend on the thread count. dQ multiplies dS by the key rows themselves,
// so key rows holding a NaN or an infinity go through a copy with those
// elements 0 and the rows that keep them get the left-out terms in Go,
// as the forward does for value rows; likewise dV and dK multiply P and
// dS by the rows of dout and q, so the rows of q or dout holding one
// (found in one scan per call) go, in the tiles where they mask a key,
// through a copy with those elements 0, and the keys they keep get the
// left-out terms in Go. PureGo (and builds without assembly, or a CPU
// without the variant's instructions) runs a pure-Go per-pair backward:
// Go dot products and math.Exp for every kept pair.
//
// # The microkernel ABI
//
// One call processes one query tile against one key tile, updating the
// online-softmax state of the tile's rows. Tiles are TQ = 48 query rows by
// TK = 64 keys; D is the kernel's head dimension of q and k and DV that of
// v and the output (each variant's table, kernels_dims_*.go, lists its
// pairs: 32, 64, 80, 96, 128, 192, 256 and 192/128; a call of other
// sizes runs the smallest pair that holds them on zero-padded tiles, or
// tileGo, which runs any multiple of 4). All buffers are float32,
// row-major, contiguous, 64-byte aligned:
//
//	q    [TQ][D]   query rows; unused rows are zero
//	kt   [D][TK]   the key tile transposed and multiplied by scale*log2(e)
//	               (kt[d][c] = scale*log2(e)*key c, dim d); unused columns zero
//	v    [TK][DV]  value rows; unused rows zero
//	s    [TQ][TK]  scratch for scores and probabilities
//	o    [TQ][DV]  running unnormalized output
//	m    [TQ]      running maximum score in log2 units (starts at -Inf)
//	l    [TQ]      running sum of 2^(score - m) (starts at 0)
//	mask [TQ]uint64, or nil: bit c of mask[r] is set when row r keeps key c.
//	               nil means every pair of the tile is kept (a full tile).
//
// For each row r: scores s_c = q_r . kt[:,c]; masked scores are -Inf;
// mnew = max(m_r, max_c s_c). A row that keeps no key of the tile is left
// untouched. Otherwise, with ms = mnew, or 0 when mnew is -Inf (every kept
// score -Inf or NaN, no state yet; m stays -Inf): alpha = 2^(m_r - mnew)
// (1 when they are equal or mnew is -Inf, 0 when m_r is -Inf), p_c =
// 2^(s_c - ms) (0 when masked, NaN for a NaN score), l_r = alpha*l_r +
// sum_c p_c, o_r = alpha*o_r + sum_c p_c * v_c, m_r = mnew. exp2 flushes
// results below 2^-126 to 0 and keeps NaN, so a kept NaN score or a kept
// +Inf score (Inf - Inf) makes the row NaN. The driver finishes a row with
// out = o/l and lse = (m + log2 l) * ln 2, or 0 and -Inf when l = 0; a
// 16-bit output gets each float32 o/l rounded to the inputs' format (to
// nearest, ties to even, in Go), so it is bit for bit the float32 output
// rounded.
//
// The score kernels (tileScore, decodeScore: emit/avo's tileScoreAVX512D64,
// decodeScoreAVX2F32D128R4 and the like, emit/neon's tileScoreNEOND64,
// decodeScoreNEONF16D64R2 and the like, and tileScoreGo) take one more
// argument, a *scoreTile (score.go, whose field offsets are part of the
// ABI), and rewrite each score s_c of row r before the maximum: s_c =
// cap*tanh(s_c*invCap) with scoreCap (tanh32's function, within 2.5 ulp,
// both halves computed and blended), then with scoreAlibi s_c +=
// slope[r]*(cols[c] - rows[r]) (or -= slope[r]*|cols[c] - rows[r]| with
// scoreAbs), the distance exact in int32 and converted once. A decode
// kernel's rows i read rows[i] and slope[i], its keys j cols[j] (it may
// read up to 16 int32 past cols[TK-1]: the padding). The kernels branch on
// the flags once per call (NEON's decode kernels, which go one row at a
// time, once per row); masked scores may be rewritten to anything.
// For the tiled backward, scoreBwd (scoreBwdAVX512, scoreBwdAVX2,
// scoreBwdNEON; a variant without one runs the per-pair Go backward for such a stage) applies the stage to c*S in place and writes the
// soft-cap's factor 1 - tanh^2 (see kernels.scoreBwdK). Each variant's
// vector tanh is also in its table alone (tanh: tanhAVX512, tanhAVX2,
// tanhNEON), for the tests that measure its error.
//
// The kernels multiply a masked p = 0 by its value row, and 0 times NaN or
// an infinity is NaN. So that masked data never reaches an output, the
// driver marks the value rows of a key tile that hold a non-finite element
// (once per tile, when some row of a tile masks a key of it); for a tile
// where some row masks one of them it runs the kernel on a copy with those
// elements zeroed and then adds p * v for them to the rows that keep them
// (IEEE arithmetic through kept pairs).
//
// # The driver
//
// A call first walks the plan once per query tile (mask.Visit, shared by
// the heads unless the mask has head parameters and, unless document ids
// differ per batch, by the batches):
// the key tiles some query tile visits are the only ones ever packed, so
// a decoding call (few queries) costs what its kept keys cost. A job is
// one query tile of one head, or, when a segment's rows are few, of all
// the query heads that share a key/value head (they read each key and
// value once). Calls with fewer than splitJobs jobs split each into parts
// of consecutive key tiles that run on different threads and merge, in
// part order, by their maxima (flash decoding); the split depends on the
// shape only, so results do not depend on the thread count. Key tiles are
// packed (transposed, times scale*log2(e); values copied only where they
// are not whole rows of v) by the first worker that needs them, or, when
// every tile has one user (decoding), in the worker's own buffers. Whole
// key tiles go through the variant's transpose (transposeTileAVX512, 16 x
// 16 blocks; transposeTileAVX2, 8 x 8), 16-bit rows through its widening
// loops, and the driver's row loops (output scaling, log-sum-exp,
// non-finite value rows, 16-bit outputs) run the variant's row helpers,
// on AVX-512, AVX2 and NEON alike (emit/avo, emit/neon). Query
// tiles are read from q in place when they are TQ consecutive rows, else
// copied. In layouts whose heads sit side by side (BSHD, packed QKV) a
// prefill job holds the rows of several query heads of one kv head at
// fewer positions (sideHeads: up to the group's heads, a divisor of TQ;
// 4 heads of 12 positions for 4:1 grouped-query attention), so that its
// rows of q and of the output are runs of adjacent heads on a quarter of
// the pages; jobs are listed position by position there, the kv heads of
// each one after another, so that consecutive jobs read the same key
// tiles and the same pages of q and the output, and head by head, the
// query tiles of each in order, in BHSD. A row's bits do not depend on
// the rows it shares a job with. A worker claims its next item before an item's
// last key tiles and prefetches its copied query rows, and the item's own
// output rows when they lie apart, a part before each of those tiles
// (the amd64 variants' prefetchRows).
//
// Decoding jobs of at most maxDecodeRows (16) rows skip packing for whole
// key tiles that every row keeps: on AVX-512, AVX2 and NEON (whose
// kernels emit/neon.EmitDecode writes with the same ABI, one row at a
// time) the decode kernels
// (emit/avo.EmitDecode, 1, 2, 4 or 8 rows, float32, bfloat16 or half
// precision; larger jobs in groups of 8) read the key and value rows in
// place, through one byte offset per key row and one per value row
// (decodeOffsets: contiguous, paged or strided alike, k and v each with
// its own strides and head size, so that BSHD with head_dim {qk: 192, v:
// 128} reads both in place too), in one pass per tile and group, with the
// query rows scaled instead of the keys; they are also given the next
// tile's key offsets, which the AVX2 one-row kernels prefetch. Partial tiles still go through the tile kernel,
// whose running state (o, m, l) they share.
package cpu

// Tile sizes shared by every variant.
const (
	TQ = 48
	TK = 64
)
