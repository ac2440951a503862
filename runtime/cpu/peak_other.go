//go:build !amd64 || purego

package cpu

func peakLoop() (func(int), int) { return peakGo, 12 * 2 }

func peakLoopOf(Variant) (func(int), int) { return peakLoop() }
