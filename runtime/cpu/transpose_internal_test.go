package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPackTranspose: pack lays out every key tile as kt[d][c] = key c, dim
// d (zero past the keys) and the values as rows, whatever path it takes
// (each variant's transpose for whole tiles where it has one), for every
// square head dimension of its table, identity and strided layouts,
// whole and tail tiles.
func TestPackTranspose(t *testing.T) { eachKernels(t, nil, testPackTranspose) }

func testPackTranspose(t *testing.T, kern *kernels) {
	r := rand.New(rand.NewPCG(16, 17))
	for _, D := range append(squareTestDims(kern), 40, 104) { // and sizes padded to larger kernels
		for _, stride := range []int{1, 3} {
			sk := 300
			k, v := make([]float32, 2*sk*D), make([]float32, 2*sk*D)
			for i := range k {
				k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			s := Shape{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: sk, HeadDim: D}
			kd, ok := kern.kernelDims(square(D))
			if !ok {
				t.Fatalf("D %d: no kernel dims", D)
			}
			c := &call{kern: kern, s: s, dd: square(D), kd: kd, ls: BHSD(s, 0), inputs: inputs{k: k, v: v}, scale: 0.375}
			for off := 0; off < stride; off++ {
				g := segment{nk: (sk - off + stride - 1) / stride, off: off, stride: stride}
				for tt := 0; tt*TK < g.nk; tt++ {
					kt, vt := make([]float32, TK*kd.qk), make([]float32, TK*kd.v)
					for i := range kt {
						kt[i] = -7
					}
					for i := range vt {
						vt[i] = -7
					}
					tmp := make([]float32, TK*kd.qk) // scratch of earlier tiles: garbage
					for i := range tmp {
						tmp[i] = float32(math.NaN())
					}
					c.pack(kt, vt, tmp, 1, g, tt)
					vt = c.valueTile(vt, 1, g, tt)
					inPlace := kd == c.dd && g.stride == 1 && (tt+1)*TK <= g.nk
					for x := 0; x < TK; x++ {
						key := tt*TK + x
						for d := 0; d < kd.qk; d++ {
							wantK, wantV := float32(0), float32(0)
							if key < g.nk && d < D {
								row := (sk + g.off + g.stride*key) * D
								wantK, wantV = 0.375*k[row+d], v[row+d]
							}
							if kt[d*TK+x] != wantK || (key < g.nk || !inPlace) && vt[x*kd.v+d] != wantV {
								t.Fatalf("D %d (kernels %v) stride %d class %d tile %d key %d dim %d: kt %v vt %v, want %v %v", D, kd, stride, off, tt, x, d, kt[d*TK+x], vt[x*kd.v+d], wantK, wantV)
							}
						}
					}
				}
			}
		}
	}
}

// TestTransposeAsm: each variant's transpose equals the definition for
// both head dimensions and several pitches.
func TestTransposeAsm(t *testing.T) {
	eachKernels(t, func(k *kernels) bool { return k.transpose != nil }, testTranspose)
}

func testTranspose(t *testing.T, kern *kernels) {
	r := rand.New(rand.NewPCG(18, 19))
	for _, D := range squareTestDims(kern) {
		for _, pitch := range []int{D, D + 16, 5 * D} {
			k := make([]float32, (TK-1)*pitch+D)
			for i := range k {
				k[i] = float32(r.NormFloat64())
			}
			kt := make([]float32, D*TK)
			if !kern.transposeK(kt, k, pitch, D, -1.5) {
				t.Fatalf("D %d pitch %d: the transpose did not run", D, pitch)
			}
			for d := 0; d < D; d++ {
				for c := 0; c < TK; c++ {
					if kt[d*TK+c] != -1.5*k[c*pitch+d] {
						t.Fatalf("D %d pitch %d: kt[%d][%d] = %v, want %v", D, pitch, d, c, kt[d*TK+c], -1.5*k[c*pitch+d])
					}
				}
			}
		}
	}
}
