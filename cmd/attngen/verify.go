package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	"github.com/attngen/attngen/verify/gpurun"
)

// kernelRun adapts a CPU variant running a pattern's plan (with its score
// section) to verify.Run; a pattern with head parameters or a score stage
// runs ForwardArgs with the shape's values.
func kernelRun(p spec.Pattern, headDim int, variant cpu.Variant) (verify.Run, error) {
	return kernelRunLayout(p, headDim, variant, false)
}

// kernelRunLayout is kernelRun, through q, k, v and out held as BSHD
// (forwardBSHD) when bshd is set.
func kernelRunLayout(p spec.Pattern, headDim int, variant cpu.Variant, bshd bool) (verify.Run, error) {
	sc := p.Score
	plan, err := gen.Compile(&spec.Spec{Name: "verify", Mask: p.Mask, Causal: p.Causal, HeadDim: headDim, HeadParams: p.Params, Score: sc}, gen.CPUTarget, nil)
	if err != nil {
		return nil, err
	}
	m := plan.Mask()
	return func(out, lse, q, k, v []float32, docs []int32, s verify.Shape) error {
		cs := cpu.Shape{
			Batch: s.Batch, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: s.SeqQ, SeqK: s.SeqK,
			HeadDim: s.HeadDim, Scale: float32(s.Scale),
		}
		if p.HasParams() || sc.Active() || s.HeadDimV != 0 || ragged(s) || bshd {
			a := cpu.Args{Q: q, K: k, V: v, Out: out, LSE: lse, HeadParams: cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), Shape: cs, HeadDimV: s.HeadDimV,
				SeqLensQ: s.SeqLensQ, SeqLensK: s.SeqLensK, QPos: s.QPos, KPos: s.KPos}
			a.SoftCap, a.Slopes, a.Sinks = s.Score.Float32()
			if p.Mask.HasTree() {
				a.Tree = docs
			} else {
				a.Docs = docs
			}
			if bshd {
				return forwardBSHD(m, variant, a)
			}
			return cpu.ForwardArgs(m, variant, a)
		}
		return cpu.Forward(m, variant, out, lse, q, k, v, docs, cs)
	}, nil
}

// ragged reports a shape with per-row lengths or positions.
func ragged(s verify.Shape) bool {
	return s.SeqLensQ != nil || s.SeqLensK != nil || s.QPos != nil || s.KPos != nil
}

// forwardBSHD runs a's call with q, k, v and the output held as
// [batch, seq, heads, head_dim] (cpu.BSHD): the inputs are copied into
// that layout, the call reads them through its strides, and the output is
// copied back, so that the check judges the strided call on the
// reference's layout.
func forwardBSHD(m mask.Mask, variant cpu.Variant, a cpu.Args) error {
	s, dv := a.Shape, a.HeadDimV
	if dv == 0 {
		dv = s.HeadDim
	}
	ly := cpu.BSHD(s, dv)
	// rows calls f with each row's offsets in the contiguous layout and in
	// the strided one.
	rows := func(n [3]int, w int, st cpu.Strides, f func(c, t int)) {
		for b := 0; b < n[0]; b++ {
			for h := 0; h < n[1]; h++ {
				for r := 0; r < n[2]; r++ {
					f(((b*n[1]+h)*n[2]+r)*w, b*st.Batch+h*st.Head+r*st.Pos)
				}
			}
		}
	}
	in := func(x []float32, n [3]int, w int, st cpu.Strides) []float32 {
		y := make([]float32, n[0]*n[1]*n[2]*w)
		rows(n, w, st, func(c, t int) { copy(y[t:t+w], x[c:c+w]) })
		return y
	}
	nq, nk := [3]int{s.Batch, s.HeadsQ, s.SeqQ}, [3]int{s.Batch, s.HeadsKV, s.SeqK}
	b := a
	b.Q, b.K, b.V = in(a.Q, nq, s.HeadDim, ly.Q), in(a.K, nk, s.HeadDim, ly.K), in(a.V, nk, dv, ly.V)
	b.Out = make([]float32, nq[0]*nq[1]*nq[2]*dv)
	for i := range b.Out {
		b.Out[i] = float32(math.NaN())
	}
	b.Layout = ly
	if err := cpu.ForwardArgs(m, variant, b); err != nil {
		return err
	}
	rows(nq, dv, ly.Out, func(c, t int) { copy(a.Out[c:c+dv], b.Out[t:t+dv]) })
	return nil
}

// kernelBackward adapts the backward of a CPU variant running a pattern's
// plan to verify.RunBackward (dsink, given with learned sinks, is
// BackArgs.DSinks).
func kernelBackward(p spec.Pattern, headDim int, variant cpu.Variant) (verify.RunBackward, error) {
	sc := p.Score
	plan, err := gen.Compile(&spec.Spec{Name: "verify", Mask: p.Mask, Causal: p.Causal, HeadDim: headDim, HeadParams: p.Params, Score: sc}, gen.CPUTarget, nil)
	if err != nil {
		return nil, err
	}
	m := plan.Mask()
	return func(dq, dk, dv, dout, q, k, v, out, lse []float32, docs []int32, s verify.Shape, dsink []float32) error {
		a := cpu.BackArgs{DQ: dq, DK: dk, DV: dv, DOut: dout, Q: q, K: k, V: v, Out: out, LSE: lse, Docs: docs, DSinks: dsink,
			HeadParams: cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), Shape: cpu.Shape{
				Batch: s.Batch, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: s.SeqQ, SeqK: s.SeqK,
				HeadDim: s.HeadDim, Scale: float32(s.Scale),
			}, HeadDimV: s.HeadDimV, SeqLensQ: s.SeqLensQ, SeqLensK: s.SeqLensK, QPos: s.QPos, KPos: s.KPos}
		a.SoftCap, a.Slopes, a.Sinks = s.Score.Float32()
		return cpu.BackwardArgs(m, variant, a)
	}, nil
}

// cpuChecks are the shapes of the checks verify runs on each CPU variant:
// the numeric checks of the forward and the backward, the masked-data and
// non-finite checks, and the length of the dependency and stack checks.
type cpuChecks struct {
	shapes, hostile []verify.Shape
	// ragged are shapes with per-row lengths and positions, run with q, k,
	// v and out held as BSHD (forwardBSHD)
	ragged   []verify.Shape
	depN     int
	headDimV int // of v and the output when not the head dimension, else 0
}

// defaultCPUChecks are attngen verify's: verify.Shapes, two hostile
// shapes (batches with grouped heads and lengths off the tile sizes; few
// queries against many keys) and -dep-seq.
func defaultCPUChecks(headDim, headDimV, depN int) cpuChecks {
	if headDimV == headDim {
		headDimV = 0
	}
	c := cpuChecks{
		shapes: verify.Shapes(headDim),
		hostile: []verify.Shape{
			{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 61, SeqK: 130, HeadDim: headDim, HeadDimV: headDimV},
			{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 2, SeqK: 600, HeadDim: headDim, HeadDimV: headDimV},
		},
		ragged: raggedShapes(headDim, headDimV),
		depN:   depN, headDimV: headDimV,
	}
	for i := range c.shapes {
		c.shapes[i].HeadDimV = headDimV
	}
	return c
}

// raggedShapes are the shapes of the check of per-row lengths, positions
// and a strided layout: a prefill whose rows have their own query and key
// counts and positions (one row's queries before some of its keys, one
// with a single query), and a decode batch of four cache lengths at the
// default alignment. Every position lies below SeqK, so that run-time
// data drawn for SeqK positions covers them.
func raggedShapes(headDim, headDimV int) []verify.Shape {
	return []verify.Shape{
		{Batch: 3, HeadsQ: 4, HeadsKV: 2, SeqQ: 37, SeqK: 130, HeadDim: headDim, HeadDimV: headDimV,
			SeqLensQ: []int32{37, 20, 1}, SeqLensK: []int32{130, 75, 64}, QPos: []int32{93, 50, 64}, KPos: []int32{0, 41, 3}},
		{Batch: 4, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 300, HeadDim: headDim, HeadDimV: headDimV,
			SeqLensK: []int32{300, 1, 129, 64}},
	}
}

// raggedText describes a ragged shape's rows.
func raggedText(sh verify.Shape) string {
	t := fmt.Sprintf("rows of %v queries and %v keys", orAll(sh.SeqLensQ, sh.SeqQ), orAll(sh.SeqLensK, sh.SeqK))
	if sh.QPos != nil || sh.KPos != nil {
		t += fmt.Sprintf(" at positions %v and %v", sh.QPos, sh.KPos)
	}
	return t
}

func orAll(x []int32, n int) any {
	if x == nil {
		return fmt.Sprintf("[%d ...]", n)
	}
	return x
}

// maskedText is what a passed verify.CheckMaskedData on shape sh reports.
func maskedText(sh verify.Shape) string {
	return fmt.Sprintf("masked data: NaN and infinities at masked keys, values and queries leave every output that reads none of them bit-identical (B%d Hq%d Hkv%d Sq%d Sk%d)",
		sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK)
}

// verifyCPU runs every check of one CPU variant on a spec: the forward
// against the float64 reference on c.shapes, its dependencies, the
// masked-data rule on c.hostile, the backward (verifyBackward) and the
// 3-layer stack. It prints a line per check and returns the number that
// failed.
func verifyCPU(s *spec.Spec, v cpu.Variant, c cpuChecks, r *rand.Rand, stdout io.Writer) (int, error) {
	run, err := kernelRun(s.Pattern(), s.HeadDim, v)
	if err != nil {
		return 0, err
	}
	failed := 0
	for _, sh := range c.shapes {
		rep, err := verify.CheckNumeric(s.Pattern(), run, sh, r)
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "%-7s FAIL %v\n", v, err)
			continue
		}
		fmt.Fprintf(stdout, "%-7s ok   %v\n", v, rep)
	}
	dep := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: c.depN, SeqK: c.depN, HeadDim: s.HeadDim, HeadDimV: c.headDimV}
	if err := verify.CheckDependencies(s.Pattern(), run, dep, r); err != nil {
		failed++
		fmt.Fprintf(stdout, "%-7s FAIL dependencies: %v\n", v, err)
	} else {
		fmt.Fprintf(stdout, "%-7s ok   output i changes exactly when a kept key/value j changes (S = %d, all j)\n", v, c.depN)
	}
	for _, sh := range c.hostile {
		if err := verify.CheckMaskedData(s.Pattern(), run, sh, r, 3); err != nil {
			failed++
			fmt.Fprintf(stdout, "%-7s FAIL masked data: %v\n", v, err)
			continue
		}
		fmt.Fprintf(stdout, "%-7s ok   %s\n", v, maskedText(sh))
	}
	if len(c.ragged) > 0 {
		bshd, err := kernelRunLayout(s.Pattern(), s.HeadDim, v, true)
		if err != nil {
			return failed, err
		}
		for _, sh := range c.ragged {
			rep, err := verify.CheckNumeric(s.Pattern(), bshd, sh, r)
			if err != nil {
				failed++
				fmt.Fprintf(stdout, "%-7s FAIL BSHD, %s: %v\n", v, raggedText(sh), err)
				continue
			}
			fmt.Fprintf(stdout, "%-7s ok   BSHD, %s: %v\n", v, raggedText(sh), rep)
		}
	}
	n, err := verifyBackward(s, v, run, c, r, stdout)
	if err != nil {
		return failed, err
	}
	failed += n
	if c.headDimV != 0 {
		fmt.Fprintf(stdout, "%-7s 3-layer stack check skipped: head_dim {qk, v} layers do not stack (their outputs are not the next layer's queries)\n", v)
		return failed, nil
	}
	var layers []spec.Pattern
	var runs []verify.Run
	for l := 1; l <= 3; l++ {
		p := s.LayerAt(l)
		if p.Mask.HasDocument() {
			break
		}
		if p.Mask.HasTree() {
			// a random parent array, which the model and the run share
			d, err := spec.NewTree(verify.RandomTree(r, c.depN))
			if err != nil {
				return failed, err
			}
			p.Data = d
		}
		run, err := kernelRun(p, s.HeadDim, v)
		if err != nil {
			return failed, err
		}
		if p, run, err = stackHead(p, run, r, c.depN); err != nil {
			return failed, err
		}
		layers, runs = append(layers, p), append(runs, run)
	}
	if len(layers) < 3 {
		fmt.Fprintf(stdout, "%-7s 3-layer stack check skipped: document masks need run-time ids\n", v)
		return failed, nil
	}
	if err := verify.CheckStack(layers, runs, c.depN, s.HeadDim, r); err != nil {
		failed++
		fmt.Fprintf(stdout, "%-7s FAIL stack: %v\n", v, err)
	} else {
		fmt.Fprintf(stdout, "%-7s ok   a 3-layer stack depends exactly on R_3(t) of the reachability model (S = %d)\n", v, c.depN)
	}
	return failed, nil
}

// verifyBackward runs the gradient checks on one CPU variant's backward
// (after its forward, run): dq, dk and dv against the float64 reference
// on c.shapes, the dependencies of the gradients on dout by perturbation
// (S = c.depN), NaN and infinities at masked positions (c.hostile), and
// both again at per-row lengths and positions (c.ragged). It prints a line per check and returns the number that failed.
func verifyBackward(s *spec.Spec, v cpu.Variant, run verify.Run, c cpuChecks, r *rand.Rand, stdout io.Writer) (int, error) {
	bwd, err := kernelBackward(s.Pattern(), s.HeadDim, v)
	if err != nil {
		return 0, err
	}
	failed := 0
	for _, sh := range c.shapes {
		rep, err := verify.CheckGrad(s.Pattern(), run, bwd, sh, r)
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "%-7s FAIL backward %v\n", v, err)
			continue
		}
		fmt.Fprintf(stdout, "%-7s ok   backward %v\n", v, rep)
	}
	dep := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: c.depN, SeqK: c.depN, HeadDim: s.HeadDim, HeadDimV: c.headDimV}
	if err := verify.CheckGradDependencies(s.Pattern(), run, bwd, dep, r); err != nil {
		failed++
		fmt.Fprintf(stdout, "%-7s FAIL backward dependencies: %v\n", v, err)
	} else {
		fmt.Fprintf(stdout, "%-7s ok   backward: dout row i changes dv exactly at the keys i keeps, dk only there, dq only in row i (S = %d, all i)\n", v, c.depN)
	}
	for _, sh := range c.hostile {
		if err := verify.CheckGradNonFinite(s.Pattern(), run, bwd, sh, r, 3); err != nil {
			failed++
			fmt.Fprintf(stdout, "%-7s FAIL backward non-finite: %v\n", v, err)
			continue
		}
		fmt.Fprintf(stdout, "%-7s ok   %s\n", v, nonFiniteText(sh))
	}
	for _, sh := range c.ragged {
		rep, err := verify.CheckGrad(s.Pattern(), run, bwd, sh, r)
		if err == nil {
			err = verify.CheckGradNonFinite(s.Pattern(), run, bwd, sh, r, 3)
		}
		if err != nil {
			failed++
			fmt.Fprintf(stdout, "%-7s FAIL backward, %s: %v\n", v, raggedText(sh), err)
			continue
		}
		fmt.Fprintf(stdout, "%-7s ok   backward, %s: %v; no NaN or infinity at a masked pair or past a row's lengths reaches a gradient\n", v, raggedText(sh), rep)
	}
	return failed, nil
}

// stackHead gives a layer of the stack check (one query head) random values
// of the pattern's head parameters: the pattern bound to them, for the
// reachability model, and the run given them. Other layers are returned
// as they are.
func stackHead(p spec.Pattern, run verify.Run, r *rand.Rand, n int) (spec.Pattern, verify.Run, error) {
	np := len(p.Params)
	if np == 0 {
		return p, run, nil
	}
	vals := verify.RandomHeadParams(p, r, 3, n)[np : 2*np] // the middle head's: random
	iv := make([]int, np)
	for k, x := range vals {
		iv[k] = int(x)
	}
	b, err := p.Bind(iv)
	if err != nil {
		return p, nil, err
	}
	return b, func(out, lse, q, k, v []float32, docs []int32, s verify.Shape) error {
		s.HeadParams = vals
		return run(out, lse, q, k, v, docs, s)
	}, nil
}

// maxDepSeq bounds verify -dep-seq: the dependency and stack checks run
// the kernels once per key position, each run over S x S pairs.
const maxDepSeq = 512

func cmdVerify(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", stderr)
	path := fs.String("spec", "", "spec file (YAML)")
	seed := fs.Uint64("seed", 0, "random seed; 0: a fresh one each run (printed)")
	depN := fs.Int("dep-seq", 70, "length for the dependency-by-perturbation and 3-layer stack checks")
	gpu := fs.Bool("gpu", false, "also run the PTX kernel on the GPU (CUDA driver) against the reference and the interpreter")
	noPTX := fs.Bool("no-ptx", false, "skip the PTX kernels under the interpreter")
	dtype := fs.String("dtype", "bf16", "element types of the PTX kernels to verify, comma separated: bf16, f16 (as attngen -spec)")
	sm := fs.String("sm", "80", "SM versions of the PTX kernels to verify (as attngen -spec; 90a: the sm_90a forward, with -gpu on a compute capability 9.0 device only); none: CPU kernels only")
	layout := fs.String("layout", "bhsd", "layout of q, k, v and out on the device for the PTX forward kernels' checks, under the interpreter and with -gpu: bhsd, bshd, or packed (views into one QKV buffer; shapes get as many queries as keys); the backward's checks stay bhsd")
	sample := fs.Int("sample", 512, fmt.Sprintf("-gpu: on shapes of %d or more query rows, the query rows judged against the float64 reference (first, last, fully masked, mask boundaries, tile edges, random; for every head up to four), and on the backward's S = 4096 shape as many dq rows and dk/dv keys of one head; 0: every row", sampleFrom))
	if err := parseArgs(fs, args, stdout, path); err != nil {
		return err
	}
	if err := positive("dep-seq", *depN); err != nil {
		return err
	}
	if *sample < 0 {
		return usagef("-sample %d: want 0 (every row) or more rows", *sample)
	}
	if err := atMost("dep-seq", *depN, maxDepSeq, "the perturbation checks run the kernel once per key position on S x S pairs"); err != nil {
		return err
	}
	gpus, err := gpuTargets(*sm, *dtype)
	if err != nil {
		return usageError{err.Error()}
	}
	if !slices.Contains(gpurun.Layouts, *layout) {
		return usagef("-layout %q: want one of %s", *layout, strings.Join(gpurun.Layouts, ", "))
	}
	if *layout != gpurun.BHSD && (len(gpus) == 0 || *noPTX && !*gpu) {
		return usagef("-layout %s: no PTX kernel runs (-sm none, or -no-ptx without -gpu)", *layout)
	}
	if len(gpus) == 0 && *gpu {
		return usagef("-gpu with -sm none: no PTX kernel to run")
	}
	s, err := loadSpec(*path, stderr)
	if err != nil {
		return err
	}
	if err := checkTargets(s, gpus); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	if *gpu {
		// sm_80 runs on every GPU; sm_90a is run only when -sm asks for
		// it, and asking on a device that cannot run it fails here,
		// before any check
		if err := gpuRunsTargets(gpus); err != nil {
			return err
		}
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano()) | 1
	}
	r := rand.New(rand.NewPCG(*seed, 0x61747467656e))
	fmt.Fprintf(stdout, "verify %s (%s), seed %d\nmask: %s (causal %v), head_dim %s\n", s.Name, s.File, *seed, s.Mask, s.Causal, headDimString(s))
	failed := 0
	for _, t := range cpu.Targets {
		v := t.Variant
		if !cpu.Supported(v) {
			fmt.Fprintf(stdout, "%-7s not supported on this machine/build: skipped\n", v)
			continue
		}
		n, err := verifyCPU(s, v, defaultCPUChecks(s.HeadDim, s.HeadDimV, *depN), r, stdout)
		if err != nil {
			return err
		}
		failed += n
	}
	for _, t := range gpus {
		if *noPTX && !*gpu {
			break
		}
		n, err := verifyPTXLayout(s, t, r, *gpu, *sample, *layout, stdout, stderr)
		if err != nil {
			return err
		}
		failed += n
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "%d checks FAILED\n", failed)
		return exitError{1}
	}
	fmt.Fprintln(stdout, "all checks passed")
	return nil
}
