package cpu_test

import (
	"time"

	"golang.org/x/sys/unix"
)

// On Linux BenchmarkShapesCPU reads the calling thread's CPU clock.
func init() {
	threadClock = func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			panic(err)
		}
		return time.Duration(ts.Nano())
	}
}
