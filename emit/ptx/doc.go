// Package ptx lowers a gen.Plan to PTX text for sm_80 and later: the
// forward attention kernel (bf16 or fp16 inputs, fp32 accumulation) whose
// tile schedule is evaluated inside the kernel from the plan's mask. It
// decides no tiling: tile sizes (ptx.Sm80, 64x64), the layout and the
// predicate come from the plan.
//
// # Pieces
//
//   - ir.go: a small instruction IR: virtual registers by class (.pred,
//     .b16, .b32, .b64, .f32; integer types live in bit-size registers),
//     operands, instructions, labels, guards.
//   - table.go: the one op-to-text table (opTable, with an operand
//     signature per op); Legalize, which checks every instruction against
//     the table, labels and register classes and returns an error (never
//     panics) on anything it cannot render; Module.Text, the one place that
//     writes the header (.version 7.8, .target sm_80, .address_size 64),
//     the .entry with its .param list, the .reg declarations derived from
//     the registers the body uses, and the dynamic shared memory.
//   - build.go: emission helpers with constant folding; floored division
//     and modulo (shifts and masks for powers of two, div/rem.s32 with a
//     correction otherwise, so negative operands are right too).
//   - pred.go: the plan's partial-tile predicate (gen.Pred) as integer PTX
//     on a score element's (row, col): every gen.IROp is handled; document
//     ids and starts are loads from run-time arrays. PredMemo shares
//     row-only and column-only subexpressions across a tile's elements.
//   - sched.go: the closed-form key hull of a query tile (per primitive:
//     window [q0-left, q1+right], block [blk(q0)b, blk(q1)b+b-1], bridge
//     from its first active block, global [0, g-1], dilated by its reach;
//     union = min/max hull, intersect = intersection) and each primitive's
//     tile classification of spec/classify.go (union = max, intersect =
//     min of the classes), as PTX integer code.
//   - forward.go: the forward kernel, its parameter layout and Launch
//     geometry.
//
// # The forward kernel
//
// One CTA per (query tile of 64 rows, query head, batch), 4 warps of 16
// query rows each. Q is copied to shared memory with cp.async and held in
// registers as ldmatrix.x4 fragments. Key tiles are visited from the hull
// of the tile's key range; a scan skips empty tiles (they are never
// copied), full tiles skip the predicate, partial tiles evaluate it per
// element together with the key bound (a full tile that runs past seq_k is
// demoted to partial). K and V tiles (64 keys x D, rows padded by 16 bytes)
// are double-buffered with cp.async (16-byte chunks, zero-filled past
// seq_k), the next visited tile in flight while the current one computes.
// S = Q K^T and O += P V use mma.sync.m16n8k16 (.bf16 or .f16, f32
// accumulate; ldmatrix for K, ldmatrix.trans for V). The online softmax
// follows kernel/doc.go: the row max of the raw scores over the quad
// (shfl.sync.bfly) times scale*log2(e), P = ex2.approx.ftz(fma(s,
// scale*log2(e), -m)), packed with cvt.rn.bf16x2.f32 (or
// f16x2), l summed from the unrounded P; the epilogue writes O/l and
// lse = (m + log2 l) ln 2, or 0 and -Inf for rows without keys.
//
// Shapes: tensors are [batch][heads][seq][D] row-major; query head h reads
// key/value head h / (heads_q/heads_kv); seq_q <= seq_k, query row r is
// position r + seq_k - seq_q. Dilated masks whose stride is below the key
// tile run on the plan's residue layout: CTA z = batch*stride + c runs
// residue class c, reading rows c, c+stride, ... directly (a strided row
// pitch, no gather). Document kernels take doc_id, doc_start and doc_end
// arrays (DocArrays) over the seq_k positions, shared by every batch
// element and head; their key range and tile classes follow
// spec.VisitTilesDocs and spec.ClassifyDocs.
//
// Positions are s32 and below 2^30.
//
// # Tests
//
// Text-level tests (always run): every gen.IROp is lowered, unknown ops
// and illegal instructions are errors, generation is deterministic, the
// header and declarations, a golden kernel (testdata/causal64.ptx; rerun
// with -update), rejections and launch geometry.
//
// Interpreter tests run the kernels under verify/ptx (with its race,
// divergence and uninitialized-read checks on); -short trims the head_dim
// 128 sweeps.
//
// They compare every example spec and a set of small-parameter masks (D 64
// and 128, seq not multiples of 64, seq_q = 1, seq_q < seq_k, grouped
// heads, bf16 and f16, dilated, documents) with verify.Reference on inputs
// rounded to the element type, per element within the error of a
// straightforward implementation that rounds P and the output to the
// element type (u sum_j w_j |v_j| + u |out|, u = 2^-8 for bf16); and they
// check the in-kernel tile classes (exactly, against spec), key hulls
// (against brute force) and predicates (against gen.Pred.Eval) on random
// tiles; and the key tiles each CTA visits (counted by its barriers) equal
// the plan's schedule. The interpreter has no lg2, so they use
// Config.SoftLg2; TestInterpHardwareLg2 runs the lg2.approx kernel once it
// does. go test -run TestWritePTX -ptxdir DIR writes the example kernels
// for GPU checks.
package ptx
