package ptx_test

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/verify"
)

// TestDSinkFloorSeeds: the sm_80 bf16 backward with learned sinks passes
// GradBF16 on the seeds where its dsink, correct, failed before
// GradOptions.OutUnit's floor (its delta reads the forward's bf16 output,
// whose rounding the yardstick's own rounded output can miss by far), and
// fails them without that floor, so the floor is what lets them pass.
func TestDSinkFloorSeeds(t *testing.T) {
	t.Parallel()
	s := scoreSpec(t, "sinks", 64)
	fk, bk := scoreKernels(t, s, ptx.SM80, 0)
	sh := verify.Shape{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 69, SeqK: 132, HeadDim: 64}
	noFloor := verify.GradBF16
	noFloor.OutUnit = 0
	for _, seed := range []uint64{28, 37} {
		if _, err := verify.CheckGradWith(s.Pattern(), fk.Run(), bk.Run(), sh, rand.New(rand.NewPCG(seed, 6)), verify.GradBF16); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
		if _, err := verify.CheckGradWith(s.Pattern(), fk.Run(), bk.Run(), sh, rand.New(rand.NewPCG(seed, 6)), noFloor); err == nil {
			t.Errorf("seed %d passes without OutUnit's floor: pick seeds that show why it is there", seed)
		}
	}
}
