package main

import (
	"fmt"
	"math"
	"math/bits"

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
	total, cgroup, ok := cpu.MachineMemory()
	switch {
	case !ok:
		return fallbackMemory, "no /proc/meminfo here: a fixed cap"
	case cgroup:
		from = fmt.Sprintf("half of this cgroup's memory.max %s", byteSize(total))
	default:
		from = fmt.Sprintf("half of this machine's %s, /proc/meminfo MemTotal", byteSize(total))
	}
	return total / 2, from
}

// benchMemory refuses a CPU benchmark whose tensors, workspace and
// read-bandwidth probe would not fit in memory: q and out of
// batch*headsQ*seqQ*headDim float32 each, lse (batch*headsQ*seqQ), k and v
// of batch*headsKV*seqK*headDim each, the kernels' key and value tile
// workspace (the keys and values again, each sequence padded to whole
// tiles), for esize 2 the 16-bit copies of q, k, v and out, for page > 0
// a paged copy of k and v of esize bytes an element, with grads the
// backward's dout, dq, dk, dv and row deltas, and probeBytes for
// the probe's buffer. Every product and sum is
// checked, so a flag near MaxInt64 is refused here, not in make.
func benchMemory(batch, headsQ, headsKV, seqQ, seqK, headDim, esize, page int, grads bool, probeBytes int64) error {
	nq, ok1 := mulInt64(batch, headsQ, seqQ, headDim)
	nkv, ok2 := mulInt64(batch, headsKV, seqK, headDim)
	if !ok1 || !ok2 {
		return usagef("-batch %d x -heads %d x -seq-q %d, -heads-kv %d x -seq %d, head_dim %d: the element count overflows a 64-bit count; no machine holds these tensors",
			batch, headsQ, seqQ, headsKV, seqK, headDim)
	}
	padded, ok3 := mulInt64(batch, headsKV, seqK/cpu.TK+1, cpu.TK, headDim)
	lse, ok4 := mulInt64(batch, headsQ, seqQ)
	floats, ok5 := addInt64(nq, nq, nkv, nkv, padded, padded, lse)
	if grads { // the backward's dout, dq, dk, dv and its row deltas
		g, ok := addInt64(floats, nq, nq, nkv, nkv, lse)
		floats, ok5 = g, ok5 && ok
	}
	tensors, ok6 := floats*4, floats <= math.MaxInt64/4
	if page > 0 { // a paged copy of k and v in their element type, in whole pages
		pages, ok := mulInt64(batch, headsKV, seqK/page+1, page, headDim)
		per := 2 * int64(esize)
		ok6 = ok6 && ok && pages <= math.MaxInt64/per && tensors <= math.MaxInt64-per*pages
		tensors += per * pages
	}
	if esize == 2 { // 16-bit copies of q, k, v and out beside the float32 ones
		in, ok := addInt64(nq, nkv, nkv, nq)
		ok6 = ok6 && ok && in <= math.MaxInt64/2 && tensors <= math.MaxInt64-2*in
		tensors += 2 * in
	}
	total, ok7 := addInt64(tensors, max(probeBytes, 0))
	ok := ok3 && ok4 && ok5 && ok6 && ok7
	limit, from := memoryLimit()
	if !ok || total > limit {
		size := "more than 8 EiB"
		if ok {
			size = fmt.Sprintf("%s (%s for the read-bandwidth probe's buffer)", byteSize(total), byteSize(probeBytes))
		}
		return usagef("-batch %d -heads %d -heads-kv %d -seq %d -seq-q %d (head_dim %d) needs %s of memory for q, k, v, out, lse (with -pass bwd or both their gradients too), the workspace and the read-bandwidth probe; the limit is %s (%s): use a shorter -seq or -seq-q, fewer -heads or -heads-kv, or a smaller -bw-mib",
			batch, headsQ, headsKV, seqK, seqQ, headDim, size, byteSize(limit), from)
	}
	return nil
}
