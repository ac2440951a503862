//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestNonSquareAVX holds every AVX-512 and AVX2 kernel of dims (qk, v)
// with v < qk (tile, tileScore, decode and decodeScore, every element type
// and row count) to the variant's square kernel of qk, which
// TestTileAsm, TestDecodeAsm and the score tests check against the float64
// reference. Run on the same q and keys, with each value row zero-padded
// from v to qk elements for the square kernel, the two must agree bit for
// bit on m, l, the first v columns of o and (tile kernels) the p left in
// s: emit/avo computes the scores of both with the same code (it depends
// on qk only) and sums each output column over the keys in key order
// whatever the column chunks, so the agreement is exact, and it is what the
// driver's zero padding relies on. The unpadded kernel's value rows are
// followed by NaN (decode: up to the next row; tile: o and s are followed
// by NaN guards), so a kernel that reads past v elements of a value row,
// writes past its buffers or steps rows by the wrong width fails.
func TestNonSquareAVX(t *testing.T) {
	eachKernels(t, func(k *kernels) bool { return len(k.byDims) > 0 && (k == avx512Kernels || k == avx2Kernels) }, func(t *testing.T, kern *kernels) {
		n := 0
		for _, x := range kern.byDims {
			d := x.dims
			if d.qk == d.v {
				continue
			}
			n++
			if d.v > d.qk || kern.at(square(d.qk)) == nil {
				t.Errorf("%v: no square kernel of qk = %d to hold it to", d, d.qk)
				continue
			}
			t.Run(fmt.Sprintf("D%dV%d", d.qk, d.v), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(d.qk), uint64(d.v)))
				for _, flags := range append([]uint32{0}, scoreFlagSets...) {
					t.Run(fmt.Sprintf("tile/%d", flags), func(t *testing.T) { padTile(t, kern, rng, d, flags) })
				}
				for _, elem := range []Elem{F32, BF16, F16} {
					for _, rows := range []int{1, 2, 4, 8} {
						for _, flags := range append([]uint32{0}, scoreFlagSets...) {
							t.Run(fmt.Sprintf("decode/%s/R%d/%d", elem, rows, flags), func(t *testing.T) {
								padDecode(t, kern, rng, d, elem, rows, flags)
							})
						}
					}
				}
			})
		}
		if n == 0 {
			t.Skip("no kernel of qk != v")
		}
	})
}

// guarded returns n floats on a 64-byte boundary followed by 16 NaN that
// guard returns true for while they stay NaN.
func guarded(n int) []float32 {
	b := atFloats(n + 16)
	for i := range b {
		b[i] = float32(math.NaN())
	}
	return b[:n:n]
}

func guard(b []float32) bool {
	for _, x := range unsafe.Slice((*float32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), 4*len(b))), 16) {
		if x == x {
			return false
		}
	}
	return true
}

// padState is a running state of rows rows, o rows w floats apart: the
// first two rows fresh (m = -Inf, o arbitrary: a fresh row's o must stay
// as it is until it keeps a key, then be scaled by 0), the others a prior
// state.
type padState struct{ o, m, l []float32 }

func newPadState(rng *rand.Rand, rows, w int) *padState {
	st := &padState{o: guarded(rows * w), m: guarded(rows), l: guarded(rows)}
	for r := 0; r < rows; r++ {
		st.m[r], st.l[r] = float32(math.Inf(-1)), 0
		if r >= 2 {
			st.m[r], st.l[r] = float32(rng.IntN(9)-4), float32(1+rng.IntN(5))
		}
		for j := 0; j < w; j++ {
			st.o[r*w+j] = float32(rng.IntN(33)-16) / 16
		}
	}
	return st
}

// widen returns the state with o rows w (> v) floats apart, zeros in the
// new columns.
func (st *padState) widen(rows, v, w int) *padState {
	p := &padState{o: guarded(rows * w), m: guarded(rows), l: guarded(rows)}
	copy(p.m, st.m)
	copy(p.l, st.l)
	for r := 0; r < rows; r++ {
		copy(p.o[r*w:r*w+v], st.o[r*v:(r+1)*v])
		clear(p.o[r*w+v : (r+1)*w])
	}
	return p
}

// agree compares st (o rows v floats apart) with the first v columns of
// the padded p (rows w apart), bit for bit, and checks every guard.
func (st *padState) agree(p *padState, rows, v, w int) error {
	for _, b := range [][]float32{st.o, st.m, st.l, p.o, p.m, p.l} {
		if !guard(b) {
			return fmt.Errorf("a kernel wrote past o, m or l")
		}
	}
	for r := 0; r < rows; r++ {
		if math.Float32bits(st.m[r]) != math.Float32bits(p.m[r]) || math.Float32bits(st.l[r]) != math.Float32bits(p.l[r]) {
			return fmt.Errorf("row %d: m, l = %v, %v, padded square kernel %v, %v", r, st.m[r], st.l[r], p.m[r], p.l[r])
		}
		for j := 0; j < v; j++ {
			if a, b := st.o[r*v+j], p.o[r*w+j]; math.Float32bits(a) != math.Float32bits(b) {
				return fmt.Errorf("row %d: o[%d] = %v, padded square kernel %v", r, j, a, b)
			}
		}
	}
	return nil
}

// padTile runs a sequence of key tiles through the tile kernel of d (with
// the score stage of flags, if not 0) and the square kernel of d.qk.
func padTile(t *testing.T, kern *kernels, rng *rand.Rand, d dims, flags uint32) {
	qk, v := d.qk, d.v
	g := &atGen{rng: rng, d: qk, grid: true, scale: 1}
	q := g.q()
	st := newPadState(rng, TQ, v)
	ps := st.widen(TQ, v, qk)
	s, sp := guarded(TQ*TK), guarded(TQ*TK)
	sc := newScoreTile(rng, flags)
	masks := []string{"full", "partial", "dense", "empty", "zerochunks", "blockdiag8", "causal", "bottom", "full"}
	for i, mk := range masks {
		tile := g.tile(mk)
		vn := guarded(TK * v)
		for c := 0; c < TK; c++ {
			copy(vn[c*v:(c+1)*v], tile.v[c*qk:c*qk+v])
			clear(tile.v[c*qk+v : (c+1)*qk])
		}
		for j := range s {
			s[j], sp[j] = float32(math.NaN()), float32(math.NaN())
		}
		if flags == 0 {
			kern.tile(q, tile.kt, vn, s, st.o, st.m, st.l, tile.mask, d)
			kern.tile(q, tile.kt, tile.v, sp, ps.o, ps.m, ps.l, tile.mask, square(qk))
		} else {
			setCols(rng, sc)
			kern.tileScore(q, tile.kt, vn, s, st.o, st.m, st.l, tile.mask, d, sc)
			kern.tileScore(q, tile.kt, tile.v, sp, ps.o, ps.m, ps.l, tile.mask, square(qk), sc)
		}
		if err := st.agree(ps, TQ, v, qk); err != nil {
			t.Fatalf("tile %d (%s): %v", i, mk, err)
		}
		if !guard(s) || !guard(sp) {
			t.Fatalf("tile %d (%s): a kernel wrote past s", i, mk)
		}
		for j := range s {
			if math.Float32bits(s[j]) != math.Float32bits(sp[j]) {
				t.Fatalf("tile %d (%s): s[%d] = %v, padded square kernel %v", i, mk, j, s[j], sp[j])
			}
		}
	}
}

// padDecode runs three key tiles through the decode kernel of d (with the
// score stage of flags, if not 0) and the square kernel of d.qk, for rows
// query rows, keys and values of elem read in place at shuffled rows pitch
// elements apart: after a value row's v elements the unpadded kernel's
// buffer holds NaN, the padded one's zeros to qk and NaN after.
func padDecode(t *testing.T, kern *kernels, rng *rand.Rand, d dims, elem Elem, rows int, flags uint32) {
	qk, v := d.qk, d.v
	g := &atGen{rng: rng, d: qk, grid: true, scale: 1}
	q := g.q()[:rows*qk]
	st := newPadState(rng, rows, v)
	ps := st.widen(rows, v, qk)
	sc := newScoreTile(rng, flags)
	pitch := qk + 8*rng.IntN(3)
	es := 4
	if elem != F32 {
		es = 2
	}
	for i := 0; i < 3; i++ {
		tile := g.tile("full")
		roundTile16(tile, elem)
		n := TK*pitch + qk
		k, vn, vp := make([]float32, n), make([]float32, n), make([]float32, n)
		for j := range k {
			k[j], vn[j], vp[j] = float32(math.NaN()), float32(math.NaN()), float32(math.NaN())
		}
		var off decodeOffsets
		for c, p := range rng.Perm(TK) {
			row := p * pitch
			off[c], off[offV+c] = es*row, es*row
			for j := 0; j < qk; j++ {
				k[row+j], vp[row+j] = tile.kt[j*TK+c], 0
				if j < v {
					vn[row+j], vp[row+j] = tile.v[c*qk+j], tile.v[c*qk+j]
				}
			}
		}
		for c := offNextK; c < offV; c++ { // prefetch hints only
			off[c] = -1<<44 + rng.IntN(1<<20)
		}
		ptr := func(x []float32) unsafe.Pointer {
			if elem == F32 {
				return unsafe.Pointer(&x[0])
			}
			h := make([]uint16, len(x))
			for j, y := range x {
				switch {
				case y == y:
					h[j] = to16(y, elem)
				case elem == BF16:
					h[j] = 0x7fc0
				default:
					h[j] = 0x7e00
				}
			}
			return unsafe.Pointer(&h[0])
		}
		kb, vnb, vpb := ptr(k), ptr(vn), ptr(vp)
		if flags == 0 {
			kern.decodeRun(elem, q, kb, vnb, &off, st.o, st.m, st.l, rows, d)
			kern.decodeRun(elem, q, kb, vpb, &off, ps.o, ps.m, ps.l, rows, square(qk))
		} else {
			setCols(rng, sc)
			kern.decodeScoreRun(elem, q, kb, vnb, &off, st.o, st.m, st.l, rows, d, sc)
			kern.decodeScoreRun(elem, q, kb, vpb, &off, ps.o, ps.m, ps.l, rows, square(qk), sc)
		}
		if err := st.agree(ps, rows, v, qk); err != nil {
			t.Fatalf("tile %d: %v", i, err)
		}
	}
}
