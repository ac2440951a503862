//go:build arm64 && !purego

package cpu

import "testing"

// atVariants lists the tile kernels of this architecture for the tests
// of tile_kernels_test.go.
func atVariants() []atVariant {
	return []atVariant{
		{"NEOND64", 64, tileNEOND64, hasNEON},
		{"NEOND128", 128, tileNEOND128, hasNEON},
	}
}

func TestPeakNEON(t *testing.T) {
	peakNEON(0)
	peakNEON(-1)
	peakNEON(1000)
}

// TestReadSumNEON: readSumNEON sums exactly the whole blocks of n floats,
// reads nothing past them, and returns 0 for n < one block.
func TestReadSumNEON(t *testing.T) {
	checkReadSumAsm(t, "readSumNEON", readSumNEON, 32)
}
