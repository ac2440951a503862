package gpurun

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/attngen/attngen/verify"
)

// TestInterpNonFinite: in every example's PTX kernel (under the
// interpreter), NaN and infinities at masked positions never reach an
// output and kept ones give the reference's kinds of results, as on the
// CPU.
func TestInterpNonFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(73, 74))
	for _, e := range exampleKernels(t) {
		f, s, k := e.file, e.spec, e.k
		D := s.HeadDim
		shapes := []verify.Shape{
			{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 37, SeqK: 70, HeadDim: D},
			{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 80, SeqK: 80, HeadDim: D},
		}
		trials := 4
		if testing.Short() {
			shapes, trials = shapes[:1], 2
		}
		for _, sh := range shapes {
			if err := verify.CheckNonFinite(s.Pattern(), k.Run(), sh, r, trials); err != nil {
				t.Errorf("%s: %v", filepath.Base(f), err)
			}
		}
	}
}
