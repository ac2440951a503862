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
		buf := make([]float32, 6*c.block+5)
		for i := range buf {
			buf[i] = float32(i%5 + 1)
		}
		for _, n := range []int{-1 << 62, -1, 0, 1, c.block - 1, c.block, c.block + 1, 2 * c.block, 5*c.block + 3, len(buf)} {
			whole := 0
			if n > 0 {
				whole = n / c.block * c.block
			}
			var want float32
			for _, x := range buf[:whole] {
				want += x
			}
			// Poison what lies past the blocks: a read there would show.
			saved := append([]float32(nil), buf[whole:]...)
			for i := whole; i < len(buf); i++ {
				buf[i] = 1e30
			}
			got := c.f(&buf[0], n)
			copy(buf[whole:], saved)
			if got != want {
				t.Errorf("%s(n=%d): %v, want %v", c.name, n, got, want)
			}
		}
	}
}
