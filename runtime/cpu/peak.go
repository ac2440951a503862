package cpu

import (
	"sync"
	"time"
)

// PeakGFLOPS measures this machine's float32 FMA peak on threads goroutines
// at once, each running 12 independent FMA chains on the widest vectors the
// build and CPU allow, for about dur; it returns the total GFLOP/s.
// Benchmarks report kernels as a fraction of it, measured in the same run.
func PeakGFLOPS(threads int, dur time.Duration) float64 {
	loop, flopsPerIter := peakLoop()
	return peakGFLOPS(loop, flopsPerIter, threads, dur)
}

// PeakGFLOPSOf is PeakGFLOPS for the vectors a variant's kernels use: the
// ymm peak for AVX2 (half the zmm peak on a CPU with AVX-512), the widest
// otherwise. A kernel's fraction of the peak is against its own width.
func PeakGFLOPSOf(v Variant, threads int, dur time.Duration) float64 {
	loop, flopsPerIter := peakLoopOf(v)
	return peakGFLOPS(loop, flopsPerIter, threads, dur)
}

// peakGFLOPS is PeakGFLOPS with a given loop (flopsPerIter flops an
// iteration): benchmarks of the AVX2 kernels compare against peakFMA256
// (peakLoopOf), the ymm peak, where PeakGFLOPS measures zmm.
func peakGFLOPS(loop func(int), flopsPerIter, threads int, dur time.Duration) float64 {
	// Calibrate iterations per call on one thread.
	n := 1 << 16
	for {
		t0 := time.Now()
		loop(n)
		if el := time.Since(t0); el > dur/20 || n > 1<<30 {
			break
		}
		n *= 2
	}
	best := 0.0
	for rep := 0; rep < 3; rep++ {
		var wg sync.WaitGroup
		start := time.Now()
		for t := 0; t < threads; t++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				loop(n)
			}()
		}
		wg.Wait()
		el := time.Since(start).Seconds()
		best = max(best, float64(threads)*float64(n)*float64(flopsPerIter)/el/1e9)
	}
	return best
}

// peakGo is the portable peak loop: 12 independent scalar multiply-add
// chains (the compiler fuses them where the target has FMA).
func peakGo(n int) {
	var a [12]float32
	x, y := float32(1.0000001), float32(0.9999999)
	for i := 0; i < n; i++ {
		for k := range a {
			a[k] = a[k]*x + y
		}
	}
	peakSink = a[0] + a[11]
}

var peakSink float32
