//go:build !amd64 || purego

package cpu

// readSum returns the portable read loop: no assembly in this build.
func readSum() func([]float32) float32 { return readSumGo }
