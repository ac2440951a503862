package cpu_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// shapesRun and shapesBackward are verify's Run and RunBackward of
// ForwardArgs and BackwardArgs with every shape field of a verify.Shape
// passed through: head and score values, HeadDimV, per-row lengths and
// positions (and dsink).
func shapesRun(p spec.Pattern, m mask.Mask, v cpu.Variant) verify.Run {
	return func(out, lse, q, k, v2 []float32, docs []int32, s verify.Shape) error {
		a := cpu.Args{Q: q, K: k, V: v2, Out: out, LSE: lse, Docs: docs,
			HeadParams: cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), Shape: cpuShapeOf(s),
			HeadDimV: s.HeadDimV, SeqLensQ: s.SeqLensQ, SeqLensK: s.SeqLensK, QPos: s.QPos, KPos: s.KPos}
		a.SoftCap, a.Slopes, a.Sinks = s.Score.Float32()
		return cpu.ForwardArgs(m, v, a)
	}
}

func shapesBackward(p spec.Pattern, m mask.Mask, v cpu.Variant) verify.RunBackward {
	return func(dq, dk, dv, dout, q, k, v2, out, lse []float32, docs []int32, s verify.Shape, dsink []float32) error {
		a := cpu.BackArgs{DQ: dq, DK: dk, DV: dv, DOut: dout, Q: q, K: k, V: v2, Out: out, LSE: lse, Docs: docs,
			HeadParams: cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), Shape: cpuShapeOf(s), DSinks: dsink,
			HeadDimV: s.HeadDimV, SeqLensQ: s.SeqLensQ, SeqLensK: s.SeqLensK, QPos: s.QPos, KPos: s.KPos}
		a.SoftCap, a.Slopes, a.Sinks = s.Score.Float32()
		return cpu.BackwardArgs(m, v, a)
	}
}

// TestBackwardScoreShapes: the score stages (soft-capping, ALiBi at the
// rows' absolute positions, learned sinks and their dsink summed over
// ragged rows) and head parameters through split head sizes, per-row
// lengths and positions, on every variant, against the float64 gradients.
func TestBackwardScoreShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(411, 412))
	for _, c := range scoreSpecs {
		p, m := headsPlan(t, fmt.Sprintf("%shead_dim: %d\n", c.src, c.d))
		for _, v := range supported() {
			for _, s := range []verify.Shape{
				{Batch: 3, HeadsQ: 4, HeadsKV: 2, SeqQ: 60, SeqK: 150, HeadDim: c.d, HeadDimV: 40, SeqLensQ: []int32{60, 1, 33}, SeqLensK: []int32{150, 77, 140}},
				{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 100, HeadDim: c.d, QPos: []int32{130, 45}, KPos: []int32{64, 0}},
			} {
				if c.full {
					s.SeqLensQ = s.SeqLensK
					s.SeqQ = s.SeqK
				}
				if _, err := verify.CheckGrad(p, shapesRun(p, m, v), shapesBackward(p, m, v), s, r); err != nil {
					t.Fatalf("%s %s %+v: %v", p.Score, v, s, err)
				}
			}
		}
	}
}

// TestBackwardHeadDimV: split head sizes (q/k of HeadDim, v, out, dout and
// dv of HeadDimV), with and without a multiple of 64 on either side, on
// every variant (the tiled ones on padded rows), against the float64
// gradients.
func TestBackwardHeadDimV(t *testing.T) {
	r := rand.New(rand.NewPCG(401, 402))
	dims := [][2]int{{192, 128}, {40, 96}, {96, 40}, {8, 256}, {128, 24}}
	if testing.Short() {
		dims = dims[:3]
	}
	for _, src := range shapeSpecs {
		p, m := headsPlan(t, src)
		for _, d := range dims {
			for _, v := range supported() {
				s := verify.Shape{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 70, SeqK: 130, HeadDim: d[0], HeadDimV: d[1]}
				if _, err := verify.CheckGrad(p, shapesRun(p, m, v), shapesBackward(p, m, v), s, r); err != nil {
					t.Fatalf("%s %s D %d/%d: %v", p.Mask, v, d[0], d[1], err)
				}
			}
		}
	}
}

// TestBackwardHeadDimVChecks: with split head sizes the gradients depend
// on dout exactly as the mask says (CheckGradDependencies) and NaN and
// infinities at masked positions reach none (CheckGradNonFinite), on
// every variant; a backward that adds dout's first row to every dv row
// fails the first.
func TestBackwardHeadDimVChecks(t *testing.T) {
	r := rand.New(rand.NewPCG(421, 422))
	for _, src := range shapeSpecs {
		p, m := headsPlan(t, src)
		for _, v := range supported() {
			fwd, bwd := shapesRun(p, m, v), shapesBackward(p, m, v)
			dep := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 40, SeqK: 70, HeadDim: 72, HeadDimV: 40}
			if err := verify.CheckGradDependencies(p, fwd, bwd, dep, r); err != nil {
				t.Fatalf("%s %s: %v", p.Mask, v, err)
			}
			nf := verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 61, SeqK: 130, HeadDim: 40, HeadDimV: 72}
			if err := verify.CheckGradNonFinite(p, fwd, bwd, nf, r, 2); err != nil {
				t.Fatalf("%s %s: %v", p.Mask, v, err)
			}
			leak := func(dq, dk, dv, dout, q, k, v2, out, lse []float32, docs []int32, s verify.Shape, dsink []float32) error {
				if err := bwd(dq, dk, dv, dout, q, k, v2, out, lse, docs, s, dsink); err != nil {
					return err
				}
				for j := 0; j < s.SeqK; j++ {
					dv[j*s.HeadDimV] += dout[0]
				}
				return nil
			}
			if err := verify.CheckGradDependencies(p, fwd, leak, dep, r); err == nil {
				t.Fatalf("%s %s: a backward whose dv reads dout row 0 everywhere passed", p.Mask, v)
			}
		}
	}
}

// TestBackwardRaggedChecks: at per-row lengths and positions the
// gradients depend on dout exactly as the mask at the row's positions
// says, and NaN and infinities at masked positions, past a row's keys or
// in its queries past its length reach none, and the sampled gradient
// check agrees, on every variant; a backward that ignores the lengths
// fails every check.
func TestBackwardRaggedChecks(t *testing.T) {
	r := rand.New(rand.NewPCG(431, 432))
	deps := []verify.Shape{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 40, SeqK: 90, HeadDim: 40, SeqLensQ: []int32{29}, SeqLensK: []int32{71}},
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 50, SeqK: 30, HeadDim: 24, HeadDimV: 40, QPos: []int32{77}, KPos: []int32{61}},
	}
	nfs := []verify.Shape{
		{Batch: 3, HeadsQ: 2, HeadsKV: 1, SeqQ: 45, SeqK: 130, HeadDim: 40, SeqLensQ: []int32{45, 1, 20}, SeqLensK: []int32{130, 66, 100}},
		{Batch: 2, HeadsQ: 2, HeadsKV: 2, SeqQ: 60, SeqK: 70, HeadDim: 32, HeadDimV: 48, QPos: []int32{90, 3}, KPos: []int32{64, 0}},
	}
	for _, src := range shapeSpecs {
		p, m := headsPlan(t, src)
		for _, v := range supported() {
			fwd, bwd := shapesRun(p, m, v), shapesBackward(p, m, v)
			for _, s := range deps {
				if err := verify.CheckGradDependencies(p, fwd, bwd, s, r); err != nil {
					t.Fatalf("%s %s: %v", p.Mask, v, err)
				}
			}
			for _, s := range nfs {
				if err := verify.CheckGradNonFinite(p, fwd, bwd, s, r, 2); err != nil {
					t.Fatalf("%s %s: %v", p.Mask, v, err)
				}
				for _, n := range []int{0, 12} { // every row, then a sample
					if _, err := verify.CheckGradSampledRun(p, fwd, bwd, s, r, verify.GradFP32, n); err != nil {
						t.Fatalf("%s %s, sampled (%d): %v", p.Mask, v, n, err)
					}
				}
			}
			// unragged runs the backward as if every row had all the
			// queries and keys: it reads the poisoned and perturbed rows
			// past the lengths.
			unragged := func(dq, dk, dv, dout, q, k, v2, out, lse []float32, docs []int32, s verify.Shape, dsink []float32) error {
				s.SeqLensQ, s.SeqLensK = nil, nil
				return bwd(dq, dk, dv, dout, q, k, v2, out, lse, docs, s, dsink)
			}
			if err := verify.CheckGradDependencies(p, fwd, unragged, deps[0], r); err == nil {
				t.Fatalf("%s %s: a backward that ignores SeqLensK passed CheckGradDependencies", p.Mask, v)
			}
			if _, err := verify.CheckGradSampledRun(p, fwd, unragged, nfs[0], r, verify.GradFP32, 0); err == nil {
				t.Fatalf("%s %s: a backward that ignores the lengths passed CheckGradSampledRun", p.Mask, v)
			}
			if err := verify.CheckGradNonFinite(p, fwd, unragged, nfs[0], r, 8); err == nil {
				t.Fatalf("%s %s: a backward that ignores the lengths passed CheckGradNonFinite", p.Mask, v)
			}
			shifted := func(dq, dk, dv, dout, q, k, v2, out, lse []float32, docs []int32, s verify.Shape, dsink []float32) error {
				s.QPos = []int32{s.QPos[0] - 1}
				if docs != nil {
					docs = docs[:len(docs)-1] // the ids the earlier positions need
				}
				return bwd(dq, dk, dv, dout, q, k, v2, out, lse, docs, s, dsink)
			}
			if err := verify.CheckGradDependencies(p, fwd, shifted, deps[1], r); err == nil || errors.Is(err, cpu.ErrShape) || errors.Is(err, cpu.ErrDocument) {
				t.Fatalf("%s %s: a backward whose queries sit one position early passed CheckGradDependencies (%v)", p.Mask, v, err)
			}
		}
	}
}

// TestBackwardThreadsPadded: the tiled backward at head sizes it pads (and at
// split sizes) gives the same bits whatever the thread count, which picks
// the fused pass or the two passes.
func TestBackwardThreadsPadded(t *testing.T) {
	r := rand.New(rand.NewPCG(403, 404))
	_, m := headsPlan(t, shapeSpecs[0])
	s := cpu.Shape{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 150, SeqK: 200, HeadDim: 40}
	const dv = 72
	c := newShapeCall(t, r, m, s, dv, s.SeqK)
	if err := cpu.ForwardArgs(m, cpu.Auto, c.a); err != nil {
		t.Fatal(err)
	}
	dout := randSlice(r, c.nOut)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, v := range supported() {
		var first [3][]float32
		for i, procs := range []int{1, 2, 4, 8} {
			runtime.GOMAXPROCS(procs)
			a := cpu.BackArgs{DQ: poisoned32(len(c.q), 0x7fc0_0041), DK: poisoned32(len(c.k), 0x7fc0_0042), DV: poisoned32(len(c.v), 0x7fc0_0043),
				DOut: dout, Q: c.q, K: c.k, V: c.v, Out: c.a.Out, LSE: c.a.LSE, Shape: s, HeadDimV: dv}
			if err := cpu.BackwardArgs(m, v, a); err != nil {
				t.Fatal(err)
			}
			got := [3][]float32{a.DQ, a.DK, a.DV}
			if i == 0 {
				first = got
				continue
			}
			for x, g := range got {
				if j := sameBits32(g, first[x]); j >= 0 {
					t.Fatalf("%s GOMAXPROCS %d: %s[%d] = %v, with 1 thread %v", v, procs, [3]string{"dq", "dk", "dv"}[x], j, g[j], first[x][j])
				}
			}
		}
	}
}

// TestBackwardRagged: a batch of rows with their own query and key counts
// equals one backward call per row, bit for bit, on every variant, with
// BHSD and BSHD tensors and split head sizes; stale data past a row's
// lengths (NaN in q, k, v, dout, out and lse) never reaches a gradient;
// dq rows past a row's queries and dk, dv rows past its keys are 0; and
// verify's float64 gradients of the ragged shape agree.
func TestBackwardRagged(t *testing.T) {
	r := rand.New(rand.NewPCG(405, 406))
	nan := float32(math.NaN())
	// a mask that keeps keys after the queries too: a row's stale keys
	// past its length would be kept if read
	for _, src := range append(shapeSpecs, "name: s\ncausal: false\nmask: {window: {left: 50, right: 400}}\n") {
		p, m := headsPlan(t, src)
		for _, s := range []cpu.Shape{
			{Batch: 4, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 300, HeadDim: 64},
			{Batch: 3, HeadsQ: 2, HeadsKV: 1, SeqQ: 60, SeqK: 200, HeadDim: 40},
		} {
			dvd := 96
			lensQ, lensK := make([]int32, s.Batch), make([]int32, s.Batch)
			for b := range lensK {
				lensK[b] = int32(1 + r.IntN(s.SeqK))
				lensQ[b] = int32(min(int(lensK[b]), 1+r.IntN(s.SeqQ)))
			}
			lensK[0], lensQ[0] = int32(s.SeqK), int32(s.SeqQ)
			if s.Batch > 3 {
				lensQ[3] = 0 // a row without queries
			}
			for _, v := range supported() {
				name := fmt.Sprintf("%s %s %+v", p.Mask, v, s)
				vs := verify.Shape{Batch: s.Batch, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: s.SeqQ, SeqK: s.SeqK, HeadDim: s.HeadDim,
					HeadDimV: dvd, SeqLensQ: lensQ, SeqLensK: lensK}
				if _, err := verify.CheckGrad(p, shapesRun(p, m, v), shapesBackward(p, m, v), vs, r); err != nil {
					t.Fatalf("%s: reference: %v", name, err)
				}
				c := newShapeCall(t, r, m, s, dvd, s.SeqK)
				a := c.a
				a.SeqLensQ, a.SeqLensK = lensQ, lensK
				if err := cpu.ForwardArgs(m, v, a); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				D := s.HeadDim
				dout := randSlice(r, c.nOut)
				// stale data past each row's lengths
				for b := 0; b < s.Batch; b++ {
					for h := 0; h < s.HeadsQ; h++ {
						for x := int(lensQ[b]); x < s.SeqQ; x++ {
							row := (b*s.HeadsQ+h)*s.SeqQ + x
							c.q[row*D], dout[row*dvd], a.Out[row*dvd], a.LSE[row] = nan, nan, nan, nan
						}
					}
					for h := 0; h < s.HeadsKV; h++ {
						for j := int(lensK[b]); j < s.SeqK; j++ {
							row := (b*s.HeadsKV+h)*s.SeqK + j
							c.k[row*D], c.v[row*dvd] = nan, float32(math.Inf(1))
						}
					}
				}
				ba := cpu.BackArgs{DQ: poisoned32(len(c.q), 0x7fc0_0051), DK: poisoned32(len(c.k), 0x7fc0_0052), DV: poisoned32(len(c.v), 0x7fc0_0053),
					DOut: dout, Q: c.q, K: c.k, V: c.v, Out: a.Out, LSE: a.LSE, Docs: c.docs, Shape: s, HeadDimV: dvd, SeqLensQ: lensQ, SeqLensK: lensK}
				if err := cpu.BackwardArgs(m, v, ba); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				// the same in BSHD
				l := cpu.BSHD(s, dvd)
				nq, nk := [3]int{s.Batch, s.HeadsQ, s.SeqQ}, [3]int{s.Batch, s.HeadsKV, s.SeqK}
				sd := cpu.BackArgs{DQ: poisoned32(len(c.q), 0x7fc0_0054), DK: poisoned32(len(c.k), 0x7fc0_0055), DV: poisoned32(len(c.v), 0x7fc0_0056),
					DOut: make([]float32, c.nOut), Q: make([]float32, len(c.q)), K: make([]float32, len(c.k)), V: make([]float32, len(c.v)),
					Out: make([]float32, c.nOut), LSE: a.LSE, Docs: c.docs, Shape: s, HeadDimV: dvd, SeqLensQ: lensQ, SeqLensK: lensK, Layout: l}
				copyStrided(sd.Q, c.q, nq, D, l.Q)
				copyStrided(sd.K, c.k, nk, D, l.K)
				copyStrided(sd.V, c.v, nk, dvd, l.V)
				copyStrided(sd.Out, a.Out, nq, dvd, l.Out)
				copyStrided(sd.DOut, dout, nq, dvd, l.Out)
				if err := cpu.BackwardArgs(m, v, sd); err != nil {
					t.Fatalf("%s BSHD: %v", name, err)
				}
				for _, g := range []struct {
					what      string
					got, want []float32
					n         [3]int
					w         int
					x         cpu.Strides
				}{{"dq", sd.DQ, ba.DQ, nq, D, l.Q}, {"dk", sd.DK, ba.DK, nk, D, l.K}, {"dv", sd.DV, ba.DV, nk, dvd, l.V}} {
					back := make([]float32, len(g.want))
					gatherStrided(back, g.got, g.n, g.w, g.x)
					if i := sameBits32(back, g.want); i >= 0 {
						t.Fatalf("%s: BSHD %s[%d] = %v, BHSD %v", name, g.what, i, back[i], g.want[i])
					}
				}
				for b := 0; b < s.Batch; b++ {
					bq, bk := int(lensQ[b]), int(lensK[b])
					var q, k, vv, out, do, lse []float32
					for h := 0; h < s.HeadsQ; h++ {
						row := (b*s.HeadsQ + h) * s.SeqQ
						q = append(q, c.q[row*D:][:bq*D]...)
						out = append(out, a.Out[row*dvd:][:bq*dvd]...)
						do = append(do, dout[row*dvd:][:bq*dvd]...)
						lse = append(lse, a.LSE[row:][:bq]...)
					}
					for h := 0; h < s.HeadsKV; h++ {
						row := (b*s.HeadsKV + h) * s.SeqK
						k = append(k, c.k[row*D:][:bk*D]...)
						vv = append(vv, c.v[row*dvd:][:bk*dvd]...)
					}
					if bq > 0 {
						var docs []int32
						if m.UsesDocs() {
							docs = c.docs[:bk]
						}
						one := cpu.BackArgs{DQ: poisoned32(len(q), 0x7fc0_0057), DK: poisoned32(len(k), 0x7fc0_0058), DV: poisoned32(len(vv), 0x7fc0_0059),
							DOut: do, Q: q, K: k, V: vv, Out: out, LSE: lse, Docs: docs, HeadDimV: dvd,
							Shape: cpu.Shape{Batch: 1, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: bq, SeqK: bk, HeadDim: D}}
						if err := cpu.BackwardArgs(m, v, one); err != nil {
							t.Fatalf("%s: row %d alone: %v", name, b, err)
						}
						for h := 0; h < s.HeadsQ; h++ {
							got := ba.DQ[((b*s.HeadsQ+h)*s.SeqQ)*D:][:bq*D]
							if i := sameBits32(got, one.DQ[h*bq*D:][:bq*D]); i >= 0 {
								t.Fatalf("%s: row %d head %d: dq[%d] = %v, alone %v", name, b, h, i, got[i], one.DQ[h*bq*D+i])
							}
						}
						for h := 0; h < s.HeadsKV; h++ {
							row := (b*s.HeadsKV + h) * s.SeqK
							if i := sameBits32(ba.DK[row*D:][:bk*D], one.DK[h*bk*D:][:bk*D]); i >= 0 {
								t.Fatalf("%s: row %d kv head %d: dk[%d] = %v, alone %v", name, b, h, i, ba.DK[row*D+i], one.DK[h*bk*D+i])
							}
							if i := sameBits32(ba.DV[row*dvd:][:bk*dvd], one.DV[h*bk*dvd:][:bk*dvd]); i >= 0 {
								t.Fatalf("%s: row %d kv head %d: dv[%d] = %v, alone %v", name, b, h, i, ba.DV[row*dvd+i], one.DV[h*bk*dvd+i])
							}
						}
					}
					// past the lengths: exactly 0
					for h := 0; h < s.HeadsQ; h++ {
						row := (b*s.HeadsQ + h) * s.SeqQ
						for i, x := range ba.DQ[(row+bq)*D : (row+s.SeqQ)*D] {
							if x != 0 {
								t.Fatalf("%s: row %d head %d: dq past the %d queries [%d] = %v, want 0", name, b, h, bq, i, x)
							}
						}
					}
					for h := 0; h < s.HeadsKV; h++ {
						row := (b*s.HeadsKV + h) * s.SeqK
						if bq == 0 {
							bk = 0 // no query: no key gets a gradient
						}
						for i, x := range ba.DK[(row+bk)*D : (row+s.SeqK)*D] {
							if x != 0 {
								t.Fatalf("%s: row %d: dk past the %d keys [%d] = %v, want 0", name, b, bk, i, x)
							}
						}
						for i, x := range ba.DV[(row+bk)*dvd : (row+s.SeqK)*dvd] {
							if x != 0 {
								t.Fatalf("%s: row %d: dv past the %d keys [%d] = %v, want 0", name, b, bk, i, x)
							}
						}
					}
				}
			}
		}
	}
}

// TestBackwardPositions: gradients at absolute positions (QPos, KPos, one
// for all rows or one per row) match verify's float64 gradients at those
// positions; and a call cut into key chunks at their positions (out and
// lse the whole call's) gives dq terms that sum to the single call's dq,
// and dk and dv of each chunk's keys, within float32 rounding; likewise
// query chunks give the whole call's dq rows and dk, dv summed.
func TestBackwardPositions(t *testing.T) {
	r := rand.New(rand.NewPCG(407, 408))
	for _, src := range shapeSpecs {
		p, m := headsPlan(t, src)
		for _, v := range supported() {
			for _, vs := range []verify.Shape{
				{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 90, SeqK: 150, HeadDim: 64, QPos: []int32{200}, KPos: []int32{131}},
				{Batch: 3, HeadsQ: 2, HeadsKV: 2, SeqQ: 50, SeqK: 120, HeadDim: 40, HeadDimV: 24, QPos: []int32{70, 0, 300}, KPos: []int32{0, 5, 250}},
				{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 100, SeqK: 60, HeadDim: 32, QPos: []int32{10}, KPos: []int32{64}}, // more queries than keys
			} {
				if _, err := verify.CheckGrad(p, shapesRun(p, m, v), shapesBackward(p, m, v), vs, r); err != nil {
					t.Fatalf("%s %s %+v: %v", p.Mask, v, vs, err)
				}
			}
			s := cpu.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 200, SeqK: 333, HeadDim: 64}
			D, qpos := s.HeadDim, s.SeqK-s.SeqQ
			c := newShapeCall(t, r, m, s, 0, s.SeqK)
			if err := cpu.ForwardArgs(m, v, c.a); err != nil {
				t.Fatal(err)
			}
			dout := randSlice(r, c.nOut)
			whole := cpu.BackArgs{DQ: poisoned32(len(c.q), 0x7fc0_0061), DK: poisoned32(len(c.k), 0x7fc0_0062), DV: poisoned32(len(c.v), 0x7fc0_0063),
				DOut: dout, Q: c.q, K: c.k, V: c.v, Out: c.a.Out, LSE: c.a.LSE, Docs: c.docs, Shape: s}
			if err := cpu.BackwardArgs(m, v, whole); err != nil {
				t.Fatal(err)
			}
			near := func(what string, i int, g, w float64) {
				t.Helper()
				if math.IsNaN(g) || math.Abs(g-w) > 1e-5*(1+math.Abs(w)) {
					t.Fatalf("%s %s: %s[%d] = %v, one call %v", p.Mask, v, what, i, g, w)
				}
			}
			// key chunks
			dq := make([]float64, len(c.q))
			kcuts := []int{0, 64, 170, 333}
			for ki := 0; ki+1 < len(kcuts); ki++ {
				k0, k1 := kcuts[ki], kcuts[ki+1]
				nk := k1 - k0
				cs := s
				cs.SeqK = nk
				a := cpu.BackArgs{DQ: poisoned32(len(c.q), 0x7fc0_0064), DK: poisoned32(nk*D, 0x7fc0_0065), DV: poisoned32(nk*D, 0x7fc0_0066),
					DOut: dout, Q: c.q, K: c.k[k0*D : k1*D], V: c.v[k0*D : k1*D], Out: c.a.Out, LSE: c.a.LSE,
					QPos: []int32{int32(qpos)}, KPos: []int32{int32(k0)}, Shape: cs}
				if m.UsesDocs() {
					a.Docs = c.docs
				}
				if err := cpu.BackwardArgs(m, v, a); err != nil {
					t.Fatalf("keys [%d, %d): %v", k0, k1, err)
				}
				for i, x := range a.DQ {
					dq[i] += float64(x)
				}
				for i := range a.DK {
					near(fmt.Sprintf("keys [%d, %d) dk", k0, k1), i, float64(a.DK[i]), float64(whole.DK[k0*D+i]))
					near(fmt.Sprintf("keys [%d, %d) dv", k0, k1), i, float64(a.DV[i]), float64(whole.DV[k0*D+i]))
				}
			}
			for i, x := range dq {
				near("dq summed over key chunks", i, x, float64(whole.DQ[i]))
			}
			// query chunks
			dk, dvs := make([]float64, len(c.k)), make([]float64, len(c.v))
			qcuts := []int{0, 100, 101, 200}
			for qi := 0; qi+1 < len(qcuts); qi++ {
				q0, q1 := qcuts[qi], qcuts[qi+1]
				nq := q1 - q0
				var q, out, do, lse []float32
				for h := 0; h < s.HeadsQ; h++ {
					row := h*s.SeqQ + q0
					q = append(q, c.q[row*D:][:nq*D]...)
					out = append(out, c.a.Out[row*D:][:nq*D]...)
					do = append(do, dout[row*D:][:nq*D]...)
					lse = append(lse, c.a.LSE[row:][:nq]...)
				}
				cs := s
				cs.SeqQ = nq
				a := cpu.BackArgs{DQ: poisoned32(len(q), 0x7fc0_0067), DK: poisoned32(len(c.k), 0x7fc0_0068), DV: poisoned32(len(c.v), 0x7fc0_0069),
					DOut: do, Q: q, K: c.k, V: c.v, Out: out, LSE: lse, Docs: c.docs, QPos: []int32{int32(qpos + q0)}, Shape: cs}
				if err := cpu.BackwardArgs(m, v, a); err != nil {
					t.Fatalf("queries [%d, %d): %v", q0, q1, err)
				}
				for h := 0; h < s.HeadsQ; h++ {
					for i := 0; i < nq*D; i++ {
						near(fmt.Sprintf("queries [%d, %d) head %d dq", q0, q1, h), i, float64(a.DQ[h*nq*D+i]), float64(whole.DQ[(h*s.SeqQ+q0)*D+i]))
					}
				}
				for i := range dk {
					dk[i] += float64(a.DK[i])
					dvs[i] += float64(a.DV[i])
				}
			}
			for i := range dk {
				near("dk summed over query chunks", i, dk[i], float64(whole.DK[i]))
				near("dv summed over query chunks", i, dvs[i], float64(whole.DV[i]))
			}
		}
	}
}

// TestBackwardStrides: padded strides of every tensor (split head sizes,
// per-row lengths) give the bits of the BHSD call and leave the padding
// untouched; the call allocates nothing after warm-up (the tensors are
// read and written in place).
func TestBackwardStrides(t *testing.T) {
	r := rand.New(rand.NewPCG(409, 410))
	_, m := headsPlan(t, shapeSpecs[0])
	s := cpu.Shape{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 77, SeqK: 140, HeadDim: 48}
	const dvd = 64
	D := s.HeadDim
	nq, nk := [3]int{s.Batch, s.HeadsQ, s.SeqQ}, [3]int{s.Batch, s.HeadsKV, s.SeqK}
	lensQ, lensK := []int32{77, 30}, []int32{140, 99}
	for _, v := range supported() {
		c := newShapeCall(t, r, m, s, dvd, s.SeqK)
		c.a.SeqLensQ, c.a.SeqLensK = lensQ, lensK
		if err := cpu.ForwardArgs(m, v, c.a); err != nil {
			t.Fatal(err)
		}
		dout := randSlice(r, c.nOut)
		want := cpu.BackArgs{DQ: make([]float32, len(c.q)), DK: make([]float32, len(c.k)), DV: make([]float32, len(c.v)),
			DOut: dout, Q: c.q, K: c.k, V: c.v, Out: c.a.Out, LSE: c.a.LSE, Shape: s, HeadDimV: dvd, SeqLensQ: lensQ, SeqLensK: lensK}
		if err := cpu.BackwardArgs(m, v, want); err != nil {
			t.Fatal(err)
		}
		// [seq][batch][head] with 5 spare elements after each row and 3
		// after each head
		pad := func(h, w, seq int) cpu.Strides {
			hs := w + 5
			ps := s.Batch*h*hs + 3
			return cpu.Strides{Batch: h * hs, Head: hs, Pos: ps}
		}
		l := cpu.Layout{Q: pad(s.HeadsQ, D, s.SeqQ), K: pad(s.HeadsKV, D, s.SeqK), V: pad(s.HeadsKV, dvd, s.SeqK), Out: pad(s.HeadsQ, dvd, s.SeqQ)}
		size := func(x cpu.Strides, seq int) int { return seq*x.Pos + 7 }
		a := cpu.BackArgs{
			DQ: poisoned32(size(l.Q, s.SeqQ), 0x7fc0_0071), DK: poisoned32(size(l.K, s.SeqK), 0x7fc0_0072), DV: poisoned32(size(l.V, s.SeqK), 0x7fc0_0073),
			Q: strided(c.q, nq, D, l.Q, 0, size(l.Q, s.SeqQ)), K: strided(c.k, nk, D, l.K, 0, size(l.K, s.SeqK)), V: strided(c.v, nk, dvd, l.V, 0, size(l.V, s.SeqK)),
			Out: strided(c.a.Out, nq, dvd, l.Out, 0, size(l.Out, s.SeqQ)), DOut: strided(dout, nq, dvd, l.Out, 0, size(l.Out, s.SeqQ)),
			LSE: c.a.LSE, Shape: s, HeadDimV: dvd, Layout: l, SeqLensQ: lensQ, SeqLensK: lensK}
		if err := cpu.BackwardArgs(m, v, a); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		for _, g := range []struct {
			what      string
			got, want []float32
			n         [3]int
			w         int
			x         cpu.Strides
			p         uint32
		}{{"dq", a.DQ, want.DQ, nq, D, l.Q, 0x7fc0_0071}, {"dk", a.DK, want.DK, nk, D, l.K, 0x7fc0_0072}, {"dv", a.DV, want.DV, nk, dvd, l.V, 0x7fc0_0073}} {
			back := make([]float32, len(g.want))
			gatherStrided(back, g.got, g.n, g.w, g.x)
			if i := sameBits32(back, g.want); i >= 0 {
				t.Fatalf("%s: strided %s[%d] = %v, BHSD %v", v, g.what, i, back[i], g.want[i])
			}
			// the padding keeps its poison
			copyStrided(g.got, make([]float32, len(g.want)), g.n, g.w, g.x)
			for i, x := range g.got {
				if y := math.Float32bits(x); y != 0 && y != g.p {
					t.Fatalf("%s: %s padding [%d] = %v was written", v, g.what, i, x)
				}
			}
		}
		if raceEnabled {
			continue
		}
		if n := testing.AllocsPerRun(5, func() { _ = cpu.BackwardArgs(m, v, a) }); n != 0 {
			t.Errorf("%s: %v allocations per strided ragged call", v, n)
		}
	}
}

// TestBackwardShapeErrors: bad lengths, positions, head sizes and strides
// of a backward call are errors (ErrShape, ErrShort, ErrAlias, ErrHeadDim),
// never a panic, and nothing is written then.
func TestBackwardShapeErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(413, 414))
	_, m := headsPlan(t, shapeSpecs[2]) // documents: data checked per row
	s := cpu.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqK: 90, HeadDim: 32}
	c := newShapeCall(t, r, m, s, 0, s.SeqK)
	if err := cpu.ForwardArgs(m, cpu.Auto, c.a); err != nil {
		t.Fatal(err)
	}
	base := cpu.BackArgs{DOut: randSlice(r, c.nOut), Q: c.q, K: c.k, V: c.v, Out: c.a.Out, LSE: c.a.LSE, Docs: c.docs, Shape: s}
	for _, x := range []struct {
		name string
		edit func(a *cpu.BackArgs)
		want error
	}{
		{"SeqLensQ past SeqQ", func(a *cpu.BackArgs) { a.SeqLensQ = []int32{41, 3} }, cpu.ErrShape},
		{"SeqLensK negative", func(a *cpu.BackArgs) { a.SeqLensK = []int32{90, -1} }, cpu.ErrShape},
		{"SeqLensK of one entry", func(a *cpu.BackArgs) { a.SeqLensK = []int32{90} }, cpu.ErrShape},
		{"queries before position 0", func(a *cpu.BackArgs) { a.SeqLensK = []int32{90, 10} }, cpu.ErrShape},
		{"KPos past int32", func(a *cpu.BackArgs) { a.KPos = []int32{math.MaxInt32 - 10} }, cpu.ErrShape},
		{"QPos negative", func(a *cpu.BackArgs) { a.QPos = []int32{-1} }, cpu.ErrShape},
		{"positions past the document ids", func(a *cpu.BackArgs) { a.QPos, a.KPos = []int32{500}, []int32{400} }, cpu.ErrDocument},
		{"HeadDimV negative", func(a *cpu.BackArgs) { a.HeadDimV = -8 }, cpu.ErrShape},
		{"HeadDimV unsupported", func(a *cpu.BackArgs) { a.HeadDimV = 12 }, cpu.ErrHeadDim},
		{"HeadDimV larger than v", func(a *cpu.BackArgs) { a.HeadDimV = 64 }, cpu.ErrShort},
		{"negative stride", func(a *cpu.BackArgs) { a.Layout.K = cpu.Strides{Batch: 90 * 32, Head: 90 * 32, Pos: -32} }, cpu.ErrShape},
		{"strides past dq", func(a *cpu.BackArgs) { a.Layout.Q = cpu.Strides{Batch: 2 * 40 * 64, Head: 40 * 64, Pos: 64} }, cpu.ErrShort},
		{"dk rows overlapping", func(a *cpu.BackArgs) { a.Layout.K = cpu.Strides{Batch: 90 * 32, Head: 90 * 32, Pos: 16} }, cpu.ErrAlias},
		{"dq and dv sharing memory", func(a *cpu.BackArgs) { a.DQ = a.DV }, cpu.ErrAlias},
		{"dq and lse sharing memory", func(a *cpu.BackArgs) { a.LSE = a.DQ[:len(c.a.LSE)] }, cpu.ErrAlias},
	} {
		for _, v := range supported() {
			a := base
			a.DQ, a.DK, a.DV = poisoned32(len(c.q), 0x7fc0_0081), poisoned32(len(c.k), 0x7fc0_0082), poisoned32(len(c.v), 0x7fc0_0083)
			x.edit(&a)
			err := cpu.BackwardArgs(m, v, a)
			if !errors.Is(err, x.want) {
				t.Fatalf("%s %s: %v, want %v", x.name, v, err, x.want)
			}
			for _, g := range [][]float32{a.DQ, a.DK, a.DV} {
				for i, y := range g {
					if b := math.Float32bits(y); b != 0x7fc0_0081 && b != 0x7fc0_0082 && b != 0x7fc0_0083 {
						t.Fatalf("%s %s: [%d] = %v written before the error", x.name, v, i, y)
					}
				}
			}
		}
	}
}
