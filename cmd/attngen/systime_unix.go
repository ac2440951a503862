//go:build unix

package main

import (
	"syscall"
	"time"
)

// sysTime is the system CPU time this process has used so far (page
// faults, madvise and the like), or -1 where the platform does not say.
func sysTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Stime.Nano())
}
