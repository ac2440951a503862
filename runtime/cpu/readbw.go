package cpu

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultReadMiB is the buffer PeakReadGBps streams when asked for 0 MiB:
// 1 GiB, far beyond any last-level cache, so that what it measures is the
// memory's read bandwidth.
const DefaultReadMiB = 1024

// Bounds of the read probe's buffer.
const (
	// minReadMiB keeps the probe from timing a buffer of a few bytes.
	minReadMiB = 1
	// maxReadMiB keeps the buffer's byte count (and passes times it) well
	// inside an int, on 32-bit builds too.
	maxReadMiB = math.MaxInt >> 22
	// readMemShare: the buffer takes at most 1/readMemShare of this
	// machine's memory (MemTotal, or the cgroup's memory.max when lower).
	readMemShare = 8
	// unknownMemMiB is the cap where the machine's memory cannot be read.
	unknownMemMiB = 256
	// minPassBytes is the least one timed repetition reads: a small,
	// cache-resident buffer is read over several passes so that the time
	// is well above the clock's resolution and the goroutine start.
	minPassBytes = 64 << 20
)

// ReadProbeMiB is the size in MiB of the buffer PeakReadGBps(_, mib, _)
// streams: mib (DefaultReadMiB when mib <= 0), capped at an eighth of this
// machine's memory (MemTotal in /proc/meminfo, or the cgroup v2 memory.max
// when lower; 256 MiB where neither can be read), and at least 1 MiB.
func ReadProbeMiB(mib int) int {
	if mib <= 0 {
		mib = DefaultReadMiB
	}
	limit := int64(unknownMemMiB)
	if total, ok := machineMemory(); ok {
		limit = total / readMemShare >> 20
	}
	return int(max(min(int64(mib), limit, maxReadMiB), minReadMiB))
}

// PeakReadGBps measures this machine's memory read bandwidth in GB/s (1e9
// bytes per second): threads goroutines each sum their own contiguous slice
// of a float32 buffer of ReadProbeMiB(mib) MiB, with the widest vector loop
// the build and CPU allow (8 independent accumulators), and the best of
// repeated passes over about dur is returned. The buffer is written before
// it is timed (untouched pages would all read the kernel's one zero page)
// and left to the garbage collector afterwards. Benchmarks of memory-bound
// kernels (decoding) report their bytes per second against it, measured in
// the same run at the same thread count, as compute-bound ones are
// reported against PeakGFLOPS.
func PeakReadGBps(threads, mib int, dur time.Duration) float64 {
	threads = max(threads, 1)
	n := ReadProbeMiB(mib) << 20 / 4
	buf := make([]float32, n)
	slices := readSlices(buf, threads)
	// Write every page, on the goroutine that will read it.
	parallel(slices, func(s []float32) {
		for i := range s {
			s[i] = float32(i&1023) * (1.0 / 1024)
		}
	})
	passes := max(1, (minPassBytes+4*n-1)/(4*n))
	sum := readSum()
	var mu sync.Mutex
	var sink float32
	best := 0.0
	deadline := time.Now().Add(dur)
	for rep := 0; ; rep++ {
		t0 := time.Now()
		parallel(slices, func(s []float32) {
			var acc float32
			for p := 0; p < passes; p++ {
				acc += sum(s)
			}
			mu.Lock()
			sink += acc
			mu.Unlock()
		})
		el := time.Since(t0).Seconds()
		best = max(best, float64(passes)*float64(4*n)/el/1e9)
		// At least two repetitions: the first may pay for page faults or
		// for pulling a small buffer into the cache.
		if rep >= 1 && time.Now().After(deadline) {
			break
		}
	}
	readSink = sink
	return best
}

// readSlices cuts buf into threads contiguous slices whose lengths are
// multiples of the widest read loop's block (the last one takes the rest).
func readSlices(buf []float32, threads int) [][]float32 {
	const block = 128
	per := len(buf) / threads / block * block
	out := make([][]float32, threads)
	for t := range out {
		lo, hi := t*per, (t+1)*per
		if t == threads-1 {
			hi = len(buf)
		}
		out[t] = buf[lo:hi]
	}
	return out
}

// parallel runs f on every slice, one goroutine each, and waits.
func parallel(slices [][]float32, f func([]float32)) {
	var wg sync.WaitGroup
	for _, s := range slices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(s)
		}()
	}
	wg.Wait()
}

// readSumGo is the portable read loop: 8 independent scalar sums.
func readSumGo(s []float32) float32 {
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8 : i+8]
		a0 += b[0]
		a1 += b[1]
		a2 += b[2]
		a3 += b[3]
		a4 += b[4]
		a5 += b[5]
		a6 += b[6]
		a7 += b[7]
	}
	for ; i < len(s); i++ {
		a0 += s[i]
	}
	return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
}

// readSink keeps the probe's sums observable.
var readSink float32

// machineMemory is the memory this process may use: MemTotal from
// /proc/meminfo, or the cgroup v2 memory.max when that is lower.
func machineMemory() (int64, bool) {
	total, _, ok := MachineMemory()
	return total, ok
}

// MachineMemory returns the memory this process may use and where the
// figure comes from: MemTotal from /proc/meminfo, or the cgroup v2
// memory.max when that is lower (cgroup true). ok is false where neither
// can be read. attngen bench sizes its buffers from it.
func MachineMemory() (bytes int64, cgroup, ok bool) {
	total, ok := memInfoTotal()
	if cg, ok2 := cgroupMemoryMax(); ok2 && (!ok || cg < total) {
		return cg, true, true
	}
	return total, false, ok
}

// memInfoTotal reads MemTotal from /proc/meminfo (Linux).
func memInfoTotal() (int64, bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kb <= 0 || kb > math.MaxInt64/1024 {
				return 0, false
			}
			return kb * 1024, true
		}
	}
	return 0, false
}

// cgroupMemoryMax reads the cgroup v2 memory limit of this process, if any
// ("max" means none).
func cgroupMemoryMax() (int64, bool) {
	data, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil && n > 0
}
