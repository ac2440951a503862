//go:build arm64 && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestNonSquareNEON holds each NEON kernel of dims (qk, v) with v < qk
// (tile, tileScore, decode and decodeScore, every element type and row
// count) to the square kernel of qk, which the tests of
// tile_kernels_test.go, decode_kernels_test.go and score_kernels_test.go
// check against the float64 reference: run on the same q and keys with
// the value rows zero-padded to qk elements, the square kernel must give
// the same m, l, p (tile kernels' s) and first v columns of o, bit for
// bit. emit/neon computes each score and each output column the same way
// whatever the other dimension (the scores' reduction order depends on qk
// only, each output column sums its keys in order), so this is exact, and
// it is the claim the driver's padding relies on. The unpadded value rows
// hold NaN past v (decode) and o and s are guarded by NaN past their end:
// a kernel that reads or writes past v columns, or steps rows by the
// wrong width, fails.
func TestNonSquareNEON(t *testing.T) {
	if !hasNEON {
		t.Skip("CPU lacks NEON")
	}
	n := 0
	for i := range neonKernels.byDims {
		x := &neonKernels.byDims[i]
		d := x.dims
		if d.qk == d.v {
			continue
		}
		n++
		sq := neonKernels.at(square(d.qk))
		if sq == nil || d.v > d.qk {
			t.Errorf("%v: no square kernel of qk = %d to hold it to", d, d.qk)
			continue
		}
		t.Run(fmt.Sprintf("D%dV%d", d.qk, d.v), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(d.qk), uint64(d.v)))
			t.Run("tile", func(t *testing.T) { nsTile(t, rng, d, x, sq, 0) })
			for _, flags := range scoreFlagSets {
				t.Run(fmt.Sprintf("tileScore/%d", flags), func(t *testing.T) { nsTile(t, rng, d, x, sq, flags) })
			}
			for _, elem := range []Elem{F32, BF16, F16} {
				for ri, rows := range []int{1, 2, 4, 8} {
					t.Run(fmt.Sprintf("decode/%s/R%d", elem, rows), func(t *testing.T) {
						nsDecode(t, rng, d, x.decode[elem][ri], sq.decode[elem][ri], nil, nil, elem, rows, 0)
					})
					for _, flags := range scoreFlagSets {
						t.Run(fmt.Sprintf("decodeScore/%s/R%d/%d", elem, rows, flags), func(t *testing.T) {
							nsDecode(t, rng, d, nil, nil, x.decodeScore[elem][ri], sq.decodeScore[elem][ri], elem, rows, flags)
						})
					}
				}
			}
		})
	}
	if n == 0 {
		t.Skip("no NEON kernel of qk != v")
	}
}

// nsGuard is the number of NaN floats after each output buffer.
const nsGuard = 16

// nsBuf returns n floats plus nsGuard of NaN after them.
func nsBuf(n int) []float32 {
	b := atFloats(n + nsGuard)
	for i := n; i < len(b); i++ {
		b[i] = float32(math.NaN())
	}
	return b[:n:n]
}

// nsGuarded reports whether the nsGuard floats after b are still NaN.
func nsGuarded(b []float32) bool {
	g := unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(&b[0]), 4*len(b))), nsGuard)
	for _, x := range g {
		if x == x {
			return false
		}
	}
	return true
}

// nsState is a running state of rows rows of width w: m, l and o, with a
// prior state in the rows past the first two (the others fresh).
type nsState struct{ o, m, l []float32 }

func newNSState(rng *rand.Rand, rows, w int) *nsState {
	st := &nsState{o: nsBuf(rows * w), m: nsBuf(rows), l: nsBuf(rows)}
	for r := 0; r < rows; r++ {
		st.m[r], st.l[r] = float32(math.Inf(-1)), 0
		if r >= 2 {
			st.m[r], st.l[r] = float32(rng.IntN(8)), float32(1+rng.IntN(4))
		}
		for j := 0; j < w; j++ {
			st.o[r*w+j] = float32(rng.IntN(17)-8) / 8
		}
	}
	return st
}

// pad copies the state to width w (> its own): zeros in the new columns.
func (st *nsState) pad(rows, v, w int) *nsState {
	p := &nsState{o: nsBuf(rows * w), m: nsBuf(rows), l: nsBuf(rows)}
	copy(p.m, st.m)
	copy(p.l, st.l)
	for r := 0; r < rows; r++ {
		copy(p.o[r*w:r*w+v], st.o[r*v:(r+1)*v])
	}
	return p
}

// same compares a state of width v with the first v columns of a padded
// one, bit for bit, and checks both guards.
func (st *nsState) same(p *nsState, rows, v, w int) error {
	for _, b := range [][]float32{st.o, st.m, st.l, p.o, p.m, p.l} {
		if !nsGuarded(b) {
			return fmt.Errorf("a kernel wrote past the end of o, m or l")
		}
	}
	for r := 0; r < rows; r++ {
		if math.Float32bits(st.m[r]) != math.Float32bits(p.m[r]) || math.Float32bits(st.l[r]) != math.Float32bits(p.l[r]) {
			return fmt.Errorf("row %d: m, l = %v, %v; padded %v, %v", r, st.m[r], st.l[r], p.m[r], p.l[r])
		}
		for j := 0; j < v; j++ {
			if a, b := st.o[r*v+j], p.o[r*w+j]; math.Float32bits(a) != math.Float32bits(b) {
				return fmt.Errorf("row %d: o[%d] = %v; padded %v", r, j, a, b)
			}
		}
	}
	return nil
}

// nsTile runs a sequence of tiles (full, masked, empty rows) through the
// tile kernel of d (tileScore with flags, if not 0) and the square one.
func nsTile(t *testing.T, rng *rand.Rand, d dims, x, sq *dimKernels, flags uint32) {
	qk, v := d.qk, d.v
	g := &atGen{rng: rng, d: qk, grid: true, scale: 1}
	q := g.q()
	st := newNSState(rng, TQ, v)
	ps := st.pad(TQ, v, qk)
	s, sp := nsBuf(TQ*TK), nsBuf(TQ*TK)
	sc := newScoreTile(rng, flags)
	for i, mk := range []string{"full", "partial", "dense", "empty", "causal", "full"} {
		tile := g.tile(mk)
		vs := nsBuf(TK * v)
		for c := 0; c < TK; c++ {
			copy(vs[c*v:(c+1)*v], tile.v[c*qk:c*qk+v])
			clear(tile.v[c*qk+v : (c+1)*qk])
		}
		for j := range s {
			s[j], sp[j] = float32(math.NaN()), float32(math.NaN())
		}
		var mp *uint64
		if tile.mask != nil {
			mp = &tile.mask[0]
		}
		if flags == 0 {
			x.tile(&q[0], &tile.kt[0], &vs[0], &s[0], &st.o[0], &st.m[0], &st.l[0], mp)
			sq.tile(&q[0], &tile.kt[0], &tile.v[0], &sp[0], &ps.o[0], &ps.m[0], &ps.l[0], mp)
		} else {
			setCols(rng, sc)
			x.tileScore(&q[0], &tile.kt[0], &vs[0], &s[0], &st.o[0], &st.m[0], &st.l[0], mp, sc)
			sq.tileScore(&q[0], &tile.kt[0], &tile.v[0], &sp[0], &ps.o[0], &ps.m[0], &ps.l[0], mp, sc)
		}
		if err := st.same(ps, TQ, v, qk); err != nil {
			t.Fatalf("tile %d (%s): %v", i, mk, err)
		}
		if !nsGuarded(s) || !nsGuarded(sp) {
			t.Fatalf("tile %d (%s): a kernel wrote past s", i, mk)
		}
		for j := range s {
			if math.Float32bits(s[j]) != math.Float32bits(sp[j]) {
				t.Fatalf("tile %d (%s): s[%d] = %v; padded %v", i, mk, j, s[j], sp[j])
			}
		}
	}
}

// nsDecode runs three key tiles through the decode kernel f of d (or, with
// flags, fs) and the square one (fq, fqs), rows query rows, keys and
// values of elem read in place at shuffled rows: the value rows of the
// first call hold v elements and NaN after them, those of the second qk,
// zeros past v.
func nsDecode(t *testing.T, rng *rand.Rand, d dims, f, fq decodeKernel, fs, fqs decodeScoreKernel, elem Elem, rows int, flags uint32) {
	qk, v := d.qk, d.v
	g := &atGen{rng: rng, d: qk, grid: true, scale: 1}
	q := g.q()[:rows*qk]
	st := newNSState(rng, rows, v)
	ps := st.pad(rows, v, qk)
	sc := newScoreTile(rng, flags)
	pitch := qk + 4*rng.IntN(5)
	es := 4
	if elem != F32 {
		es = 2
	}
	for i := 0; i < 3; i++ {
		tile := g.tile("full")
		roundTile16(tile, elem)
		n := TK*pitch + qk
		k, va, vp := make([]float32, n), make([]float32, n), make([]float32, n)
		for j := range k {
			k[j], va[j], vp[j] = float32(math.NaN()), float32(math.NaN()), float32(math.NaN())
		}
		var off decodeOffsets
		perm := rng.Perm(TK)
		for c := 0; c < TK; c++ {
			row := perm[c] * pitch
			off[c], off[offV+c] = es*row, es*row
			for j := 0; j < qk; j++ {
				k[row+j] = tile.kt[j*TK+c]
				vp[row+j] = 0
				if j < v {
					va[row+j], vp[row+j] = tile.v[c*qk+j], tile.v[c*qk+j]
				}
			}
		}
		for c := offNextK; c < offV; c++ {
			off[c] = -1<<44 + rng.IntN(1<<20)
		}
		ptr := func(x []float32) *byte {
			if elem == F32 {
				return (*byte)(unsafe.Pointer(&x[0]))
			}
			h := make([]uint16, len(x))
			for j, y := range x {
				if y != y {
					h[j] = 0x7fc0 // NaN in bfloat16
					if elem == F16 {
						h[j] = 0x7e00
					}
					continue
				}
				h[j] = to16(y, elem)
			}
			return (*byte)(unsafe.Pointer(&h[0]))
		}
		kb, vab, vpb := ptr(k), ptr(va), ptr(vp)
		if flags == 0 {
			f(&q[0], kb, vab, &off[0], &st.o[0], &st.m[0], &st.l[0])
			fq(&q[0], kb, vpb, &off[0], &ps.o[0], &ps.m[0], &ps.l[0])
		} else {
			setCols(rng, sc)
			fs(&q[0], kb, vab, &off[0], &st.o[0], &st.m[0], &st.l[0], sc)
			fqs(&q[0], kb, vpb, &off[0], &ps.o[0], &ps.m[0], &ps.l[0], sc)
		}
		if err := st.same(ps, rows, v, qk); err != nil {
			t.Fatalf("tile %d: %v", i, err)
		}
	}
}
