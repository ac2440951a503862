package generated_test

import (
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
	}
}

// TestNonFiniteInputs: masked keys and values never reach an output (NaN
// and infinities at masked positions leave every row that does not keep
// them bit-identical), and kept non-finite values give the reference's
// kinds of non-finite results, on every package and variant.
func TestNonFiniteInputs(t *testing.T) {
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
