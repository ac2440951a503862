package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// decodeAt runs the decode kernel of elem on an atTile: its keys written
// back as rows (kt transposed) and its values, both scattered in shuffled
// order with gaps between rows that hold NaN (the kernel must read exactly
// the rows off names), for the first n rows of q; with sc, the decode
// kernel with the score stage. For 16-bit elements the tile's values are
// first truncated to the format, so that the reference sees what the
// kernel reads.
func decodeAt(kern *kernels, rng *rand.Rand, st *atState, elem Elem, d, n int, q []float32, t *atTile, sc *scoreTile) {
	roundTile16(t, elem)
	pitch := d + 16*rng.IntN(3)
	k, v := atFloats(TK*pitch+d), atFloats(TK*pitch+d)
	k16, v16 := make([]uint16, len(k)), make([]uint16, len(v))
	for i := range k {
		k[i], v[i] = float32(math.NaN()), float32(math.NaN())
		k16[i], v16[i] = 0x7fc0, 0x7e00 // NaN in bfloat16 and in half precision
	}
	var off decodeOffsets
	es := 4
	if elem != F32 {
		es = 2
	}
	// key and value rows in orders of their own: a kernel that read a
	// value row at its key's offset would read another key's value
	perm, vperm := rng.Perm(TK), rng.Perm(TK)
	for c := 0; c < TK; c++ {
		row, vrow := perm[c]*pitch, vperm[c]*pitch
		off[c], off[offV+c] = es*row, es*vrow
		for i := 0; i < d; i++ {
			k[row+i], k16[row+i] = t.kt[i*TK+c], to16(t.kt[i*TK+c], elem)
			v[vrow+i], v16[vrow+i] = t.v[c*d+i], to16(t.v[c*d+i], elem)
		}
	}
	// The next rows are prefetch hints, never loads: offsets far outside
	// any mapping would fault if a kernel read them.
	for c := offNextK; c < offV; c++ {
		off[c] = -1<<44 + rng.IntN(1<<20)
	}
	kb, vb := unsafe.Pointer(&k[0]), unsafe.Pointer(&v[0])
	if elem != F32 {
		kb, vb = unsafe.Pointer(&k16[0]), unsafe.Pointer(&v16[0])
	}
	if sc != nil {
		kern.decodeScoreRun(elem, q, kb, vb, &off, st.o, st.m, st.l, n, square(d), sc)
		return
	}
	kern.decodeRun(elem, q, kb, vb, &off, st.o, st.m, st.l, n, square(d))
}

// roundTile16 truncates a tile's keys and values to a 16-bit elem (nothing
// for F32); a second call changes nothing.
func roundTile16(t *atTile, elem Elem) {
	if elem == F32 {
		return
	}
	for _, x := range [][]float32{t.kt, t.v} {
		for i, y := range x {
			x[i] = f16to32n(to16(y, elem), elem)
		}
	}
}

// to16 truncates x to bfloat16 or half precision (half-precision values
// below 2^-14 become zero); f16to32n widens either.
func to16(x float32, elem Elem) uint16 {
	b := math.Float32bits(x)
	if elem == BF16 {
		return uint16(b >> 16)
	}
	sign := uint16(b>>16) & 0x8000
	e := int(b>>23&0xff) - 127 + 15
	switch {
	case e <= 0:
		return sign
	case e >= 31:
		panic("to16: out of the half-precision range")
	}
	return sign | uint16(e)<<10 | uint16(b>>13&0x3ff)
}

func f16to32n(h uint16, elem Elem) float32 {
	if elem == BF16 {
		return math.Float32frombits(uint32(h) << 16)
	}
	return f16to32(h)
}

// TestDecodeAsm checks each variant's decode kernels the way TestTileAsm
// checks the tile kernels: against the float64 reference of the tile ABI, for n
// rows of a full tile (the rows past n must stay bit for bit), exact scores
// with the strict tolerance and Gaussian ones against a straightforward
// float32 step on all TQ rows of the same tiles.
func TestDecodeAsm(t *testing.T) {
	eachDecode(t, func(t *testing.T, kern *kernels) { testDecodeAsm(t, kern) })
}

func testDecodeAsm(t *testing.T, kern *kernels) {
	cases := []struct {
		name  string
		grid  bool
		scale float32
		sd    float64
		tiles int
		prior bool
	}{
		{"one", true, 1, 0, 1, false},
		{"successive", true, 1, 0, 4, false},
		{"prior", true, 1, 0, 2, true},
		{"large", true, 8, 0, 3, false},
		{"large-prior", true, 8, 0, 3, true},
		{"gaussian", false, 0, 6, 4, false},
		{"gaussian-large", false, 0, 60, 3, true},
	}
	for _, elem := range []Elem{F32, BF16, F16} {
		for _, d := range squareTestDims(kern) {
			for ci, c := range cases {
				for _, n := range []int{1, 2, 4, 8} {
					for seed := uint64(0); seed < 2; seed++ {
						rng := rand.New(rand.NewPCG(seed, uint64(ci*1000+n*10+d)))
						g := &atGen{rng: rng, d: d, grid: c.grid, scale: c.scale, sd: c.sd}
						q := g.q()
						st := newAtState(d)
						if c.prior {
							pre := g.tile("full")
							ref := newAtRef(st, d)
							ref.step(q, pre)
							for r := 2; r < TQ; r++ {
								st.m[r], st.l[r] = float32(ref.m[r]), float32(ref.l[r])
								for j := 0; j < d; j++ {
									st.o[r*d+j] = float32(ref.o[r*d+j])
								}
							}
						}
						poisonUntouched(st, d, rng)
						ref := newAtRef(st, d)
						// The float32 yardstick runs on all TQ rows (full tiles):
						// its error over one row alone is too noisy a bar.
						refAll, f32 := newAtRef(st, d), st.clone()
						rowsMask := make([]uint64, TQ)
						for r := 0; r < n; r++ {
							rowsMask[r] = ^uint64(0)
						}
						for i := 0; i < c.tiles; i++ {
							tile := g.tile("full")
							tile.mask = rowsMask
							before := st.clone()
							decodeAt(kern, rng, st, elem, d, n, q, tile, nil)
							if err := atUnkept(before, st, tile.mask, d); err != nil {
								t.Fatalf("%s D=%d %s rows %d tile %d: %v", elem, d, c.name, n, i, err)
							}
							ref.step(q, tile)
							if !c.grid { // the yardstick of Gaussian scores only
								all := &atTile{kt: tile.kt, v: tile.v}
								refAll.step(q, all)
								atStepF32(f32, d, q, all)
							}
							eo, el, em, err := ref.errs(st)
							if err != nil {
								t.Fatalf("%s D=%d %s rows %d tile %d: %v", elem, d, c.name, n, i, err)
							}
							if c.grid {
								if em != 0 || el > atTol || eo > atTol {
									t.Fatalf("%s D=%d %s rows %d tile %d: errors m %.3g (want 0), l %.3g, o %.3g (want <= %g)", elem, d, c.name, n, i, em, el, eo, atTol)
								}
								continue
							}
							fo, fl, fm, err := refAll.errs(f32)
							if err != nil {
								t.Fatalf("float32 yardstick: %v", err)
							}
							fs := math.Ln2 * fm
							if eo > 4*max(fo, fs)+1e-6 || el > 4*max(fl, fs)+1e-6 || em > 4*fm+1e-6 {
								t.Fatalf("%s D=%d %s rows %d tile %d: errors o %.3g l %.3g m %.3g; straightforward float32: %.3g %.3g %.3g", elem, d, c.name, n, i, eo, el, em, fo, fl, fm)
							}
						}
					}
				}
			}
		}
	}
}

// BenchmarkDecodeKernel times the float32 decode kernels on one key tile
// in cache: the compute side of a decode (memory is the other).
func BenchmarkDecodeKernel(b *testing.B) {
	eachDecode(b, benchDecodeKernel)
}

func benchDecodeKernel(b *testing.B, kern *kernels) {
	const d = 128
	rng := rand.New(rand.NewPCG(1, 1))
	k, v, q := atFloats(TK*d), atFloats(TK*d), atFloats(TQ*d)
	for _, x := range [][]float32{k, v, q} {
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 0.1)
		}
	}
	var off decodeOffsets
	for j := range off {
		off[j] = 4 * (j % TK) * d
	}
	for _, n := range []int{1, 2, 4, 8} {
		st := newAtState(d)
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			for b.Loop() {
				kern.decodeRun(F32, q, unsafe.Pointer(&k[0]), unsafe.Pointer(&v[0]), &off, st.o, st.m, st.l, n, square(d))
			}
		})
	}
}
