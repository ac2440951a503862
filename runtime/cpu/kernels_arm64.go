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
// nothing. The kernels are written by emit/neon (tile_arm64.s), their
// table by head dimensions, neonDims, too (kernels_dims_arm64.go).
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
