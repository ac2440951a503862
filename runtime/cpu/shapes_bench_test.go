package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/attngen/attngen/runtime/cpu"
)

// timePair times calls a and b in alternating rounds (the same noise for
// both) and returns their median times.
func timePair(rounds int, a, b func()) (ta, tb time.Duration) {
	var xa, xb []time.Duration
	for i := 0; i < rounds; i++ {
		t0 := time.Now()
		a()
		t1 := time.Now()
		b()
		t2 := time.Now()
		xa, xb = append(xa, t1.Sub(t0)), append(xb, t2.Sub(t1))
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
// -bench Shapes -benchtime 1x.
func BenchmarkShapes(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	_, m := headsPlan(b, "name: s\nmask: {window: {size: 1024}}\n")
	v := cpu.Best()
	run := func(a cpu.Args) func() {
		return func() {
			if err := cpu.ForwardArgs(m, v, a); err != nil {
				b.Fatal(err)
			}
		}
	}
	for b.Loop() {
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
				buf := make([]float32, s.SeqK*(s.HeadsQ+2*s.HeadsKV)*s.HeadDim)
				a.Q, a.K, a.V = buf, buf[s.HeadsQ*s.HeadDim:], buf[(s.HeadsQ+s.HeadsKV)*s.HeadDim:]
			}
			ta, tb := timePair(9, run(base), run(a))
			fmt.Printf("layout %-6s prefill S=2048 D=128: BHSD %v, %s %v, ratio %.3f\n", name, ta, name, tb, float64(tb)/float64(ta))
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
		ta, tb := timePair(15, run(uni), run(rag))
		fmt.Printf("ragged decode 8 seqs, 32k keys: uniform %v, ragged %v, ratio %.3f\n", ta, tb, float64(tb)/float64(ta))
		// Head sizes, per FLOP: prefill S=2048, H=8/8.
		at := func(d int) cpu.Args {
			s := cpu.Shape{Batch: 1, HeadsQ: 8, HeadsKV: 8, SeqQ: 2048, SeqK: 2048, HeadDim: d}
			return newShapeCall(b, r, m, s, 0, s.SeqK).a
		}
		a128 := at(128)
		for _, d := range []int{96, 256, 64, 192} {
			ta, tb := timePair(7, run(a128), run(at(d)))
			fmt.Printf("head dim %d vs 128, prefill per FLOP: %v, %v, ratio %.3f (%s)\n", d, ta, tb, float64(tb)/float64(ta)*128/float64(d), v)
		}
	}
}
