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
