package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
)

// clock is what timePair reads: the wall clock, or for BenchmarkShapesCPU
// the thread's CPU clock (threadClock).
var clock = func() time.Duration { return time.Duration(time.Now().UnixNano()) }

// threadClock reads the calling thread's CPU time where the OS has such a
// clock (shapes_clock_linux_test.go), else it is nil.
var threadClock func() time.Duration

// timePair times calls a and b in rounds (the same noise for both), each
// round running them in the other order, and returns their median times.
func timePair(rounds int, a, b func()) (ta, tb time.Duration) {
	var xa, xb []time.Duration
	for i := 0; i < rounds; i++ {
		// the order alternates, so that neither call always runs second
		// (on caches the other warmed)
		first, second := a, b
		if i%2 == 1 {
			first, second = b, a
		}
		t0 := clock()
		first()
		t1 := clock()
		second()
		t2 := clock()
		da, db := t1-t0, t2-t1
		if i%2 == 1 {
			da, db = db, da
		}
		xa, xb = append(xa, da), append(xb, db)
	}
	med := func(x []time.Duration) time.Duration {
		for i := 1; i < len(x); i++ {
			for j := i; j > 0 && x[j] < x[j-1]; j-- {
				x[j], x[j-1] = x[j-1], x[j]
			}
		}
		return x[len(x)/2]
	}
	return med(xa), med(xb)
}

// BenchmarkShapes prints, measured side by side in alternating rounds on
// the best variant: BSHD and packed-QKV prefill against BHSD (target:
// within 3%), a ragged decode batch of 8 sequences against the same keys
// in one uniform batch (target: at most 1.1x), and per-FLOP prefill time
// of head sizes 96 and 256 against 128 (target: within 15%). Run with
// -bench Shapes -benchtime 1x (-short: without the head sizes).
func BenchmarkShapes(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	_, m := headsPlan(b, "name: s\nmask: {window: {size: 1024}}\n")
	var v cpu.Variant
	run := func(a cpu.Args) func() {
		return func() {
			if err := cpu.ForwardArgs(m, v, a); err != nil {
				b.Fatal(err)
			}
		}
	}
	for b.Loop() {
		for _, v = range supported() {
			if v == cpu.PureGo {
				continue
			}
			shapesRound(b, r, m, v, run)
		}
	}
}

// BenchmarkShapesCPU is BenchmarkShapes on one thread (GOMAXPROCS 1, so
// a call runs on the calling goroutine alone) timed by that thread's CPU
// clock: the CPU time of each call, which other processes on a busy
// machine do not add to as they add to the wall time. Run with -bench
// ShapesCPU -benchtime 1x (-short: without the head sizes).
func BenchmarkShapesCPU(b *testing.B) {
	if threadClock == nil {
		b.Skip("no thread CPU clock on this OS")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	wall := clock
	clock = threadClock
	defer func() { clock = wall }()
	BenchmarkShapes(b)
}

// shapesRound is one variant's part of BenchmarkShapes.
func shapesRound(b *testing.B, r *rand.Rand, m mask.Mask, v cpu.Variant, run func(cpu.Args) func()) {
	{
		// Layouts: prefill S=2048, H=8/2, D=128.
		s := cpu.Shape{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: 2048, SeqK: 2048, HeadDim: 128}
		c := newShapeCall(b, r, m, s, 0, s.SeqK)
		base := c.a
		for _, name := range []string{"BSHD", "packed"} {
			a := base
			a.Out = make([]float32, c.nOut)
			if name == "BSHD" {
				a.Layout = cpu.BSHD(s, 0)
			} else {
				a.Layout = cpu.PackedQKV(s)
				// random values, as BHSD's: a buffer never written would be
				// read from the OS's zero page, every line a cache hit
				buf := randSlice(r, s.SeqK*(s.HeadsQ+2*s.HeadsKV)*s.HeadDim)
				a.Q, a.K, a.V = buf, buf[s.HeadsQ*s.HeadDim:], buf[(s.HeadsQ+s.HeadsKV)*s.HeadDim:]
			}
			ta, tb := timePair(21, run(base), run(a))
			fmt.Printf("%s layout %-6s prefill S=2048 D=128: BHSD %v, %s %v, ratio %.3f\n", v, name, ta, name, tb, float64(tb)/float64(ta))
		}
		// Ragged decode: 8 sequences of 1k..7k keys (32k in all) against 8
		// of 4k each; H=8/2, D=128, one query each.
		sd := cpu.Shape{Batch: 8, HeadsQ: 8, HeadsKV: 2, SeqQ: 1, SeqK: 7168, HeadDim: 128}
		cd := newShapeCall(b, r, m, sd, 0, sd.SeqK)
		lens := []int32{1024, 7168, 2048, 6144, 3072, 5120, 4096, 4096}
		rag := cd.a
		rag.SeqLensK = lens
		uni := cd.a
		uni.Shape.SeqK = 4096
		uni.K, uni.V = cd.k[:8*2*4096*128], cd.v[:8*2*4096*128]
		ta, tb := timePair(61, run(uni), run(rag))
		fmt.Printf("%s ragged decode 8 seqs, 32k keys: uniform %v, ragged %v, ratio %.3f\n", v, ta, tb, float64(tb)/float64(ta))
		if testing.Short() {
			return // -short: layouts and ragged decode only
		}
		// Head sizes, per FLOP: prefill S=2048, H=8/8.
		at := func(d int) cpu.Args {
			s := cpu.Shape{Batch: 1, HeadsQ: 8, HeadsKV: 8, SeqQ: 2048, SeqK: 2048, HeadDim: d}
			return newShapeCall(b, r, m, s, 0, s.SeqK).a
		}
		a128 := at(128)
		for _, d := range []int{96, 256, 64, 192} {
			ta, tb := timePair(7, run(a128), run(at(d)))
			fmt.Printf("%s head dim %d vs 128, prefill per FLOP: %v, %v, ratio %.3f\n", v, d, ta, tb, float64(tb)/float64(ta)*128/float64(d))
		}
	}
}

// BenchmarkLayoutCalls runs BenchmarkShapes' calls one at a time, for
// profiles (-cpuprofile) and per-call timings: the prefill on each layout
// and the ragged and uniform decode batches, on each assembly variant.
func BenchmarkLayoutCalls(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	_, m := headsPlan(b, "name: s\nmask: {window: {size: 1024}}\n")
	s := cpu.Shape{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: 2048, SeqK: 2048, HeadDim: 128}
	c := newShapeCall(b, r, m, s, 0, s.SeqK)
	bshd := c.a
	bshd.Layout = cpu.BSHD(s, 0)
	packed := c.a
	packed.Layout = cpu.PackedQKV(s)
	buf := randSlice(r, s.SeqK*(s.HeadsQ+2*s.HeadsKV)*s.HeadDim)
	packed.Q, packed.K, packed.V = buf, buf[s.HeadsQ*s.HeadDim:], buf[(s.HeadsQ+s.HeadsKV)*s.HeadDim:]
	sd := cpu.Shape{Batch: 8, HeadsQ: 8, HeadsKV: 2, SeqQ: 1, SeqK: 7168, HeadDim: 128}
	cd := newShapeCall(b, r, m, sd, 0, sd.SeqK)
	rag := cd.a
	rag.SeqLensK = []int32{1024, 7168, 2048, 6144, 3072, 5120, 4096, 4096}
	uni := cd.a
	uni.Shape.SeqK = 4096
	uni.K, uni.V = cd.k[:8*2*4096*128], cd.v[:8*2*4096*128]
	calls := []struct {
		name string
		a    cpu.Args
	}{{"BHSD", c.a}, {"BSHD", bshd}, {"packed", packed}, {"uniform", uni}, {"ragged", rag}}
	for _, v := range supported() {
		if v == cpu.PureGo {
			continue
		}
		for _, x := range calls {
			b.Run(fmt.Sprintf("%s/%s", v, x.name), func(b *testing.B) {
				for b.Loop() {
					if err := cpu.ForwardArgs(m, v, x.a); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDecodeOneRow times a causal decoding step of one query row per
// job (H = Hkv = 8, the memory-bound case whose kernels prefetch the next
// tile's key rows) at D = 128 and 256, and one of H = 8, Hkv = 2 in BSHD
// with head_dim {qk: 192, v: 128} (key and value rows at offsets of their
// own), on each assembly variant, on one thread, and reports the thread's
// CPU time per call (cpu-ns/op) beside the wall time, which other
// processes on a busy machine add to.
func BenchmarkDecodeOneRow(b *testing.B) {
	if threadClock == nil {
		b.Skip("no thread CPU clock on this OS")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	r := rand.New(rand.NewPCG(3, 4))
	_, m := headsPlan(b, "name: s\nhead_dim: 128\nmask: {window: {size: 1000000}}\n")
	for _, v := range supported() {
		if v == cpu.PureGo {
			continue
		}
		for _, d := range []int{128, 256, 192} {
			s := cpu.Shape{Batch: 1, HeadsQ: 8, HeadsKV: 8, SeqQ: 1, SeqK: 32768, HeadDim: d}
			name := fmt.Sprintf("%s/D=%d", v, d)
			dv := 0
			if d == 192 {
				s.HeadsKV, dv, name = 2, 128, fmt.Sprintf("%s/BSHD-192-128", v)
			}
			a := newShapeCall(b, r, m, s, dv, s.SeqK).a
			if d == 192 {
				a.Layout = cpu.BSHD(s, dv)
			}
			b.Run(name, func(b *testing.B) {
				runtime.LockOSThread() // the thread whose clock is read
				defer runtime.UnlockOSThread()
				t0 := threadClock()
				for b.Loop() {
					if err := cpu.ForwardArgs(m, v, a); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(threadClock()-t0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
