//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	xcpu "golang.org/x/sys/cpu"

	"github.com/attngen/attngen/spec"
)

// atVariants lists the tile kernels of this architecture for the tests
// of tile_kernels_test.go: every square entry of the AVX-512 and AVX2
// tables (TestNonSquareAVX holds the others to them).
func atVariants() []atVariant {
	var vs []atVariant
	for _, isa := range []struct {
		name string
		k    *kernels
		ok   bool
	}{
		{"AVX512", avx512Kernels, xcpu.X86.HasAVX512F},
		{"AVX2", avx2Kernels, xcpu.X86.HasAVX2 && xcpu.X86.HasFMA},
	} {
		for _, d := range squareTestDims(isa.k) {
			vs = append(vs, atVariant{fmt.Sprintf("%sD%d", isa.name, d), d, isa.k.at(square(d)).tile, isa.ok})
		}
	}
	return vs
}

func TestPeakFMA(t *testing.T) {
	if xcpu.X86.HasAVX512F {
		peakFMA512(0)
		peakFMA512(-1)
		peakFMA512(1000)
	}
	if xcpu.X86.HasAVX2 && xcpu.X86.HasFMA {
		peakFMA256(0)
		peakFMA256(-1)
		peakFMA256(1000)
	}
}

func benchTileAsm(b *testing.B, name string, maskKind string) {
	var v atVariant
	for _, x := range atVariants() {
		if x.name == name {
			v = x
		}
	}
	if !v.ok {
		b.Skipf("CPU lacks the instructions of %s", name)
	}
	g := &atGen{rng: rand.New(rand.NewPCG(1, 2)), d: v.d, grid: true, scale: 1}
	q := g.q()
	tile := g.tile(maskKind)
	st := newAtState(v.d)
	st.run(v.fn, q, tile)
	var mp *uint64
	if tile.mask != nil {
		mp = &tile.mask[0]
	}
	for b.Loop() {
		v.fn(&q[0], &tile.kt[0], &tile.v[0], &st.s[0], &st.o[0], &st.m[0], &st.l[0], mp)
	}
	flops := 4.0 * TQ * TK * float64(v.d) * float64(b.N)
	b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkTile runs the full-tile kernel of every square head dimension
// of both ISAs (BenchmarkTile/AVX512D96 and so on).
func BenchmarkTile(b *testing.B) {
	for _, v := range atVariants() {
		b.Run(v.name, func(b *testing.B) { benchTileAsm(b, v.name, "full") })
	}
}

// The masked benchmarks run the same work with a mask (partial tiles).
func BenchmarkTileMaskedAVX512D128(b *testing.B) { benchTileAsm(b, "AVX512D128", "dense") }
func BenchmarkTileMaskedAVX2D128(b *testing.B)   { benchTileAsm(b, "AVX2D128", "dense") }

// The empty benchmarks run a masked tile that keeps nothing: what is left
// when both products are skipped (the softmax and the mask bookkeeping).
func BenchmarkTileEmptyAVX512D128(b *testing.B) { benchTileAsm(b, "AVX512D128", "empty") }
func BenchmarkTileEmptyAVX2D128(b *testing.B)   { benchTileAsm(b, "AVX2D128", "empty") }

// sparseTileMasks lists the visited tiles (those keeping some pair) of the
// query tiles covering rows [q0, q1) of a pattern over seq keys: the mask
// of each, nil for a full tile, and the kept pairs in all.
func sparseTileMasks(p spec.Pattern, q0, q1, seq int) (masks [][]uint64, kept int) {
	for qt := q0; qt < q1; qt += TQ {
		for k0 := 0; k0 < seq; k0 += TK {
			mask := make([]uint64, TQ)
			n := 0
			for r := 0; r < TQ; r++ {
				for c := 0; c < TK; c++ {
					if p.At(qt+r, k0+c) {
						mask[r] |= 1 << c
						n++
					}
				}
			}
			if n == 0 {
				continue
			}
			if n == TQ*TK {
				mask = nil
			}
			masks = append(masks, mask)
			kept += n
		}
	}
	return masks, kept
}

// BenchmarkTileSparse runs the tile kernels over the visited tiles of 16
// query tiles (rows 1536-2303 of 4096) of the BenchmarkForward masks of
// package gen, with the driver's mask words (nil for full tiles). It
// reports the GFLOP/s of the pairs kept (what the mask asks for) and
// ns/tile.
func BenchmarkTileSparse(b *testing.B) {
	patterns := []struct {
		name string
		p    spec.Pattern
	}{
		{"causal", spec.Pattern{Mask: spec.Full(), Causal: true}},
		{"window1024", spec.Pattern{Mask: spec.Window(1024), Causal: true}},
		{"block256", spec.Pattern{Mask: spec.Block(256), Causal: true}},
		{"bridge256r32", spec.Pattern{Mask: spec.Union(spec.Block(256), spec.Bridge(256, 32, 32, 0)), Causal: true}},
	}
	for _, pat := range patterns {
		masks, kept := sparseTileMasks(pat.p, 1536, 2304, 4096)
		for _, name := range []string{"AVX512D128", "AVX2D128"} {
			b.Run(pat.name+"/"+name, func(b *testing.B) {
				var v atVariant
				for _, x := range atVariants() {
					if x.name == name {
						v = x
					}
				}
				if !v.ok {
					b.Skipf("CPU lacks the instructions of %s", name)
				}
				g := &atGen{rng: rand.New(rand.NewPCG(1, 2)), d: v.d, grid: true, scale: 1}
				q := g.q()
				tile := g.tile("full")
				st := newAtState(v.d)
				for b.Loop() {
					for _, mask := range masks {
						var mp *uint64
						if mask != nil {
							mp = &mask[0]
						}
						v.fn(&q[0], &tile.kt[0], &tile.v[0], &st.s[0], &st.o[0], &st.m[0], &st.l[0], mp)
					}
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(4*float64(kept*v.d)*float64(b.N)/sec/1e9, "GFLOP/s")
				b.ReportMetric(sec*1e9/float64(b.N*len(masks)), "ns/tile")
			})
		}
	}
}

// PeakFMA512 and PeakFMA256 report the single-core FP32 FMA peak that the
// tile figures are compared against.
func benchPeak(b *testing.B, ok bool, fn func(int), flopsPerIter int) {
	if !ok {
		b.Skip("CPU lacks the instructions")
	}
	const iters = 1 << 16
	for b.Loop() {
		fn(iters)
	}
	b.ReportMetric(float64(flopsPerIter)*iters*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkPeakFMA512(b *testing.B) { benchPeak(b, xcpu.X86.HasAVX512F, peakFMA512, 12*2*16) }
func BenchmarkPeakFMA256(b *testing.B) {
	benchPeak(b, xcpu.X86.HasAVX2 && xcpu.X86.HasFMA, peakFMA256, 12*2*8)
}
