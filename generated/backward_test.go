package generated_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/verify"
)

// TestBackwardPackages runs the gradient checks of attngen verify on every
// generated package's BackwardVariant, through its public API, for every
// CPU target this machine supports: dq, dk and dv against the float64
// reference on the forward's awkward shapes (length 1, lengths that are no
// multiple of a tile, fewer queries than keys, grouped heads, several
// batches; outputs poisoned with NaN, rows and keys no pair keeps exactly
// 0), the dependencies of the gradients on dout by perturbation, and NaN
// and infinities at masked positions or in a row's q and dout, which must
// reach no gradient through a masked pair.
func TestBackwardPackages(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(91, 92))
	for _, p := range packages() {
		s := load(t, p)
		pat := s.Pattern()
		for _, tg := range cpu.Targets {
			v := int(tg.Variant)
			if !p.supported(v) {
				continue
			}
			name := p.file + "/" + tg.Name
			fwd, bwd := p.run(v), p.bwd(v)
			for _, sh := range verify.Shapes(s.HeadDim) {
				if testing.Short() && sh.SeqK > 200 || tg.Variant != cpu.Best() && sh.SeqK > 1000 {
					continue // every variant runs the same Go backward today: the long shapes once
				}
				if _, err := verify.CheckGrad(pat, fwd, bwd, sh, r); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			dep := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 50, SeqK: 70, HeadDim: s.HeadDim}
			if err := verify.CheckGradDependencies(pat, fwd, bwd, dep, r); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, sh := range hostileShapes(s.HeadDim)[1:] {
				if err := verify.CheckGradNonFinite(pat, fwd, bwd, sh, r, 2); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
	}
}

// TestBackwardAPI: each package's Backward takes the forward's validation
// rules: another head dimension, an overflowing shape, a short slice (lse
// included: the backward needs it), a gradient sharing memory with another
// gradient or an input, an unknown variant and document ids of a wrong
// length are errors wrapping the package's own errors; after a call of a
// shape has run, the next allocates nothing.
func TestBackwardAPI(t *testing.T) {
	r := rand.New(rand.NewPCG(93, 94))
	for _, p := range packages() {
		fwd, bwd := p.run(int(cpu.Auto)), p.bwd(int(cpu.Auto))
		s := withHeads(t, p, verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 10, SeqK: 12, HeadDim: p.headDim}, r)
		nq, nkv, nl := s.Sizes()
		q, k, v, dout := randVec(r, nq), randVec(r, nkv), randVec(r, nkv), randVec(r, nq)
		out, lse := make([]float32, nq), make([]float32, nl)
		dq, dk, dv := make([]float32, nq), make([]float32, nkv), make([]float32, nkv)
		ids := plainData(p, s.SeqK)
		if err := fwd(out, lse, q, k, v, ids, s); err != nil {
			t.Fatalf("%s: %v", p.file, err)
		}
		call := func(s verify.Shape) error { return bwd(dq, dk, dv, dout, q, k, v, out, lse, ids, s, nil) }
		if err := call(s); err != nil {
			t.Fatalf("%s: %v", p.file, err)
		}
		if n := testing.AllocsPerRun(3, func() { _ = call(s) }); n != 0 && !raceEnabled {
			t.Errorf("%s: Backward allocates %v times a call after warm-up", p.file, n)
		}
		bad := s
		bad.HeadDim = p.headDim ^ (64 | 128)
		big := s
		big.Batch = 1 << 57
		for _, c := range []struct {
			what, err string
			call      func() error
		}{
			{"other head dim", "headDim", func() error { return call(bad) }},
			{"batch 1<<57", "shape", func() error { return bwd(nil, nil, nil, nil, nil, nil, nil, nil, nil, ids, big, nil) }},
			{"seq_q > seq_k", "shape", func() error { b := s; b.SeqQ = 13; return call(b) }},
			{"short lse", "short", func() error { return bwd(dq, dk, dv, dout, q, k, v, out, lse[:nl-1], ids, s, nil) }},
			{"no lse", "short", func() error { return bwd(dq, dk, dv, dout, q, k, v, out, nil, ids, s, nil) }},
			{"short dout", "short", func() error { return bwd(dq, dk, dv, dout[:nq-1], q, k, v, out, lse, ids, s, nil) }},
			{"short dv", "short", func() error { return bwd(dq, dk, dv[:nkv-1], dout, q, k, v, out, lse, ids, s, nil) }},
			{"dk over dv", "alias", func() error {
				buf := make([]float32, nkv+8)
				return bwd(dq, buf[:nkv], buf[8:], dout, q, k, v, out, lse, ids, s, nil)
			}},
			{"dq over dout", "alias", func() error { return bwd(dout, dk, dv, dout, q, k, v, out, lse, ids, s, nil) }},
			{"dv over k", "alias", func() error { return bwd(dq, dk, k, dout, q, k, v, out, lse, ids, s, nil) }},
			{"variant 99", "variant", func() error { return p.bwd(99)(dq, dk, dv, dout, q, k, v, out, lse, ids, s, nil) }},
		} {
			if err := c.call(); !errors.Is(err, p.errs[c.err]) {
				t.Errorf("%s: Backward, %s: error %v, want %s.Err%s", p.file, c.what, err, p.dir, c.err)
			}
		}
		if p.docs {
			if err := bwd(dq, dk, dv, dout, q, k, v, out, lse, make([]int32, s.SeqK+1), s, nil); !errors.Is(err, p.errs["data"]) {
				t.Errorf("%s: Backward with %d entries of data: error %v, want ErrDocument (ErrTree for a tree)", p.file, s.SeqK+1, err)
			}
		}
	}
}
