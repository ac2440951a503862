package cpu

import (
	"math"
	"testing"
	"time"
)

// TestPeakReadGBpsSmall: the probe on a small buffer returns a positive,
// finite figure quickly, at one and at several goroutines.
func TestPeakReadGBpsSmall(t *testing.T) {
	for _, threads := range []int{1, 2, 3} {
		t0 := time.Now()
		g := PeakReadGBps(threads, 4, 20*time.Millisecond)
		el := time.Since(t0)
		if !(g > 0) || math.IsInf(g, 0) {
			t.Errorf("threads %d: %v GB/s", threads, g)
		}
		if el > 300*time.Millisecond {
			t.Errorf("threads %d: took %v on a 4 MiB buffer", threads, el)
		}
		t.Logf("threads %d: %.1f GB/s (4 MiB buffer, in %v)", threads, g, el)
	}
	// More goroutines than the buffer has blocks: every float is still read
	// by exactly one slice.
	if g := PeakReadGBps(1000, 1, 0); !(g > 0) || math.IsInf(g, 0) {
		t.Errorf("1000 threads on 1 MiB: %v GB/s", g)
	}
}

// TestReadProbeMiB: the default, the floor, and the cap by the machine's
// memory.
func TestReadProbeMiB(t *testing.T) {
	if got := ReadProbeMiB(3); got != 3 {
		t.Errorf("ReadProbeMiB(3) = %d", got)
	}
	if got := ReadProbeMiB(-5); got != ReadProbeMiB(DefaultReadMiB) {
		t.Errorf("ReadProbeMiB(-5) = %d, want the default's %d", got, ReadProbeMiB(DefaultReadMiB))
	}
	limit := int64(unknownMemMiB)
	if total, ok := machineMemory(); ok {
		limit = total / readMemShare >> 20
	}
	if got := ReadProbeMiB(math.MaxInt); int64(got) > limit || got < minReadMiB {
		t.Errorf("ReadProbeMiB(MaxInt) = %d MiB, the cap here is %d MiB", got, limit)
	}
}

// TestReadSlices: the probe's slices are contiguous, cover the buffer once,
// and all but the last are whole blocks.
func TestReadSlices(t *testing.T) {
	for _, c := range []struct{ n, threads int }{{1000, 1}, {1000, 3}, {128 * 7, 2}, {100, 4}, {1 << 16, 7}} {
		buf := make([]float32, c.n)
		s := readSlices(buf, c.threads)
		if len(s) != c.threads {
			t.Fatalf("%+v: %d slices", c, len(s))
		}
		next := 0
		for i, x := range s {
			if len(x) > 0 && &x[0] != &buf[next] {
				t.Fatalf("%+v: slice %d does not start at %d", c, i, next)
			}
			if i < len(s)-1 && len(x)%128 != 0 {
				t.Fatalf("%+v: slice %d has %d floats", c, i, len(x))
			}
			next += len(x)
		}
		if next != c.n {
			t.Fatalf("%+v: slices cover %d floats", c, next)
		}
	}
}

// TestReadSum: the read loop this build picks sums exactly (small integers)
// on every length around its blocks.
func TestReadSum(t *testing.T) {
	sum := readSum()
	buf := make([]float32, 1100)
	for i := range buf {
		buf[i] = float32(i%7 + 1)
	}
	for n := 0; n <= len(buf); n++ {
		var want float32
		for _, x := range buf[:n] {
			want += x
		}
		if got := sum(buf[:n]); got != want {
			t.Fatalf("n %d: %v, want %v", n, got, want)
		}
		if got := readSumGo(buf[:n]); got != want {
			t.Fatalf("n %d: readSumGo %v, want %v", n, got, want)
		}
	}
}

// checkReadSumAsm: an assembly read loop f (blocks of block floats) sums
// exactly the whole blocks of n floats, reads nothing past them, and
// returns 0 for n < one block, negative n included.
func checkReadSumAsm(t *testing.T, name string, f func(*float32, int) float32, block int) {
	t.Helper()
	buf := make([]float32, 6*block+5)
	for i := range buf {
		buf[i] = float32(i%5 + 1)
	}
	for _, n := range []int{-1 << 62, -1, 0, 1, block - 1, block, block + 1, 2 * block, 5*block + 3, len(buf)} {
		whole := 0
		if n > 0 {
			whole = n / block * block
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
		got := f(&buf[0], n)
		copy(buf[whole:], saved)
		if got != want {
			t.Errorf("%s(n=%d): %v, want %v", name, n, got, want)
		}
	}
}
