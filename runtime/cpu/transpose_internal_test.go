package cpu

import (
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
	for _, D := range squareTestDims(kern) {
		for _, stride := range []int{1, 3} {
			sk := 300
			k, v := make([]float32, 2*sk*D), make([]float32, 2*sk*D)
			for i := range k {
				k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			c := &call{kern: kern, s: Shape{SeqK: sk, HeadDim: D}, inputs: inputs{k: k, v: v}, scale: 0.375}
			for off := 0; off < stride; off++ {
				g := segment{nk: (sk - off + stride - 1) / stride, off: off, stride: stride}
				for tt := 0; tt*TK < g.nk; tt++ {
					kt, vt := make([]float32, TK*D), make([]float32, TK*D)
					for i := range kt {
						kt[i], vt[i] = -7, -7
					}
					c.pack(kt, vt, make([]float32, TK*D), 1, g, tt)
					vt = c.valueTile(vt, 1, g, tt)
					for x := 0; x < TK; x++ {
						key := tt*TK + x
						for d := 0; d < D; d++ {
							wantK, wantV := float32(0), float32(0)
							if key < g.nk {
								row := (sk + g.off + g.stride*key) * D
								wantK, wantV = 0.375*k[row+d], v[row+d]
							}
							if kt[d*TK+x] != wantK || (key < g.nk || !(g.stride == 1 && (tt+1)*TK <= g.nk)) && vt[x*D+d] != wantV {
								t.Fatalf("D %d stride %d class %d tile %d key %d dim %d: kt %v vt %v, want %v %v", D, stride, off, tt, x, d, kt[d*TK+x], vt[x*D+d], wantK, wantV)
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
