package cpu_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
)

// pagedCache lays the contiguous caches k, v ([batch, kv head, seqK, D])
// out as pages of size p in a shuffled order, with NaN (float32) or
// staleK and staleV in every slot no position uses (spare pages, rows
// past SeqK), and returns the caches and the table.
func pagedCache(r *rand.Rand, k, v []float32, s cpu.Shape, p, stride int) (pk, pv []float32, table []int32) {
	return pagedCacheOf(r, k, v, s, p, stride, float32(math.NaN()), float32(math.Inf(1)))
}

func pagedCacheOf[T float32 | uint16](r *rand.Rand, k, v []T, s cpu.Shape, p, stride int, staleK, staleV T) (pk, pv []T, table []int32) {
	need := (s.SeqK + p - 1) / p
	pages := s.Batch*need + 3 // three spare pages
	per := s.HeadsKV * p * s.HeadDim
	pk, pv = make([]T, pages*per), make([]T, pages*per)
	for i := range pk {
		pk[i], pv[i] = staleK, staleV
	}
	order := r.Perm(pages)
	table = make([]int32, s.Batch*stride)
	for i := range table {
		table[i] = -1 // entries past need are never read
	}
	D := s.HeadDim
	for b := 0; b < s.Batch; b++ {
		for i := 0; i < need; i++ {
			page := order[b*need+i]
			table[b*stride+i] = int32(page)
			for h := 0; h < s.HeadsKV; h++ {
				for x := 0; x < p && i*p+x < s.SeqK; x++ {
					src := ((b*s.HeadsKV+h)*s.SeqK + i*p + x) * D
					dst := ((page*s.HeadsKV+h)*p + x) * D
					copy(pk[dst:dst+D], k[src:src+D])
					copy(pv[dst:dst+D], v[src:src+D])
				}
			}
		}
	}
	return pk, pv, table
}

// TestPaged: a paged cache in shuffled pages, with stale NaN and Inf in
// every unused slot and a last page partly filled, gives the outputs of
// the contiguous cache bit for bit, for several page sizes (below, equal
// to and above a key tile, and not dividing it), table strides, prefill
// and decoding shapes, on every variant.
func TestPaged(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 21))
	shapes := []cpu.Shape{
		{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 300, HeadDim: 64},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 130, SeqK: 250, HeadDim: 128},
		{Batch: 3, HeadsQ: 2, HeadsKV: 2, SeqQ: 5, SeqK: 77, HeadDim: 64},
	}
	for _, v := range cpu.Targets {
		if !cpu.Supported(v.Variant) {
			continue
		}
		for _, s := range shapes {
			a := newArgs(r, s)
			if err := cpu.Forward(causal{}, v.Variant, a.out, a.lse, a.q, a.k, a.v, nil, s); err != nil {
				t.Fatal(err)
			}
			for _, p := range []int{16, 64, 128, 7} {
				need := (s.SeqK + p - 1) / p
				for _, stride := range []int{0, need + 2} {
					st := stride
					if st == 0 {
						st = need
					}
					pk, pv, table := pagedCache(r, a.k, a.v, s, p, st)
					out, lse := make([]float32, len(a.out)), make([]float32, len(a.lse))
					if err := cpu.ForwardPaged(causal{}, v.Variant, out, lse, a.q, pk, pv, nil, cpu.Paged{PageSize: p, Table: table, TableStride: stride}, s); err != nil {
						t.Fatalf("%s %+v page %d: %v", v.Name, s, p, err)
					}
					for i := range out {
						if math.Float32bits(out[i]) != math.Float32bits(a.out[i]) {
							t.Fatalf("%s %+v page %d stride %d: out[%d] = %v, contiguous %v", v.Name, s, p, stride, i, out[i], a.out[i])
						}
					}
					for i := range lse {
						if math.Float32bits(lse[i]) != math.Float32bits(a.lse[i]) {
							t.Fatalf("%s %+v page %d: lse[%d] = %v, contiguous %v", v.Name, s, p, i, lse[i], a.lse[i])
						}
					}
				}
			}
		}
	}
}

// TestPagedErrors: page tables that do not fit the shape or point outside
// the caches are ErrPage errors, never a panic.
func TestPagedErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 23))
	s := cpu.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 1, SeqK: 100, HeadDim: 64}
	a := newArgs(r, s)
	pk, pv, table := pagedCache(r, a.k, a.v, s, 16, 7)
	bad := func(f func([]int32)) []int32 {
		t2 := append([]int32(nil), table...)
		f(t2)
		return t2
	}
	for name, pg := range map[string]cpu.Paged{
		"page size 0":      {PageSize: 0, Table: table},
		"negative stride":  {PageSize: 16, Table: table, TableStride: -1},
		"stride too small": {PageSize: 16, Table: table, TableStride: 6},
		"short table":      {PageSize: 16, Table: table[:10]},
		// table is 2 batches of the 7 pages of SeqK 100: one entry more is
		// too long with stride 0 (exactly 14) and with stride 7 (at most 14).
		"long table, stride 0": {PageSize: 16, Table: append(append([]int32(nil), table...), 0)},
		"long table, stride 7": {PageSize: 16, Table: append(append([]int32(nil), table...), 0), TableStride: 7},
		"max-pages table":      {PageSize: 16, Table: append(append([]int32(nil), table...), table...)},
		"negative page":        {PageSize: 16, Table: bad(func(t []int32) { t[3] = -2 })},
		"page past the end":    {PageSize: 16, Table: bad(func(t []int32) { t[7+6] = 1 << 20 })},
		"huge page size":       {PageSize: math.MaxInt32, Table: table},
		"overflowing stride":   {PageSize: 16, Table: table, TableStride: math.MaxInt / 2},
	} {
		err := cpu.ForwardPaged(causal{}, cpu.Auto, a.out, a.lse, a.q, pk, pv, nil, pg, s)
		if !errors.Is(err, cpu.ErrPage) {
			t.Errorf("%s: error %v, want ErrPage", name, err)
		}
	}
}

// TestSharedPrefixPages: batches that share a prompt prefix can share its
// pages (one copy of the prefix's keys and values in the cache, every
// batch's table pointing at it, each batch's own suffix pages after it):
// the outputs equal those of a contiguous cache holding a copy of the
// prefix per batch, bit for bit, for prefill and decoding shapes, on every
// variant, with the suffixes of different lengths' worth of stale data
// (NaN) in the slots no position uses.
func TestSharedPrefixPages(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 25))
	for _, c := range []struct {
		s      cpu.Shape
		page   int
		prefix int // pages
	}{
		{cpu.Shape{Batch: 3, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 300, HeadDim: 64}, 16, 12},
		{cpu.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqK: 260, HeadDim: 128}, 64, 3},
		{cpu.Shape{Batch: 4, HeadsQ: 8, HeadsKV: 2, SeqQ: 3, SeqK: 1100, HeadDim: 128}, 32, 30},
	} {
		s, p, D := c.s, c.page, c.s.HeadDim
		a := newArgs(r, s)
		// the prefix positions of every batch hold batch 0's rows
		for b := 1; b < s.Batch; b++ {
			for h := 0; h < s.HeadsKV; h++ {
				src, dst := (0*s.HeadsKV+h)*s.SeqK*D, (b*s.HeadsKV+h)*s.SeqK*D
				copy(a.k[dst:dst+c.prefix*p*D], a.k[src:src+c.prefix*p*D])
				copy(a.v[dst:dst+c.prefix*p*D], a.v[src:src+c.prefix*p*D])
			}
		}
		need := (s.SeqK + p - 1) / p
		pages := c.prefix + s.Batch*(need-c.prefix) + 1
		per := s.HeadsKV * p * D
		pk, pv := make([]float32, pages*per), make([]float32, pages*per)
		for i := range pk {
			pk[i], pv[i] = float32(math.NaN()), float32(math.NaN())
		}
		order := r.Perm(pages)
		table := make([]int32, s.Batch*need)
		next := c.prefix
		for b := 0; b < s.Batch; b++ {
			for i := 0; i < need; i++ {
				page := order[i] // the shared prefix pages
				if i >= c.prefix {
					page = order[next]
					next++
				}
				table[b*need+i] = int32(page)
				for h := 0; h < s.HeadsKV; h++ {
					for x := 0; x < p && i*p+x < s.SeqK; x++ {
						src := ((b*s.HeadsKV+h)*s.SeqK + i*p + x) * D
						dst := ((page*s.HeadsKV+h)*p + x) * D
						copy(pk[dst:dst+D], a.k[src:src+D])
						copy(pv[dst:dst+D], a.v[src:src+D])
					}
				}
			}
		}
		for _, v := range cpu.Targets {
			if !cpu.Supported(v.Variant) {
				continue
			}
			if err := cpu.Forward(causal{}, v.Variant, a.out, a.lse, a.q, a.k, a.v, nil, s); err != nil {
				t.Fatal(err)
			}
			out, lse := make([]float32, len(a.out)), make([]float32, len(a.lse))
			for i := range out {
				out[i] = float32(math.NaN())
			}
			if err := cpu.ForwardPaged(causal{}, v.Variant, out, lse, a.q, pk, pv, nil, cpu.Paged{PageSize: p, Table: table}, s); err != nil {
				t.Fatalf("%s %+v: %v", v.Name, s, err)
			}
			for i := range out {
				if math.Float32bits(out[i]) != math.Float32bits(a.out[i]) {
					t.Fatalf("%s %+v page %d, %d shared pages: out[%d] = %v, contiguous %v", v.Name, s, p, c.prefix, i, out[i], a.out[i])
				}
			}
			for i := range lse {
				if math.Float32bits(lse[i]) != math.Float32bits(a.lse[i]) {
					t.Fatalf("%s %+v: lse[%d] = %v, contiguous %v", v.Name, s, i, lse[i], a.lse[i])
				}
			}
		}
	}
}
