package cpu_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
)

// causal is a hand-written mask.Mask: key j is kept by query i when j <= i.
type causal struct{}

func (causal) Stride() int    { return 1 }
func (causal) UsesDocs() bool { return false }
func (causal) Hull(q0, q1, x int, _ *mask.Docs) (int, int) {
	return max(x, 0), q1
}
func (causal) Class(q0, q1, k0, k1 int, _ *mask.Docs) mask.Class {
	switch {
	case k0 > q1:
		return mask.Empty
	case k1 <= q0:
		return mask.Full
	}
	return mask.Partial
}
func (causal) Word(i, k0, nk int, _ *mask.Docs) uint64 {
	return mask.TailBits(min(i-k0+1, nk-k0))
}

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

type args struct {
	out, lse, q, k, v []float32
	s                 cpu.Shape
}

func newArgs(r *rand.Rand, s cpu.Shape) args {
	nq := s.Batch * s.HeadsQ * s.SeqQ * s.HeadDim
	nkv := s.Batch * s.HeadsKV * s.SeqK * s.HeadDim
	return args{make([]float32, nq), make([]float32, nq/s.HeadDim), randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv), s}
}

// TestShapeOverflow: shapes whose sizes overflow int are errors, before
// anything is allocated (no out-of-memory, no panic).
func TestShapeOverflow(t *testing.T) {
	for _, s := range []cpu.Shape{
		{Batch: 1 << 57, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: 64},
		{Batch: math.MaxInt, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: 64},
		{Batch: 1, HeadsQ: 1 << 40, HeadsKV: 1 << 40, SeqQ: 1 << 20, SeqK: 1 << 20, HeadDim: 64},
		{Batch: 1 << 30, HeadsQ: 1 << 30, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: 128},
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: math.MaxInt32 + 1, HeadDim: 64},
		{Batch: 3, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: math.MaxInt / 64, HeadDim: 64},
	} {
		err := cpu.Forward(causal{}, cpu.PureGo, nil, nil, nil, nil, nil, nil, s)
		if !errors.Is(err, cpu.ErrShape) {
			t.Errorf("%+v: error %v, want ErrShape", s, err)
		}
	}
}

// TestScale: a scale whose product with log2(e) overflows float32 is an
// error (it turned every row into 0 and -Inf); large finite ones run.
func TestScale(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := cpu.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 5, SeqK: 5, HeadDim: 64}
	for _, sc := range []float32{3e38, -3e38, float32(math.Inf(1)), float32(math.NaN())} {
		s.Scale = sc
		a := newArgs(r, s)
		if err := cpu.Forward(causal{}, cpu.PureGo, a.out, a.lse, a.q, a.k, a.v, nil, s); !errors.Is(err, cpu.ErrShape) {
			t.Errorf("scale %v: error %v, want ErrShape", sc, err)
		}
	}
	s.Scale = 1e-3
	a := newArgs(r, s)
	if err := cpu.Forward(causal{}, cpu.PureGo, a.out, a.lse, a.q, a.k, a.v, nil, s); err != nil {
		t.Error(err)
	}
}

// TestAliasing: an output that overlaps an input or the other output is an
// error; inputs may share memory, outputs may sit side by side in one
// buffer.
func TestAliasing(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	s := cpu.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 9, SeqK: 9, HeadDim: 64}
	a := newArgs(r, s)
	n := len(a.q)
	for name, c := range map[string]func() error{
		"out = v": func() error { return cpu.Forward(causal{}, cpu.Auto, a.v, nil, a.q, a.k, a.v, nil, s) },
		"out = q": func() error { return cpu.Forward(causal{}, cpu.Auto, a.q, nil, a.q, a.k, a.v, nil, s) },
		"out overlaps k": func() error {
			big := make([]float32, 2*n)
			return cpu.Forward(causal{}, cpu.Auto, big[n-1:], nil, a.q, big[:n], a.v, nil, s)
		},
		"lse inside q": func() error { return cpu.Forward(causal{}, cpu.Auto, a.out, a.q[n-len(a.lse):], a.q, a.k, a.v, nil, s) },
		"lse inside out": func() error {
			return cpu.Forward(causal{}, cpu.Auto, a.out, a.out[n-len(a.lse):], a.q, a.k, a.v, nil, s)
		},
		"lse overlaps out": func() error {
			big := make([]float32, 2*n)
			return cpu.Forward(causal{}, cpu.Auto, big[:n], big[n-1:], a.q, a.k, a.v, nil, s)
		},
	} {
		if err := c(); !errors.Is(err, cpu.ErrAlias) {
			t.Errorf("%s: error %v, want ErrAlias", name, err)
		}
	}
	// Allowed: q = k = v (self-attention on one buffer), out and lse
	// adjacent in one allocation.
	buf := make([]float32, n+len(a.lse))
	if err := cpu.Forward(causal{}, cpu.Auto, buf[:n], buf[n:], a.q, a.q, a.q, nil, s); err != nil {
		t.Error(err)
	}
}

// TestDocumentLengths: document ids must cover SeqK positions (shared) or
// Batch*SeqK (one row per batch); other lengths are errors.
func TestDocumentLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	s := cpu.Shape{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 7, SeqK: 7, HeadDim: 64}
	a := newArgs(r, s)
	m := docMask{}
	for _, n := range []int{0, 6, 8, 13, 15, 21} {
		if err := cpu.Forward(m, cpu.PureGo, a.out, a.lse, a.q, a.k, a.v, make([]int32, n), s); !errors.Is(err, cpu.ErrDocument) {
			t.Errorf("%d ids: error %v, want ErrDocument", n, err)
		}
	}
	for _, n := range []int{7, 14} {
		if err := cpu.Forward(m, cpu.PureGo, a.out, a.lse, a.q, a.k, a.v, make([]int32, n), s); err != nil {
			t.Errorf("%d ids: %v", n, err)
		}
	}
	bad := []int32{0, 0, 1, 1, 1, 2, 2, 0, 1, 0, 1, 1, 1, 1} // batch 1 decreases
	if err := cpu.Forward(m, cpu.PureGo, a.out, a.lse, a.q, a.k, a.v, bad, s); !errors.Is(err, cpu.ErrDocument) {
		t.Errorf("decreasing ids in batch 1: error %v, want ErrDocument", err)
	}
}

// docMask keeps pairs in the same document.
type docMask struct{}

func (docMask) Stride() int    { return 1 }
func (docMask) UsesDocs() bool { return true }
func (docMask) Hull(q0, q1, x int, d *mask.Docs) (int, int) {
	return max(x, d.Start(q0)), d.End(q1) - 1
}
func (docMask) Class(q0, q1, k0, k1 int, d *mask.Docs) mask.Class { return mask.Partial }
func (docMask) Word(i, k0, nk int, d *mask.Docs) uint64 {
	var w uint64
	for c := 0; c < 64 && k0+c < nk; c++ {
		if d.ID(k0+c) == d.ID(i) {
			w |= 1 << c
		}
	}
	return w
}

// TestConcurrentCalls: calls from many goroutines at once give the results
// of the same calls made one at a time, bit for bit.
func TestConcurrentCalls(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	shapes := []cpu.Shape{
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 100, SeqK: 130, HeadDim: 64},
		{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 70, SeqK: 70, HeadDim: 128},
		{Batch: 1, HeadsQ: 3, HeadsKV: 3, SeqQ: 1, SeqK: 200, HeadDim: 64},
	}
	var calls []args
	var want [][]float32
	for i := 0; i < 12; i++ {
		a := newArgs(r, shapes[i%len(shapes)])
		if err := cpu.Forward(causal{}, cpu.Auto, a.out, a.lse, a.q, a.k, a.v, nil, a.s); err != nil {
			t.Fatal(err)
		}
		want = append(want, append(append([]float32(nil), a.out...), a.lse...))
		calls = append(calls, a)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(calls))
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := calls[i]
			for rep := 0; rep < 5; rep++ {
				clear(a.out)
				clear(a.lse)
				if err := cpu.Forward(causal{}, cpu.Auto, a.out, a.lse, a.q, a.k, a.v, nil, a.s); err != nil {
					errs[i] = err
					return
				}
				got := append(append([]float32(nil), a.out...), a.lse...)
				for x := range got {
					if math.Float32bits(got[x]) != math.Float32bits(want[i][x]) {
						errs[i] = fmt.Errorf("call %d, repeat %d: element %d = %v, alone %v", i, rep, x, got[x], want[i][x])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestIdleWorkersExit: the helper goroutines exit once no call needs them.
func TestIdleWorkersExit(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one processor: calls use no helper")
	}
	r := rand.New(rand.NewPCG(9, 10))
	a := newArgs(r, cpu.Shape{Batch: 1, HeadsQ: 4, HeadsKV: 1, SeqQ: 200, SeqK: 200, HeadDim: 64})
	if err := cpu.Forward(causal{}, cpu.Auto, a.out, a.lse, a.q, a.k, a.v, nil, a.s); err != nil {
		t.Fatal(err)
	}
	if cpu.Workers() == 0 {
		t.Fatal("no helper goroutine after a call with many tiles")
	}
	deadline := time.Now().Add(10 * time.Second)
	for cpu.Workers() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d helper goroutines still alive 10 s after the last call", cpu.Workers())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkConcurrent measures calls per second on a small shape with 1, 2
// and 8 goroutines calling at once (a server's load): the ratio to the
// 1-caller figure shows whether calls run in parallel.
func BenchmarkConcurrent(b *testing.B) {
	s := cpu.Shape{Batch: 1, HeadsQ: 4, HeadsKV: 1, SeqQ: 64, SeqK: 256, HeadDim: 64}
	for _, callers := range []int{1, 2, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			as := make([]args, callers)
			for i := range as {
				as[i] = newArgs(rand.New(rand.NewPCG(uint64(i), 11)), s)
			}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			var next sync.Mutex
			n := 0
			for i := range as {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a := as[i]
					for {
						next.Lock()
						if n >= b.N {
							next.Unlock()
							return
						}
						n++
						next.Unlock()
						if err := cpu.Forward(causal{}, cpu.Auto, a.out, a.lse, a.q, a.k, a.v, nil, a.s); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// TestLargeWorkspaceReleased: a call whose key and value tiles are large
// (a long decode) does not keep them once it returns: after the caller
// drops its slices and the garbage collector runs, the heap is back near
// where it was.
func TestLargeWorkspaceReleased(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 256 MiB")
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	s := cpu.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1 << 17, HeadDim: 128}
	func() {
		a := newArgs(rand.New(rand.NewPCG(12, 13)), s)
		if err := cpu.Forward(causal{}, cpu.Auto, a.out, a.lse, a.q, a.k, a.v, nil, s); err != nil {
			t.Fatal(err)
		}
	}()
	after := heap()
	if after > before+16<<20 {
		t.Errorf("heap %d MiB after the call, %d MiB before: the workspace stayed", after>>20, before>>20)
	}
}

// TestSupportedAuto: Supported(Auto) is true, since Auto runs Best()
// (which is itself supported) on every machine and build, and a call with
// Auto succeeds; a variant that is no target is not supported.
func TestSupportedAuto(t *testing.T) {
	if !cpu.Supported(cpu.Auto) {
		t.Errorf("Supported(Auto) = false, but Auto runs %s here", cpu.Best())
	}
	if !cpu.Supported(cpu.Best()) {
		t.Errorf("Supported(Best() = %s) = false", cpu.Best())
	}
	a := newArgs(rand.New(rand.NewPCG(3, 4)), cpu.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 70, SeqK: 70, HeadDim: 64})
	if err := cpu.Forward(causal{}, cpu.Auto, a.out, a.lse, a.q, a.k, a.v, nil, a.s); err != nil {
		t.Errorf("Forward with Auto: %v", err)
	}
	if cpu.Supported(cpu.Variant(99)) {
		t.Errorf("Supported(Variant(99)) = true")
	}
}
