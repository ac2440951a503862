//go:build !amd64 || purego

package kernel

func peakLoop() (func(int), int) { return peakGo, 12 * 2 }
