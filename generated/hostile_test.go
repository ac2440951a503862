package generated_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/verify"
)

// hostileShapes are awkward shapes for the non-finite checks: one row,
// fewer queries than keys, grouped heads, lengths off the tile sizes.
func hostileShapes(d int) []verify.Shape {
	return []verify.Shape{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: d},
		{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 61, SeqK: 130, HeadDim: d},
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 150, SeqK: 150, HeadDim: d, Scale: 0.3},
		{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 2, SeqK: 600, HeadDim: d},
	}
}

// TestNonFiniteInputs: masked keys and values never reach an output (NaN
// and infinities at masked positions leave every row that does not keep
// them bit-identical), and kept non-finite values give the reference's
// kinds of non-finite results, on every package and variant.
func TestNonFiniteInputs(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(81, 82))
	for _, p := range packages() {
		s := load(t, p)
		for _, tg := range cpu.Targets {
			if !p.supported(int(tg.Variant)) {
				continue
			}
			for _, sh := range hostileShapes(s.HeadDim) {
				if err := verify.CheckNonFinite(s.Pattern(), p.run(int(tg.Variant)), sh, r, 6); err != nil {
					t.Errorf("%s/%s: %v", p.file, tg.Name, err)
				}
			}
		}
	}
}

// TestBatchDocuments: document ids may come one row per batch.
func TestBatchDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(83, 84))
	for _, p := range packages() {
		if !p.docs {
			continue
		}
		s := load(t, p)
		for _, tg := range cpu.Targets {
			if !p.supported(int(tg.Variant)) {
				continue
			}
			sh := verify.Shape{Batch: 3, HeadsQ: 2, HeadsKV: 1, SeqQ: 90, SeqK: 140, HeadDim: s.HeadDim}
			if err := verify.CheckBatchDocs(s.Pattern(), p.run(int(tg.Variant)), sh, r); err != nil {
				t.Errorf("%s/%s: %v", p.file, tg.Name, err)
			}
		}
	}
}

// TestIssueScenarios replays the cases the trust issue reported, on every
// variant: NaN in value row 99 (document 1) must not reach rows of
// document 0; a NaN query row gives a NaN row and lse, not 0 and -Inf; a
// NaN in a kept key gives NaN in every variant.
func TestIssueScenarios(t *testing.T) {
	r := rand.New(rand.NewPCG(85, 86))
	for _, p := range packages() {
		if !p.docs || p.tree {
			continue
		}
		s := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 150, SeqK: 150, HeadDim: p.headDim}
		nq, nkv, nl := s.Sizes()
		ids := make([]int32, s.SeqK)
		for j := 98; j < s.SeqK; j++ {
			ids[j] = 1
		}
		q, k, v := randVec(r, nq), randVec(r, nkv), randVec(r, nkv)
		D := s.HeadDim
		for _, tg := range cpu.Targets {
			if !p.supported(int(tg.Variant)) {
				continue
			}
			run := p.run(int(tg.Variant))
			clean, cleanLSE := make([]float32, nq), make([]float32, nl)
			if err := run(clean, cleanLSE, q, k, v, ids, s); err != nil {
				t.Fatal(err)
			}
			call := func(q, k, v []float32) ([]float32, []float32) {
				out, lse := make([]float32, nq), make([]float32, nl)
				if err := run(out, lse, q, k, v, ids, s); err != nil {
					t.Fatal(err)
				}
				return out, lse
			}
			name := p.file + "/" + tg.Name
			// NaN in value row 99: rows of document 0 are unchanged.
			pv := append([]float32(nil), v...)
			for d := 0; d < D; d++ {
				pv[99*D+d] = float32(math.NaN())
			}
			out, _ := call(q, k, pv)
			for x := 0; x < 98*D; x++ {
				if math.Float32bits(out[x]) != math.Float32bits(clean[x]) {
					t.Fatalf("%s: NaN in value row 99 changed out[row %d, dim %d] of document 0: %v, clean %v", name, x/D, x%D, out[x], clean[x])
				}
			}
			// NaN in query row 120: that row is NaN, its neighbours clean.
			pq := append([]float32(nil), q...)
			pq[120*D+3] = float32(math.NaN())
			out, lse := call(pq, k, v)
			if !math.IsNaN(float64(lse[120])) || !math.IsNaN(float64(out[120*D])) {
				t.Errorf("%s: NaN in query row 120: out %v, lse %v, want NaN", name, out[120*D], lse[120])
			}
			if math.Float32bits(out[121*D]) != math.Float32bits(clean[121*D]) {
				t.Errorf("%s: NaN in query row 120 changed row 121", name)
			}
			// NaN in kept key 100 (document 1): rows 100.. of document 1
			// that keep it are NaN.
			pk := append([]float32(nil), k...)
			pk[100*D+5] = float32(math.NaN())
			out, lse = call(q, pk, v)
			if !math.IsNaN(float64(lse[100])) || !math.IsNaN(float64(out[100*D+7])) {
				t.Errorf("%s: NaN in key 100: row 100 out %v, lse %v, want NaN", name, out[100*D+7], lse[100])
			}
		}
	}
}
