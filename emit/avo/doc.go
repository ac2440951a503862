// Package avo lowers the CPU tile microkernel to AVX-512 and AVX2 Go
// assembly through avo (github.com/mmcloughlin/avo). It decides no tiling:
// the tile sizes (TQ = 48, TK = 64) and the microkernel ABI are those of
// package runtime/cpu, and which tiles run, full or partial, is the plan's.
//
// Build returns an avo build context holding the whole kernel file: the
// shared constant table (EmitConsts), one tile kernel per ISA and pair of
// head dimensions of KernelDims (EmitTile: tileAVX512D64, tileAVX2D96,
// tileAVX512D192V128 where q and k have 192 and v and o 128), the decode
// kernels of both ISAs (EmitDecode: decodeAVX512F32D128R4,
// decodeAVX2BF16D64R8 and the like, by key and value type, head
// dimensions and rows, for decoding's whole key tiles read
// in place; one generator, the ISA choosing the register blocking, the
// lane folds and broadcasts and how m and l are stored for r rows only),
// the FMA peak loops the
// benchmarks compare against
// (EmitPeak: peakFMA512, peakFMA256), for each ISA the key-tile transpose
// the runtime packs whole key tiles with (EmitTranspose:
// transposeTileAVX512, 16 x 16 blocks, transposeTileAVX2, 8 x 8 blocks,
// each through three rounds of shuffles), the loops that widen 16-bit
// inputs (EmitWiden: widenBF16AVX512, widenF16AVX2, ...), the driver's
// row helpers (EmitRowHelpers: scaleRow, addScaledRow, nonFiniteRows; EmitLSE: lse;
// EmitNarrow: narrowBF16, narrowF16, each name ending in its ISA; AVX2 has
// no opmasks, VGETEXPPS or VPMOVDW, so it blends, takes exponent and
// mantissa from the bits and packs with VPACKUSDW, reading its constants
// from the constant table's slots; EmitPrefetch: prefetchRows, PREFETCHT0
// over rows a pitch apart, for query and output tiles whose rows the
// driver copies or writes later), and the two kernels of the tiled backward for each ISA
// (EmitBackward: gemmAVX512 and gemmAVX2, C (+)= A B with A read through
// two strides so that it may be transposed, 6, 4, 2 or 1 rows x 4 zmm
// register blocks on AVX-512, 3, 2 or 1 rows x 4 ymm in 16 registers on
// AVX2; bwdProbAVX512 and bwdProbAVX2, P = exp2(c S - lb) and dS = P scale
// (dP - delta), the keep words as opmasks on AVX-512 and as bit tests
// ANDed into both results on AVX2, reusing the tile kernels' exp2), and
// the score stage's kernels (EmitScoreKernels, score.go: tileScoreAVX512D64
// and the like, decodeScoreAVX2BF16D128R4 and the like, each its plain
// kernel with one pass of soft-capping and ALiBi over the scores before the
// softmax, after one branch on the flags; scoreBwdAVX512 and scoreBwdAVX2
// (EmitScoreBwd), the stage for the tiled backward, writing the soft-cap's
// factor 1 - tanh^2 beside it; and tanhAVX512, tanhAVX2, the vector tanh
// alone for the tests). The score kernels read runtime/cpu's
// scoreTile by the offsets score.go exports (ScoreCapOff, ...), and the
// tanh constants (TanhPoly, TanhSmall, TanhM2L2E) sit in the constant
// table's last slots, after the older ones, so that adding them changed no
// older kernel; runtime/cpu's TestScoreABI compares both with its own.
// Generate compiles and prints it,
// WriteFiles writes runtime/cpu/tile_amd64.s and runtime/cpu/tile_amd64.go,
// and beside them the table of each ISA's kernels by head dimensions
// (Table: kernels_dims_amd64.go, avx512Dims and avx2Dims, runtime/cpu's
// []dimKernels, one entry per KernelDims), so that a new size is one entry
// of KernelDims; the command
// cmd/genkernel runs it for go generate (runtime/cpu/generate.go). Output is
// byte-for-byte deterministic, and a test compares the committed files with
// a fresh generation.
//
// A second file, built the same way by BuildReadBW and written by
// WriteReadBWFiles as runtime/cpu/readbw_amd64.s and readbw_amd64.go (the
// same command writes both files), holds the read-bandwidth loops that
// decoding benchmarks compare against (EmitReadSum: readSumAVX512,
// readSumAVX2): 8 independent VADDPS chains summing full vectors loaded
// from memory, then one horizontal sum. They share nothing with the tile
// kernels, whose file they leave unchanged.
//
// Each tile kernel runs three phases: S = Q K^T, the online softmax, and
// O = alpha O + P V. The two products are register-blocked (AVX-512: 6 rows
// x 4 zmm accumulators with explicit broadcasts; AVX2: 3 rows x 4 ymm, all
// 16 registers) and stream the operand whose chunk stays in L1. Head
// dimensions are any multiples of 16 up to 256, qk and v apart: the
// reduction over qk goes in the fewest parts of at most 64 steps, as equal
// as they can be (80: 40 + 40), and the columns of v in the fewest chunks
// of at most 4 vectors, as equal as they can be (AVX-512, 80: 3 + 2
// vectors), one loop per run of equal chunks; the decode kernels split
// the o row likewise (decodeShapeOf). The softmax
// takes rows in groups of one per lane so that the row maxima and sums are
// transposing reductions, works in log2 units with a degree-6 exp2 (1.3 ulp,
// VSCALEFPS on AVX-512, exponent-field add on AVX2, anything below 2^-125
// flushed to +0 so that no subnormal, and no microcode assist, ever
// occurs), applies the mask with opmask registers (AVX-512) or bit tests
// (AVX2) only when the mask is not nil, and handles rows with no key kept
// yet without a branch or a NaN.
//
// The nil test of the mask selects, once on entry, one of two copies of the
// kernel. The masked copy ORs the mask words of each row block and skips
// what the mask makes useless: row blocks that keep nothing (in both
// products), in S = Q K^T the vectors of columns no row of the block keeps,
// and in P V the keys outside the block's first to last kept key. Skipped
// scores are never read unmasked, so whatever s held there cannot leak.
//
// Facts about avo that the code relies on: it never spills (too many live
// registers is an allocation error); with more than 16 live vectors in AVX2
// code it silently takes Y16-Y31, so Generate rejects any EVEX-only register
// in an AVX2 function; it inserts no VZEROUPPER (every kernel ends with one);
// its liveness analysis treats VPXORD x, x, x as reading x (zeroing on
// AVX-512 is therefore a broadcast load of +0); its build package registers
// flags on flag.CommandLine, so the command uses its own flag set.
package avo
