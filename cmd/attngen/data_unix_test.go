//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDataUnboundedInput: a -data that is a pipe or a device passes any
// os.Stat size check (its size is 0), so the read itself must stop at the
// cap: a FIFO fed 64 MiB of valid-looking data and /dev/zero, which never
// ends, are refused with an error naming the flag and the cap, and the
// FIFO's writer is cut off after about the cap.
func TestDataUnboundedInput(t *testing.T) {
	want := fmt.Sprintf("more than %d bytes", maxDataFile)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	for _, cmd := range []string{"show", "reach"} {
		written := make(chan int64, 1)
		go func() {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				written <- -1
				return
			}
			defer w.Close()
			chunk := bytes.Repeat([]byte("0 "), 32<<10)
			var n int64
			for n < 64<<20 {
				m, err := w.Write(chunk)
				n += int64(m)
				if err != nil { // the reader closed: EPIPE
					break
				}
			}
			written <- n
		}()
		args := []string{cmd, "-spec", "../../spec/examples/document.yaml", "-seq", "8", "-data", fifo}
		if cmd == "show" {
			args = append(args, "-tile", "2")
		}
		_, errs, code := runBounded(t, time.Minute, args...)
		if code == 0 || !strings.Contains(errs, "-data "+fifo) || !strings.Contains(errs, want) {
			t.Errorf("%s -data FIFO: exit %d, stderr %q, want %q", cmd, code, errs, want)
		}
		if n := drain(fifo, written); n > maxDataFile+1<<20 {
			t.Errorf("%s -data FIFO: the writer wrote %d bytes, want the read to stop near %d", cmd, n, maxDataFile)
		}
	}
	if _, err := os.Stat("/dev/zero"); err != nil {
		return
	}
	for _, cmd := range []string{"show", "reach"} {
		args := []string{cmd, "-spec", "../../spec/examples/tree.yaml", "-seq", "8", "-data", "/dev/zero"}
		if cmd == "show" {
			args = append(args, "-tile", "2")
		}
		_, errs, code := runBounded(t, time.Minute, args...)
		if code == 0 || !strings.Contains(errs, "-data /dev/zero") || !strings.Contains(errs, want) {
			t.Errorf("%s -data /dev/zero: exit %d, stderr %q, want %q", cmd, code, errs, want)
		}
	}
}

// drain waits for the FIFO writer's count. Should the command not have
// opened the FIFO, it opens and closes the read end now and then, so that
// the writer's open returns and its next write fails.
func drain(fifo string, written chan int64) int64 {
	for {
		select {
		case n := <-written:
			return n
		case <-time.After(50 * time.Millisecond):
			if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				r.Close()
			}
		}
	}
}
