package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	"github.com/attngen/attngen/verify/gpurun"
)

// benchResult is one line of attngen bench -json.
type benchResult struct {
	Pass string `json:"pass"` // fwd or bwd
	// Score is the score section the line ran ("none": the same mask
	// without it, timed right after the line with it); empty for specs
	// without one.
	Score      string  `json:"score,omitempty"`
	Variant    string  `json:"variant"`
	Mask       string  `json:"mask"`
	Dtype      string  `json:"dtype"`
	OutDtype   string  `json:"out_dtype"`
	Seq        int     `json:"seq"`
	SeqQ       int     `json:"seq_q"`
	Batch      int     `json:"batch"`
	Heads      int     `json:"heads"`
	HeadsKV    int     `json:"heads_kv"`
	HeadDim    int     `json:"head_dim"`
	Threads    int     `json:"threads"`
	Ms         float64 `json:"ms"`
	GFlops     float64 `json:"gflops"`
	PeakGFlops float64 `json:"peak_gflops"`
	PctPeak    float64 `json:"pct_peak"`
	GBps       float64 `json:"gbps"`
	PeakGBps   float64 `json:"peak_gbps"`
	KeptPairs  int64   `json:"kept_pairs"`
	Reps       int     `json:"reps"`
	MeasHeads  int     `json:"measured_heads"`
	AllocsOp   float64 `json:"allocs_per_op"`
	// SysMs is the system CPU time (all threads: page faults of fresh
	// memory, above all) per timed call, over the -reps calls; -1 where
	// the platform does not report it.
	SysMs float64 `json:"sys_ms"`
	// HeadParams are the values every query head took, for a mask with
	// head parameters (-head-params): name=value, comma-separated
	HeadParams string `json:"head_params,omitempty"`
}

// benchBytes counts the bytes one call reads and writes: q and out (and
// lse) of every query row, and the key and value rows of the readKeys keys
// some query keeps, per key/value head; esize bytes an input element,
// osize an output element, lse float32.
func benchBytes(batch, hq, hkv, seqQ, readKeys, headDim, esize, osize int, lse bool) float64 {
	rows := float64(batch) * float64(hq) * float64(seqQ)
	in := rows*float64(headDim) + 2*float64(batch)*float64(hkv)*float64(readKeys)*float64(headDim) // q, k, v
	b := float64(esize)*in + float64(osize)*rows*float64(headDim)                                  // out
	if lse {
		b += 4 * rows
	}
	return b
}

// benchBytesBwd counts the bytes one backward call reads and writes, all
// float32: q, out, dout and dq of every query row (and lse, when read),
// and k, v, dk and dv of the readKeys keys some query keeps, per
// key/value head. The straightforward backward recomputes the output
// instead of reading out and lse (out false).
func benchBytesBwd(batch, hq, hkv, seqQ, readKeys, headDim int, out bool) float64 {
	rows := float64(batch) * float64(hq) * float64(seqQ)
	perRow := 3.0 // q, dout, dq
	if out {
		perRow = 4 // and out
	}
	b := 4 * (perRow*rows*float64(headDim) + 4*float64(batch)*float64(hkv)*float64(readKeys)*float64(headDim))
	if out {
		b += 4 * rows // lse
	}
	return b
}

// bwdFlopFactor is how many forward FLOPs a backward row counts: the
// backward recomputes S = QK^T and computes dV, dP, dK and dQ, five
// matrix products to the forward's two (FlashAttention-2's count).
const bwdFlopFactor = 2.5

// pagedCopy lays contiguous caches ([batch, kv head, seq, D]) out as pages
// of p positions in a shuffled order, unused slots nan (NaN in the
// caches' element type), with their table.
func pagedCopy[T float32 | uint16](r *rand.Rand, k, v []T, nan T, batch, hkv, seq, d, p int) (pk, pv []T, pg cpu.Paged) {
	need := (seq + p - 1) / p
	per := hkv * p * d
	pages := batch * need
	pk, pv = make([]T, pages*per), make([]T, pages*per)
	for i := range pk {
		pk[i], pv[i] = nan, nan
	}
	order := r.Perm(pages)
	pg = cpu.Paged{PageSize: p, Table: make([]int32, pages)}
	for b := 0; b < batch; b++ {
		for i := 0; i < need; i++ {
			page := order[b*need+i]
			pg.Table[b*need+i] = int32(page)
			for h := 0; h < hkv; h++ {
				n := min(p, seq-i*p) * d
				src := ((b*hkv+h)*seq + i*p) * d
				dst := (page*hkv + h) * p * d
				copy(pk[dst:dst+n], k[src:src+n])
				copy(pv[dst:dst+n], v[src:src+n])
			}
		}
	}
	return pk, pv, pg
}

// bits16 rounds float32 values to a 16-bit format and returns the bits.
func bits16(elem cpu.Elem, x []float32) []uint16 {
	b := make([]uint16, len(x))
	for i, v := range x {
		if elem == cpu.BF16 {
			b[i] = verify.BF16(v)
		} else {
			b[i] = verify.F16(v)
		}
	}
	return b
}

// widened returns the float32 values of 16-bit bits.
func widened(elem cpu.Elem, b []uint16) []float32 {
	x := make([]float32, len(b))
	for i, h := range b {
		if elem == cpu.BF16 {
			x[i] = verify.FromBF16(h)
		} else {
			x[i] = verify.FromF16(h)
		}
	}
	return x
}

// keysRead counts the keys that some of the last seqQ query positions keep:
// the keys a kernel that skips what the mask leaves out must read.
func keysRead(p spec.Pattern, seqQ, seqK int) int {
	mark := make([]int32, seqK+1) // +1 at an interval's start, -1 past its end
	var progs []spec.Prog
	for r := 0; r < seqQ; r++ {
		progs = p.Keys(progs[:0], spec.Row(r, seqQ, seqK), seqK)
		for _, g := range progs {
			if g.Step == 1 {
				mark[g.Lo]++
				mark[g.Hi+1]--
				continue
			}
			for j := g.Lo; j <= g.Hi; j += g.Step {
				mark[j]++
				mark[j+1]--
			}
		}
	}
	n, run := 0, int32(0)
	for _, m := range mark[:seqK] {
		if run += m; run > 0 {
			n++
		}
	}
	return n
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	path := fs.String("spec", "", "spec file (YAML)")
	seq := fs.Int("seq", 4096, "sequence length: the keys (the KV cache when -seq-q is shorter)")
	seqQFlag := fs.Int("seq-q", 0, "query rows, the last Q positions of the sequence (1 <= Q <= -seq; default -seq; 1 is one decoding step). GB/s counts q and out (and lse) of these rows and the key and value rows of every key some of them keeps, per key/value head")
	heads := fs.Int("heads", 8, "query heads")
	headParamsFlag := fs.String("head-params", "", "for a mask with head_params, the values every query head takes: `name=value,...` (others at their max)")
	headsKVFlag := fs.Int("heads-kv", 0, "key/value heads; -heads must be a multiple (grouped-query attention; default -heads)")
	dtype := fs.String("dtype", "fp32", "element type of q, k and v: fp32, bf16 or f16 (16-bit inputs are widened exactly to float32 as tiles are packed or as the decode kernels load rows; lse is float32)")
	outDtype := fs.String("out-dtype", "fp32", "element type of out: fp32, or the -dtype of 16-bit inputs (the float32 output rounded to it)")
	paged := fs.Int("paged", 0, "page size of a paged KV cache: the kernels read k and v (in -dtype) from pages of this many positions in shuffled order through a page table")
	bwMiB := fs.Int("bw-mib", cpu.DefaultReadMiB, "buffer of the read-bandwidth probe in MiB (at most an eighth of this machine's memory)")
	batch := fs.Int("batch", 1, "batch")
	threadsFlag := fs.String("threads", "1", "thread counts, comma separated (e.g. 1,2)")
	reps := fs.Int("reps", 3, "repetitions per variant; the best is reported")
	naiveHeads := fs.Int("naive-heads", 1, "heads the straightforward Go implementation runs (it is slow; throughput is per pair, so fewer heads measure the same rate)")
	asJSON := fs.Bool("json", false, "print one JSON array")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (go tool pprof) of each CPU variant's timed calls to `prefix`.VARIANT.THREADSt (probes and warm-up not included)")
	gpu := fs.Bool("gpu", false, "benchmark the bf16 PTX kernels on the GPU instead of the CPU variants (use -batch 4 -heads 16 -seq 8192 for docs/performance.md's shape): the forward, and with -pass bwd or both the backward's dq and dk/dv kernels timed together; random normal bf16 inputs, -warmup untimed launches, then -reps timed ones (default 30, at least 20; the median is reported), and what the timed launches left checked against the float64 reference: the output on -sample rows, the gradients on -sample dq rows and dk/dv keys of one head")
	warmup := fs.Int("warmup", 3, "-gpu: untimed launches before the timed ones")
	sample := fs.Int("sample", 256, "-gpu: query rows (each for four heads: first, last, two random) whose output, and dq rows and dk/dv keys (of one head) whose gradients, are checked against the float64 reference after timing; 0: every row")
	seed := fs.Uint64("seed", 1, "-gpu: seed of the random normal bf16 inputs")
	variantsFlag := fs.String("variants", "", "comma-separated variants to time, of the CPU targets' names (avx512, avx2, neon, purego) and naive (the straightforward Go implementation); default all this machine runs")
	smFlag := fs.String("sm", "80", "-gpu: SM versions of the forward kernels timed, comma separated, each on the same inputs (80: the sm_80 kernel, which every GPU runs; 90a: the sm_90a kernel, on a compute capability 9.0 device only); the backward's kernels are sm_80's")
	scoreFlag := fs.String("score", "", "a score section to time instead of the spec's, as YAML (`{softcap: 50}`, `{alibi: {}}`, `{learned_sinks: true}`; see docs/language.md): with a score section, from the spec or this flag, each CPU variant also runs the same mask without it, right after, and the ratios are printed")
	pass := fs.String("pass", "fwd", "what to time: fwd (the forward), bwd (the backward: dq, dk and dv from dout, q, k, v and the forward's out and lse; on the CPU float32 and contiguous caches, with -gpu the bf16 PTX dq and dk/dv kernels timed together; FLOP/s count 2.5x the forward's FLOPs) or both")
	if err := parseArgs(fs, args, stdout, path); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := positive("seq", *seq, "heads", *heads, "batch", *batch, "reps", *reps, "naive-heads", *naiveHeads, "bw-mib", *bwMiB); err != nil {
		return err
	}
	seqQ, headsKV := *seq, *heads
	if set["seq-q"] {
		if *seqQFlag < 1 || *seqQFlag > *seq {
			return usagef("-seq-q %d: the query rows must be between 1 and -seq %d (they are the last positions of the sequence)", *seqQFlag, *seq)
		}
		seqQ = *seqQFlag
	}
	if set["heads-kv"] {
		if err := positive("heads-kv", *headsKVFlag); err != nil {
			return err
		}
		if *headsKVFlag > *heads || *heads%*headsKVFlag != 0 {
			return usagef("-heads %d -heads-kv %d: the query heads must be a multiple of the key/value heads", *heads, *headsKVFlag)
		}
		headsKV = *headsKVFlag
	}
	elem, err := benchDtype(*dtype)
	if err != nil {
		return err
	}
	switch {
	case *outDtype == "fp32" || *outDtype == *dtype:
	case *dtype == "fp32":
		return usagef("-out-dtype %q with -dtype fp32: float32 inputs give a float32 output; a 16-bit output needs -dtype bf16 or f16 (the output is float32 or the inputs' type)", *outDtype)
	default:
		return usagef("-out-dtype %q with -dtype %s: want fp32 or %s (the output is float32 or the inputs' type)", *outDtype, *dtype, *dtype)
	}
	out16 := *outDtype != "fp32"
	if *gpu && set["out-dtype"] {
		return usagef("-out-dtype: -gpu times the bf16 PTX kernel, whose output is bf16")
	}
	if set["paged"] {
		if *paged < 1 || *paged > spec.MaxPageSize {
			return usagef("-paged %d: want 1 to %d positions a page", *paged, spec.MaxPageSize)
		}
		if *gpu {
			return usagef("-paged: the PTX kernel reads contiguous caches only")
		}
	}
	if err := atMost("reps", *reps, maxBenchReps, "the best of more repetitions measures nothing new"); err != nil {
		return err
	}
	want, err := benchVariants(*variantsFlag)
	if err != nil {
		return err
	}
	fwdPass, bwdPass := *pass == "fwd" || *pass == "both", *pass == "bwd" || *pass == "both"
	if !fwdPass && !bwdPass {
		return usagef("-pass %q: want fwd, bwd or both", *pass)
	}
	if bwdPass && !*gpu {
		switch {
		case *dtype != "fp32" || *outDtype != "fp32":
			return usagef("-pass %s with -dtype %s -out-dtype %s: the backward takes float32 inputs and writes float32 gradients", *pass, *dtype, *outDtype)
		case set["paged"]:
			return usagef("-pass %s with -paged: the backward reads contiguous caches only", *pass)
		}
	}
	if *gpu && set["cpuprofile"] {
		return usagef("-cpuprofile: profiles the CPU variants; -gpu times kernels on the GPU")
	}
	if !*gpu {
		for _, f := range []string{"warmup", "sample", "seed", "sm"} {
			if set[f] {
				return usagef("-%s: only -gpu takes it (the CPU variants report the best of -reps)", f)
			}
		}
	}
	if *gpu {
		if !set["reps"] {
			*reps = defaultGPUReps
		}
		if *reps < minGPUReps {
			return usagef("-reps %d with -gpu: the median needs at least %d timed launches", *reps, minGPUReps)
		}
		if *warmup < 0 || *warmup > maxBenchReps {
			return usagef("-warmup %d: want 0 to %d", *warmup, maxBenchReps)
		}
		if *sample < 0 {
			return usagef("-sample %d: want 0 (every row) or more rows", *sample)
		}
	}
	threads, err := benchThreads(*threadsFlag)
	if err != nil {
		return err
	}
	s, err := loadSpec(*path, stderr)
	if err != nil {
		return err
	}
	if set["score"] {
		sc, err := spec.Parse("-score", []byte("name: score\nmask: {full: {}}\ncausal: "+strconv.FormatBool(s.Causal)+"\nscore: "+*scoreFlag+"\n"))
		if err != nil {
			return usagef("-score %q: %v", *scoreFlag, err)
		}
		if !sc.Score.Active() {
			return usagef("-score %q: modifies nothing", *scoreFlag)
		}
		s.Score = sc.Score
	}
	hb, err := benchHeadParams(s, *headParamsFlag, *heads, stderr)
	if err != nil {
		return err
	}
	if s.Mask.HasDocument() {
		return fmt.Errorf("bench: document masks need run-time ids; benchmark the positional mask instead")
	}
	if s.Mask.HasTree() {
		return fmt.Errorf("bench: tree masks need a run-time parent array; benchmark the positional mask instead")
	}
	if *gpu {
		if seqQ != *seq || headsKV != *heads {
			return usagef("-gpu times the PTX kernel with as many queries as keys and one key/value head per query head: leave out -seq-q and -heads-kv")
		}
		// The host draws q, k and v, reads out back and checks it: four
		// float32 tensors and a 16-bit copy of one; the backward adds dout,
		// dq, dk and dv (float32) and 16-bit copies of q, k, v, out and
		// dout.
		n, err := benchElems(*batch, *heads, *seq, s.HeadDim)
		if err != nil {
			return err
		}
		per, what := int64(18), "q, k, v and out"
		if bwdPass {
			per, what = 44, "q, k, v, out, dout, dq, dk and dv"
		}
		if limit, from := memoryLimit(); n > limit/per {
			return usagef("-gpu -batch %d -heads %d -seq %d: the host copies of %s take %s, more than the %s allowed (%s)",
				*batch, *heads, *seq, what, byteSize(per*n), byteSize(limit), from)
		}
		targets, err := gpuTargets(*smFlag, "bf16")
		if err != nil || len(targets) == 0 {
			return usagef("-sm %q: want SM versions such as 80 or 80,90a (bf16 kernels)", *smFlag)
		}
		if err := checkTargets(s, targets); err != nil {
			return err
		}
		return benchGPU(s, gpuBench{batch: *batch, heads: *heads, seq: *seq, reps: *reps, warmup: *warmup, sample: *sample, seed: *seed, fwd: fwdPass, bwd: bwdPass, targets: targets, hp: hb}, *asJSON, stdout, stderr)
	}
	probeMiB := cpu.ReadProbeMiB(*bwMiB)
	esize := 4
	if elem != cpu.F32 {
		esize = 2
	}
	copies := 0 // a paged copy of k and v
	if *paged > 0 {
		copies = *paged
	}
	if err := benchMemory(*batch, *heads, headsKV, seqQ, *seq, s.HeadDim, esize, copies, bwdPass, int64(probeMiB)<<20); err != nil {
		return err
	}
	plan, err := gen.Compile(s, gen.CPUTarget, nil)
	if err != nil {
		return err
	}
	mask := plan.Mask()
	// With a score section, the same mask without it, for the ratios.
	plainMask, scoreText := mask, ""
	if s.Score.Active() {
		plain := *s
		plain.Score = spec.Score{}
		pp, err := gen.Compile(&plain, gen.CPUTarget, nil)
		if err != nil {
			return err
		}
		plainMask, scoreText = pp.Mask(), s.Score.String()
	}
	D := s.HeadDim
	kept := verify.KeptPairs(hb.pat, seqQ, *seq)
	read := keysRead(hb.pat, seqQ, *seq)
	r := rand.New(rand.NewPCG(1, 2))
	nq, nkv := *batch**heads*seqQ*D, *batch*headsKV**seq*D
	mk := func(n int) []float32 {
		x := make([]float32, n)
		for k := range x {
			x[k] = float32(r.NormFloat64())
		}
		return x
	}
	q, k, v := mk(nq), mk(nkv), mk(nkv)
	// 16-bit inputs: the same values rounded to the format, as its bits
	// (the naive path runs on the rounded float32 values).
	var q16, k16, v16 []uint16
	if elem != cpu.F32 {
		q16, k16, v16 = bits16(elem, q), bits16(elem, k), bits16(elem, v)
		q, k, v = widened(elem, q16), widened(elem, k16), widened(elem, v16)
	}
	out, lse := make([]float32, nq), make([]float32, *batch**heads*seqQ)
	shape := cpu.Shape{Batch: *batch, HeadsQ: *heads, HeadsKV: headsKV, SeqQ: seqQ, SeqK: *seq, HeadDim: D}
	// The kernels' call: inputs in -dtype, output in -out-dtype, and with
	// -paged the same keys and values in pages of that many positions, in
	// a shuffled order, with NaN in the unused slots.
	callArgs := cpu.Args{Elem: elem, Q: q, K: k, V: v, Out: out, LSE: lse, HeadParams: hb.cpu, Shape: shape}
	// the score section's call values: random, as verify draws them
	scoreVals := verify.RandomScore(s.Score, *heads, r)
	callArgs.SoftCap, callArgs.Slopes, callArgs.Sinks = scoreVals.Float32()
	if elem != cpu.F32 {
		callArgs.Q, callArgs.K, callArgs.V = nil, nil, nil
		callArgs.Q16, callArgs.K16, callArgs.V16 = q16, k16, v16
	}
	if out16 {
		callArgs.Out, callArgs.Out16 = nil, make([]uint16, nq)
	}
	if *paged > 0 {
		if elem == cpu.F32 {
			callArgs.K, callArgs.V, callArgs.Paged = pagedCopy(r, k, v, float32(math.NaN()), *batch, headsKV, *seq, D, *paged)
		} else {
			callArgs.K16, callArgs.V16, callArgs.Paged = pagedCopy(r, k16, v16, 0xffff, *batch, headsKV, *seq, D, *paged) // NaN in both formats
		}
	}
	// The backward's inputs: a random dout, and out and lse of the forward
	// on the same q, k and v.
	var dout, dq, dk, dv, fout, flse []float32
	if bwdPass {
		dout = mk(nq)
		dq, dk, dv = make([]float32, nq), make([]float32, nkv), make([]float32, nkv)
		fout, flse = make([]float32, nq), make([]float32, len(lse))
		if err := cpu.ForwardArgs(mask, cpu.Auto, cpu.Args{Q: q, K: k, V: v, Out: fout, LSE: flse, HeadParams: hb.cpu, SoftCap: callArgs.SoftCap, Slopes: callArgs.Slopes, Sinks: callArgs.Sinks, Shape: shape}); err != nil {
			return fmt.Errorf("bench %s: forward for the backward's inputs: %w", s.Name, err)
		}
	}
	group := *heads / headsKV
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	var results []benchResult
	for _, th := range threads {
		runtime.GOMAXPROCS(th)
		// The FMA peak is measured right before and after each variant and
		// averaged: on shared machines it drifts within a run. It is the
		// peak of the variant's own vectors (ymm for avx2; the widest for
		// pure Go and naive, the machine's).
		peakBefore, peakOf := 0.0, cpu.Auto
		measurePeak := func(v cpu.Variant) {
			peakOf = v
			peakBefore = cpu.PeakGFLOPSOf(v, th, 150*time.Millisecond)
		}
		// The read bandwidth is measured once per thread count, before the
		// kernels, on a buffer far larger than the caches.
		fmt.Fprintf(stderr, "bench %s: read bandwidth, %d thread%s, %d MiB buffer\n", s.Name, th, plural(th), probeMiB)
		peakBW := cpu.PeakReadGBps(th, probeMiB, 200*time.Millisecond)
		// add records a variant that ran b batches of h query heads (and
		// the key/value heads they read), writing lse or not.
		add := func(pass, variant, score string, b, h int, lseOut bool, reps int, ms, sysMs float64, allocs float64) {
			peak := (peakBefore + cpu.PeakGFLOPSOf(peakOf, th, 150*time.Millisecond)) / 2
			sec := ms / 1e3
			g := 4 * float64(b) * float64(h) * float64(D) * float64(kept) / sec / 1e9
			es, os := esize, 4
			if out16 {
				os = 2
			}
			if variant == "naive" {
				es, os = 4, 4 // the straightforward path reads and writes float32 values
			}
			hkv := (h + group - 1) / group
			gb := benchBytes(b, h, hkv, seqQ, read, D, es, os, lseOut) / sec / 1e9
			if pass == "bwd" {
				g *= bwdFlopFactor
				gb = benchBytesBwd(b, h, hkv, seqQ, read, D, lseOut) / sec / 1e9
			}
			results = append(results, benchResult{HeadParams: hb.text, Pass: pass, Score: score, Variant: variant, Mask: s.Name, Dtype: *dtype, OutDtype: *outDtype, Seq: *seq, SeqQ: seqQ, Batch: *batch, Heads: *heads, HeadsKV: headsKV, HeadDim: D,
				Threads: th, Ms: ms, GFlops: g, PeakGFlops: peak, PctPeak: 100 * g / peak, GBps: gb, PeakGBps: peakBW,
				KeptPairs: kept, Reps: reps, MeasHeads: h, AllocsOp: allocs, SysMs: sysMs})
		}
		// timeVariant times one variant's call: the pure-Go variant is slow,
		// so it runs once (which also warms up) and its allocations are not
		// counted; the others run a warm-up call (workers, workspace), the
		// best of -reps (and the system time they took, per call), and one
		// call counting allocations.
		timeVariant := func(variant cpu.Variant, call func()) (n int, ms, sysMs, allocs float64, err error) {
			n, allocs = *reps, -1.0
			if variant == cpu.PureGo {
				n = 1
			} else {
				call()
			}
			if *cpuProfile != "" {
				name := fmt.Sprintf("%s.%s.%dt", *cpuProfile, variant, th)
				f, err := os.Create(name)
				if err != nil {
					return 0, 0, 0, 0, fmt.Errorf("bench: -cpuprofile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return 0, 0, 0, 0, fmt.Errorf("bench: -cpuprofile: %w", err)
				}
				fmt.Fprintf(stderr, "bench %s: profiling the timed calls into %s\n", s.Name, name)
			}
			best := time.Duration(1 << 62)
			sys0 := sysTime()
			for rep := 0; rep < n; rep++ {
				t0 := time.Now()
				call()
				best = min(best, time.Since(t0))
			}
			if *cpuProfile != "" {
				pprof.StopCPUProfile()
			}
			sysMs = -1
			if sys1 := sysTime(); sys0 >= 0 && sys1 >= 0 {
				sysMs = float64((sys1 - sys0).Nanoseconds()) / 1e6 / float64(n)
			}
			if variant != cpu.PureGo {
				allocs = testingAllocs(call)
			}
			return n, float64(best.Nanoseconds()) / 1e6, sysMs, allocs, nil
		}
		nh := min(max(*naiveHeads, th), *heads)
		// One pass: each variant this machine runs and -variants names,
		// then the straightforward Go implementation on nh heads.
		// plain, with a score section, is the call without it.
		type benchPass struct {
			name, label string
			call        func(cpu.Variant) error
			plain       func(cpu.Variant) error
			naive       func() error
		}
		plainArgs := callArgs
		plainArgs.SoftCap, plainArgs.Slopes, plainArgs.Sinks = 0, nil, nil
		var passes []benchPass
		if fwdPass {
			bp := benchPass{"fwd", "",
				func(vr cpu.Variant) error { return cpu.ForwardArgs(mask, vr, callArgs) }, nil,
				// on naiveHeads query heads of the first batch, with th
				// goroutines over the heads
				func() error { return naiveParallel(hb.pat, q, k, v, out, nh, group, seqQ, *seq, D, th) }}
			if scoreText != "" {
				bp.plain = func(vr cpu.Variant) error { return cpu.ForwardArgs(plainMask, vr, plainArgs) }
			}
			passes = append(passes, bp)
		}
		if bwdPass {
			bargs := cpu.BackArgs{DQ: dq, DK: dk, DV: dv, DOut: dout, Q: q, K: k, V: v, Out: fout, LSE: flse, HeadParams: hb.cpu,
				SoftCap: callArgs.SoftCap, Slopes: callArgs.Slopes, Sinks: callArgs.Sinks, Shape: shape}
			bp := benchPass{"bwd", "backward, ",
				func(vr cpu.Variant) error { return cpu.BackwardArgs(mask, vr, bargs) }, nil,
				// verify.NaiveGradFP32: dense keep rows, the softmax
				// recomputed in float32, on the forward naive's heads
				func() error { return naiveGradParallel(hb.pat, q, k, v, dout, nh, group, seqQ, *seq, D, th) }}
			if scoreText != "" {
				pb := bargs
				pb.SoftCap, pb.Slopes, pb.Sinks = 0, nil, nil
				bp.plain = func(vr cpu.Variant) error { return cpu.BackwardArgs(plainMask, vr, pb) }
			}
			passes = append(passes, bp)
		}
		for _, ps := range passes {
			for _, t := range cpu.Targets {
				variant := t.Variant
				if !cpu.Supported(variant) || !want[variant.String()] {
					continue
				}
				// with a score section: the call with it, then the same
				// mask without it, right after
				runs := []struct {
					score, label string
					call         func(cpu.Variant) error
				}{{scoreText, "", ps.call}}
				if ps.plain != nil {
					runs = append(runs, struct {
						score, label string
						call         func(cpu.Variant) error
					}{"none", " without the score section", ps.plain})
				}
				var callErr error
				calls := make([]func(), len(runs))
				for x, run := range runs {
					calls[x] = func() {
						if err := run.call(variant); err != nil && callErr == nil {
							callErr = err
						}
					}
				}
				// With and without the score section: after each one's own
				// timing (system time, allocations, profile), -reps rounds
				// of one call of each, alternating, give the times of both
				// lines, so that both sample the same moments of a machine
				// whose speed drifts.
				var pair [2]float64
				if len(runs) == 2 && variant != cpu.PureGo {
					best := [2]time.Duration{1 << 62, 1 << 62}
					for rep := 0; rep < *reps; rep++ {
						for x, call := range calls {
							t0 := time.Now()
							call()
							best[x] = min(best[x], time.Since(t0))
						}
					}
					pair = [2]float64{float64(best[0].Nanoseconds()) / 1e6, float64(best[1].Nanoseconds()) / 1e6}
				}
				for x, run := range runs {
					fmt.Fprintf(stderr, "bench %s: %s%s%s, %d thread%s, best of %d\n", s.Name, ps.label, variant, run.label, th, plural(th), *reps)
					measurePeak(variant)
					reps, ms, sysMs, allocs, err := timeVariant(variant, calls[x])
					if err != nil {
						return err
					}
					if callErr != nil {
						return fmt.Errorf("bench %s: %s%s: %w", s.Name, ps.label, variant, callErr)
					}
					if pair[x] > 0 {
						ms = pair[x] // the alternating rounds' best
					}
					add(ps.name, variant.String(), run.score, *batch, *heads, true, reps, ms, sysMs, allocs)
				}
			}
			if want["naive"] {
				fmt.Fprintf(stderr, "bench %s: %snaive, %d thread%s, %d head%s, once\n", s.Name, ps.label, th, plural(th), nh, plural(nh))
				measurePeak(cpu.Auto)
				t0, sys0 := time.Now(), sysTime()
				if err := ps.naive(); err != nil {
					return err
				}
				ms := float64(time.Since(t0).Nanoseconds()) / 1e6
				sysMs := -1.0
				if sys1 := sysTime(); sys0 >= 0 && sys1 >= 0 {
					sysMs = float64((sys1 - sys0).Nanoseconds()) / 1e6
				}
				add(ps.name, "naive", "", 1, nh, false, 1, ms, sysMs, -1)
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(results)
	}
	causal := verify.KeptPairs(spec.Pattern{Mask: spec.Full(), Causal: true}, seqQ, *seq)
	fmt.Fprintf(stdout, "bench %s: B=%d H=%d Hkv=%d D=%d S=%d Q=%d %s, kept pairs %d (density %.4f of causal); effective GFLOP/s = 4*B*H*D*kept/s, GB/s = bytes of q, out, lse and the k, v rows of the %d keys some query keeps, per s\n",
		s.Name, *batch, *heads, headsKV, D, *seq, seqQ, *dtype+" in, "+*outDtype+" out", kept, float64(kept)/float64(causal), read)
	fmt.Fprintf(stdout, "%-4s %-8s %7s %5s %7s %8s %10s %8s %10s %12s %8s %9s %10s %9s\n",
		"pass", "variant", "threads", "dtype", "seq_q", "heads_kv", "ms", "sys ms", "GFLOP/s", "peak GFLOP/s", "% peak", "GB/s", "peak GB/s", "allocs/op")
	for _, r := range results {
		allocs := "-"
		if r.AllocsOp >= 0 {
			allocs = fmt.Sprintf("%.0f", r.AllocsOp)
		}
		sys := "-"
		if r.SysMs >= 0 {
			sys = fmt.Sprintf("%.3f", r.SysMs)
		}
		v := r.Variant
		if r.Score == "none" {
			v += "-"
		}
		fmt.Fprintf(stdout, "%-4s %-8s %7d %5s %7d %8d %10.3f %8s %10.1f %12.1f %7.1f%% %9.2f %10.1f %9s\n",
			r.Pass, v, r.Threads, r.Dtype, r.SeqQ, r.HeadsKV, r.Ms, sys, r.GFlops, r.PeakGFlops, r.PctPeak, r.GBps, r.PeakGBps, allocs)
	}
	if scoreText != "" {
		fmt.Fprintf(stdout, "score section %s: time with it / time of the same mask without it, each the best of -reps rounds alternating one call of each:\n", scoreText)
		for x, r := range results {
			if r.Score != scoreText || x+1 >= len(results) || results[x+1].Score != "none" {
				continue
			}
			fmt.Fprintf(stdout, "  %-4s %-8s %d thread%s: %.3f ms / %.3f ms = %.3f\n", r.Pass, r.Variant, r.Threads, plural(r.Threads), r.Ms, results[x+1].Ms, r.Ms/results[x+1].Ms)
		}
	}
	fmt.Fprintf(stdout, "(sys ms: system CPU time per call over the timed calls, page faults of fresh memory above all; peak GFLOP/s: 12-chain FMA loop on every thread on the line's own vectors (ymm for avx2, the widest otherwise), measured right before and after each line and averaged; peak GB/s: every thread summing its slice of a %d MiB buffer, once per thread count; naive runs one batch of max(-naive-heads, threads) heads)\n", probeMiB)
	if bwdPass {
		fmt.Fprintf(stdout, "(bwd rows: GFLOP/s count %.1f x 4*B*H*D*kept/s; GB/s count q, out, dout, dq, lse and the k, v, dk, dv rows of the keys some query keeps, all float32; AVX-512 and AVX2 run the tiled backward kernels, pure Go the per-pair Go backward)\n", bwdFlopFactor)
	}
	return nil
}

// benchDtype accepts fp32 and refuses, as a usage error, the types bench
// names but cannot run yet and anything else.
func benchDtype(d string) (cpu.Elem, error) {
	switch d {
	case "fp32":
		return cpu.F32, nil
	case "bf16":
		return cpu.BF16, nil
	case "f16":
		return cpu.F16, nil
	}
	return 0, usagef("-dtype %q: want fp32, bf16 or f16", d)
}

// Bounds of bench's flags, checked before anything is allocated.
const (
	maxBenchReps    = 1000
	defaultGPUReps  = 30 // -gpu: timed launches when -reps is not given
	minGPUReps      = 20 // -gpu: the fewest timed launches a median is taken of
	maxBenchThreadN = 16 // thread counts in one -threads list
	// fallbackMemory is the memory assumed where the machine's cannot be
	// read (no /proc/meminfo).
	fallbackMemory = 8 << 30
)

// maxBenchThreads is the largest -threads count: four goroutines per CPU
// already measure nothing but the scheduler, and a fixed ceiling of 1024
// keeps a many-core machine from starting tens of thousands of threads
// (the Go runtime aborts at 10000).
func maxBenchThreads() int { return min(4*runtime.NumCPU(), 1024) }

// benchThreads parses and bounds -threads.
func benchThreads(flag string) ([]int, error) {
	fields := strings.Split(flag, ",")
	if len(fields) > maxBenchThreadN {
		return nil, usagef("-threads lists %d counts, at most %d (each runs the whole benchmark)", len(fields), maxBenchThreadN)
	}
	var threads []int
	for _, f := range fields {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, usagef("-threads %q: want positive integers separated by commas", flag)
		}
		if limit := maxBenchThreads(); n > limit {
			return nil, usagef("-threads %d: at most %d (4 x the %d CPUs here, and never above 1024: more threads than CPUs only measure the scheduler)", n, limit, runtime.NumCPU())
		}
		threads = append(threads, n)
	}
	return threads, nil
}

// benchElems is batch*heads*seq*headDim, the elements of q (and of k, v
// and out), refused with the flags named when the product overflows.
func benchElems(batch, heads, seq, headDim int) (int64, error) {
	n, ok := mulInt64(batch, heads, seq, headDim)
	if !ok {
		return 0, usagef("-batch %d x -heads %d x -seq %d x head_dim %d elements overflows a 64-bit count; no machine holds these tensors", batch, heads, seq, headDim)
	}
	return n, nil
}

// naiveParallel runs verify.NaiveFP32 on the first nh query heads of the
// first batch, split by head over th goroutines; query head h reads
// key/value head h/group.
func naiveParallel(p spec.Pattern, q, k, v, out []float32, nh, group, seqQ, seqK, D, th int) error {
	perQ, perKV := seqQ*D, seqK*D
	errs := make(chan error, nh)
	sem := make(chan struct{}, th)
	for h := 0; h < nh; h++ {
		sem <- struct{}{}
		go func(h int) {
			defer func() { <-sem }()
			one := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: seqQ, SeqK: seqK, HeadDim: D}
			g := h / group
			errs <- verify.NaiveFP32(p, nil, q[h*perQ:(h+1)*perQ], k[g*perKV:(g+1)*perKV], v[g*perKV:(g+1)*perKV], one, out[h*perQ:(h+1)*perQ], nil)
		}(h)
	}
	for h := 0; h < nh; h++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// naiveGradParallel runs verify.NaiveGradFP32 on the first nh query heads
// of the first batch, split by head over th goroutines; query head h reads
// key/value head h/group. The gradients are discarded.
func naiveGradParallel(p spec.Pattern, q, k, v, dout []float32, nh, group, seqQ, seqK, D, th int) error {
	perQ, perKV := seqQ*D, seqK*D
	errs := make(chan error, nh)
	sem := make(chan struct{}, th)
	for h := 0; h < nh; h++ {
		sem <- struct{}{}
		go func(h int) {
			defer func() { <-sem }()
			one := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: seqQ, SeqK: seqK, HeadDim: D}
			g := h / group
			_, err := verify.NaiveGradFP32(p, nil, q[h*perQ:(h+1)*perQ], k[g*perKV:(g+1)*perKV], v[g*perKV:(g+1)*perKV], dout[h*perQ:(h+1)*perQ], one)
			errs <- err
		}(h)
	}
	for h := 0; h < nh; h++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// testingAllocs counts heap allocations of one call (after warm-up).
func testingAllocs(f func()) float64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return float64(b.Mallocs - a.Mallocs)
}

// gpuBench is what bench -gpu runs: the shape (as many queries as keys, one
// key/value head per query head), the passes, the launches and the checks.
type gpuBench struct {
	batch, heads, seq int
	reps, warmup      int
	sample            int // rows checked after timing; 0: every row
	seed              uint64
	fwd, bwd          bool         // the passes timed
	targets           []ptx.Target // the forward kernels timed (bf16); nil: sm_80
	hp                benchHeads   // head parameter values (-head-params)
}

// benchInputs draws n standard normal values rounded to bf16: random, so
// that the tensor cores see the data a model gives them (they run faster on
// zeros and constants).
func benchInputs(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	verify.RoundBF16(x)
	return x
}

// gpuRow is one row of bench -gpu: a pass timed on a device. The FLOPs
// of a forward are 4*B*H*D*kept (QK^T and PV); a backward counts
// bwdFlopFactor times that, as the CPU rows do.
func gpuRow(pass, mask, device string, b gpuBench, headDim int, kept int64, tm gpurun.Timing, check string) map[string]any {
	msOf := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	ms := msOf(tm.Median())
	flops := 4 * float64(b.batch*b.heads*headDim) * float64(kept)
	if pass == "bwd" {
		flops *= bwdFlopFactor
	}
	return map[string]any{"pass": pass, "variant": "ptx-bf16", "target": "sm_80", "mask": mask, "seq": b.seq, "batch": b.batch, "heads": b.heads, "head_dim": headDim,
		"ms": ms, "ms_min": msOf(tm.Min()), "ms_max": msOf(tm.Max()), "stat": "median", "runs": len(tm.Times), "warmup": tm.Warmup,
		"tflops": flops / (ms / 1e3) / 1e12, "kept_pairs": kept, "device": device, "inputs": fmt.Sprintf("random normal bf16, seed %d", b.seed), "check": check}
}

// gpuRowText is a row of bench -gpu as a line of text.
func gpuRowText(r map[string]any) string {
	what := "output"
	if r["pass"] == "bwd" {
		what = "gradients (dq and dk/dv kernels timed together)"
	}
	return fmt.Sprintf("bench %s %s on %s: B=%d H=%d D=%d S=%d bf16, %s kernels: median %.3f ms of %d (min %.3f, max %.3f), %.1f effective TFLOP/s; %s %s",
		r["mask"], r["pass"], r["device"], r["batch"], r["heads"], r["head_dim"], r["seq"], r["target"], r["ms"], r["runs"], r["ms_min"], r["ms_max"], r["tflops"], what, r["check"])
}

// benchGPU times the spec's bf16 PTX kernels with CUDA events on random
// inputs (median of the timed launches after the warm-up), reports
// effective TFLOP/s, and then checks what the timed launches left: the
// forward's output against the float64 reference on sampled rows, the
// backward's gradients (dq kernel and dk/dv kernel timed together, on the
// output and lse of the forward and a random dout) on sampled dq rows and
// dk/dv keys. A failed check is reported and makes the command fail.
func benchGPU(s *spec.Spec, b gpuBench, asJSON bool, stdout, progress io.Writer) error {
	fmt.Fprintf(progress, "bench %s: opening the GPU\n", s.Name)
	drv, err := cuda.Open()
	if err != nil {
		return err
	}
	dev, err := drv.Device(0)
	if err != nil {
		return err
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return err
	}
	defer ctx.Release()
	targets := b.targets
	if len(targets) == 0 {
		targets = []ptx.Target{ptx.SM80}
	}
	// sm_80 runs on every GPU; sm_90a only on 9.0 devices, and only when
	// -sm asks for it: a target the device cannot run is refused here
	for _, t := range targets {
		if err := gpu.CanRun(t.Arch(), dev.Major, dev.Minor); err != nil {
			return fmt.Errorf("bench -gpu -sm: %s (%s): %w", dev.Name, dev, err)
		}
	}
	sh := verify.Shape{Batch: b.batch, HeadsQ: b.heads, HeadsKV: b.heads, SeqQ: b.seq, SeqK: b.seq, HeadDim: s.HeadDim, HeadParams: b.hp.flat}
	// a score section's call-time values: random, as the CPU bench's
	sh = verify.WithScore(s.Pattern(), sh, rand.New(rand.NewPCG(b.seed, 0x73636f7265)))
	type fwdKernel struct {
		t ptx.Target
		k *gpurun.Kernel
	}
	var ks []fwdKernel
	for _, t := range targets {
		plan, err := gen.Compile(s, t, nil)
		if err != nil {
			return err
		}
		set, err := ptx.Kernels(plan, ptx.Config{Target: t})
		if err != nil {
			return err
		}
		f := set.Forward
		if _, err := f.Geometry(sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK, 0); err != nil {
			return fmt.Errorf("bench -gpu: the %s kernel: %w", t.Arch(), err)
		}
		k, err := gpurun.GPU(ctx, f)
		if err != nil {
			return err
		}
		ks = append(ks, fwdKernel{t, k})
	}
	var kb *gpurun.BackwardKernel
	if b.bwd {
		// the backward timed is the sm_80 target's (whose kernels every
		// GPU runs, the sm_90a target's included)
		plan, err := gen.Compile(s, ptx.SM80, nil)
		if err != nil {
			return err
		}
		set, err := ptx.Kernels(plan, ptx.Config{Target: ptx.SM80})
		if err != nil {
			return err
		}
		if kb, err = gpurun.GPUBackward(ctx, set.Backward); err != nil {
			return err
		}
	}
	nq, nkv, nl := sh.Sizes()
	r := rand.New(rand.NewPCG(b.seed, 0x62656e6368))
	fmt.Fprintf(progress, "bench %s: random normal bf16 inputs (seed %d)\n", s.Name, b.seed)
	q, kk, v := benchInputs(r, nq), benchInputs(r, nkv), benchInputs(r, nkv)
	out, lse := make([]float32, nq), make([]float32, nl)
	kept := verify.KeptPairs(b.hp.pat, b.seq, b.seq)
	var rows []map[string]any
	failed := false
	record := func(row map[string]any, cerr error) {
		rows = append(rows, row)
		if cerr != nil {
			failed = true
			fmt.Fprintf(progress, "bench %s: the %s of the timed launches is wrong: %v\n", s.Name, map[string]string{"fwd": "output", "bwd": "gradients"}[row["pass"].(string)], cerr)
		}
	}
	if b.fwd {
		for _, fk := range ks {
			clear(out)
			clear(lse)
			fmt.Fprintf(progress, "bench %s: timing the %s bf16 kernel on %s: %d warm-up launches, then the median of %d\n", s.Name, fk.t.Arch(), dev, b.warmup, b.reps)
			tm, err := fk.k.Bench(out, lse, q, kk, v, nil, sh, b.warmup, b.reps)
			if err != nil {
				return err
			}
			var sample []int
			if b.sample > 0 {
				sample = verify.SampleRows(s.Pattern(), nil, sh, b.sample, r)
			}
			fmt.Fprintf(progress, "bench %s: checking the output of the timed launches against the float64 reference\n", s.Name)
			rep, cerr := verify.CheckOutput(s.Pattern(), nil, q, kk, v, sh, out, lse, verify.BF16Kernel, sample)
			check := "ok: " + rep.String()
			if cerr != nil {
				check = "FAIL: " + cerr.Error()
			}
			row := gpuRow("fwd", s.Name, dev.String(), b, s.HeadDim, kept, tm, check)
			if fk.t.Accel {
				row["variant"], row["target"] = "ptx-"+strings.ReplaceAll(fk.t.Arch(), "_", "")+"-bf16", fk.t.Arch()
			}
			record(row, cerr)
		}
	} else if b.bwd {
		fmt.Fprintf(progress, "bench %s: the forward's output and lse for the backward\n", s.Name)
		if err := ks[0].k.Run()(out, lse, q, kk, v, nil, sh); err != nil {
			return err
		}
	}
	if b.bwd {
		dout := benchInputs(r, nq)
		dq, dk, dv := make([]float32, nq), make([]float32, nkv), make([]float32, nkv)
		var dsink []float32
		if s.Score.LearnedSinks {
			dsink = make([]float32, sh.HeadsQ)
		}
		fmt.Fprintf(progress, "bench %s: timing the bf16 backward (dq and dk/dv kernels together) on %s: %d warm-up launches, then the median of %d\n", s.Name, dev, b.warmup, b.reps)
		tm, err := kb.Bench(dq, dk, dv, dout, q, kk, v, out, lse, nil, sh, dsink, b.warmup, b.reps)
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "bench %s: checking the gradients of the timed launches against the float64 reference\n", s.Name)
		rep, cerr := verify.CheckGradSampled(s.Pattern(), nil, q, kk, v, dout, sh, dq, dk, dv, dsink, verify.GradBF16, verify.SampleGradRows(s.Pattern(), nil, sh, b.sample, r))
		check := "ok: " + rep.String()
		if cerr != nil {
			check = "FAIL: " + cerr.Error()
		}
		record(gpuRow("bwd", s.Name, dev.String(), b, s.HeadDim, kept, tm, check), cerr)
	}
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(rows); err != nil {
			return err
		}
	} else {
		for _, row := range rows {
			fmt.Fprintln(stdout, gpuRowText(row))
		}
	}
	if failed {
		return exitError{1}
	}
	return nil
}

// benchVariants parses -variants: the set of variant names to time (every
// CPU target's and naive when list is empty), or a usage error naming an
// unknown one.
func benchVariants(list string) (map[string]bool, error) {
	known := map[string]bool{"naive": true}
	for _, t := range cpu.Targets {
		known[t.Variant.String()] = true
	}
	if list == "" {
		return known, nil
	}
	want := map[string]bool{}
	for _, v := range strings.Split(list, ",") {
		v = strings.TrimSpace(v)
		if !known[v] {
			names := make([]string, 0, len(known))
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, usagef("-variants: unknown variant %q (want some of %s)", v, strings.Join(names, ", "))
		}
		want[v] = true
	}
	return want, nil
}

// benchHeads are the head parameter values of a bench run: every query
// head takes the values of -head-params (headValues).
type benchHeads struct {
	pat  spec.Pattern                // the spec's pattern bound to them (the spec's own without parameters)
	cpu  [mask.MaxHeadParams][]int32 // per parameter, one value per query head (cpu.Args.HeadParams)
	flat []int32                     // head-major (verify.Shape.HeadParams)
	text string                      // name=value, ... ("" without parameters)
}

// benchHeadParams reads -head-params for heads query heads and prints its
// note to progress.
func benchHeadParams(s *spec.Spec, flag string, heads int, progress io.Writer) (benchHeads, error) {
	b := benchHeads{pat: s.Pattern()}
	vals, note, err := headValues(s, flag)
	if err != nil || vals == nil {
		return b, err
	}
	if b.pat, err = b.pat.Bind(vals); err != nil {
		return b, err
	}
	var text []string
	for k, x := range vals {
		text = append(text, fmt.Sprintf("%s=%d", s.HeadParams[k].Name, x))
	}
	for h := 0; h < heads; h++ {
		for _, x := range vals {
			b.flat = append(b.flat, int32(x))
		}
	}
	b.cpu = cpu.SplitHeadParams(b.flat, len(vals), heads)
	b.text = strings.Join(text, ",")
	fmt.Fprintf(progress, "bench %s: %s, at every query head\n", s.Name, note)
	return b, nil
}
