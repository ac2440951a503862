//go:build amd64 && !purego

package kernel

import "golang.org/x/sys/cpu"

func peakLoop() (func(int), int) {
	switch {
	case cpu.X86.HasAVX512F:
		return peakFMA512, 12 * 2 * 16
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return peakFMA256, 12 * 2 * 8
	}
	return peakGo, 12 * 2
}
