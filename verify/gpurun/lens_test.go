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
// and backward under the interpreter on a ragged batch
// (verify.Shape.SeqLensQ, SeqLensK, passed as seq_lens_q and seq_lens_k)
// against the references, then both with positions (QPos, KPos: q_pos
// and k_pos, one entry for every row widened to one per row), and checks
// that positions are refused for a kernel that takes none (the tree
// example's).
func TestInterpRaggedLens(t *testing.T) {
	t.Parallel()
	kernel := func(name string) (*spec.Spec, *gen.Plan, *Kernel) {
		s, err := spec.ParseFile(filepath.Join("../../spec/examples", name+".yaml"))
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
		return s, plan, k
	}
	s, plan, k := kernel("streaming")
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
	// keys from 1000 (sinks out of reach), queries ending 5 past the last key
	sh.QPos, sh.KPos = []int32{1035, 1026, 2000}, []int32{1000}
	if rep, err = verify.CheckNumericWith(s.Pattern(), k.Run(), sh, r, verify.BF16Kernel); err != nil {
		t.Fatal(err)
	}
	t.Logf("positions: %v", rep)
	if g, err = verify.CheckGradWith(s.Pattern(), k.Run(), kb.Run(), sh, r, verify.GradBF16); err != nil {
		t.Fatal(err)
	}
	t.Logf("positions backward: %v", g)
	sh.KPos = []int32{-1}
	if _, err := verify.CheckNumericWith(s.Pattern(), k.Run(), sh, r, verify.BF16Kernel); err == nil {
		t.Errorf("a negative position: no error")
	}
	ts, _, tk := kernel("tree")
	sh = verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 20, SeqK: 30, HeadDim: ts.HeadDim, KPos: []int32{5}}
	if _, err := verify.CheckNumericWith(ts.Pattern(), tk.Run(), sh, r, verify.BF16Kernel); err == nil || !strings.Contains(err.Error(), "takes no positions") {
		t.Errorf("positions on the tree kernel: err = %v, want a refusal", err)
	}
}
