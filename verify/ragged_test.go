package verify

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// randomRagged draws a shape with per-row lengths and, half the time,
// positions (some rows' queries before some of their keys).
func randomRagged(r *rand.Rand) Shape {
	s := Shape{Batch: 1 + r.IntN(3), HeadsQ: 2, HeadsKV: 1 + r.IntN(2), SeqK: 1 + r.IntN(60), HeadDim: 1 + r.IntN(12)}
	s.SeqQ = 1 + r.IntN(s.SeqK)
	pos := r.IntN(2) == 0
	for b := 0; b < s.Batch; b++ {
		nk := r.IntN(s.SeqK + 1)
		nq := r.IntN(s.SeqQ + 1)
		if !pos {
			nq = min(nq, nk) // the default alignment needs nq <= nk
		}
		s.SeqLensQ, s.SeqLensK = append(s.SeqLensQ, int32(nq)), append(s.SeqLensK, int32(nk))
		if pos {
			s.KPos = append(s.KPos, int32(r.IntN(40)))
			s.QPos = append(s.QPos, int32(r.IntN(80)))
		}
	}
	return s
}

// denseAt is an independent formulation of a ragged call with positions:
// per batch row, the dense mask at absolute positions over that row's
// queries and keys only, exp of each kept score over their total.
func denseAt(p spec.Pattern, q, k, v []float32, s Shape) (out, lse []float64) {
	D := s.HeadDim
	out = make([]float64, s.Batch*s.HeadsQ*s.SeqQ*D)
	lse = make([]float64, s.Batch*s.HeadsQ*s.SeqQ)
	for b := 0; b < s.Batch; b++ {
		nq, nk := int(s.SeqLensQ[b]), int(s.SeqLensK[b])
		kpos, qpos := 0, nk-nq
		if s.KPos != nil {
			kpos, qpos = int(s.KPos[b]), int(s.QPos[b])
		}
		for h := 0; h < s.HeadsQ; h++ {
			hk := h * s.HeadsKV / s.HeadsQ
			for r := 0; r < s.SeqQ; r++ {
				row := (b*s.HeadsQ+h)*s.SeqQ + r
				lse[row] = math.Inf(-1)
				if r >= nq {
					continue
				}
				var ws []float64
				var js []int
				for j := 0; j < nk; j++ {
					if !p.At(qpos+r, kpos+j) {
						continue
					}
					dot := 0.0
					for d := 0; d < D; d++ {
						dot += float64(q[row*D+d]) * float64(k[((b*s.HeadsKV+hk)*s.SeqK+j)*D+d])
					}
					ws, js = append(ws, dot*s.EffScale()), append(js, j)
				}
				if len(ws) == 0 {
					continue
				}
				total := 0.0
				for _, w := range ws {
					total += math.Exp(w)
				}
				lse[row] = math.Log(total)
				for n, j := range js {
					for d := 0; d < D; d++ {
						out[row*D+d] += math.Exp(ws[n]) / total * float64(v[((b*s.HeadsKV+hk)*s.SeqK+j)*D+d])
					}
				}
			}
		}
	}
	return out, lse
}

// TestRaggedReference: Reference and NaiveFP32 on shapes with per-row
// lengths and positions agree with denseAt (and so with each other), and
// stale values past each row's keys (NaN) reach neither.
func TestRaggedReference(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for iter := 0; iter < 150; iter++ {
		p := spectest.Pattern(r, 30, 2)
		s := randomRagged(r)
		nq, nkv, nl := s.Sizes()
		q, k, v := randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv)
		wantOut, wantLSE := denseAt(p, q, k, v, s)
		for b := 0; b < s.Batch; b++ { // stale keys and values past each row's length
			for hk := 0; hk < s.HeadsKV; hk++ {
				for j := int(s.SeqLensK[b]); j < s.SeqK; j++ {
					at := ((b*s.HeadsKV+hk)*s.SeqK + j) * s.HeadDim
					k[at], v[at] = float32(math.NaN()), float32(math.Inf(1))
				}
			}
		}
		ref, refLSE, err := Reference(p, nil, q, k, v, s)
		if err != nil {
			t.Fatalf("%v %+v: %v", p, s, err)
		}
		out, lse := make([]float32, nq), make([]float32, nl)
		if err := NaiveFP32(p, nil, q, k, v, s, out, lse); err != nil {
			t.Fatalf("%v %+v: %v", p, s, err)
		}
		for n := range wantOut {
			if math.Abs(ref[n]-wantOut[n]) > 1e-9*(1+math.Abs(wantOut[n])) || math.Abs(float64(out[n])-wantOut[n]) > 1e-5*(1+math.Abs(wantOut[n])) {
				t.Fatalf("%v %+v: out[%d]: reference %v, naive %v, dense %v", p, s, n, ref[n], out[n], wantOut[n])
			}
		}
		for n := range wantLSE {
			if !closeTo(refLSE[n], wantLSE[n], 1e-9) || !closeTo(float64(lse[n]), wantLSE[n], 1e-5) {
				t.Fatalf("%v %+v: lse[%d]: reference %v, naive %v, dense %v", p, s, n, refLSE[n], lse[n], wantLSE[n])
			}
		}
	}
}

// TestRaggedShapeErrors: per-row slices of the wrong length, lengths past
// the shape's and negative positions are errors of both references.
func TestRaggedShapeErrors(t *testing.T) {
	p := spec.Pattern{Causal: true}
	base := Shape{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 4, SeqK: 8, HeadDim: 4}
	nq, nkv, nl := base.Sizes()
	q, k, v := make([]float32, nq), make([]float32, nkv), make([]float32, nkv)
	for _, tc := range []struct {
		name string
		edit func(*Shape)
	}{
		{"three lengths for two rows", func(s *Shape) { s.SeqLensK = []int32{1, 2, 3} }},
		{"keys past SeqK", func(s *Shape) { s.SeqLensK = []int32{9, 2} }},
		{"queries past SeqQ", func(s *Shape) { s.SeqLensQ = []int32{5, 1} }},
		{"more queries than keys at the default alignment", func(s *Shape) { s.SeqLensQ, s.SeqLensK = []int32{4, 4}, []int32{8, 2} }},
		{"negative position", func(s *Shape) { s.QPos = []int32{-1} }},
	} {
		s := base
		tc.edit(&s)
		if _, _, err := Reference(p, nil, q, k, v, s); err == nil {
			t.Errorf("%s: Reference took %+v", tc.name, s)
		}
		if err := NaiveFP32(p, nil, q, k, v, s, make([]float32, nq), make([]float32, nl)); err == nil {
			t.Errorf("%s: NaiveFP32 took %+v", tc.name, s)
		}
	}
}
