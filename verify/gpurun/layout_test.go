package gpurun

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/verify"
)

// TestInterpLayouts runs forward kernels (sm_80, sm_90a, and sm_90a's
// residue layout) through gpurun with q, k, v and out held as BSHD and
// as a packed QKV buffer (gaps NaN, the output's gaps checked untouched):
// each call gives the bits of the BHSD call on the same fresh random
// inputs (outputs NaN before each run), and the BSHD call passes the
// float64 reference's check on its own.
func TestInterpLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(221, 222))
	cases := []struct {
		file string
		tg   ptx.Target
		sh   verify.Shape
	}{
		{"causal", ptx.SM80, verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqK: 40}},
		{"causal", ptx.SM80, verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqK: 40, SeqLensQ: []int32{40, 17}, SeqLensK: []int32{40, 29}}},
		{"causal", ptx.SM90a, verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqK: 40}},
		{"dilated", ptx.SM90a, verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 64, SeqK: 64}},
	}
	for _, c := range cases {
		s, f := hopperKernel(t, "../../spec/examples/"+c.file+".yaml", c.tg)
		base, err := Interp(f)
		if err != nil {
			t.Fatal(err)
		}
		sh := c.sh
		sh.HeadDim = s.HeadDim
		nq, nkv, nl := sh.Sizes()
		q, k, v := randomBF16(r, nq), randomBF16(r, nkv), randomBF16(r, nkv)
		run := func(kr *Kernel) ([]float32, []float32) {
			out, lse := make([]float32, nq), make([]float32, nl)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			for i := range lse {
				lse[i] = float32(math.NaN())
			}
			if err := kr.Run()(out, lse, q, k, v, nil, sh); err != nil {
				t.Fatalf("%s %s, layout %s: %v", c.file, c.tg.Name(), kr.Layout(), err)
			}
			return out, lse
		}
		o0, l0 := run(base)
		for _, name := range []string{BSHD, Packed} {
			kl, err := base.WithLayout(name)
			if err != nil {
				t.Fatal(err)
			}
			o, l := run(kl)
			for i := range o0 {
				if math.Float32bits(o[i]) != math.Float32bits(o0[i]) {
					t.Fatalf("%s %s, layout %s: out[%d] = %v, the BHSD call's %v", c.file, c.tg.Name(), name, i, o[i], o0[i])
				}
			}
			for i := range l0 {
				if math.Float32bits(l[i]) != math.Float32bits(l0[i]) {
					t.Fatalf("%s %s, layout %s: lse[%d] = %v, the BHSD call's %v", c.file, c.tg.Name(), name, i, l[i], l0[i])
				}
			}
		}
		kb, _ := base.WithLayout(BSHD)
		opts := verify.BF16Kernel
		if _, err := verify.CheckNumericWith(s.Pattern(), kb.Run(), sh, r, opts); err != nil {
			t.Errorf("%s %s, BSHD against the reference: %v", c.file, c.tg.Name(), err)
		}
	}
	// refusals: an unknown layout; packed with seq_q != seq_k
	_, f := hopperKernel(t, "../../spec/examples/causal.yaml", ptx.SM80)
	k, err := Interp(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.WithLayout("sbhd"); err == nil || !strings.Contains(err.Error(), "want one of bhsd, bshd, packed") {
		t.Errorf("layout sbhd: %v", err)
	}
	kp, _ := k.WithLayout(Packed)
	sh := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 10, SeqK: 20, HeadDim: f.HeadDim}
	nq, nkv, nl := sh.Sizes()
	if err := kp.Run()(make([]float32, nq), make([]float32, nl), make([]float32, nq), make([]float32, nkv), make([]float32, nkv), nil, sh); err == nil || !strings.Contains(err.Error(), "seq_q = seq_k") {
		t.Errorf("packed with seq_q 10, seq_k 20: %v", err)
	}
}
