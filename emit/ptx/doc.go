// Package ptx lowers a gen.Plan to PTX text for sm_80 and later: the
// forward attention kernel (bf16 or fp16 inputs, fp32 accumulation) whose
// tile schedule is evaluated inside the kernel from the plan's programs,
// and the backward's two kernels.
//
// It knows nothing of the spec language: it never imports spec and never
// looks at a mask. Everything it computes about a mask comes from the
// plan, as data: the tile sizes, the layout (identity, or residue with a
// stride), and the plan's integer programs (gen.Prog), which it renders
// into the kernel: the key hull hull(q0, q1, x), the tile class
// class(q0, q1, k0, k1) and the partial-tile predicate pred(i, j); a
// residue layout's classes are split at each batch row's lengths and
// positions (residueSegment, runtime/cpu's segments; gen.ResidueProg at
// the default alignment). A new mask primitive therefore needs
// no change here; a new IR op does (and TestEveryIROp fails until it
// renders).
//
// Targets are values: Target{SM, Elem, Accel} names the SM version the
// module is written for (its .target, with the PTX ISA version known for
// it), the element type and, with Accel, the architecture-specific target
// sm_<SM>a. It is a gen.Target (Name, TileSizes), so a plan is compiled
// for it directly; it also tells the head dimensions the kernels support
// (HeadDims, HeadDimText, Supports: 32, 64, 96, 128, 192 and 256, square,
// and {qk: 192, v: 128}, q and k rows of 192 and v, output and dout rows
// of 128, as DeepSeek's MLA has), whose tiles one table holds (tiles in
// target.go, with the reasons; a split pair takes its qk size's tiles).
// In a split kernel V tiles keep the K tile's row pitch and copy with
// their own lanes (vact); the products over value columns (P V, dO V^T)
// run over Dv. SM80 is the default; DefaultTargets are the
// targets attngen's tests build for both element types.
//
// Kernels(plan, cfg) is the one place that decides which kernels a target
// gets, and attngen's generate, verify and bench ask it: the forward
// kernel, and the backward's dq and dk/dv kernels for every target that
// has them (Target.HasBackward: all but the architecture-specific sm_90a
// ones, whose backward is the plain target's mma.sync kernels, which those
// GPUs run). GenerateForward writes the sm_80 kernel for every target but
// the sm_90a ones (SM90a), which get the Hopper kernel (hopper.go, below);
// attngen generate embeds it next to the sm_80 kernels, its gpu.Kernel
// marked OptIn (runners use it only when asked for) until SM90aVerified
// records a GPU run. GenerateBackward writes the backward's module.
//
// # Structure
//
// Three layers: the PTX builder (ir.go, table.go, build.go, prog.go: a
// module, its functions, registers and instructions, the plan's programs
// as PTX), which knows no kernel; the kernel toolkit (kit), the pieces
// every kernel is made of, emitted for the kernel's explicit geometry;
// and thin kernels built on it: the sm_80 forward (fwd80), the backward's
// dq and dk/dv kernels (bwdK) and the sm_90a forward (hop). Each kernel
// type embeds *kit and adds its own pieces; none redeclares one of the
// toolkit's (TestKitNotShadowed), so each toolkit piece is the same code
// in every kernel.
//
// The geometry (geom) is what the toolkit knows of the kernel it is
// emitted into, stated by each kernel: query rows and keys per tile,
// compute threads (and so warps), head dimension, padded row pitch,
// element type, layout stride, and whether the kernel takes document
// arrays, tree arrays or head parameters. planGeom checks a plan against
// a target and gives the plan's part; the kernel adds its tiles from the
// table (tilesOf: sm_80 forward and dq: 64 query rows, 128 threads, 64 or
// 32 keys, rows padded to 2D+16 bytes; dk/dv: 64 keys, 128 or 256
// threads (columns split), dkvQ query rows per step; sm_90a: 128 query
// rows, 256 compute threads, 64, 32 or 16 keys, swizzled boxes without
// padding: 128-byte swizzle, 64-byte where D is not a multiple of 64).
// Rows of 2D bytes split into 16-byte copy chunks per lane; where D/8 is
// not a power of two (96, 192) the lanes are rounded up to one and the
// extra lanes idle (act guards their copies and their share of sanitize).
//
// Written once, for every kernel:
//
//   - the parameter list (kernelParams): the kernel's tensors, the mask's
//     run-time data (tree or document arrays, then head_params), the
//     kernel's addresses after them (the backward's gradients, the sm_90a
//     kernel's tensor maps), the per-row lengths (seq_lens_q, seq_lens_k)
//     and positions (q_pos, k_pos), the shape scalars (seq_q, seq_k, heads_q,
//     heads_kv, scale_log2), the tensors' element strides, the kernel's own scalars (the backward's
//     scale, the persistent kernel's batch); each parameter is described
//     once (params.go);
//   - the prologue (prologue): the parameters read in list order, the
//     thread and CTA coordinates, the query head's values where the CTA
//     computes one head, the lane coordinates; the copy lanes and the
//     ldmatrix lane offsets of padded tiles (copyLanes, ldmRowCol,
//     ldmKey);
//   - the residue split (residueSplit, residueSegment, residueExit), the key hull of a
//     query tile (keyRange) and the scan of its key tiles (find), the
//     head-parameter loads (headValues), the K/V copies and the
//     double-buffered tile loop (copyKV, pipeline), the mma.sync tile
//     products (product16, accumulate, pack);
//   - partial tiles (partial.go): the predicate or the rows' key intervals
//     per element (maskPartial), and the masked-value rule's vote,
//     zeroing and IEEE add-back (sanitizeIn, voteNonFinite, indicators,
//     addBack);
//   - the score stage (score.go): where a tile's q.k become probabilities.
//     Each concept is one method, called by every kernel at the same point
//     (TestScoreStageOnce checks the callers): scoreStage, when a tile's
//     scores are complete and not yet masked (the sm_80 and sm_90a
//     forwards' tile, both backward kernels' S or S^T), where soft-capping
//     (s <- c tanh(s/c)) and ALiBi (s <- s - slope[h] (i - j)) go, with
//     the fragment's query and key positions (scoreAt) and the query head
//     (kit.qhead); scoreGrad, when the backward has formed dS, where the
//     stage's derivative goes (soft-capping's 1 - tanh^2); prob, the one
//     exponentiation of a score, 2^(s scale log2(e) + bias) (the online
//     softmax's bias -m, the backward's -lse log2(e)); rowTotal, where the
//     forwards' epilogue (finish) uses a row's final l with its m, where a
//     learned sink logit per head joins the denominator (and so the lse the
//     backward reads); scoreHead, where a kernel sets its query head,
//     loading the head's slope and sink; sinkGrad, the dq kernel's term
//     of the sink gradient next to delta. Without score modifications
//     none of them emits anything. The online softmax (softmax), lg2 and
//     the forwards' epilogue (finish) are there too.
//
// # The score stage
//
// The plan's stage (gen.ScoreStage) is rendered in the kernels' log2
// units. Soft-capping and ALiBi rewrite a tile's raw products q.k at
// scoreStage, before the mask (masked scores stay -Inf, or P 0), into
// scaled scores: cap2 tanh(q.k capX) with cap2 = cap log2(e) and capX =
// scale log2(e)/cap2 (one correctly rounded division per kernel; the cap
// an immediate when the spec fixes it, else the soft_cap parameter), then
// plus slope log2(e) times the distance j - i, an exact s32 difference of
// the element's positions times the residue stride (absolute positions
// are offset + stride x segment position), converted to f32 once (for
// |i - j| the slope is negated and the distance's absolute value taken).
// prob and softmax then take the scores as they are instead of scaling
// them in the exponent. tanh is runtime/cpu's tanh32 algorithm: the odd
// polynomial to x^17 below |x| = 0.55, above (1 - e)/(1 + e) with e =
// ex2.approx(-2 log2(e) |x|) and the quotient from rcp.approx refined by
// one Newton step, the sign copied by bits (not tanh.approx.f32, whose
// 2^-11 relative error is far from float32 rounding); TestTanhInterp
// measures 1.82 ulp at worst under the interpreter. The backward keeps
// each score's t (tanhT) and multiplies dS by 1 - t^2 at scoreGrad.
//
// Learned sinks join each row's denominator at rowTotal relative to M =
// max(m, sink2): l 2^(m-M) + 2^(sink2-M), the output weighted by 2^(m-M),
// lse = (M + log2 L) ln 2, and a row that keeps nothing gets out 0 and
// lse = the sink (natural units, as the call gave it). The sink gradient
// dsink[h] = -sum_i p_sink(i) delta_i is deterministic: the dq kernel
// computes each row's term -2^(sink2 - lse log2(e)) delta (0 at a head
// whose sink is -Inf) where it writes delta, into dsink_rows
// ([batch][heads_q][seq_q]), and the host sums head h's rows over the
// batch in float64 in a fixed order (gpu.DSink), rather than float
// atomics whose order, and so result, vary from run to run.
//
// The stage's values are parameters that exist only when its part is
// active (kernelParams): alibi_slopes and sinks ([heads_q] f32, natural
// units) after the mask's run-time data, dsink_rows after dq, soft_cap
// after the shape scalars; scoreHead loads the current head's slope and
// sink. Plans without a stage keep their parameter lists and PTX byte
// for byte (TestKernelsGolden). A soft-capped plan whose predicate is
// longer than capPred instructions runs its dk/dv kernel at 32 query rows
// per step (the neighbourhood example spilled at 64). Tests: TestScoreStage
// and TestScoreMutants (score_test.go, an external test package that runs
// the kernels through verify/gpurun against verify's checks: every
// combination of parts, the sm_80 and sm_90a forwards and the backward
// with dsink; ALiBi with j - i, the cap after masking, a sink counted
// twice and dsink with the wrong sign must fail, through Config's
// unexported scoreMutant), TestTanhInterp, TestScorePtxas (every example
// with every part added: no spills with ptxas 11.8 and 12.4) and
// TestScoreSASS (gemma2's key-tile loop against the plain mask).
//
// TestKernelsGolden hashes the PTX and the descriptions of every example's
// kernels for every target (testdata/kernels.sha256): a change of the
// toolkit or of a kernel that is meant to leave the PTX as it is must pass
// it unchanged.
//
// # Pieces
//
//   - target.go: Target, SM80, DefaultTargets, the tile and block
//     constants, and the table of PTX ISA versions per SM version. A target
//     whose SM has no ISA version, or lacks an op of the op table (each op
//     carries the oldest SM that has it: cp.async and bf16 mma need sm_80),
//     is refused with an error.
//   - ir.go: a small instruction IR: virtual registers by class (.pred,
//     .b16, .b32, .b64, .f32; integer types live in bit-size registers),
//     operands, instructions, labels, guards.
//   - table.go: the one op-to-text table (opTable, with an operand
//     signature and a minimum SM per op); Legalize, which checks every
//     instruction against the table, labels and register classes and
//     returns an error (never panics) on anything it cannot render;
//     Module.Text, the one place that writes the header (.version of the
//     SM, .target sm_<SM>, .address_size 64), the .entry with its .param
//     list, the .reg declarations derived from the registers the body uses,
//     and the dynamic shared memory.
//   - build.go: emission helpers with constant folding; floored division
//     and modulo by constants (shifts and masks for powers of two,
//     div/rem.s32 with a correction otherwise) and by registers, so
//     negative operands are right too.
//   - prog.go: RenderProg, the renderer of any plan program as PTX: s32,
//     with a range analysis from register arguments that are positions in
//     [0, ArgMax]; values whose range does not fit s32 are computed in
//     s64, and results that do not fit saturate to s32. Arguments are operands the caller gives (registers or immediates, in
//     Prog.Args order), results come back as integer operands or predicate
//     registers (Value), document ops load from the kernel's doc_id,
//     doc_start and doc_end arrays (DocRegs), tree ops from its tree
//     arrays (TreeRegs: treeanc is four loads, a bit test and compares),
//     param ops are the current head's values (Env.Heads), with the range
//     [Min, Max] the plan declares for the parameter. Every non-word gen.IROp
//     renders; word ops (which exist only in the CPU keep-word program), an
//     unknown op, a constant, immediate or value folded from constants
//     outside s32 (gen.Inf and -gen.Inf fit), or a value whose range
//     exceeds 64 bits are errors. Constants fold; dead values are skipped; a
//     Memo shares values between renderings in one block by the arguments
//     they depend on, so the per-element predicate computes row-only values
//     once per row and column-only values once per column.
//   - kernels.go: Kernels and KernelSet, the kernels of a target.
//   - kit.go, params.go, partial.go, score.go: the toolkit (above); the
//     op table's rcp.approx.ftz.f32 (OpRcp) is the score stage's.
//   - forward.go: the forward's API: Config, Forward, its Launch geometry
//     (the grid's query tiles come from mask.MaxQueries) and arguments,
//     GenerateForward; fwd80.go: the sm_80 forward kernel.
//   - heads.go: head parameters (below): the head_params parameter and the
//     loads of a head's values.
//   - backward.go: the backward pass, two kernels in one module, its API
//     (Backward, BackwardLaunch) and the pieces both kernels share; dq.go
//     and dkv.go: the dq and dk/dv kernels.
//   - tree.go: TreeArrays, a tree kernel's arrays.
//   - hopper.go: the sm_90a forward kernel and its tensor maps
//     (Forward.TensorMaps). The op table marks its ops (wgmma, mbarrier,
//     the bulk tensor copy, the proxy fences; hopperOps) with the SM that
//     has them and, for wgmma, accel: only sm_90a. Target.Check checks the
//     ops of the kernel the target gets; Module.Accel writes .target
//     sm_90a with ISA 8.3 (fence.proxy.tensormap needs it), and
//     Func.SharedAlign the 1024-byte alignment of the dynamic shared
//     memory.
//
// # The forward kernel
//
// One CTA per (query tile of 64 rows, query head, batch), 4 warps of 16
// query rows each. Q is copied to shared memory with cp.async and held in
// registers as ldmatrix.x4 fragments. The key tiles visited are the tiles
// of the plan's hull(q0, q1, 0) of the tile's query positions, clipped to
// [0, seq_k-1], scanned in order: each tile's class is the plan's class
// program, empty tiles are skipped (never copied), full tiles skip the
// predicate, partial tiles evaluate the predicate program per element
// together with the key bound (a full tile that runs past seq_k is demoted
// to partial). When the plan's rows keep intervals of keys
// (gen.Plan.RowInterval) and the predicate is longer than intervalPred
// instructions, a partial tile instead renders each of the thread's two
// rows' key hull, hull(i, i, 0), once and tests lo <= j <= hi per element. The class program is sound but may call a tile of a union
// or intersection partial (or non-empty) where keep words would refine it,
// so the kernel may visit a superset of the plan's exact schedule
// (gen.Plan.Visit), never fewer tiles. K and V tiles (64 keys x D, rows
// padded by 16 bytes) are double-buffered with cp.async (16-byte chunks,
// zero-filled past seq_k; a tile wholly below seq_k takes one address per
// tensor and immediate row offsets, the last one checks and clamps each
// row), the next visited tile in flight while the current one computes. S = Q K^T and O += P V use mma.sync.m16n8k16
// (.bf16 or .f16, f32 accumulate; ldmatrix for K, ldmatrix.trans for V).
// The online softmax follows runtime/cpu's: the row max of the raw scores
// over the quad (shfl.sync.bfly) times scale*log2(e), P =
// ex2.approx.ftz(fma(s, scale*log2(e), -m)), packed with
// cvt.rn.bf16x2.f32 (or f16x2), l summed from the unrounded P; the
// epilogue writes O/l and lse = (m + log2 l) ln 2, or 0 and -Inf for rows
// without keys.
//
// Shapes: a tensor's rows of D (or Dv) contiguous elements lie at the
// element strides (batch, head, pos) the kernel takes for it
// (strideParams, u32 stride_<t>_<axis> after the shape scalars;
// gpu.Layout, default gpu.BHSD, [batch][heads][seq][D] row-major): the
// sm_80 forward and both backward kernels take those of q, k, v and o
// (dout and the forward's o take o's, dq, dk and dv, f32, those of q, k
// and v; lse, delta and dsink_rows stay contiguous [batch][heads_q][seq_q]),
// the sm_90a forward o's, its q, k and v strides being its tensor maps'
// (TensorMapsWith: one byte stride per axis, so BHSD, BSHD, packed QKV,
// padded rows and any mix run, each stride of an axis of more than one
// row a positive multiple of 16 bytes below 2^40 and the addresses
// 16-byte aligned; other strides, a 0 broadcast among them, are refused
// there and run on the sm_80 kernel). A row's
// address is the (b, h) base, a 64-bit product of the batch and head
// strides, plus a 32-bit row x pitch x element size times the pos stride,
// widened; the strides are loaded from their parameters where used, so
// no register holds them across the tile loop. TestInterpStrides
// (layout_test.go) runs padded BHSD, BSHD, a mix and packed QKV against
// the contiguous call's bits on the sm_80 forward and backward and the
// sm_90a forward (the latter's contiguous call also against the sm_80
// kernel's, within bf16 rounding, so that maps wrong alike in every
// layout fail too).
//
// Ragged batches: every kernel (the sm_80 forward, both backward
// kernels, the sm_90a forward; identity layouts at every head_dim,
// residue layouts up to head_dim 128) takes seq_lens_q and
// seq_lens_k (gpu.SeqLensQParam: device addresses of [batch]s32, 0 for
// none; Launch.SeqLensQ and SeqLensK, not among Args' addresses). After
// the batch row is known (rowLens: per CTA, per work item on sm_90a) the
// row's lengths, clamped to 0..seq_q and 0..seq_k, replace seq_q and seq_k
// everywhere but the tensors' indexing and the stores' bounds (sqT, skT):
// copies zero-fill past them (so no element past a row's keys or queries
// is read on sm_80; the sm_90a kernel's tensor copies read them and the
// key bound and the masked-value rule keep them out), the default
// alignment is the row's (query r at position r + lenK - lenQ), a tile
// past the row's queries (keys) visits no tile, and the tensors' rows past
// a row's queries get out 0, lse -Inf, dq 0 (and a 0 dsink_rows term),
// past its keys dk 0 and dv 0, as runtime/cpu writes them. Residue-layout
// kernels above head_dim 128 (stageDim: their class split is not staged)
// take no lengths: Launch.Args refuses them. TestInterpRagged
// (ragged_test.go) requires each row's bits to be those of the row alone,
// with NaN past every row's lengths (head_dim 64, 192, 256, {192, 128},
// and bigbird's long programs); TestInterpRaggedResidue does the
// same for a residue layout (stride 3, row lengths that are not
// multiples of it, rows of no queries or keys, classes of two query and
// key tiles; on sm_90a the row alone is its rows padded to a multiple of
// the stride, at its lengths).
//
// Residue layouts at lengths and positions: a batch row's class c is its
// absolute positions p = c (mod st) (queries at q_pos.., keys at
// k_pos.., at the row's lengths; the defaults as above), each at segment
// position (p - c) / st, where the plan's programs see it, as runtime/cpu
// splits a call (its segments). After rowLens and rowPos, residueSegment
// gives the class's first query the tensor row qR0 = (c - q_pos) mod st
// and segment position qx0 = ceil((q_pos - c) / st) (the key likewise,
// kR0 and kx0), then every st-th row: g.sq and g.sk become the class's
// queries and keys among the row's lengths, ceil((len - R0) / st), sqT
// and skT its rows among the tensors' (so that the tail rows past a row's
// length, of every class together, are written 0), qp0 and kp the
// segment positions qx0 and kx0. At the default positions this is
// gen.ResidueProg's split (qR0 = (c - (seq_k - seq_q)) mod st, kR0 = c).
// A CTA whose tile lies past its class's tensor rows returns; one past
// the class's rows of the batch row writes its empty rows. The sm_90a
// kernel's tensor maps see rows grouped by the stride (column, residue,
// row group: TensorMapsWith, unchanged), so a class's queries are the
// boxes at dimension-1 coordinate qR0 and its keys at kR0 (they differ at
// positions); the tensors' rows must still be multiples of the stride
// (every head's rows start a group), a row's lengths need not: its tail
// boxes read the rows past its length (the next head's, or zeros past
// the tensor), which the key bound and the masked-value rule keep out
// and the stores skip.
//
// Staged row values: with a row's lengths and positions in registers
// across the tile loop ptxas 11.8 and 12.4 spilled at head_dim 192 and
// 256 (bigbird's, causal's and the neighbourhood's forwards; the dk/dv
// kernels of causal, document and the neighbourhood at 256: 4 to 36
// bytes) and for hull and class programs above bigScan (the neighbourhood's
// sm_80 forward, bigbird's sm_90a forward at 128: 52 bytes). Those
// kernels (geom.stage; on sm_90a the design without a producer) keep them
// in shared memory instead (stageRow): thread 0 stores sq, sk, kp and qp0
// (and the sm_80 forward its query tile's positions q0, q1 and last key
// tile kthi) into the words after the vote words, a CTA barrier follows
// (on sm_90a a barrier before the store too, since each work item
// rewrites them), and each value becomes a staged operand (Staged,
// KStaged) which Func.Emit loads with ld.volatile.shared into a fresh
// register right before every instruction that reads it (find loads q0
// and q1 once per scan): ptxas may neither hoist nor merge a volatile
// load, so no register holds them across the loop, the same effect the
// strides get from being reread from the constant bank. The other
// kernels keep them in registers, byte for byte as before.
//
// Positions: the kernels that take lengths take q_pos and k_pos too (gpu.QPosParam: device addresses
// of [batch]s32, 0 for the default alignment; Launch.QPos and KPos, not
// among Args' addresses), the absolute positions of each batch row's
// first query and first key (runtime/cpu's QPos and KPos). rowPos loads
// them after the lengths: the row's first key at kp = k_pos[b] (default
// 0), its first query at q_pos[b] (default kp + keys - queries, the
// bottom-right alignment), so query row r is at r + q_pos and key index j
// at j + kp (keyPos; keyIdx takes kp off). Tiles stay on the tensors'
// rows (key tile kt holds keys kt*tileK.. of the row, at positions from
// kp + kt*tileK, which need not lie on the mask's blocks); every program
// is evaluated at positions: the key hull at hull(q0, q1, 0) raised to kp and its
// ends turned back into key indices (clamped in positions first so that
// the hull's -Inf and Inf do not wrap), the class program at the tile's
// first and last key positions, which classifies an offset tile exactly
// as runtime/mask.VisitFrom does (a tile full at aligned positions may
// be partial offset), the dk/dv kernel's query hull and class at its key
// tile's positions, the partial tiles' predicate and row intervals, and
// the score stage's positions (ALiBi's distances are absolute). Document
// ids index absolute positions: the document arrays must cover every
// position a row reaches (one past its last query or key), and positions
// past a row's keys are clamped to the last of them (lastPos). A tree's
// arrays (TreeArrays) index absolute positions the same way: the parent
// array must cover every position a row reaches, as runtime/cpu's Tree
// with QPos and KPos does (verify/gpurun builds the arrays from its first
// reach entries, a prefix, which is the same tree on those positions);
// treeanc, the tree's hull and its class program are evaluated at the
// queries' and keys' absolute positions, and its per-call values (chain,
// least lo, largest top) are those of that array. Without
// positions kp is the immediate 0 and the programs' key arguments are
// the key indices unchanged. Positions plus lengths must stay below
// 2^31; negative positions read as 0 (verify/gpurun refuses them).
// Residue layouts above head_dim 128 take none: Launch.Args refuses
// non-zero QPos or KPos (TestPositionsRefused). A call
// may have more queries than keys (seq_q > seq_k: a query chunk longer
// than its key chunk) on a kernel that takes positions: Geometry
// (gpu.Kernel.GeometryAt) sizes the grid by the tensors' query rows,
// ceil(seq_q / st) per class, and Launch.Args requires QPos or KPos (the
// default alignment would put queries before position 0; a row whose
// default lands there reads as 0); a kernel without positions refuses
// such a shape in Geometry. TestInterpPositions (pos_test.go) cuts a call
// into query and key chunks at their positions (the first key chunk
// shorter than the queries), checks each against verify's reference and
// the key chunks merged by lse against the single call (sm_80 and
// sm_90a, a dilated mask in the residue layout among the masks);
// TestInterpPositionsGrad checks the backward at positions, and with
// seq_q > seq_k, against verify's gradient reference (both with bigbird,
// a tree and head_dim 192, 256 and {192, 128} among their masks).
//
// Query head h reads
// key/value head h / (heads_q/heads_kv); by default (seq_q <= seq_k) query row r is
// position r + seq_k - seq_q. Plans with a residue layout run it
// directly: CTA z = batch*stride + c runs residue class c of batch row
// z / stride (residueSegment, above: at the default alignment
// gen.ResidueProg's counts), reading rows qR0, qR0+stride, ... and kR0,
// kR0+stride, ... (a strided row pitch, no gather).
// Document kernels (a plan program reads document ids) take doc_id,
// doc_start and doc_end arrays (DocArrays) over the seq_k positions,
// shared by every batch element and head; documents with a residue layout
// are refused. Tree kernels (a plan program reads a parent array) take
// tree_lo, tree_off, tree_anc and tree_info instead (TreeArrays: each
// position's fully kept key prefix, the ancestor bitset rows of the
// positions past the leading chain, and three per-call values), one tree
// shared by every batch element and head.
//
// # Head parameters
//
// A plan with head parameters (gen.Plan.HeadParams: issue 11's window
// sizes and sink counts per query head, spec head_params) has programs
// that read them (an IRLoad of gen.FieldParam+k: parameter k at the
// query head being computed). Its kernels take one more device address, head_params, right
// after the mask's run-time data (after lse, or delta in the backward's
// kernels, and after the document or tree arrays; before the sm_90a
// kernel's tensor maps): s32 values, head-major [heads_q][n] for the
// plan's n parameters (query head h's values at h*n), shared by every
// batch element. Forward.HeadParams and Backward.HeadParams list the
// parameters with their ranges; gpu.CheckHeadParams checks a call's
// values, which must lie in those ranges (the range analysis computes in
// s32 what the ranges allow: a position plus a window of at most 8192 keys
// stays s32). The sm_80 and sm_90a forwards and the dq kernel load the n
// values of their CTA's query head (%ctaid.y) once, after the parameters;
// the dk/dv kernel, which loops over the query heads of a key/value head's
// group, loads them at the top of each head's iteration and evaluates its
// query-tile range (the query hull) and first tile there, per head, since
// they depend on the values (without head parameters both are computed
// once, before the loop). Plans without head parameters take no such
// parameter and their kernels are unchanged, byte for byte.
//
// # The sm_90a kernel
//
// Target{SM: 90, Accel: true}: the same schedule (hull, class with the
// empty-tile jump, predicate, key bound), online softmax, masked-value
// rule, epilogue and outputs as the sm_80 kernel (the code that emits them
// is shared), with the tile products and the copies of sm_90a. Its plan
// tiles are 128 queries by 64 keys (Target.TileSizes): a CTA of 256
// threads is two consumer warpgroups of 64 query rows (4 warps of 16 rows
// each), which visit the key tiles of the CTA's 128 rows together.
//
// Q, K and V are read by cp.async.bulk.tensor.4d through tensor maps
// passed by address (parameters tmap_q, tmap_k, tmap_v in place of q, k
// and v; Forward.TensorMaps describes them for cuTensorMapEncodeTiled):
// rank 4, (column, position, head, batch), each axis at the tensor's own
// byte stride, boxes of 64 columns by 128 query positions or 64 key
// positions of one head with the 128-byte swizzle, two boxes per row of a
// head_dim 128 tile, into 1024-byte aligned shared memory; the copy of a
// tile names its first position, its head and its batch row, and rows of a
// box past the head's positions read as zeros. One thread, the issuer, initializes four
// mbarriers (Q, and one per stage of the 3-stage K/V pipeline), acquires
// the three tensor maps for the tensor copies
// (fence.proxy.tensormap::generic.acquire.sys: the host wrote them into
// global memory), arrives with the expected bytes and issues the copies;
// every consumer thread waits on a stage's mbarrier (try_wait.parity, the
// phase parity kept per stage) before reading it.
//
// Producer warpgroup (hopProducer): the CTA has a third warpgroup (384
// threads); after the mbarriers' set-up (bar.sync 0 of all threads) the
// consumers raise their register budget with setmaxnreg.inc and the
// producer lowers its with setmaxnreg.dec (hopRegs: 224 and 64 at
// head_dim 128, 216 and 80 at 64; a CTA's pool of 64K registers bounds
// 2x128 consumers plus 128 producers), and the producer's warps but the
// first exit. That warp walks the CTA's work items and their visited
// tiles with the consumers' own scan (hull, class, the empty-tile jump)
// and its first thread, the issuer, copies Q when the consumers have
// released the last item's Q and each K/V tile into the next of the
// three stages (the stage order runs on across items) when they have
// released the tile that stage held: the consumers release with
// bar.arrive on named barriers (2: Q, 3-5: the stages) and the producer
// waits on them with bar.sync, 288 threads each (256 consumers and the
// producer warp, counted by whole warps); at its end it takes the last
// releases, so every barrier generation completes. The consumers pass no
// barrier of their own between tiles (the two warpgroups may drift apart
// by up to the stages in flight); sanitize's vote and its second barrier
// are named barrier 1 of 256 threads, and consecutive votes use two sets
// of vote words (a vote's barrier separates the reads of the vote before
// it from the writes of the vote after it; with one set and no closing
// barrier the interpreter reports the race). ptxas 12.4 honours setmaxnreg
// only when the kernel declares .minnctapersm (here 1) or .maxnreg:
// without it (the reverted attempt, commit 8df4253) it dropped the
// setmaxnreg of the head_dim 64 kernels, capped them at the launch's 168
// registers and spilled. At head_dim 128 the consumers need 224 registers
// (216 spills and serializes the wgmma), leaving the producer 64, too few
// for the scan of very long hull and class programs (bigbird, the
// neighbourhood example: 64-80 bytes of spills); plans whose hull and
// class programs exceed bigScan instructions keep the design without a
// producer at head_dim 128, with thread 0 of the consumers issuing the
// copies (256 threads, the tile's closing bar.sync 0 freeing its stage).
// TestHopperProducerPtxas12 checks every example at both head dimensions
// (no spills, no remark, both setmaxnreg kept).
//
// S = Q K^T is head_dim/16 wgmma.mma_async m64n64k16 per warpgroup, its 64
// rows of Q and the key tile from shared memory (K-major, 128B-swizzled
// descriptors, the start address moved 32 bytes per 16 columns and by a
// box per 64); the accumulator fragment is mma.sync's, so masking and
// softmax are the sm_80 kernel's. O += P V is 4 wgmma m64n<head_dim>k16
// with P packed in registers as the A operand and V from shared memory as
// an MN-major (transposed) descriptor (LBO: the next box of 64 columns,
// SBO: 8 keys). Tile i's iteration issues the copies of the visited tile
// after next (into the stage tile i-1 freed at its closing barrier), then
// S of the next tile, which stays in flight while tile i is masked, its
// softmax runs and its P V is issued; one wgmma.wait_group 0 covers both,
// and the next tile's scores move into place after the closing barrier
// (the first tile's S is computed before the loop).
//
// Sanitize works on the swizzled tiles as they are (the codes go where the
// keys were, in the value tile's layout, and restore reads them with the
// value descriptor moved to the key tile, one box and 64 keys at a time),
// with fence.proxy.async after its generic stores. The residue layout is a
// tensor-map view: rank 5, positions grouped by the stride (column, class,
// group, head, batch; position group*st + class, the class axis at the pos
// stride, the group axis at st times it), copied by
// cp.async.bulk.tensor.5d, so a box holds positions c, c+st, ... of one
// class of one head, no gather; it needs seq_q and seq_k to be multiples
// of the stride (Geometry and TensorMaps refuse other calls). Each map
// spans one head's seq positions, so a batch row of fewer keys (per-row
// lengths, where a kernel takes them) needs no other map: the keys past
// its length are masked, and boxes past the head read zeros. Documents and grouped-query heads are as on sm_80.
//
// The grid is persistent: the kernel takes the batch size (parameter
// batch, gpu.PersistentParam) and its CTAs loop over the call's work
// items, a query tile of one query head of one batch element and residue
// class, numbered in one order: query tiles heaviest first, and inside a
// query tile the heads of a batch element (and class) consecutive, then
// the next batch element; CTA b of a grid of G takes items b, b+G, b+2G,
// ... (static striding: no counter to reset, and each item is computed
// the same way on any grid, so results do not depend on it). The G CTAs
// that run at once thus work on one query tile of consecutive heads,
// which share K and V (grouped heads read one key/value head) or at least
// their key range, in L2. Heaviest first is decided per plan when the
// kernel is generated (heaviestFirst): a query tile weighs the key tiles
// the kernel's scan visits (the hull and class programs, mask.Visit) at
// 8192 positions, and the direction, last query tile first or first
// first, is the one that puts more weight earlier (smaller sum of
// position x weight). Causal-like masks, whose hull grows with the query,
// take the last tiles first; bigbird and longformer, whose first queries
// are global, the first; masks that read documents or trees, whose
// weights are run-time data, the last (the hull grows with the query
// inside each document). gpu.Kernel.Geometry gives the kernel one CTA per
// item (the most that can have work) and ResidentGrid the launch on a
// device: min(items, one CTA per multiprocessor), whose count the runner
// reads from the device; any grid of at least one CTA is correct. The
// mbarriers are initialized once per CTA; their phases carry over from
// item to item (the per-stage parity bits and the Q barrier's parity are
// registers kept across items, each copy waited for exactly once). With a
// producer warpgroup the stage order runs on across items; without one
// every item starts at stage 0 (every stage is free between items: the
// last tile of an item ends with a CTA barrier after its last wgmma has
// completed, which also frees Q for the next item's copy). An item
// without tiles (or, in the residue layout, past its class's queries)
// only writes its rows' empty results.
//
// Not yet: 128-key tiles (the kernel takes the key tile as a parameter,
// but gen.Compile refuses key tiles above a keep word's 64 keys).
//
// Positions are s32 and seq_k below 2^29 (gpu.MaxSeq); values the programs
// form from them may leave s32 and are then computed in s64.
//
// Masked pairs never read their value: the P V product multiplies a masked
// p = 0 by v, and 0 times NaN or an infinity is NaN, so on partial tiles
// the threads vote (through a shared word per warp) on whether the value
// tile holds a non-finite element; if so they zero those elements in
// shared memory, write a code per element over the tile's keys (no longer
// read), and after the product add back, through one more product of
// [p > 0] with the codes, the IEEE sum of the non-finite values each row
// keeps with a non-zero weight. Full tiles keep every pair, so IEEE
// arithmetic needs nothing there. A kept NaN score gives NaN through ex2.
//
// # The backward kernels
//
// GenerateBackward emits the FlashAttention-2 backward from the same plan
// as two kernels, launched in order; every gradient element is written by
// one thread in a fixed order (no atomics), so results are deterministic,
// and every row is written (rows and keys that keep nothing get exactly
// 0). Gradients and delta are f32.
//
//   - The dq kernel has the forward's grid and schedule (the key hull, the
//     class program, the forward's scan and double-buffered K/V copies).
//     It first computes delta = rowsum(dout * out) of its 64 rows (two
//     threads per row, f32) into the delta buffer, then per key tile
//     S = Q K^T, P = ex2(S scale log2(e) - lse log2(e)), masked in partial
//     tiles (predicate and key bound, selected), dP = dO V^T, dS = P (dP -
//     delta) and dQ += dS K (K through ldmatrix.trans).
//   - The dk/dv kernel runs one CTA per key tile (64 keys, 16 per warp) of
//     a key/value head; K and V stay in shared memory while it loops over
//     the query heads of the group and, for each, over the query tiles the
//     plan's query hull qhull(k0, k1, x) allows, skipping those the class
//     program calls empty and jumping over empty runs with the hull's next
//     (TestBackwardInterpJumpsQueryTiles). Per query tile (64 rows at head
//     dimension 64, 16 at 128 and 32 for predicates longer than bigPred,
//     so that ptxas needs no spills: bwdQ) it forms S^T = K Q^T, P^T, dP^T
//     = V dO^T and dS^T in registers and accumulates dV += P^T dO and dK +=
//     dS^T Q, summed over the group's heads.
//
// Masked pairs never reach a gradient: P is selected to 0 by the
// predicate, dS to 0 where P is 0 (a NaN P, a kept non-finite score, keeps
// its NaN), and, in partial tiles, the tile whose rows a masked pair would
// multiply by 0 (K in the dq kernel; dO and Q in the dk/dv kernel) is
// checked for non-finite elements by a CTA-wide vote; if it has any, they
// are zeroed in shared memory and flagged, and after the product one more
// product of P with the flags makes NaN the gradient elements that a kept
// pair reaches from a flagged element (IEEE would give NaN or an
// infinity). The lse of rows past seq_q is taken as -Inf in the dk/dv
// kernel (P = 0), and their Q and dO are zero-filled.
//
// # Tests
//
// Text-level tests (always run): targets and the header they give, every
// gen.IROp (each non-word op renders and equals Prog.Eval under the
// interpreter, with register, immediate and mixed operands; each word op
// is refused by name), rejections of programs and plans that cannot be
// rendered, the memo's sharing, illegal instructions, determinism, the
// register declarations, a golden kernel (testdata/causal64.ptx; rerun
// with -update), launch geometry, and that no file of the package imports
// spec. Backward tests (backward_test.go) run the forward and both
// backward kernels under the interpreter on every example and on random
// and document masks (head dimensions 64 and 128, bf16 and f16, awkward
// shapes) against verify.ReferenceGrad, within verify.ErrFactor of a
// straightforward backward that rounds out, P and dS to the element type
// (verify.NaiveGradRounded), with rows and keys that keep nothing exactly
// 0; they check that an off-by-one mask fails, that poisoned masked
// inputs leave every unreachable gradient row bit-identical, the dk/dv
// kernel's visits against the closed-form column schedule, and (with
// ptxas) that neither kernel spills. The overflow tests (overflow_test.go) generate random specs with
// extreme parameters for every target, run extreme kernels under the
// interpreter against the reference, and check rendered programs against
// Prog.Eval on positions near 2^29 and on operands past s32.
//
// Interpreter tests run the kernels under verify/ptx (with its race,
// divergence and uninitialized-read checks on); -short trims the head_dim
// 128 runs. Their masks are the example specs (spec/examples/*.yaml) and
// seeded random masks (spec/spectest; single primitives, dilated ones in
// the residue layout, nested unions and intersections, and documents
// intersected with random masks). They compare the kernels with
// verify.Reference on inputs rounded to the element type, per element
// within the error of a straightforward implementation that rounds P and
// the output to the element type (u sum_j w_j |v_j| + u |out|, u = 2^-8
// for bf16); they run the plan's hull, class, predicate and residue
// programs as the kernel renders them on random arguments against
// Prog.Eval; and they count the key tiles each CTA visits (by its
// barriers, one more per partial tile for the vote) against a scan (which,
// like the kernel, jumps over empty tiles with the hull's next) of the plan's hull and class programs, whose
// tiles must include the plan's exact schedule (Visit). The interpreter
// has no lg2, so they use Config.SoftLg2; TestInterpHardwareLg2 runs the
// lg2.approx kernel once it does. TestPtxas assembles every example for
// sm_80 and sm_90 when ptxas is at hand. go test -run TestWritePTX
// -ptxdir DIR writes the example kernels (sm_80 and sm_90a) for GPU checks.
//
// The sm_90a kernel's tests (hopper_test.go) run it through the same
// harness (outputs poisoned with NaN before every launch, tensor maps
// registered with the interpreter's Device.NewTensorMap from
// Forward.TensorMaps): every example (the dilated one in the residue
// layout, on sequence lengths rounded up to the stride) on the sm_80
// tests' shapes, and at the other head dimension without -short; random
// masks (residue ones included), document masks, f16, a wrong-mask check,
// the extreme specs; the tile visits through the barriers (one per CTA
// with work after the mbarrier set-up; per tile the consumers' release of
// its stage, one more per partial tile; per
// item with tiles the release of Q; none for items without tiles; on one
// CTA per item and on two);
// non-finite inputs (verify.CheckNonFinite). TestHopperPersistentGrids
// runs grids of 1, 2 and 3 CTAs and of more CTAs than items on random
// shapes, and TestHopperPersistentOrder reads the order in which each CTA
// writes its items (ptx.Device.OnGlobalStore) against the work list and
// the heaviest-first direction.
// TestHopperPtxas12 assembles every example for sm_90a with ptxas 12 (no
// spills, no remark) and TestHopperSASS counts HGMMA, WARPGROUP.DEPBAR
// (serialized wgmma would add some), UTMALDG and MUFU.EX2 in and around
// the key-tile loop against the kernel's structure.
// Head parameters (heads_test.go): the param op in TestEveryIROp (values
// loaded per case by the kernels' own loading code, and immediates) and
// TestParamRange (the declared range decides s32 or s64); the parameter's
// place in each kernel's list; the sm_80 and sm_90a forwards and the
// backward under the interpreter on three masks with per-head windows and
// sinks (each parameter's Min and Max, sinks 0 at some heads, values that
// differ within each group of grouped heads, so the dk/dv kernel's per-head
// reload and schedule matter; random values) at head dimensions 64 and
// 128, bf16 and f16, outputs poisoned, against the reference bound per
// head (verify.Shape.HeadParams); ptxas 11.8 and 12.4 without spills. The
// example-driven tests bind or upload values per head, so an example with
// head_params runs through all of them.
// TestSM90aVerifiedRecorded allows SM90aVerified only with a passing
// sm_90a GPU verification recorded in docs/gpu-results.md. The kernel's
// GPU path (tensor maps encoded by the driver, passed by address; the
// choice of kernel by compute capability) is tested in verify/gpurun and
// cmd/attngen against the CUDA binding's mock driver.
//
// The tests share work within one test binary (once_test.go): a plan's
// kernels are generated and parsed by the interpreter once per config,
// ptxas runs once per (ptxas, arch, module text) and nvdisasm once per
// cubin, several at a time; the slow tests run in parallel.
package ptx
