package gpurun

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// TestInterpRaggedLens runs the sm_80 forward of the streaming example
// under the interpreter on a ragged batch (verify.Shape.SeqLensQ,
// SeqLensK, passed as seq_lens_q and seq_lens_k) against the reference,
// and checks that positions (QPos, KPos), which the kernels do not take,
// are refused.
func TestInterpRaggedLens(t *testing.T) {
	t.Parallel()
	s, err := spec.ParseFile(filepath.Join("../../spec/examples", "streaming.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := gen.Compile(s, ptx.SM80, nil)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := ptx.GenerateForward(plan, ptx.Config{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := Interp(fw)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	sh := verify.Shape{Batch: 3, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqK: 70, HeadDim: s.HeadDim,
		SeqLensQ: []int32{40, 9, 0}, SeqLensK: []int32{70, 30, 12}}
	rep, err := verify.CheckNumericWith(s.Pattern(), k.Run(), sh, r, verify.BF16Kernel)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ragged: %v", rep)
	bw, err := ptx.GenerateBackward(plan, ptx.Config{})
	if err != nil {
		t.Fatal(err)
	}
	kb, err := InterpBackward(bw)
	if err != nil {
		t.Fatal(err)
	}
	g, err := verify.CheckGradWith(s.Pattern(), k.Run(), kb.Run(), sh, r, verify.GradBF16)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ragged backward: %v", g)
	sh.SeqLensQ, sh.SeqLensK, sh.KPos = nil, nil, []int32{5}
	if _, err := verify.CheckNumericWith(s.Pattern(), k.Run(), sh, r, verify.BF16Kernel); err == nil || !strings.Contains(err.Error(), "positions") {
		t.Errorf("positions: err = %v, want a refusal", err)
	}
}
