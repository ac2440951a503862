//go:build arm64 && !purego

package cpu

import (
	"fmt"
	"testing"
)

// atVariants lists the tile kernels of this architecture for the tests
// of tile_kernels_test.go: every square entry of the NEON table.
func atVariants() []atVariant {
	var vs []atVariant
	for _, d := range squareTestDims(neonKernels) {
		vs = append(vs, atVariant{fmt.Sprintf("NEOND%d", d), d, neonKernels.at(square(d)).tile, hasNEON})
	}
	return vs
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
