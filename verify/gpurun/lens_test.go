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
// and k_pos, one entry for every row widened to one per row); then the
// same for the kernels that stage the row's values in shared memory
// (head_dim 192, 256 and {192, 128}; bigbird's long hull and class
// programs) and for a tree (its parent array covering the positions the
// rows reach), and checks that positions are refused for a kernel that
// takes none (the dilated example at head_dim 192: a residue layout above 128).
func TestInterpRaggedLens(t *testing.T) {
	t.Parallel()
	kernelAt := func(name string, d, dv int) (*spec.Spec, *gen.Plan, *Kernel) {
		s, err := spec.ParseFile(filepath.Join("../../spec/examples", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if d != 0 {
			s.HeadDim, s.HeadDimV = d, dv
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
	kernel := func(name string) (*spec.Spec, *gen.Plan, *Kernel) { return kernelAt(name, 0, 0) }
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
	for _, c := range []struct {
		name  string
		d, dv int
	}{{"causal", 192, 192}, {"gemma2", 256, 256}, {"streaming", 192, 128}, {"bigbird", 0, 0}, {"tree", 0, 0}} {
		cs, cplan, ck := kernelAt(c.name, c.d, c.dv)
		bw, err := ptx.GenerateBackward(cplan, ptx.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cb, err := InterpBackward(bw)
		if err != nil {
			t.Fatal(err)
		}
		sh := verify.Shape{Batch: 3, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqK: 70, HeadDim: cs.HeadDim, HeadDimV: cs.HeadDimV,
			SeqLensQ: []int32{40, 9, 0}, SeqLensK: []int32{70, 30, 12}}
		for _, pos := range []bool{false, true} {
			if pos {
				// queries 5 past their row's last key, keys from 100
				sh.QPos, sh.KPos = []int32{135, 126, 300}, []int32{100}
			}
			rep, err := verify.CheckNumericWith(cs.Pattern(), ck.Run(), sh, r, verify.BF16Kernel)
			if err != nil {
				t.Fatalf("%s D=%d,%d positions %v: %v", c.name, cs.HeadDim, cs.HeadDimV, pos, err)
			}
			g, err := verify.CheckGradWith(cs.Pattern(), ck.Run(), cb.Run(), sh, r, verify.GradBF16)
			if err != nil {
				t.Fatalf("%s D=%d,%d positions %v backward: %v", c.name, cs.HeadDim, cs.HeadDimV, pos, err)
			}
			t.Logf("%s positions %v: %v; backward %v", c.name, pos, rep, g)
		}
	}
	ds, _, dk := kernelAt("dilated", 192, 192)
	sh = verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 20, SeqK: 30, HeadDim: ds.HeadDim, KPos: []int32{5}}
	if _, err := verify.CheckNumericWith(ds.Pattern(), dk.Run(), sh, r, verify.BF16Kernel); err == nil || !strings.Contains(err.Error(), "takes no positions") {
		t.Errorf("positions on the dilated kernel at head_dim 192 (a residue layout above 128): err = %v, want a refusal", err)
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
