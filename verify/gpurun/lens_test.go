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

// TestInterpRaggedLensResidue is TestInterpRaggedLens for a residue
// layout (a dilated mask of stride 3): the sm_80 forward and backward and
// the sm_90a forward against verify's references on a ragged batch whose
// row lengths are not multiples of the stride (zero-length rows
// included), then at positions, then with more queries than keys (seq_q
// > seq_k, which positions allow). The tensors' rows are multiples of the
// stride, as the sm_90a kernel's tensor maps need.
func TestInterpRaggedLensResidue(t *testing.T) {
	t.Parallel()
	s, err := spec.Parse("dil3.yaml", []byte("name: dil3\nmask:\n  dilated: {stride: 3, size: 20}\nhead_dim: 64\n"))
	if err != nil {
		t.Fatal(err)
	}
	shapes := []struct {
		what string
		sh   verify.Shape
	}{
		{"ragged", verify.Shape{Batch: 4, HeadsQ: 2, HeadsKV: 1, SeqQ: 45, SeqK: 72, HeadDim: 64,
			SeqLensQ: []int32{45, 10, 0, 0}, SeqLensK: []int32{71, 32, 13, 0}}},
		{"positions", verify.Shape{Batch: 4, HeadsQ: 2, HeadsKV: 1, SeqQ: 45, SeqK: 72, HeadDim: 64,
			SeqLensQ: []int32{45, 10, 0, 0}, SeqLensK: []int32{71, 32, 13, 0},
			QPos: []int32{100, 7, 50, 0}, KPos: []int32{60, 0, 41, 5}}},
		{"seq_q > seq_k", verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 48, SeqK: 27, HeadDim: 64,
			SeqLensQ: []int32{48, 31}, SeqLensK: []int32{27, 14}, QPos: []int32{10, 40}, KPos: []int32{0, 33}}},
	}
	for _, tg := range []ptx.Target{ptx.SM80, ptx.SM90a} {
		t.Run(tg.Arch(), func(t *testing.T) {
			t.Parallel()
			plan, err := gen.Compile(s, tg, nil)
			if err != nil {
				t.Fatal(err)
			}
			ks, err := ptx.Kernels(plan, ptx.Config{Target: tg, SoftLg2: true})
			if err != nil {
				t.Fatal(err)
			}
			if ks.Forward.Stride != 3 {
				t.Fatalf("the dilated mask runs at residue stride %d, want 3", ks.Forward.Stride)
			}
			k, err := Interp(ks.Forward)
			if err != nil {
				t.Fatal(err)
			}
			var kb *BackwardKernel
			if ks.Backward != nil && !tg.Accel {
				if kb, err = InterpBackward(ks.Backward); err != nil {
					t.Fatal(err)
				}
			}
			r := rand.New(rand.NewPCG(15, 16))
			for _, c := range shapes {
				rep, err := verify.CheckNumericWith(s.Pattern(), k.Run(), c.sh, r, verify.BF16Kernel)
				if err != nil {
					t.Fatalf("%s: %v", c.what, err)
				}
				t.Logf("%s: %v", c.what, rep)
				if kb == nil {
					continue
				}
				g, err := verify.CheckGradWith(s.Pattern(), k.Run(), kb.Run(), c.sh, r, verify.GradBF16)
				if err != nil {
					t.Fatalf("%s backward: %v", c.what, err)
				}
				t.Logf("%s backward: %v", c.what, g)
			}
			// without positions a call of more queries than keys is refused
			wide := shapes[2].sh
			wide.QPos, wide.KPos = nil, nil
			if _, err := verify.CheckNumericWith(s.Pattern(), k.Run(), wide, r, verify.BF16Kernel); err == nil || !strings.Contains(err.Error(), "exceeds") {
				t.Errorf("seq_q > seq_k without positions: err = %v, want a refusal", err)
			}
		})
	}
}
