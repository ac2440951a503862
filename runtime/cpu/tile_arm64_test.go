//go:build arm64 && !purego

package cpu

import xcpu "golang.org/x/sys/cpu"

// atVariants lists the tile kernels of this architecture for the tests
// of tile_kernels_test.go.
func atVariants() []atVariant {
	return []atVariant{
		{"NEOND64", 64, tileNEOND64, xcpu.ARM64.HasASIMD},
		{"NEOND128", 128, tileNEOND128, xcpu.ARM64.HasASIMD},
	}
}
