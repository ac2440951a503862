//go:build amd64 && !purego

package cpu

import (
	"testing"

	xcpu "golang.org/x/sys/cpu"
)

// TestReadSumAsm: each assembly read loop sums exactly the whole blocks of
// n floats, reads nothing past them, and returns 0 for n < one block,
// negative n included.
func TestReadSumAsm(t *testing.T) {
	for _, c := range []struct {
		name  string
		ok    bool
		f     func(*float32, int) float32
		block int
	}{
		{"readSumAVX512", xcpu.X86.HasAVX512F, readSumAVX512, 128},
		{"readSumAVX2", xcpu.X86.HasAVX2, readSumAVX2, 64},
	} {
		if !c.ok {
			t.Logf("%s: this CPU lacks it", c.name)
			continue
		}
		checkReadSumAsm(t, c.name, c.f, c.block)
	}
}
