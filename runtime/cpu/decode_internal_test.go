package cpu

import (
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
