package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"

	"github.com/attngen/attngen/runtime/cpu"
)

// mulInt64 multiplies non-negative ints, reporting whether the product
// fits an int64.
func mulInt64(xs ...int) (int64, bool) {
	p := uint64(1)
	for _, x := range xs {
		if x < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(p, uint64(x))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		p = lo
	}
	return int64(p), true
}

// addInt64 adds non-negative int64s, reporting whether the sum fits.
func addInt64(xs ...int64) (int64, bool) {
	var s int64
	for _, x := range xs {
		if x < 0 || s > math.MaxInt64-x {
			return 0, false
		}
		s += x
	}
	return s, true
}

// byteSize writes a byte count with a binary unit.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= unit && u < 6 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTPE"[u-1])
}

// memoryLimit is the most memory one attngen run may ask for: half of the
// machine's memory (MemTotal in /proc/meminfo), or half of the cgroup's
// memory.max when that is lower, or a fixed fallbackMemory where neither
// can be read. from says which.
func memoryLimit() (limit int64, from string) {
	total, ok := memTotal()
	if !ok {
		return fallbackMemory, "no /proc/meminfo here: a fixed cap"
	}
	from = fmt.Sprintf("half of this machine's %s, /proc/meminfo MemTotal", byteSize(total))
	if cg, ok := cgroupMax(); ok && cg < total {
		total, from = cg, fmt.Sprintf("half of this cgroup's memory.max %s", byteSize(cg))
	}
	return total / 2, from
}

// memTotal reads MemTotal from /proc/meminfo (Linux).
func memTotal() (int64, bool) {
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

// cgroupMax reads the cgroup v2 memory limit of this process, if any.
func cgroupMax() (int64, bool) {
	data, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil && n > 0
}

// benchMemory refuses a CPU benchmark whose tensors and workspace would not
// fit in memory: q, k, v and out of batch*heads*seq*headDim float32 each,
// lse, and the kernels' key and value tile workspace (the keys and values
// again, each sequence padded to whole tiles). Every product and sum is
// checked, so a flag near MaxInt64 is refused here, not in make.
func benchMemory(batch, heads, seq, headDim int) error {
	n, err := benchElems(batch, heads, seq, headDim)
	if err != nil {
		return err
	}
	padded, ok1 := mulInt64(batch, heads, seq/cpu.TK+1, cpu.TK, headDim)
	lse, ok2 := mulInt64(batch, heads, seq)
	floats, ok3 := addInt64(n, n, n, n, padded, padded, lse)
	total, ok4 := floats*4, floats <= math.MaxInt64/4
	ok := ok1 && ok2 && ok3 && ok4
	limit, from := memoryLimit()
	if !ok || total > limit {
		size := "more than 8 EiB"
		if ok {
			size = byteSize(total)
		}
		return usagef("-batch %d -heads %d -seq %d (head_dim %d) needs %s of memory for q, k, v, out, lse and the workspace; the limit is %s (%s): use a shorter -seq or fewer -heads",
			batch, heads, seq, headDim, size, byteSize(limit), from)
	}
	return nil
}
