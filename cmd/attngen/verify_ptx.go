package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	"github.com/attngen/attngen/verify/gpurun"
)

// sampleFrom is the fewest query rows of a GPU shape that verify -gpu
// judges on sampled rows (-sample) rather than on every row: the float64
// reference of every row of its S = 8192 shape takes about 20 s a spec on
// one thread.
const sampleFrom = 1024

// interpShapes are the small awkward shapes the PTX interpreter runs.
func interpShapes(d int) []verify.Shape {
	return []verify.Shape{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: d},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 37, SeqK: 70, HeadDim: d},
		{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 65, SeqK: 65, HeadDim: d},
	}
}

// verifyPTX checks the spec's PTX kernel for one target under the
// interpreter and, with gpu, on the GPU (the interpreter shapes plus larger
// ones up to S = 8192, those of sampleFrom rows or more judged on sample
// rows) and against the interpreter on identical inputs. It
// returns the number of failed checks; the GPU checks report their progress
// on progress.
//
// Each element type is judged against the straightforward kernel of that
// type (verify.BF16Kernel, verify.F16Kernel) on inputs rounded to it.
func verifyPTX(s *spec.Spec, t ptx.Target, r *rand.Rand, gpu bool, sample int, stdout, progress io.Writer) (int, error) {
	plan, err := gen.Compile(s, t, nil)
	if err != nil {
		return 0, err
	}
	fi, err := ptx.GenerateForward(plan, ptx.Config{Target: t})
	if err != nil {
		return 0, err
	}
	ik, err := gpurun.Interp(fi)
	if err != nil {
		return 0, err
	}
	failed := 0
	report := func(what string, err error, ok string) {
		what += " " + t.Name()
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "%-7s FAIL %v\n", what, err)
		} else {
			fmt.Fprintf(stdout, "%-7s ok   %s\n", what, ok)
		}
	}
	opts := verify.BF16Kernel
	if t.Elem == "f16" {
		opts = verify.F16Kernel
	}
	yard := " (" + t.Elem + "; yardstick: straightforward " + t.Elem + ")"
	for _, sh := range interpShapes(s.HeadDim) {
		rep, err := verify.CheckNumericWith(s.Pattern(), ik.Run(), sh, r, opts)
		report("ptx-sim", err, rep.String()+yard)
	}
	dep := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 20, SeqK: 40, HeadDim: s.HeadDim}
	report("ptx-sim", verify.CheckDependencies(s.Pattern(), ik.Run(), dep, r), "output i changes exactly when a kept key/value j changes (S = 40, all j)")
	if !gpu {
		return failed, nil
	}
	drv, err := cuda.Open()
	if err != nil {
		return failed, fmt.Errorf("-gpu: %w", err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		return failed, err
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return failed, err
	}
	defer ctx.Release()
	fg, err := ptx.GenerateForward(plan, ptx.Config{Target: t})
	if err != nil {
		return failed, err
	}
	gk, err := gpurun.GPU(ctx, fg)
	if err != nil {
		return failed, err
	}
	fmt.Fprintf(stdout, "gpu: %s\n", dev)
	shapes := append(interpShapes(s.HeadDim), verify.Shapes(s.HeadDim)...)
	shapes = append(shapes, verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 8192, SeqK: 8192, HeadDim: s.HeadDim})
	steps := len(shapes) + 1 + len(interpShapes(s.HeadDim))
	step := 0
	next := func(what string) {
		step++
		fmt.Fprintf(progress, "verify %s: gpu check %d of %d: %s\n", t.Name(), step, steps, what)
	}
	for _, sh := range shapes {
		n := 0
		if sh.SeqQ >= sampleFrom {
			n = sample
		}
		next(fmt.Sprintf("numeric, B%d Hq%d Hkv%d Sq%d Sk%d", sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK))
		rep, err := verify.CheckNumericSampled(s.Pattern(), gk.Run(), sh, r, opts, n)
		report("gpu", err, rep.String())
	}
	next("dependencies, S = 40")
	report("gpu", verify.CheckDependencies(s.Pattern(), gk.Run(), dep, r), "output i changes exactly when a kept key/value j changes (S = 40, all j)")
	// GPU against the interpreter on identical inputs.
	for _, sh := range interpShapes(s.HeadDim) {
		next(fmt.Sprintf("GPU against the interpreter, %dx%d", sh.SeqQ, sh.SeqK))
		report("gpu=sim", agree(s, gk, ik, sh, r), fmt.Sprintf("GPU and interpreter agree within %s output rounding on %dx%d", t.Elem, sh.SeqQ, sh.SeqK))
	}
	return failed, nil
}

// agree runs two kernels on the same bf16 inputs; outputs may differ by the
// rounding of one bf16 step (2^-8 relative) plus what ex2.approx allows.
func agree(s *spec.Spec, a, b *gpurun.Kernel, sh verify.Shape, r *rand.Rand) error {
	nq, nkv, nl := sh.Sizes()
	mk := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		verify.RoundBF16(x)
		return x
	}
	q, k, v := mk(nq), mk(nkv), mk(nkv)
	ids := verify.RandomData(s.Pattern(), r, sh.SeqK)
	oa, la, ob, lb := make([]float32, nq), make([]float32, nl), make([]float32, nq), make([]float32, nl)
	if err := a.Run()(oa, la, q, k, v, ids, sh); err != nil {
		return err
	}
	if err := b.Run()(ob, lb, q, k, v, ids, sh); err != nil {
		return err
	}
	for i := range oa {
		if d := math.Abs(float64(oa[i] - ob[i])); d > 1e-2*(1+math.Abs(float64(ob[i]))) {
			return fmt.Errorf("out[%d]: %v vs %v", i, oa[i], ob[i])
		}
	}
	for i := range la {
		if math.IsInf(float64(la[i]), -1) != math.IsInf(float64(lb[i]), -1) || (!math.IsInf(float64(la[i]), -1) && math.Abs(float64(la[i]-lb[i])) > 1e-4) {
			return fmt.Errorf("lse[%d]: %v vs %v", i, la[i], lb[i])
		}
	}
	return nil
}
