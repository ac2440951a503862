package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
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

// interpBwdShapes are the small awkward shapes the backward kernels run
// under the interpreter: one query against keys off the tile size, fewer
// queries than keys with grouped heads, batches with a scale.
func interpBwdShapes(d int) []verify.Shape {
	return []verify.Shape{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 77, HeadDim: d},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 130, HeadDim: d},
		{Batch: 2, HeadsQ: 2, HeadsKV: 2, SeqQ: 65, SeqK: 65, HeadDim: d, Scale: 0.3},
	}
}

// verifyPTX checks the spec's PTX kernels for one target, the forward and
// the backward's two, under the interpreter and, with gpu, on the GPU (the
// interpreter shapes plus larger ones: the forward's up to S = 8192, those
// of sampleFrom rows or more judged on sample rows; the backward's those
// of verify.Shapes, judged on every row, and S = 4096 judged on sample dq
// rows and sample dk/dv keys of one head) and against the interpreter on
// identical inputs, that NaN and infinities at masked positions reach no
// output (verify.CheckMaskedData) and no gradient
// (verify.CheckGradNonFinite). It returns the number of
// failed checks; the GPU checks report their progress on progress.
//
// Each element type is judged against the straightforward kernel of that
// type (verify.BF16Kernel, verify.F16Kernel; for the backward
// verify.GradBF16, verify.GradF16) on inputs rounded to it.
func verifyPTX(s *spec.Spec, t ptx.Target, r *rand.Rand, gpu bool, sample int, stdout, progress io.Writer) (int, error) {
	return verifyPTXLayout(s, t, r, gpu, sample, gpurun.BHSD, stdout, progress)
}

// verifyPTXLayout is verifyPTX with the forward kernels' checks run on q,
// k, v and out held in the named layout (gpurun.Layouts: bhsd, bshd,
// packed) on the device, under the interpreter and on the GPU; the
// packed layout (one QKV projection's output) runs every forward shape
// with as many queries as keys. The backward's checks, and the forward
// runs they make, stay BHSD.
func verifyPTXLayout(s *spec.Spec, t ptx.Target, r *rand.Rand, gpu bool, sample int, layout string, stdout, progress io.Writer) (int, error) {
	plan, err := gen.Compile(s, t, nil)
	if err != nil {
		return 0, err
	}
	ks, err := ptx.Kernels(plan, ptx.Config{Target: t})
	if err != nil {
		return 0, err
	}
	fi, bw := ks.Forward, ks.Backward
	ik, err := gpurun.Interp(fi)
	if err != nil {
		return 0, err
	}
	ikB := ik // the backward checks' forward: BHSD
	if ik, err = ik.WithLayout(layout); err != nil {
		return 0, err
	}
	if ik.Layout() != gpurun.BHSD {
		fmt.Fprintf(stdout, "%-7s the forward checks of %s hold q, k, v and out as %s on the device\n", "ptx-sim", t.Name(), ik.Layout())
	}
	// the sm_90a target has a forward kernel only (ptx.Kernels gives it no
	// backward: the sm_80 target's kernels serve it), and runs residue
	// layouts on lengths that are multiples of the stride: its shapes are
	// rounded up to them; the packed layout gets as many queries as keys
	fit := func(shs ...verify.Shape) []verify.Shape {
		out := slices.Clone(shs)
		for x := range out {
			if layout == gpurun.Packed {
				out[x].SeqQ = out[x].SeqK
			}
			if st := fi.Stride; fi.Target.Accel && st > 1 {
				out[x].SeqQ = (out[x].SeqQ + st - 1) / st * st
				out[x].SeqK = (out[x].SeqK + st - 1) / st * st
			}
		}
		return out
	}
	var ib *gpurun.BackwardKernel
	if bw != nil {
		if ib, err = gpurun.InterpBackward(bw); err != nil {
			return 0, err
		}
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
	opts, gopts := verify.BF16Kernel, verify.GradBF16
	if t.Elem == "f16" {
		opts, gopts = verify.F16Kernel, verify.GradF16
	}
	yard := " (" + t.Elem + "; yardstick: straightforward " + t.Elem + ")"
	for _, sh := range fit(interpShapes(s.HeadDim)...) {
		rep, err := verify.CheckNumericWith(s.Pattern(), ik.Run(), sh, r, opts)
		report("ptx-sim", err, rep.String()+yard)
	}
	dep := fit(verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 20, SeqK: 40, HeadDim: s.HeadDim})[0]
	depText := fmt.Sprintf("output i changes exactly when a kept key/value j changes (S = %d, all j)", dep.SeqK)
	report("ptx-sim", verify.CheckDependencies(s.Pattern(), ik.Run(), dep, r), depText)
	nfSim := verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 61, SeqK: 130, HeadDim: s.HeadDim}
	mdSim := fit(nfSim)[0]
	report("ptx-sim", verify.CheckMaskedData(s.Pattern(), ik.Run(), mdSim, r, 2), maskedText(mdSim))
	// a ragged batch, where the kernels take per-row lengths
	ragged := fit(verify.Shape{Batch: 3, HeadsQ: 2, HeadsKV: 1, SeqQ: 37, SeqK: 130, HeadDim: s.HeadDim,
		SeqLensQ: []int32{37, 20, 1}, SeqLensK: []int32{130, 75, 64}})[0]
	// and the same rows at positions of their own, where the kernels take
	// positions (raggedShapes' first shape)
	positioned := raggedShapes(s.HeadDim, 0)[0]
	positioned.HeadsQ = 2
	positioned.HeadsKV = 1
	ragged, positioned = fit(ragged)[0], fit(positioned)[0] // the sm_90a residue kernel's tensors: multiples of the stride
	lens, pos := takesParam(fi.Params, lensParam), takesParam(fi.Params, posParam)
	if lens {
		rep, err := verify.CheckNumericWith(s.Pattern(), ik.Run(), ragged, r, opts)
		report("ptx-sim", err, raggedText(ragged)+": "+rep.String()+yard)
	} else {
		fmt.Fprintf(stdout, "%-7s ragged batch skipped: the %s kernel takes no per-row lengths (residue layouts above head_dim 128 do not)\n", "ptx-sim", t.Name())
	}
	if pos {
		rep, err := verify.CheckNumericWith(s.Pattern(), ik.Run(), positioned, r, opts)
		report("ptx-sim", err, raggedText(positioned)+": "+rep.String()+yard)
	} else {
		fmt.Fprintf(stdout, "%-7s positions skipped: the %s kernel takes no positions (residue layouts above head_dim 128 do not)\n", "ptx-sim", t.Name())
	}
	if bw == nil {
		fmt.Fprintf(stdout, "%-7s the backward of %s: the sm_80 kernels serve it (verify -sm 80)\n", "ptx-sim", t.Name())
		if !gpu {
			return failed, nil
		}
		return failed, verifyGPUForward(s, t, fi, ikB, r, sample, layout, fit, dep, depText, mdSim, report, stdout, progress)
	}
	for _, sh := range interpBwdShapes(s.HeadDim) {
		rep, err := verify.CheckGradWith(s.Pattern(), ikB.Run(), ib.Run(), sh, r, gopts)
		report("ptx-sim", err, "backward "+rep.String()+yard)
	}
	if lens {
		rep, err := verify.CheckGradWith(s.Pattern(), ikB.Run(), ib.Run(), ragged, r, gopts)
		report("ptx-sim", err, "backward "+raggedText(ragged)+": "+rep.String()+yard)
	}
	if pos && takesParam(bw.DQParams, posParam) {
		rep, err := verify.CheckGradWith(s.Pattern(), ikB.Run(), ib.Run(), positioned, r, gopts)
		report("ptx-sim", err, "backward "+raggedText(positioned)+": "+rep.String()+yard)
	}
	report("ptx-sim", verify.CheckGradDependencies(s.Pattern(), ikB.Run(), ib.Run(), dep, r), bwdDepText)
	report("ptx-sim", verify.CheckGradNonFinite(s.Pattern(), ikB.Run(), ib.Run(), nfSim, r, 2), nonFiniteText(nfSim))
	if !gpu {
		return failed, nil
	}
	ctx, err := openGPU()
	if err != nil {
		return failed, err
	}
	defer ctx.Release()
	dev := ctx.Device()
	gk, err := gpurun.GPU(ctx, fi)
	if err != nil {
		return failed, err
	}
	gkB := gk // the backward checks' forward: BHSD
	if gk, err = gk.WithLayout(layout); err != nil {
		return failed, err
	}
	gb, err := gpurun.GPUBackward(ctx, bw)
	if err != nil {
		return failed, err
	}
	fmt.Fprintf(stdout, "gpu: %s\n", dev)
	shapes := append(interpShapes(s.HeadDim), verify.Shapes(s.HeadDim)...)
	shapes = fit(append(shapes, verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 8192, SeqK: 8192, HeadDim: s.HeadDim})...)
	bwdShapes := append(interpBwdShapes(s.HeadDim), verify.Shapes(s.HeadDim)...)
	// the backward's long shape, judged on sampled rows and keys
	bwdLong := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 4096, SeqK: 4096, HeadDim: s.HeadDim}
	nfGPU := []verify.Shape{nfSim, {Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 2, SeqK: 600, HeadDim: s.HeadDim}}
	mdGPU := fit(nfGPU...) // the forward's masked-data shapes
	steps := len(shapes) + 1 + len(nfGPU) + len(interpShapes(s.HeadDim)) + len(bwdShapes) + 2 + len(nfGPU) + len(interpBwdShapes(s.HeadDim))
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
	report("gpu", verify.CheckDependencies(s.Pattern(), gk.Run(), dep, r), depText)
	for _, sh := range mdGPU {
		next(fmt.Sprintf("masked data, B%d Hq%d Hkv%d Sq%d Sk%d", sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK))
		report("gpu", verify.CheckMaskedData(s.Pattern(), gk.Run(), sh, r, 3), maskedText(sh))
	}
	// GPU (in the layout) against the interpreter (BHSD) on identical inputs.
	for _, sh := range fit(interpShapes(s.HeadDim)...) {
		next(fmt.Sprintf("GPU against the interpreter, %dx%d", sh.SeqQ, sh.SeqK))
		report("gpu=sim", agree(s, gk, ikB, sh, r), fmt.Sprintf("GPU and interpreter agree within %s output rounding on %dx%d", t.Elem, sh.SeqQ, sh.SeqK))
	}
	for _, sh := range bwdShapes {
		next(fmt.Sprintf("backward, B%d Hq%d Hkv%d Sq%d Sk%d", sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK))
		rep, err := verify.CheckGradWith(s.Pattern(), gkB.Run(), gb.Run(), sh, r, gopts)
		report("gpu", err, "backward "+rep.String())
	}
	next(fmt.Sprintf("backward, B1 Hq1 Hkv1 Sq%d Sk%d, sampled", bwdLong.SeqQ, bwdLong.SeqK))
	rep, err := verify.CheckGradSampledRun(s.Pattern(), gkB.Run(), gb.Run(), bwdLong, r, gopts, sample)
	what := fmt.Sprintf(" (of %d sampled dq rows and %d dk/dv keys)", sample, sample)
	if sample == 0 {
		what = " (every row)"
	}
	report("gpu", err, "backward "+rep.String()+what)
	next("backward dependencies, S = 40")
	report("gpu", verify.CheckGradDependencies(s.Pattern(), gkB.Run(), gb.Run(), dep, r), bwdDepText)
	for _, sh := range nfGPU {
		next(fmt.Sprintf("backward non-finite, B%d Hq%d Hkv%d Sq%d Sk%d", sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK))
		report("gpu", verify.CheckGradNonFinite(s.Pattern(), gkB.Run(), gb.Run(), sh, r, 3), nonFiniteText(sh))
	}
	for _, sh := range interpBwdShapes(s.HeadDim) {
		next(fmt.Sprintf("backward, GPU against the interpreter, %dx%d", sh.SeqQ, sh.SeqK))
		report("gpu=sim", agreeBackward(s, ikB, gb, ib, sh, r), fmt.Sprintf("backward: GPU and interpreter gradients agree on %dx%d", sh.SeqQ, sh.SeqK))
	}
	return failed, nil
}

// lensParam and posParam name the parameters of per-row lengths and
// positions (verifyPTX's gpu flag hides the package there).
const (
	lensParam = gpu.SeqLensQParam
	posParam  = gpu.QPosParam
)

// takesParam reports whether a kernel's parameters include one named
// name (gpu.SeqLensQParam: per-row lengths; gpu.QPosParam: positions).
func takesParam(ps []ptx.Param, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// openGPU opens device 0's primary context through the CUDA driver.
func openGPU() (*cuda.Context, error) {
	drv, err := cuda.Open()
	if err != nil {
		return nil, fmt.Errorf("-gpu: %w", err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		return nil, err
	}
	return dev.PrimaryContext()
}

// gpuRunsTargets refuses, before any check runs, targets the GPU cannot
// run (gpu.CanRun): asking for sm_90a on a device other than 9.0, or for
// sm_90 on an 8.x device, is an error naming both.
func gpuRunsTargets(ts []ptx.Target) error {
	ctx, err := openGPU()
	if err != nil {
		return err
	}
	defer ctx.Release()
	dev := ctx.Device()
	for _, t := range ts {
		if err := gpu.CanRun(t.Arch(), dev.Major, dev.Minor); err != nil {
			return fmt.Errorf("-gpu -sm: %s (%s): %w", dev.Name, dev, err)
		}
	}
	return nil
}

// verifyGPUForward is verifyPTX's GPU part for a target with a forward
// kernel only (sm_90a), its tensors held in the named layout on the GPU:
// the interpreter shapes, verify.Shapes and S = 8192 (sampled rows),
// rounded by fit; dependencies; the masked-data rule on shape md; and GPU
// against the interpreter (ik, BHSD) on identical inputs. Each check goes
// to count, which reports it and counts failures.
func verifyGPUForward(s *spec.Spec, t ptx.Target, fi *ptx.Forward, ik *gpurun.Kernel, r *rand.Rand, sample int, layout string,
	fit func(...verify.Shape) []verify.Shape, dep verify.Shape, depText string, md verify.Shape, count func(string, error, string), stdout, progress io.Writer) error {
	ctx, err := openGPU()
	if err != nil {
		return err
	}
	defer ctx.Release()
	gk, err := gpurun.GPU(ctx, fi)
	if err != nil {
		return err
	}
	if gk, err = gk.WithLayout(layout); err != nil {
		return err
	}
	opts := verify.BF16Kernel
	if t.Elem == "f16" {
		opts = verify.F16Kernel
	}
	fmt.Fprintf(stdout, "gpu: %s\n", ctx.Device())
	shapes := append(interpShapes(s.HeadDim), verify.Shapes(s.HeadDim)...)
	shapes = fit(append(shapes, verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 8192, SeqK: 8192, HeadDim: s.HeadDim})...)
	agreeShapes := fit(interpShapes(s.HeadDim)...)
	steps, step := len(shapes)+2+len(agreeShapes), 0
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
		count("gpu", err, rep.String())
	}
	next(fmt.Sprintf("dependencies, S = %d", dep.SeqK))
	count("gpu", verify.CheckDependencies(s.Pattern(), gk.Run(), dep, r), depText)
	next(fmt.Sprintf("masked data, B%d Hq%d Hkv%d Sq%d Sk%d", md.Batch, md.HeadsQ, md.HeadsKV, md.SeqQ, md.SeqK))
	count("gpu", verify.CheckMaskedData(s.Pattern(), gk.Run(), md, r, 3), maskedText(md))
	for _, sh := range agreeShapes {
		next(fmt.Sprintf("GPU against the interpreter, %dx%d", sh.SeqQ, sh.SeqK))
		count("gpu=sim", agree(s, gk, ik, sh, r), fmt.Sprintf("GPU and interpreter agree within %s output rounding on %dx%d", t.Elem, sh.SeqQ, sh.SeqK))
	}
	return nil
}

// nonFiniteText is what a passed CheckGradNonFinite on shape sh reports.
func nonFiniteText(sh verify.Shape) string {
	return fmt.Sprintf("backward: NaN and infinities at masked keys and values, or in a row's q and dout, reach no gradient through a masked pair (B%d Hq%d Hkv%d Sq%d Sk%d)",
		sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK)
}

// bwdDepText is what a passed CheckGradDependencies on the S = 40 shape
// reports.
const bwdDepText = "backward: dout row i changes dv exactly at the keys i keeps, dk only there, dq only in row i (Sq 20, Sk 40, all i)"

// agreeBackward runs two backward kernels on the same bf16 inputs (and the
// same forward output and lse, from fwd): the gradients may differ by what
// ex2.approx and the rounding of P and dS to the element type allow, 1e-2
// of the largest gradient magnitude (each gradient is a sum over many
// pairs of rounded products, so a relative bound per element does not
// fit values near 0).
func agreeBackward(s *spec.Spec, fwd *gpurun.Kernel, a, b *gpurun.BackwardKernel, sh verify.Shape, r *rand.Rand) error {
	nq, nkv, nl := sh.Sizes()
	mk := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		verify.RoundBF16(x)
		return x
	}
	q, k, v, dout := mk(nq), mk(nkv), mk(nkv), mk(nq)
	sh = verify.WithScore(s.Pattern(), sh, r)
	var ids []int32
	if s.Mask.HasDocument() {
		ids = verify.RandomDocs(r, sh.SeqK)
	}
	out, lse := make([]float32, nq), make([]float32, nl)
	if err := fwd.Run()(out, lse, q, k, v, ids, sh); err != nil {
		return err
	}
	ga := [3][]float32{make([]float32, nq), make([]float32, nkv), make([]float32, nkv)}
	gb := [3][]float32{make([]float32, nq), make([]float32, nkv), make([]float32, nkv)}
	if err := a.Run()(ga[0], ga[1], ga[2], dout, q, k, v, out, lse, ids, sh, nil); err != nil {
		return err
	}
	if err := b.Run()(gb[0], gb[1], gb[2], dout, q, k, v, out, lse, ids, sh, nil); err != nil {
		return err
	}
	for x, name := range []string{"dq", "dk", "dv"} {
		scale := 0.0
		for _, y := range gb[x] {
			scale = max(scale, math.Abs(float64(y)))
		}
		for i := range ga[x] {
			if d := math.Abs(float64(ga[x][i] - gb[x][i])); !(d <= 1e-2*max(scale, 1)) {
				return fmt.Errorf("%s[%d]: %v vs %v (largest magnitude %.3g)", name, i, ga[x][i], gb[x][i], scale)
			}
		}
	}
	return nil
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
	sh = verify.WithScore(s.Pattern(), sh, r)
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
