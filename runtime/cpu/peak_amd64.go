//go:build amd64 && !purego

package cpu

import xcpu "golang.org/x/sys/cpu"

func peakLoop() (func(int), int) {
	switch {
	case xcpu.X86.HasAVX512F:
		return peakFMA512, 12 * 2 * 16
	case xcpu.X86.HasAVX2 && xcpu.X86.HasFMA:
		return peakFMA256, 12 * 2 * 8
	}
	return peakGo, 12 * 2
}

// peakLoopOf returns the peak loop of a variant's vector width: peakFMA512
// for AVX512, peakFMA256 for AVX2 (each where the CPU has it), else
// peakLoop's.
func peakLoopOf(v Variant) (func(int), int) {
	switch {
	case v == AVX512 && xcpu.X86.HasAVX512F:
		return peakFMA512, 12 * 2 * 16
	case v == AVX2 && xcpu.X86.HasAVX2 && xcpu.X86.HasFMA:
		return peakFMA256, 12 * 2 * 8
	}
	return peakLoop()
}
