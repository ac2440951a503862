//go:build arm64 && !purego

package cpu

import (
	"runtime"

	xcpu "golang.org/x/sys/cpu"
)

// hasNEON reports whether the CPU has Advanced SIMD: x/sys/cpu's
// HWCAP bit, or macOS, where every arm64 CPU has it but x/sys/cpu's
// sysctl probe (v0.50) does not set HasASIMD.
var hasNEON = xcpu.ARM64.HasASIMD || runtime.GOOS == "darwin"

// archKernels returns the kernels of an arm64 variant when the CPU has the
// instructions they need (Advanced SIMD), else nil.
func archKernels(v Variant) *kernels {
	if v == NEON && hasNEON {
		return neonKernels
	}
	return nil
}

// neonKernels is the NEON table, made once so that dispatch allocates
// nothing. The kernels are written by emit/neon (tile_arm64.s).
var neonKernels = &kernels{
	tile:      asmTile(neonDims),
	tileScore: asmTileScore(neonDims),
	byDims:    neonDims,
	tanh:      tanhNEON,
	scoreBwd:  scoreBwdNEON,
	gemm:      gemmNEON,
	bwdProb:   bwdProbNEON,
	lanes:     4,
	scaleRow:  scaleRowNEON,
	nonFinite: nonFiniteRowsNEON,
	widen:     [3]func(*float32, *uint16, int){BF16: widenBF16NEON, F16: widenF16NEON},
	transpose: transposeTileNEON,
	lse:       lseNEON,
	narrow:    [3]func(*uint16, *float32, int, float32){BF16: narrowBF16NEON, F16: narrowF16NEON},
	peak:      peakNEON, peakFlops: 12 * 2 * 4,
	readSum: readSumNEON, readBlock: 32,
}

// neonDims are the NEON kernels by head dimensions.
var neonDims = []dimKernels{
	{
		dims: square(64), tile: tileNEOND64, tileScore: tileScoreNEOND64,
		decode: [3][4]decodeKernel{
			F32:  {decodeNEONF32D64R1, decodeNEONF32D64R2, decodeNEONF32D64R4, decodeNEONF32D64R8},
			BF16: {decodeNEONBF16D64R1, decodeNEONBF16D64R2, decodeNEONBF16D64R4, decodeNEONBF16D64R8},
			F16:  {decodeNEONF16D64R1, decodeNEONF16D64R2, decodeNEONF16D64R4, decodeNEONF16D64R8},
		},
		decodeScore: [3][4]decodeScoreKernel{
			F32:  {decodeScoreNEONF32D64R1, decodeScoreNEONF32D64R2, decodeScoreNEONF32D64R4, decodeScoreNEONF32D64R8},
			BF16: {decodeScoreNEONBF16D64R1, decodeScoreNEONBF16D64R2, decodeScoreNEONBF16D64R4, decodeScoreNEONBF16D64R8},
			F16:  {decodeScoreNEONF16D64R1, decodeScoreNEONF16D64R2, decodeScoreNEONF16D64R4, decodeScoreNEONF16D64R8},
		},
	},
	{
		dims: square(128), tile: tileNEOND128, tileScore: tileScoreNEOND128,
		decode: [3][4]decodeKernel{
			F32:  {decodeNEONF32D128R1, decodeNEONF32D128R2, decodeNEONF32D128R4, decodeNEONF32D128R8},
			BF16: {decodeNEONBF16D128R1, decodeNEONBF16D128R2, decodeNEONBF16D128R4, decodeNEONBF16D128R8},
			F16:  {decodeNEONF16D128R1, decodeNEONF16D128R2, decodeNEONF16D128R4, decodeNEONF16D128R8},
		},
		decodeScore: [3][4]decodeScoreKernel{
			F32:  {decodeScoreNEONF32D128R1, decodeScoreNEONF32D128R2, decodeScoreNEONF32D128R4, decodeScoreNEONF32D128R8},
			BF16: {decodeScoreNEONBF16D128R1, decodeScoreNEONBF16D128R2, decodeScoreNEONBF16D128R4, decodeScoreNEONBF16D128R8},
			F16:  {decodeScoreNEONF16D128R1, decodeScoreNEONF16D128R2, decodeScoreNEONF16D128R4, decodeScoreNEONF16D128R8},
		},
	},
}
