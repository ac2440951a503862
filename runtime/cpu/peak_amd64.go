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
