//go:build !unix

package main

import "time"

// sysTime: this platform's system CPU time is not measured.
func sysTime() time.Duration { return -1 }
