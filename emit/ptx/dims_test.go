package ptx

import (
	"fmt"
	"github.com/attngen/attngen/verify"
	ptxi "github.com/attngen/attngen/verify/ptx"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
)

// dimMasks are the examples the head-dimension checks run at every size:
// a short predicate, the longest predicate (bigbird: the forward's
// bigPred and the dk/dv kernel's 32-row limit), the longest scan
// (neighborhood: the sm_90a kernel without a producer), a soft-cap
// (gemma2) and documents.
var dimMasks = []string{"causal", "bigbird", "neighborhood", "gemma2", "document"}

// otherDims are the head dimensions no example spec has (the examples'
// are 64 and 128, which TestPtxas, TestPtxas12 and TestBackwardPtxas
// assemble for every example).
var otherDims = []int{32, 96, 192, 256}

// splitDimsTested are the {qk, v} pairs (splitDims) the checks run.
var splitDimsTested = [][2]int{{192, 128}}

// dimPlan compiles example name at head dimension d for target tg.
func dimPlan(t *testing.T, name string, d int, tg Target) *gen.Plan {
	return dimPlanV(t, name, d, d, tg)
}

// dimPlanV is dimPlan at head dimension {qk: d, v: dv}.
func dimPlanV(t *testing.T, name string, d, dv int, tg Target) *gen.Plan {
	t.Helper()
	s, err := spec.ParseFile(filepath.Join("../../spec/examples", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s.HeadDim, s.HeadDimV = d, dv
	p, err := gen.Compile(s, tg, nil)
	if err != nil {
		t.Fatalf("%s D=%d %s: %v", name, d, tg, err)
	}
	return p
}

// TestPtxasHeadDims assembles, at every head dimension the examples lack,
// the kernels of dimMasks (bf16): the sm_80 forward and the backward
// module with ptxas 11.8 for sm_80 (ATTNGEN_PTXAS) and ptxas 12.4 for
// sm_90 (ATTNGEN_PTXAS12), and the sm_90a forward with ptxas 12.4
// for sm_90a, and requires no spills, and shared memory within the
// target's limit (164 KiB a CTA on sm_80, 227 KiB on sm_90a). It logs a
// table of registers per kernel.
func TestPtxasHeadDims(t *testing.T) {
	t.Parallel()
	p11, p12 := os.Getenv("ATTNGEN_PTXAS"), os.Getenv("ATTNGEN_PTXAS12")
	if p11 == "" && p12 == "" {
		t.Skip("no ptxas: set ATTNGEN_PTXAS and ATTNGEN_PTXAS12 (scripts/fetch-ptxas.sh fetches them)")
	}
	type run struct {
		ptxas, ver, arch string
		sm               int
	}
	var plain []run
	if p11 != "" {
		// (11.8 for sm_90 reports within 2 registers of sm_80 at every size;
		// TestPtxas and TestBackwardPtxas keep it for the examples)
		plain = append(plain, run{p11, "11.8", "sm_80", 80})
	}
	if p12 != "" {
		plain = append(plain, run{p12, "12.4", "sm_90", 90})
	}
	var dims [][2]int
	for _, d := range otherDims {
		dims = append(dims, [2]int{d, d})
	}
	dims = append(dims, splitDimsTested...)
	masks := dimMasks
	if testing.Short() {
		masks = masks[:2]
	}
	type job struct {
		name    string
		kernels int // reports expected: 1 forward, 2 backward
	}
	var js []job
	var jobs []asmJob
	for _, dd := range dims {
		d, name := dd[0], fmt.Sprint(dd[0])
		if dd[1] != d {
			name = fmt.Sprintf("%d,%d", d, dd[1])
		}
		for _, m := range masks {
			p := dimPlanV(t, m, d, dd[1], SM80)
			for _, rn := range plain {
				tg := Target{SM: rn.sm, Elem: "bf16"}
				k := forwardOf(t, p, Config{Target: tg})
				if k.DynShared > 164<<10 {
					t.Errorf("%s D=%d %s: forward shared memory %d bytes > 164 KiB", m, d, tg, k.DynShared)
				}
				js = append(js, job{fmt.Sprintf("D=%s %s fwd %s ptxas %s", name, m, rn.arch, rn.ver), 1})
				jobs = append(jobs, asmJob{rn.ptxas, rn.arch, k.PTX})
				b := backwardOf(t, p, Config{Target: tg})
				if b.DQShared > 164<<10 || b.DKVShared > 164<<10 {
					t.Errorf("%s D=%d %s: backward shared memory %d, %d bytes > 164 KiB", m, d, tg, b.DQShared, b.DKVShared)
				}
				js = append(js, job{fmt.Sprintf("D=%s %s bwd %s ptxas %s", name, m, rn.arch, rn.ver), 2})
				jobs = append(jobs, asmJob{rn.ptxas, rn.arch, b.PTX})
			}
			if p12 != "" {
				hp := dimPlanV(t, m, d, dd[1], SM90a)
				k := forwardOf(t, hp, Config{Target: SM90a})
				if k.DynShared > 227<<10 {
					t.Errorf("%s D=%d sm_90a: shared memory %d bytes > 227 KiB", m, d, k.DynShared)
				}
				js = append(js, job{fmt.Sprintf("D=%s %s fwd sm_90a ptxas 12.4", name, m), 1})
				jobs = append(jobs, asmJob{p12, "sm_90a", k.PTX})
			}
		}
	}
	var table []string
	for x, r := range assembleAll(t, jobs) {
		name := js[x].name
		if r.err != nil {
			t.Errorf("%s: ptxas failed: %v\n%s", name, r.err, r.log)
			continue
		}
		spills, regs := spillRE.FindAllStringSubmatch(r.log, -1), regsRE.FindAllStringSubmatch(r.log, -1)
		if len(spills) != js[x].kernels || len(regs) != js[x].kernels {
			t.Errorf("%s: want %d kernel reports:\n%s", name, js[x].kernels, r.log)
			continue
		}
		var rs, ss []string
		for k := range spills {
			rs = append(rs, regs[k][1])
			ss = append(ss, spills[k][1]+"/"+spills[k][2])
			if spills[k][1] != "0" || spills[k][2] != "0" {
				t.Errorf("%s: spills:\n%s", name, r.log)
			}
		}
		table = append(table, fmt.Sprintf("%s: registers %s, spill stores/loads %s", name, strings.Join(rs, " "), strings.Join(ss, " ")))
	}
	sort.Strings(table)
	t.Logf("\n%s", strings.Join(table, "\n"))
}

// dimCase is one head dimension of TestInterpHeadDims with its mask.
type dimCase struct {
	d  int
	mk testMask
}

// dimCases give every size the examples lack one mask with partial
// tiles: a window, a sink and window (long empty runs), blocks (full and
// empty tiles), causal.
var dimCases = []dimCase{
	{32, testMask{"window", spec.Pattern{Mask: spec.Window(40), Causal: true}}},
	{96, testMask{"sinkwin", spec.Pattern{Mask: spec.Union(spec.Global(3), spec.Window(17)), Causal: true}}},
	{192, testMask{"block", spec.Pattern{Mask: spec.Block(24)}}},
	{256, testMask{"causal", spec.Pattern{Mask: spec.Full(), Causal: true}}},
}

// shortDims picks the sizes -short runs for a kernel: one each, chosen
// for the paths the other sizes lack.
func shortDims(cases []dimCase, d int) []dimCase {
	if !testing.Short() {
		return cases
	}
	for _, c := range cases {
		if c.d == d {
			return []dimCase{c}
		}
	}
	panic("shortDims: no such size")
}

// TestInterpHeadDims runs every kernel at every head dimension the
// examples lack (dimCases) under the interpreter on small awkward shapes
// against the float64 reference, and checks that non-finite values at
// masked positions reach no output (verify.CheckNonFinite for the
// forwards, checkBackwardNonFinite for the backward). -short runs one size
// per kernel: the sm_80 forward and the backward at 96 (copy lanes left
// idle) and 192 (dk/dv's split columns), the sm_90a forward at 96 (the
// 64-byte swizzle).
func TestInterpHeadDims(t *testing.T) {
	t.Parallel()
	sh := shape{1, 2, 1, 70, 130} // grouped heads, SeqQ < SeqK, not multiples of the tiles
	r := rand.New(rand.NewPCG(95, 96))
	nf := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 37, SeqK: 70}
	t.Run("sm80", func(t *testing.T) {
		for _, c := range shortDims(dimCases, 96) {
			p := compile(t, c.mk.name, c.mk.p.Mask, c.mk.p.Causal, c.d)
			t.Run(fmt.Sprintf("%s/d%d", c.mk.name, c.d), func(t *testing.T) {
				runForward(t, p, Config{SoftLg2: true}, sh, nil, true)
				k, mod := generated(t, p, Config{SoftLg2: true})
				s := nf
				s.HeadDim = c.d
				if err := verify.CheckNonFinite(c.mk.p, hopperRun(t, k, mod), s, r, 1); err != nil {
					t.Error(err)
				}
			})
		}
	})
	t.Run("backward", func(t *testing.T) {
		for _, c := range shortDims(dimCases, 192) {
			p := compile(t, c.mk.name, c.mk.p.Mask, c.mk.p.Causal, c.d)
			t.Run(fmt.Sprintf("%s/d%d", c.mk.name, c.d), func(t *testing.T) {
				res := runBackwardKernels(t, p, Config{SoftLg2: true}, sh, nil, uint64(c.d), nil)
				if bad := checkBackward(t, res, p.Source, BF16, true); bad > 0 {
					t.Fatalf("%d failures", bad)
				}
			})
		}
		if !testing.Short() {
			for k, c := range dimCases[1:3] { // the idle copy lanes and the split columns
				checkBackwardNonFinite(t, k, c.mk, c.d)
			}
		}
	})
	t.Run("sm90a", func(t *testing.T) {
		for _, c := range shortDims(dimCases, 96) {
			p := compileFor(t, SM90a, c.mk.name, c.mk.p.Mask, c.mk.p.Causal, c.d)
			t.Run(fmt.Sprintf("%s/d%d", c.mk.name, c.d), func(t *testing.T) {
				cfg := Config{Target: SM90a, SoftLg2: true}
				runForward(t, p, cfg, fitStride(p, sh), nil, true)
				k, mod := generated(t, p, cfg)
				s := nf
				s.HeadDim = c.d
				if err := verify.CheckNonFinite(c.mk.p, hopperRun(t, k, mod), s, r, 1); err != nil {
					t.Error(err)
				}
			})
		}
	})
}

// TestSASSHeadDims is TestSASSInnerLoop at the head dimensions the
// examples lack: the sm_80 forward of causal and gemma2 (the soft-cap's
// tanh), written for sm_90 and assembled for sm_90a with ptxas 12.4, its
// key-tile loop counted against wantSASSLoop (key tiles of 32 and Q read
// per tile at D = 192 and 256).
func TestSASSHeadDims(t *testing.T) {
	t.Parallel()
	p12 := ptxas12(t)
	dis := nvdisasm(t, p12)
	var cs []cubin
	var jobs []asmJob
	for _, d := range otherDims {
		for _, m := range []string{"causal", "gemma2"} {
			k := forwardOf(t, dimPlan(t, m, d, SM80), Config{Target: Target{SM: 90, Elem: "bf16"}})
			cs = append(cs, cubin{name: fmt.Sprintf("%s D=%d", m, d), k: k})
			jobs = append(jobs, asmJob{p12, "sm_90a", k.PTX})
		}
	}
	cs = assembled(t, cs, jobs)
	lists := disassembled(t, dis, cs)
	for x, c := range cs {
		got, err := readSASSLoop(lists[x])
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := wantSASSLoop(c.k.HeadDim, c.k.Score)
		got.Insts = 0
		if got != want {
			t.Errorf("%s: SASS of the key-tile loop\n every tile: %v\n  want      %v\n conditional: %v\n  want        %v\n outside: %v\n  want    %v",
				c.name, got.Every, want.Every, got.Cond, want.Cond, got.Outside, want.Outside)
			continue
		}
		t.Logf("%s: every tile %v; sanitized partial tiles add %v; outside the loop %v", c.name, got.Every, got.Cond, got.Outside)
	}
}

// splitRun is what runSplit gives: the forward's output and lse, and
// (sm_80 targets) the backward's gradients.
type splitRun struct {
	out, lse, dq, dk, dv []float32
}

// runSplit runs the kernels of plan p (a plain mask: no documents, head
// parameters or score stage) under the interpreter on the given inputs,
// already rounded to bf16: q and k rows of p.HeadDim, v and dout rows of
// dv elements; the backward only for targets that have it.
func runSplit(t *testing.T, p *gen.Plan, cfg Config, sh shape, dv int, q, kk, v, do []float32) splitRun {
	t.Helper()
	fk, fmod := generated(t, p, cfg)
	dev := ptxi.NewDevice()
	alloc := func(n int) uint64 {
		a, err := dev.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	up := func(x []float32) uint64 {
		h := make([]uint16, len(x))
		for i, f := range x {
			h[i] = bf16(f)
		}
		a := alloc(2 * len(h))
		if err := dev.WriteU16(a, h); err != nil {
			t.Fatal(err)
		}
		return a
	}
	rows := sh.batch * sh.hq * sh.sq
	qa, ka, va, doa := up(q), up(kk), up(v), up(do)
	oa, la := alloc(2*rows*dv), alloc(4*rows)
	ptrs := []uint64{qa, ka, va, oa, la}
	if cfg.Target.Accel {
		ptrs = append([]uint64{oa, la}, tensorMaps(t, dev, fk, sh, qa, ka, va)...)
	}
	l, err := fk.Geometry(sh.batch, sh.hq, sh.hkv, sh.sq, sh.sk, 0)
	if err != nil {
		t.Fatal(err)
	}
	args, err := l.Args(ptrs...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Launch(fmod, fk.Name, l.Grid, l.Block, l.DynShared, args...); err != nil {
		t.Fatal(err)
	}
	readF := func(a uint64, n int) []float32 {
		x, err := dev.ReadF32(a, n)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	oh, err := dev.ReadU16(oa, rows*dv)
	if err != nil {
		t.Fatal(err)
	}
	var r splitRun
	for _, h := range oh {
		r.out = append(r.out, fromBF16(h))
	}
	r.lse = readF(la, rows)
	if cfg.Target.Accel {
		return r
	}
	bk, bmod := generatedBackward(t, p, cfg)
	keys := sh.batch * sh.hkv * sh.sk
	dqa, dka, dva, dea := alloc(4*len(q)), alloc(4*len(kk)), alloc(4*keys*dv), alloc(4*rows)
	bl, err := bk.Geometry(sh.batch, sh.hq, sh.hkv, sh.sq, sh.sk, 0)
	if err != nil {
		t.Fatal(err)
	}
	args, err = bl.Args(bl.DQ, qa, ka, va, oa, doa, la, dea, dqa)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Launch(bmod, bk.DQ, bl.DQ.Grid, bl.DQ.Block, bl.DQ.DynShared, args...); err != nil {
		t.Fatal(err)
	}
	args, err = bl.Args(bl.DKV, qa, ka, va, doa, la, dea, dka, dva)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Launch(bmod, bk.DKV, bl.DKV.Grid, bl.DKV.Block, bl.DKV.DynShared, args...); err != nil {
		t.Fatal(err)
	}
	r.dq, r.dk, r.dv = readF(dqa, len(q)), readF(dka, len(kk)), readF(dva, keys*dv)
	return r
}

// TestInterpSplitHeadDims checks the kernels of head_dim {qk: 192, v: 128}
// (q and k rows of 192, v, the output and dout rows of 128) against the
// square head_dim 192 kernels, which the other tests hold to the float64
// reference, on the same inputs with v and dout padded by zero columns to
// 192: the output, lse, dv's first 128 columns and dk are the padded
// run's bit for bit (the same products in the same order; the padding's
// columns add zeros), and dq too but for delta = rowsum(dout * out),
// whose sum the dq kernel splits at Dv/2 (within 1e-5 of dq's largest
// element). The padded run's extra output and dv columns must be 0.
func TestInterpSplitHeadDims(t *testing.T) {
	t.Parallel()
	const D, Dv = 192, 128
	mk := testMask{"sinkwin", spec.Pattern{Mask: spec.Union(spec.Global(3), spec.Window(17)), Causal: true}}
	sh := shape{1, 2, 1, 70, 130}
	rng := rand.New(rand.NewPCG(97, 98))
	draw := func(rows, cols, pad int) (x, padded []float32) {
		for r := 0; r < rows; r++ {
			for c := 0; c < pad; c++ {
				v := float32(0)
				if c < cols {
					v = fromBF16(bf16(float32(rng.NormFloat64())))
					x = append(x, v)
				}
				padded = append(padded, v)
			}
		}
		return x, padded
	}
	rows, keys := sh.batch*sh.hq*sh.sq, sh.batch*sh.hkv*sh.sk
	q, _ := draw(rows, D, D)
	kk, _ := draw(keys, D, D)
	v, vp := draw(keys, Dv, D)
	do, dop := draw(rows, Dv, D)
	for _, tg := range []Target{SM80, SM90a} {
		t.Run(tg.Name(), func(t *testing.T) {
			split, err := gen.Compile(&spec.Spec{Name: mk.name, Mask: mk.p.Mask, Causal: mk.p.Causal, HeadDim: D, HeadDimV: Dv}, tg, nil)
			if err != nil {
				t.Fatal(err)
			}
			square := compileFor(t, tg, mk.name, mk.p.Mask, mk.p.Causal, D)
			cfg := Config{Target: tg, SoftLg2: true}
			if tg.Accel {
				sh = fitStride(split, sh)
			}
			got := runSplit(t, split, cfg, sh, Dv, q, kk, v, do)
			want := runSplit(t, square, cfg, sh, D, q, kk, vp, dop)
			same := func(what string, a []float32, ac int, b []float32, bc int, tol float64) {
				t.Helper()
				bad := 0
				for x := range a {
					r, c := x/ac, x%ac
					w := b[r*bc+c]
					if d := math.Abs(float64(a[x]) - float64(w)); !(d <= tol) && math.Float32bits(a[x]) != math.Float32bits(w) {
						if bad < 5 {
							t.Errorf("%s[%d][%d] = %v, the padded run's %v", what, r, c, a[x], w)
						}
						bad++
					}
				}
				for x := range b {
					if x%bc >= ac && b[x] != 0 {
						t.Fatalf("%s[%d][%d] = %v in the padding", what, x/bc, x%bc, b[x])
					}
				}
				if bad > 0 {
					t.Errorf("%s: %d of %d differ", what, bad, len(a))
				}
			}
			maxAbs := func(x []float32) float64 {
				m := 0.0
				for _, y := range x {
					m = math.Max(m, math.Abs(float64(y)))
				}
				return m
			}
			same("out", got.out, Dv, want.out, D, 0)
			same("lse", got.lse, 1, want.lse, 1, 0)
			if tg.Accel {
				return
			}
			same("dk", got.dk, D, want.dk, D, 0)
			same("dv", got.dv, Dv, want.dv, D, 0)
			same("dq", got.dq, D, want.dq, D, 1e-5*maxAbs(want.dq))
			t.Logf("max |out| %.3g, |dq| %.3g, |dk| %.3g, |dv| %.3g", maxAbs(got.out), maxAbs(got.dq), maxAbs(got.dk), maxAbs(got.dv))
		})
	}
}
