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

// The tables, made once so that dispatch allocates nothing.
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
		lse:       lseAVX512,
		nonFinite: nonFiniteRowsAVX512,
		narrow:    [3]func(*uint16, *float32, int, float32){BF16: narrowBF16AVX512, F16: narrowF16AVX512},
		widen:     [3]func(*float32, *uint16, int){BF16: widenBF16AVX512, F16: widenF16AVX512},
		transpose: transposeTileAVX512,
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
		lse:       lseAVX2,
		nonFinite: nonFiniteRowsAVX2,
		narrow:    [3]func(*uint16, *float32, int, float32){BF16: narrowBF16AVX2, F16: narrowF16AVX2},
		widen:     [3]func(*float32, *uint16, int){BF16: widenBF16AVX2, F16: widenF16AVX2},
		transpose: transposeTileAVX2,
		peak:      peakFMA256, peakFlops: 12 * 2 * 8,
		readSum: readSumAVX2, readBlock: 64,
	}
)

// avx512Dims are the AVX512 kernels by head dimensions.
var avx512Dims = []dimKernels{
	{
		dims: square(64), tile: tileAVX512D64, tileScore: tileScoreAVX512D64,
		decode: [3][4]decodeKernel{
			F32:  {decodeAVX512F32D64R1, decodeAVX512F32D64R2, decodeAVX512F32D64R4, decodeAVX512F32D64R8},
			BF16: {decodeAVX512BF16D64R1, decodeAVX512BF16D64R2, decodeAVX512BF16D64R4, decodeAVX512BF16D64R8},
			F16:  {decodeAVX512F16D64R1, decodeAVX512F16D64R2, decodeAVX512F16D64R4, decodeAVX512F16D64R8},
		},
		decodeScore: [3][4]decodeScoreKernel{
			F32:  {decodeScoreAVX512F32D64R1, decodeScoreAVX512F32D64R2, decodeScoreAVX512F32D64R4, decodeScoreAVX512F32D64R8},
			BF16: {decodeScoreAVX512BF16D64R1, decodeScoreAVX512BF16D64R2, decodeScoreAVX512BF16D64R4, decodeScoreAVX512BF16D64R8},
			F16:  {decodeScoreAVX512F16D64R1, decodeScoreAVX512F16D64R2, decodeScoreAVX512F16D64R4, decodeScoreAVX512F16D64R8},
		},
	},
	{
		dims: square(128), tile: tileAVX512D128, tileScore: tileScoreAVX512D128,
		decode: [3][4]decodeKernel{
			F32:  {decodeAVX512F32D128R1, decodeAVX512F32D128R2, decodeAVX512F32D128R4, decodeAVX512F32D128R8},
			BF16: {decodeAVX512BF16D128R1, decodeAVX512BF16D128R2, decodeAVX512BF16D128R4, decodeAVX512BF16D128R8},
			F16:  {decodeAVX512F16D128R1, decodeAVX512F16D128R2, decodeAVX512F16D128R4, decodeAVX512F16D128R8},
		},
		decodeScore: [3][4]decodeScoreKernel{
			F32:  {decodeScoreAVX512F32D128R1, decodeScoreAVX512F32D128R2, decodeScoreAVX512F32D128R4, decodeScoreAVX512F32D128R8},
			BF16: {decodeScoreAVX512BF16D128R1, decodeScoreAVX512BF16D128R2, decodeScoreAVX512BF16D128R4, decodeScoreAVX512BF16D128R8},
			F16:  {decodeScoreAVX512F16D128R1, decodeScoreAVX512F16D128R2, decodeScoreAVX512F16D128R4, decodeScoreAVX512F16D128R8},
		},
	},
}

// avx2Dims are the AVX2 kernels by head dimensions.
var avx2Dims = []dimKernels{
	{
		dims: square(64), tile: tileAVX2D64, tileScore: tileScoreAVX2D64,
		decode: [3][4]decodeKernel{
			F32:  {decodeAVX2F32D64R1, decodeAVX2F32D64R2, decodeAVX2F32D64R4, decodeAVX2F32D64R8},
			BF16: {decodeAVX2BF16D64R1, decodeAVX2BF16D64R2, decodeAVX2BF16D64R4, decodeAVX2BF16D64R8},
			F16:  {decodeAVX2F16D64R1, decodeAVX2F16D64R2, decodeAVX2F16D64R4, decodeAVX2F16D64R8},
		},
		decodeScore: [3][4]decodeScoreKernel{
			F32:  {decodeScoreAVX2F32D64R1, decodeScoreAVX2F32D64R2, decodeScoreAVX2F32D64R4, decodeScoreAVX2F32D64R8},
			BF16: {decodeScoreAVX2BF16D64R1, decodeScoreAVX2BF16D64R2, decodeScoreAVX2BF16D64R4, decodeScoreAVX2BF16D64R8},
			F16:  {decodeScoreAVX2F16D64R1, decodeScoreAVX2F16D64R2, decodeScoreAVX2F16D64R4, decodeScoreAVX2F16D64R8},
		},
	},
	{
		dims: square(128), tile: tileAVX2D128, tileScore: tileScoreAVX2D128,
		decode: [3][4]decodeKernel{
			F32:  {decodeAVX2F32D128R1, decodeAVX2F32D128R2, decodeAVX2F32D128R4, decodeAVX2F32D128R8},
			BF16: {decodeAVX2BF16D128R1, decodeAVX2BF16D128R2, decodeAVX2BF16D128R4, decodeAVX2BF16D128R8},
			F16:  {decodeAVX2F16D128R1, decodeAVX2F16D128R2, decodeAVX2F16D128R4, decodeAVX2F16D128R8},
		},
		decodeScore: [3][4]decodeScoreKernel{
			F32:  {decodeScoreAVX2F32D128R1, decodeScoreAVX2F32D128R2, decodeScoreAVX2F32D128R4, decodeScoreAVX2F32D128R8},
			BF16: {decodeScoreAVX2BF16D128R1, decodeScoreAVX2BF16D128R2, decodeScoreAVX2BF16D128R4, decodeScoreAVX2BF16D128R8},
			F16:  {decodeScoreAVX2F16D128R1, decodeScoreAVX2F16D128R2, decodeScoreAVX2F16D128R4, decodeScoreAVX2F16D128R8},
		},
	},
}
