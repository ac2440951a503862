package cpu

import (
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/attngen/attngen/runtime/mask"
)

// buffers are one goroutine's tile buffers.
type buffers struct {
	q, s, o, m, l []float32
	qDirty        int           // w.q is zero from here on (runItem clears what it wrote past a tile's rows)
	qs            []float32     // the query rows scaled, for the decode kernels
	off           decodeOffsets // byte offsets of a tile's key rows, the next tile's and its value rows, for the decode kernels
	vclean        []float32     // a value tile with masked non-finite entries zeroed
	kt, vt        []float32     // a key and a value tile packed for a transient call
	conv          []float32     // 16-bit key rows widened before the transpose
	lse           [TQ]float32   // the log-sum-exp of a job's rows
	mask          []uint64
	refs          []mask.Tile
	bwd           *bwdBuffers // the AVX-512 backward's tiles, made on first use
	st, st2       scoreTile   // the score stage's rows and columns of the tile being run; st2 a shifted copy for a second decode group
}

func newBuffers() *buffers {
	d := maxHeadDim()
	return &buffers{
		q: make([]float32, TQ*d), qs: make([]float32, TQ*d), s: make([]float32, TQ*TK), o: make([]float32, TQ*d),
		m: make([]float32, TQ), l: make([]float32, TQ), mask: make([]uint64, TQ),
		vclean: make([]float32, TK*d), kt: make([]float32, TK*d), vt: make([]float32, TK*d), conv: make([]float32, TK*d),
	}
}

// callerBuffers serve the goroutine that calls Forward, which works too.
var callerBuffers = sync.Pool{New: func() any { return newBuffers() }}

// A task is what a worker helps with: a forward call (*call) or one pass
// of a backward call (*bcall). work takes items until none is left; done
// tells the caller this worker has finished.
type task interface {
	work(*buffers)
	done()
}

func (c *call) work(b *buffers) { b.run(c) }
func (c *call) done()           { c.wg.Done() }

// A worker is a goroutine that helps calls. Idle workers wait in the pool
// and exit after idleTimeout without work, so a process that stops calling
// Forward keeps no goroutine and no tile buffers.
type worker struct {
	*buffers
	jobs  chan task
	timer *time.Timer
}

const idleTimeout = 2 * time.Second

var pool struct {
	sync.Mutex
	idle []*worker
	live int // worker goroutines, idle or busy
}

// helpers returns up to n workers: idle ones first, then new ones while the
// pool holds fewer than GOMAXPROCS-1 goroutines (the callers work too).
func helpers(dst []*worker, n int) []*worker {
	pool.Lock()
	defer pool.Unlock()
	for len(dst) < n && len(pool.idle) > 0 {
		w := pool.idle[len(pool.idle)-1]
		pool.idle = pool.idle[:len(pool.idle)-1]
		dst = append(dst, w)
	}
	for len(dst) < n && pool.live < runtime.GOMAXPROCS(0)-1 {
		w := &worker{buffers: newBuffers(), jobs: make(chan task)}
		pool.live++
		go w.loop()
		dst = append(dst, w)
	}
	return dst
}

func (w *worker) loop() {
	w.timer = time.NewTimer(idleTimeout)
	for {
		select {
		case c := <-w.jobs:
			c.work(w.buffers)
			c.done()
			w.timer.Reset(idleTimeout)
			pool.Lock()
			pool.idle = append(pool.idle, w)
			pool.Unlock()
		case <-w.timer.C:
			pool.Lock()
			i := slices.Index(pool.idle, w)
			if i < 0 {
				// A caller took this worker as the timer fired: its job
				// is on the way.
				pool.Unlock()
				w.timer.Reset(idleTimeout)
				continue
			}
			pool.idle = slices.Delete(pool.idle, i, i+1)
			pool.live--
			pool.Unlock()
			return
		}
	}
}

// dispatch runs task t on the calling goroutine and on up to n-1 helpers
// (n: its items; at most GOMAXPROCS in all), and returns when every helper
// it handed t to has called t.done (wg counts them).
func dispatch(t task, wg *sync.WaitGroup, n int) {
	nw := min(runtime.GOMAXPROCS(0), n)
	var hs [64]*worker
	ws := helpers(hs[:0], min(nw-1, len(hs)))
	wg.Add(len(ws))
	for _, w := range ws {
		w.jobs <- t
	}
	b := callerBuffers.Get().(*buffers)
	t.work(b)
	callerBuffers.Put(b)
	wg.Wait()
}

// Workers reports the worker goroutines the package holds now (idle or
// busy); tests use it to check that idle workers exit.
func Workers() int {
	pool.Lock()
	defer pool.Unlock()
	return pool.live
}
