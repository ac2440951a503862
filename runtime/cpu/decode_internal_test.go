package cpu

import (
	"math"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
)

// TestDecodePlan: a decoding call packs only the key tiles its queries
// visit (a window decode packs the same number whatever SeqK), runs the
// query heads of a key/value head as one job, and splits the keys of the
// few jobs into parts.
func TestDecodePlan(t *testing.T) {
	var slots []int
	for _, sk := range []int{10000, 100000} {
		s := Shape{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: 1, SeqK: sk, HeadDim: 64}
		nq, nkv := 8*64, 2*sk*64
		c := new(call)
		g := &geom{dv: s.HeadDim, ls: BHSD(s, 0), lseB: s.HeadsQ * s.SeqQ, lseH: s.SeqQ, qpos: s.SeqK - s.SeqQ, dataLen: s.SeqK}
		if err := c.setup(window{1024}, goKernels, s, g, make([]float32, nq), nil, nil, inputs{q: make([]float32, nq), k: make([]float32, nkv), v: make([]float32, nkv)}, nil, new([mask.MaxHeadParams][]int32)); err != nil {
			t.Fatal(err)
		}
		slots = append(slots, c.nslots)
		if len(c.jobs) != 2 {
			t.Fatalf("SeqK %d: %d jobs, want one per key/value head", sk, len(c.jobs))
		}
		for _, j := range c.jobs {
			if j.nh != 4 || j.per != 1 {
				t.Errorf("SeqK %d: job of %d heads x %d rows, want 4 x 1", sk, j.nh, j.per)
			}
			if j.parts < 2 {
				t.Errorf("SeqK %d: job of %d key tiles in %d parts", sk, j.v1-j.v0, j.parts)
			}
		}
		if len(c.kt) > 2*64*17*64 {
			t.Errorf("SeqK %d: %d floats of packed keys for a 1024-key window", sk, len(c.kt))
		}
	}
	if slots[0] != slots[1] || slots[0] > 17 {
		t.Errorf("window decode packs %v tiles at SeqK 10000 and 100000, want the same, at most 17", slots)
	}
}

// TestQueryTileZero: a copied query tile is zero past its job's rows (the
// tile ABI's unused rows) when the worker's buffer held a larger tile
// before: runItem clears what the earlier tile wrote there (qDirty).
func TestQueryTileZero(t *testing.T) {
	w := newBuffers()
	run := func(s Shape) {
		t.Helper()
		n := s.Batch * s.HeadsQ * s.SeqQ * s.HeadDim
		nkv := s.Batch * s.HeadsKV * s.SeqK * s.HeadDim
		q, k, v := make([]float32, n), make([]float32, nkv), make([]float32, nkv)
		for i := range q {
			q[i] = 1
		}
		a := &Args{Q: q, K: k, V: v, Out: make([]float32, n), Shape: s, Layout: BSHD(s, 0)} // q copied, not in place
		var vd validated
		if err := a.validate(window{1024}, PureGo, &vd); err != nil {
			t.Fatal(err)
		}
		c, err := vd.prepare(window{1024}, goKernels, a, s, &vd.g, &vd.io)
		if err != nil {
			t.Fatal(err)
		}
		w.drain(c)
		c.release()
	}
	run(Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 100, SeqK: 100, HeadDim: 64}) // whole tiles of 48 rows
	run(Shape{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 1, SeqK: 200, HeadDim: 32})   // one job of 3 rows
	if w.qDirty != 3*32 {
		t.Errorf("qDirty %d after a tile of 3 rows of 32, want %d", w.qDirty, 3*32)
	}
	for i, x := range w.q[3*32:] {
		if x != 0 {
			t.Fatalf("q tile element %d past the job's rows is %v, want 0", 3*32+i, x)
		}
	}
}

// evenTiles keeps key j for query i when j <= i and j's key tile is even:
// whole tiles kept with a tile left out between them.
type evenTiles struct{}

func (evenTiles) Stride() int    { return 1 }
func (evenTiles) UsesDocs() bool { return false }
func (evenTiles) Hull(q0, q1, x int, _ *mask.Docs) (int, int) {
	return max(x, 0), q1
}
func (evenTiles) Class(q0, q1, k0, k1 int, _ *mask.Docs) mask.Class {
	even, odd := false, false
	for t := k0 / TK; t <= k1/TK; t++ {
		even, odd = even || t%2 == 0, odd || t%2 == 1
	}
	switch {
	case k0 > q1 || !even:
		return mask.Empty
	case k1 <= q0 && !odd:
		return mask.Full
	}
	return mask.Partial
}
func (evenTiles) Word(i, k0, nk int, _ *mask.Docs) uint64 {
	var b uint64
	for c := 0; c < 64 && k0+c < nk; c++ {
		if j := k0 + c; j <= i && (j/TK)%2 == 0 {
			b |= 1 << c
		}
	}
	return b
}

// TestDecodeGappedTiles: a decoding call whose whole kept tiles are not
// consecutive (the decode kernels' row offsets are carried from one tile
// to the next only when it is the next) gives the tile path's results.
func TestDecodeGappedTiles(t *testing.T) {
	s := Shape{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 11*TK + 5, HeadDim: 64}
	nq, nkv := s.Batch*s.HeadsQ*s.HeadDim, s.Batch*s.HeadsKV*s.SeqK*s.HeadDim
	r := uint32(7)
	rnd := func() float32 { r = r*1664525 + 1013904223; return float32(int32(r>>8)-1<<23) / (1 << 23) }
	q, k, v := make([]float32, nq), make([]float32, nkv), make([]float32, nkv)
	for _, x := range [][]float32{q, k, v} {
		for i := range x {
			x[i] = rnd()
		}
	}
	want := make([]float32, nq)
	if err := ForwardArgs(evenTiles{}, PureGo, Args{Q: q, K: k, V: v, Out: want, Shape: s}); err != nil {
		t.Fatal(err)
	}
	eachDecode(t, func(t *testing.T, kern *kernels) {
		for _, tg := range Targets {
			if k2, ok := kernelsOf(tg.Variant); !ok || k2 != kern {
				continue
			}
			out := make([]float32, nq)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			if err := ForwardArgs(evenTiles{}, tg.Variant, Args{Q: q, K: k, V: v, Out: out, Shape: s}); err != nil {
				t.Fatal(err)
			}
			for i := range out {
				if d := math.Abs(float64(out[i] - want[i])); !(d <= 1e-5) {
					t.Fatalf("out[%d] = %v, the tile path's %v", i, out[i], want[i])
				}
			}
		}
	})
}

// TestJobOrder: prefill jobs go head by head in BHSD (consecutive jobs
// read consecutive query tiles of one head, each job one head's tile) and
// position by position in BSHD, each job the rows of sideHeads query heads
// of one kv head at TQ/sideHeads positions (consecutive jobs read the
// heads of the same positions, then the next positions); either way every
// query row of every head is in exactly one job.
func TestJobOrder(t *testing.T) {
	for _, s := range []Shape{
		{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 150, SeqK: 150, HeadDim: 32},
		{Batch: 1, HeadsQ: 10, HeadsKV: 2, SeqQ: 101, SeqK: 130, HeadDim: 32},
	} {
		n, nkv := s.Batch*s.HeadsQ*s.SeqQ*s.HeadDim, s.Batch*s.HeadsKV*s.SeqK*s.HeadDim
		group := s.HeadsQ / s.HeadsKV
		for _, bshd := range []bool{false, true} {
			ls := BHSD(s, 0)
			if bshd {
				ls = BSHD(s, 0)
			}
			c := new(call)
			g := &geom{dv: s.HeadDim, ls: ls, lseB: s.HeadsQ * s.SeqQ, lseH: s.SeqQ, qpos: s.SeqK - s.SeqQ, dataLen: s.SeqK}
			if err := c.setup(window{40}, goKernels, s, g, make([]float32, n), nil, nil, inputs{q: make([]float32, n), k: make([]float32, nkv), v: make([]float32, nkv)}, nil, new([mask.MaxHeadParams][]int32)); err != nil {
				t.Fatal(err)
			}
			side := 1
			if bshd {
				side = sideHeads(group)
			}
			seen := make([]int, s.Batch*s.HeadsQ*s.SeqQ)
			for i, j := range c.jobs {
				if int(j.nh) > side || j.h/int32(group) != (j.h+j.nh-1)/int32(group) || int(j.nh)*int(j.per) > TQ ||
					j.x0 < j.qt*TQ || j.x0+j.per > (j.qt+1)*TQ {
					t.Fatalf("BSHD %v %+v: job %d %+v: more heads than %d, heads of two kv heads, or rows outside its query tile", bshd, s, i, j, side)
				}
				for h := j.h; h < j.h+j.nh; h++ {
					for x := j.x0; x < j.x0+j.per; x++ {
						seen[(int(j.b)*s.HeadsQ+int(h))*s.SeqQ+int(x)]++
					}
				}
				if i == 0 || c.jobs[i-1].b != j.b {
					continue
				}
				p := c.jobs[i-1]
				if bshd && j.x0 < p.x0 {
					t.Fatalf("BSHD %+v: job %d (heads %d+%d, positions %d+%d) after positions %d+%d: want the positions in order", s, i, j.h, j.nh, j.x0, j.per, p.x0, p.per)
				}
				if bshd && j.x0 == p.x0 && j.h <= p.h {
					t.Fatalf("BSHD %+v: job %d (heads %d+%d) after heads %d+%d at the same positions: want the heads in order", s, i, j.h, j.nh, p.h, p.nh)
				}
				if !bshd && p.h != j.h && !(j.h == p.h+1 && j.qt == 0) {
					t.Fatalf("BHSD: job %d (head %d, tile %d) after head %d, tile %d: want the head's tiles in a row", i, j.h, j.qt, p.h, p.qt)
				}
			}
			for i, k := range seen {
				if k != 1 {
					t.Fatalf("BSHD %v %+v: query row %d (batch, head, position %d) is in %d jobs, want 1", bshd, s, i, i%s.SeqQ, k)
				}
			}
		}
	}
}
