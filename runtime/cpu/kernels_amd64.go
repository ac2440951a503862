//go:build amd64 && !purego

package cpu

import xcpu "golang.org/x/sys/cpu"

// archKernels returns the kernels of an amd64 variant when the CPU has the
// instructions they need (AVX-512 Foundation; AVX2 with FMA and F16C, the
// half-precision conversions of the F16 decode, widening and narrowing
// kernels, which every AVX2 CPU since Haswell and Zen 1 has) and the
// operating system saves the registers (x/sys/cpu checks both), else nil.
func archKernels(v Variant) *kernels {
	switch v {
	case AVX512:
		if xcpu.X86.HasAVX512F {
			return avx512Kernels
		}
	case AVX2:
		if xcpu.X86.HasAVX2 && xcpu.X86.HasFMA && xcpu.X86.HasF16C {
			return avx2Kernels
		}
	}
	return nil
}

// The tables, made once so that dispatch allocates nothing; avx512Dims
// and avx2Dims, the kernels by head dimensions, are emit/avo's
// (kernels_dims_amd64.go).
var (
	avx512Kernels = &kernels{
		tile:      asmTile(avx512Dims),
		tileScore: asmTileScore(avx512Dims),
		byDims:    avx512Dims,
		tanh:      tanhAVX512,
		gemm:      gemmAVX512,
		bwdProb:   bwdProbAVX512,
		scoreBwd:  scoreBwdAVX512,
		lanes:     16,
		scaleRow:  scaleRowAVX512,
		addScaled: addScaledRowAVX512,
		lse:       lseAVX512,
		nonFinite: nonFiniteRowsAVX512,
		narrow:    [3]func(*uint16, *float32, int, float32){BF16: narrowBF16AVX512, F16: narrowF16AVX512},
		widen:     [3]func(*float32, *uint16, int){BF16: widenBF16AVX512, F16: widenF16AVX512},
		transpose: transposeTileAVX512,
		prefetch:  prefetchRowsAVX512,
		peak:      peakFMA512, peakFlops: 12 * 2 * 16,
		readSum: readSumAVX512, readBlock: 128,
	}
	avx2Kernels = &kernels{
		tile:      asmTile(avx2Dims),
		tileScore: asmTileScore(avx2Dims),
		byDims:    avx2Dims,
		tanh:      tanhAVX2,
		gemm:      gemmAVX2,
		bwdProb:   bwdProbAVX2,
		scoreBwd:  scoreBwdAVX2,
		lanes:     8,
		scaleRow:  scaleRowAVX2,
		addScaled: addScaledRowAVX2,
		lse:       lseAVX2,
		nonFinite: nonFiniteRowsAVX2,
		narrow:    [3]func(*uint16, *float32, int, float32){BF16: narrowBF16AVX2, F16: narrowF16AVX2},
		widen:     [3]func(*float32, *uint16, int){BF16: widenBF16AVX2, F16: widenF16AVX2},
		transpose: transposeTileAVX2,
		prefetch:  prefetchRowsAVX2,
		peak:      peakFMA256, peakFlops: 12 * 2 * 8,
		readSum: readSumAVX2, readBlock: 64,
	}
)
