package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/attngen/attngen/cuda"
	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	"github.com/attngen/attngen/verify/gpurun"
)

// benchResult is one line of attngen bench -json.
type benchResult struct {
	Variant    string  `json:"variant"`
	Mask       string  `json:"mask"`
	Seq        int     `json:"seq"`
	Batch      int     `json:"batch"`
	Heads      int     `json:"heads"`
	HeadDim    int     `json:"head_dim"`
	Threads    int     `json:"threads"`
	Ms         float64 `json:"ms"`
	GFlops     float64 `json:"gflops"`
	PeakGFlops float64 `json:"peak_gflops"`
	PctPeak    float64 `json:"pct_peak"`
	KeptPairs  int64   `json:"kept_pairs"`
	Reps       int     `json:"reps"`
	MeasHeads  int     `json:"measured_heads"`
	AllocsOp   float64 `json:"allocs_per_op"`
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	path := fs.String("spec", "", "spec file (YAML)")
	seq := fs.Int("seq", 4096, "sequence length (queries = keys)")
	heads := fs.Int("heads", 8, "query heads (= key/value heads)")
	batch := fs.Int("batch", 1, "batch")
	threadsFlag := fs.String("threads", "1", "thread counts, comma separated (e.g. 1,2)")
	reps := fs.Int("reps", 3, "repetitions per variant; the best is reported")
	naiveHeads := fs.Int("naive-heads", 1, "heads the straightforward Go implementation runs (it is slow; throughput is per pair, so fewer heads measure the same rate)")
	asJSON := fs.Bool("json", false, "print one JSON array")
	gpu := fs.Bool("gpu", false, "benchmark the bf16 PTX kernel on the GPU instead of the CPU variants (use -batch 4 -heads 16 -seq 8192 for PERFORMANCE.md's shape)")
	if err := parseArgs(fs, args, stdout, path); err != nil {
		return err
	}
	if err := positive("seq", *seq, "heads", *heads, "batch", *batch, "reps", *reps, "naive-heads", *naiveHeads); err != nil {
		return err
	}
	if err := atMost("reps", *reps, maxBenchReps, "the best of more repetitions measures nothing new"); err != nil {
		return err
	}
	threads, err := benchThreads(*threadsFlag)
	if err != nil {
		return err
	}
	s, err := loadSpec(*path, stderr)
	if err != nil {
		return err
	}
	if s.Mask.HasDocument() {
		return fmt.Errorf("bench: document masks need run-time ids; benchmark the positional mask instead")
	}
	if *gpu {
		// The device holds the tensors; only the sizes are checked here.
		if _, err := benchElems(*batch, *heads, *seq, s.HeadDim); err != nil {
			return err
		}
		return benchGPU(s, *batch, *heads, *seq, *reps, *asJSON, stdout, stderr)
	}
	if err := benchMemory(*batch, *heads, *seq, s.HeadDim); err != nil {
		return err
	}
	plan, err := gen.Compile(s, gen.CPUTarget, nil)
	if err != nil {
		return err
	}
	mask := plan.Mask()
	D := s.HeadDim
	kept := verify.KeptPairs(s.Pattern(), *seq, *seq)
	r := rand.New(rand.NewPCG(1, 2))
	n := *batch * *heads * *seq * D
	mk := func(n int) []float32 {
		x := make([]float32, n)
		for k := range x {
			x[k] = float32(r.NormFloat64())
		}
		return x
	}
	q, k, v := mk(n), mk(n), mk(n)
	out, lse := make([]float32, n), make([]float32, *batch**heads**seq)
	shape := cpu.Shape{Batch: *batch, HeadsQ: *heads, HeadsKV: *heads, SeqQ: *seq, SeqK: *seq, HeadDim: D}
	flops := func(h int) float64 { return 4 * float64(*batch) * float64(h) * float64(D) * float64(kept) }
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	var results []benchResult
	for _, th := range threads {
		runtime.GOMAXPROCS(th)
		// The FMA peak is measured right before and after each variant and
		// averaged: on shared machines it drifts within a run.
		peakBefore := 0.0
		measurePeak := func() { peakBefore = cpu.PeakGFLOPS(th, 150*time.Millisecond) }
		add := func(variant string, h, reps int, ms float64, allocs float64) {
			peak := (peakBefore + cpu.PeakGFLOPS(th, 150*time.Millisecond)) / 2
			g := flops(h) / (ms / 1e3) / 1e9
			results = append(results, benchResult{Variant: variant, Mask: s.Name, Seq: *seq, Batch: *batch, Heads: *heads, HeadDim: D,
				Threads: th, Ms: ms, GFlops: g, PeakGFlops: peak, PctPeak: 100 * g / peak, KeptPairs: kept, Reps: reps, MeasHeads: h, AllocsOp: allocs})
		}
		for _, t := range cpu.Targets {
			variant := t.Variant
			if !cpu.Supported(variant) {
				continue
			}
			fmt.Fprintf(stderr, "bench %s: %s, %d thread%s, best of %d\n", s.Name, variant, th, plural(th), *reps)
			measurePeak()
			call := func() {
				if err := cpu.Forward(mask, variant, out, lse, q, k, v, nil, shape); err != nil {
					panic("BUG: " + err.Error())
				}
			}
			reps, allocs := *reps, -1.0
			if variant == cpu.PureGo {
				// The scalar path is slow: one timed call, which also warms up.
				reps = 1
			} else {
				call() // warm-up: workers, workspace
			}
			best := time.Duration(1 << 62)
			for rep := 0; rep < reps; rep++ {
				t0 := time.Now()
				call()
				best = min(best, time.Since(t0))
			}
			if variant != cpu.PureGo {
				allocs = testingAllocs(call)
			}
			add(variant.String(), *heads, reps, float64(best.Nanoseconds())/1e6, allocs)
		}
		// The straightforward Go implementation, on naiveHeads heads, with
		// th goroutines over the heads/rows.
		nh := min(max(*naiveHeads, th), *heads)
		ns := verify.Shape{Batch: 1, HeadsQ: nh, HeadsKV: nh, SeqQ: *seq, SeqK: *seq, HeadDim: D}
		fmt.Fprintf(stderr, "bench %s: naive, %d thread%s, %d head%s, once\n", s.Name, th, plural(th), nh, plural(nh))
		measurePeak()
		t0 := time.Now()
		if err := naiveParallel(s.Pattern(), q, k, v, ns, out, th); err != nil {
			return err
		}
		add("naive", nh, 1, float64(time.Since(t0).Nanoseconds())/1e6, -1)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(results)
	}
	fmt.Fprintf(stdout, "bench %s: B=%d H=%d D=%d S=%d, kept pairs %d (density %.4f of causal); effective GFLOP/s = 4*B*H*D*kept/s\n",
		s.Name, *batch, *heads, D, *seq, kept, float64(kept)/(float64(*seq)*float64(*seq+1)/2))
	fmt.Fprintf(stdout, "%-8s %7s %10s %10s %12s %8s %9s\n", "variant", "threads", "ms", "GFLOP/s", "peak GFLOP/s", "% peak", "allocs/op")
	for _, r := range results {
		allocs := "-"
		if r.AllocsOp >= 0 {
			allocs = fmt.Sprintf("%.0f", r.AllocsOp)
		}
		fmt.Fprintf(stdout, "%-8s %7d %10.2f %10.1f %12.1f %7.1f%% %9s\n", r.Variant, r.Threads, r.Ms, r.GFlops, r.PeakGFlops, r.PctPeak, allocs)
	}
	fmt.Fprintf(stdout, "(peak: 12-chain FMA loop on every thread, measured right before and after each line and averaged; naive runs on max(-naive-heads, threads) heads)\n")
	return nil
}

// Bounds of bench's flags, checked before anything is allocated.
const (
	maxBenchReps    = 1000
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

// naiveParallel runs verify.NaiveFP32 split by head over th goroutines.
func naiveParallel(p spec.Pattern, q, k, v []float32, s verify.Shape, out []float32, th int) error {
	D := s.HeadDim
	per := s.SeqQ * D
	errs := make(chan error, s.HeadsQ)
	sem := make(chan struct{}, th)
	for h := 0; h < s.HeadsQ; h++ {
		sem <- struct{}{}
		go func(h int) {
			defer func() { <-sem }()
			one := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: s.SeqQ, SeqK: s.SeqK, HeadDim: D}
			errs <- verify.NaiveFP32(p, nil, q[h*per:(h+1)*per], k[h*per:(h+1)*per], v[h*per:(h+1)*per], one, out[h*per:(h+1)*per], nil)
		}(h)
	}
	for h := 0; h < s.HeadsQ; h++ {
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

// benchGPU times the spec's bf16 PTX kernel with CUDA events (best of
// reps) and reports effective TFLOP/s.
func benchGPU(s *spec.Spec, batch, heads, seq, reps int, asJSON bool, stdout, progress io.Writer) error {
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
	plan, err := gen.Compile(s, ptx.SM80, nil)
	if err != nil {
		return err
	}
	f, err := ptx.GenerateForward(plan, ptx.Config{})
	if err != nil {
		return err
	}
	k, err := gpurun.GPU(ctx, f)
	if err != nil {
		return err
	}
	sh := verify.Shape{Batch: batch, HeadsQ: heads, HeadsKV: heads, SeqQ: seq, SeqK: seq, HeadDim: s.HeadDim}
	fmt.Fprintf(progress, "bench %s: timing the bf16 kernel on %s, best of %d\n", s.Name, dev, max(reps, 5))
	d, err := gpurun.Time(ctx, k, sh, max(reps, 5))
	if err != nil {
		return err
	}
	kept := verify.KeptPairs(s.Pattern(), seq, seq)
	ms := float64(d.Nanoseconds()) / 1e6
	tf := 4 * float64(batch*heads*s.HeadDim) * float64(kept) / (ms / 1e3) / 1e12
	res := map[string]any{"variant": "ptx-bf16", "mask": s.Name, "seq": seq, "batch": batch, "heads": heads, "head_dim": s.HeadDim,
		"ms": ms, "tflops": tf, "kept_pairs": kept, "device": dev.String()}
	if asJSON {
		return json.NewEncoder(stdout).Encode([]any{res})
	}
	fmt.Fprintf(stdout, "bench %s on %s: B=%d H=%d D=%d S=%d bf16: %.3f ms, %.1f effective TFLOP/s\n", s.Name, dev, batch, heads, s.HeadDim, seq, ms, tf)
	return nil
}
