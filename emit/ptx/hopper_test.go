package ptx

import (
	"fmt"
	"github.com/attngen/attngen/runtime/gpu"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// The sm_90a kernel (hopper.go) under the interpreter: the same harness,
// error model and schedule checks as the sm_80 kernel's tests, with q, k
// and v read through tensor maps made by Device.NewTensorMap from the
// kernel's own description (Forward.TensorMaps).

var f16SM90a = Target{SM: 90, Elem: "f16", Accel: true}

// tensorMaps registers the tensor maps of k's call with shape s on the
// interpreter's device and returns their addresses in parameter order.
func tensorMaps(t *testing.T, dev *ptxi.Device, k *Forward, s shape, q, kk, v uint64) []uint64 {
	t.Helper()
	return tensorMapsWith(t, dev, k, s, q, kk, v, gpu.Layout{})
}

// tensorMapsWith is tensorMaps for q, k and v at the strides of ly.
func tensorMapsWith(t *testing.T, dev *ptxi.Device, k *Forward, s shape, q, kk, v uint64, ly gpu.Layout) []uint64 {
	t.Helper()
	tms, err := k.TensorMapsWith(s.batch, s.hq, s.hkv, s.sq, s.sk, q, kk, v, ly)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range k.Params {
		if strings.HasPrefix(p.Name, "tmap_") {
			names = append(names, p.Name)
		}
	}
	if len(names) != len(tms) {
		t.Fatalf("%d tensor-map parameters, TensorMaps gives %d maps", len(names), len(tms))
	}
	var addrs []uint64
	for x, tm := range tms {
		if tm.Param != names[x] {
			t.Fatalf("tensor map %d is for %s, parameter %d is %s", x, tm.Param, x, names[x])
		}
		sw, ok := map[int]ptxi.Swizzle{128: ptxi.Swizzle128B, 64: ptxi.Swizzle64B}[tm.Swizzle]
		if want := hopSwizzle(k.HeadDim); !ok || tm.Swizzle != want {
			t.Fatalf("tensor map %s: swizzle %d, want %d", tm.Param, tm.Swizzle, want)
		}
		a, err := dev.NewTensorMap(ptxi.TensorMap{Global: tm.Global, ElemSize: tm.ElemSize, Dims: tm.Dims[:], Strides: tm.Strides[:], Box: tm.Box[:], Swizzle: sw})
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, a)
	}
	return addrs
}

// hopperPlan compiles an example spec for target tg.
func hopperPlan(t *testing.T, file string, tg Target) (*spec.Spec, *gen.Plan) {
	t.Helper()
	s, err := spec.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.Compile(s, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

// fitStride rounds a shape's sequence lengths up to multiples of the
// plan's residue stride, which the sm_90a kernel needs (TensorMaps); the
// identity layout keeps the shape.
func fitStride(p *gen.Plan, sh shape) shape {
	if st := p.Layout.Stride; p.Layout.Kind == gen.Residue && st > 1 {
		sh.sq = (sh.sq + st - 1) / st * st
		sh.sk = (sh.sk + st - 1) / st * st
	}
	return sh
}

// TestHopperInterpExamples runs every example's sm_90a kernel (bf16) on
// shapes that are not multiples of the tiles, with grouped heads and
// seq_q < seq_k, against the reference; without -short also at the other
// head dimension (64 or 128).
func TestHopperInterpExamples(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	for _, file := range files {
		s, p := hopperPlan(t, file, SM90a)
		dims := []int{s.HeadDim}
		if !testing.Short() {
			dims = append(dims, 192-s.HeadDim)
		}
		for _, d := range dims {
			if d != s.HeadDim {
				p = compilePattern(t, SM90a, s.Name, s.Pattern(), d)
			}
			for _, sh := range shapes {
				sh := fitStride(p, sh)
				var ids []int32
				switch {
				case p.UsesTree():
					ids = treeParents(sh.sk, uint64(sh.sq))
				case p.Pred.UsesDocs():
					ids = docIDs(sh.sk)
				}
				t.Run(fmt.Sprintf("%s/d%d/%v", s.Name, d, sh), func(t *testing.T) {
					runForwardDocs(t, p, Config{Target: SM90a, SoftLg2: true}, sh, nil, true, ids)
				})
			}
		}
	}
}

// TestHopperResidueShapes: a residue-layout kernel (the dilated example)
// refuses, with an error naming the stride, calls whose sequence lengths
// are not multiples of the stride, in Geometry and in TensorMaps.
func TestHopperResidueShapes(t *testing.T) {
	_, p := hopperPlan(t, "../../spec/examples/dilated.yaml", SM90a)
	if p.Layout.Kind != gen.Residue || p.Layout.Stride != 8 {
		t.Fatalf("the dilated example plans layout %s", layoutText(p.Layout))
	}
	k, err := GenerateForward(p, Config{Target: SM90a})
	if err != nil {
		t.Fatal(err)
	}
	for _, sq := range []int{70, 72} {
		_, gerr := k.Geometry(1, 2, 1, sq, 130, 0)
		_, terr := k.TensorMaps(1, 2, 1, sq, 130, 1<<20, 2<<20, 3<<20)
		for _, err := range []error{gerr, terr} {
			if err == nil || !strings.Contains(err.Error(), "multiples of the stride") {
				t.Errorf("seq %d/130 with stride 8: error %v", sq, err)
			}
		}
	}
	if _, err := k.Geometry(1, 2, 1, 72, 136, 0); err != nil {
		t.Error(err)
	}
}

// TestHopperInterpRandomMasks runs random masks (some in the residue layout) at
// head_dim 64, and 128 for every other one without -short.
func TestHopperInterpRandomMasks(t *testing.T) {
	t.Parallel()
	n := 0
	for k, mk := range randomMasks(7, 16) {
		dims := []int{64}
		if !testing.Short() && k%2 == 1 {
			dims = append(dims, 128)
		}
		for _, d := range dims {
			p := compileFor(t, SM90a, mk.name, mk.p.Mask, mk.p.Causal, d)
			if p.Layout.Kind == gen.Residue {
				n++
			}
			for _, sh := range []shape{{1, 2, 1, 150, 200}, {1, 1, 1, 1, 150}} {
				sh := fitStride(p, sh)
				t.Run(fmt.Sprintf("%s/d%d/%v", mk.name, d, sh), func(t *testing.T) {
					t.Logf("%s", mk.p)
					runForward(t, p, Config{Target: SM90a, SoftLg2: true}, sh, nil, true)
				})
			}
		}
	}
	if n < 2 {
		t.Fatalf("only %d random masks with the residue layout", n)
	}
}

// TestHopperInterpDocuments runs document masks (random ones and the
// examples').
func TestHopperInterpDocuments(t *testing.T) {
	t.Parallel()
	masks := randomDocMasks(8, 4)
	for _, m := range exampleMasks(t) {
		if m.p.Mask.HasDocument() {
			masks = append(masks, m)
		}
	}
	ids := docIDs(200)
	for k, mk := range masks {
		dims := []int{64}
		if !testing.Short() && k%2 == 1 {
			dims = append(dims, 128)
		}
		for _, d := range dims {
			p := compileFor(t, SM90a, mk.name, mk.p.Mask, mk.p.Causal, d)
			for _, sh := range []shape{{1, 2, 1, 150, 200}, {2, 1, 1, 1, 200}} {
				t.Run(fmt.Sprintf("%s/d%d/%v", mk.name, d, sh), func(t *testing.T) {
					t.Logf("%s", mk.p)
					runForwardDocs(t, p, Config{Target: SM90a, SoftLg2: true}, sh, nil, true, ids)
				})
			}
		}
	}
}

// TestHopperInterpF16 runs f16 kernels at both head dimensions.
func TestHopperInterpF16(t *testing.T) {
	for k, mk := range randomMasks(9, 4) {
		d := 64 * (k%2 + 1)
		p := compileFor(t, f16SM90a, mk.name, mk.p.Mask, mk.p.Causal, d)
		t.Run(fmt.Sprintf("%s/d%d", mk.name, d), func(t *testing.T) {
			t.Logf("%s", mk.p)
			runForward(t, p, Config{Target: f16SM90a, SoftLg2: true}, fitStride(p, shape{1, 2, 1, 90, 150}), nil, true)
		})
	}
}

// TestHopperCatchesWrongMask: the comparison sees a mask off by one key.
func TestHopperCatchesWrongMask(t *testing.T) {
	p := compileFor(t, SM90a, "window40", spec.Window(40), true, 64)
	wrong := spec.Pattern{Mask: spec.Window(41), Causal: true}
	if bad := runForward(t, p, Config{Target: SM90a, SoftLg2: true}, shape{1, 1, 1, 100, 130}, &wrong, false); bad == 0 {
		t.Fatal("a kernel for window 40 passed as window 41")
	}
}

// TestHopperVisits counts the key tiles the persistent kernel visits by
// its barriers: one per CTA with work after the mbarrier initialization,
// then per work item one per visited tile and one more per partial tile
// (sanitize's vote on finite data), none for items without tiles (but
// stageRow's two in every item of a kernel that stages), against
// the scan of the plan's hull and class programs; on Geometry's grid (one
// CTA per item) and on two CTAs.
func TestHopperVisits(t *testing.T) {
	t.Parallel()
	masks := append(append(exampleMasks(t), randomMasks(4, 16)...), randomDocMasks(5, 4)...)
	// with a producer warpgroup (hopProducer: at head_dim 64 every kernel
	// but those of long scan programs): per tile the consumers' release of
	// the stage (they pass no barrier of their own between tiles), per item
	// their release of Q; without one, per tile only
	perItem := func(p *gen.Plan, tiles, partial int) int64 {
		if hopProducer(p, 64) {
			return int64(tiles + partial + 1)
		}
		return int64(tiles + partial)
	}
	setup := func(ctas, items int) int64 { return int64(min(ctas, items)) }
	checkVisits(t, SM90a, masks, fitStride, perItem, 0, setup)
	if !testing.Short() {
		checkVisits(t, SM90a, masks[:8], fitStride, perItem, 2, setup)
	}
}

// hopperRun is a verify.Run of a sm_90a kernel k (parsed: mod) under the
// interpreter.
func hopperRun(t *testing.T, k *Forward, mod *ptxi.Module) verify.Run {
	// (the sm_80 forward too: TestInterpHeadDims)
	return func(out, lse, q, kk, v []float32, ids []int32, s verify.Shape) error {
		dev := ptxi.NewDevice()
		nq, nkv, nl := s.Sizes()
		toElem, fromElem := verify.BF16, verify.FromBF16
		if k.Elem == F16 {
			toElem, fromElem = verify.F16, verify.FromF16
		}
		var in []uint64
		for _, x := range [][]float32{q[:nq], kk[:nkv], v[:nkv]} {
			h := make([]uint16, len(x))
			for i, f := range x {
				h[i] = toElem(f)
			}
			a, err := dev.Alloc(2 * len(h))
			if err != nil {
				return err
			}
			if err := dev.WriteU16(a, h); err != nil {
				return err
			}
			in = append(in, a)
		}
		oa, err := dev.Alloc(2 * nq)
		if err != nil {
			return err
		}
		la, err := dev.Alloc(4 * nl)
		if err != nil {
			return err
		}
		poison(t, dev, oa, la, nq, nl)
		ptrs := []uint64{oa, la}
		if !k.Target.Accel { // the sm_80 kernel takes q, k and v by address
			ptrs = append(in[:3:3], oa, la)
		}
		alloc := func(n int) uint64 {
			a, err := dev.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		switch {
		case ids != nil && paramsHave(k.Params, "tree_lo"):
			ptrs = append(ptrs, treeArrays(t, dev, alloc, ids[:s.SeqK])...)
		case ids != nil:
			ptrs = append(ptrs, docArrays(t, dev, alloc, ids[:s.SeqK])...)
		}
		ptrs = append(ptrs, headArray(t, dev, alloc, s.HeadParams)...)
		sp, softCap := scoreArrays(t, dev, alloc, k.Params, k.Score, s)
		ptrs = append(ptrs, sp...)
		sh := shape{s.Batch, s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK}
		if k.Target.Accel {
			ptrs = append(ptrs, tensorMaps(t, dev, k, sh, in[0], in[1], in[2])...)
		}
		l, err := k.Geometry(s.Batch, s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK, s.Scale)
		if err != nil {
			return err
		}
		l.SoftCap = softCap
		args, err := l.Args(ptrs...)
		if err != nil {
			return err
		}
		if _, err := dev.Launch(mod, k.Name, l.Grid, l.Block, l.DynShared, args...); err != nil {
			return err
		}
		oh, err := dev.ReadU16(oa, nq)
		if err != nil {
			return err
		}
		for i, h := range oh {
			out[i] = fromElem(h)
		}
		if lse != nil {
			lf, err := dev.ReadF32(la, nl)
			if err != nil {
				return err
			}
			copy(lse, lf)
		}
		return nil
	}
}

// TestHopperNonFinite: NaN and infinities at masked positions never reach
// an output of the sm_90a kernel, and kept ones give the reference's kinds
// of results (verify.CheckNonFinite, as for the sm_80 kernel in
// verify/gpurun).
func TestHopperNonFinite(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(91, 92))
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	for _, file := range files {
		s, p := hopperPlan(t, file, SM90a)
		k, mod := generated(t, p, Config{Target: SM90a, SoftLg2: true})
		fit := fitStride(p, shape{1, 2, 1, 37, 70})
		sh := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: fit.sq, SeqK: fit.sk, HeadDim: s.HeadDim}
		trials := 4
		if testing.Short() {
			trials = 2
		}
		if err := verify.CheckNonFinite(s.Pattern(), hopperRun(t, k, mod), sh, r, trials); err != nil {
			t.Errorf("%s: %v", filepath.Base(file), err)
		}
	}
}

// TestHopperHeader checks the module header, the shared-memory alignment,
// the parameters and the tensor-map description.
func TestHopperHeader(t *testing.T) {
	for _, tg := range []Target{SM90a, f16SM90a} {
		p := compileFor(t, tg, "causal", spec.Full(), true, 128)
		k, err := GenerateForward(p, Config{Target: tg})
		if err != nil {
			t.Fatal(err)
		}
		// S and restore are m64n64k16 (64 keys, 64 columns), P V m64n128k16
		for _, want := range []string{".version 8.3\n.target sm_90a\n", ".extern .shared .align 1024 .b8 smem[];", "wgmma.mma_async.sync.aligned.m64n64k16.f32." + tg.Elem, "wgmma.mma_async.sync.aligned.m64n128k16.f32." + tg.Elem, "cp.async.bulk.tensor.4d", "mbarrier.try_wait.parity"} {
			if !strings.Contains(k.PTX, want) {
				t.Errorf("%s: no %q in the module", tg, want)
			}
		}
		if tg.Name() != "ptx-sm90a-"+tg.Elem || tg.Arch() != "sm_90a" {
			t.Errorf("target names %s, %s", tg.Name(), tg.Arch())
		}
		var names []string
		for _, p := range k.Params {
			names = append(names, p.Name)
		}
		if got, want := strings.Join(names, " "), "o lse tmap_q tmap_k tmap_v seq_lens_q seq_lens_k q_pos k_pos seq_q seq_k heads_q heads_kv scale_log2 stride_o_batch stride_o_head stride_o_pos batch"; got != want {
			t.Errorf("parameters %s, want %s", got, want)
		}
		// Q 32 KiB (128 rows), three stages of K and V 96 KiB, 4 mbarriers,
		// two sets of 8 vote words (the producer design)
		if k.DynShared != 2*16384+6*16384+32+2*32 || k.Threads != 384 {
			t.Errorf("dynamic shared memory %d", k.DynShared)
		}
		tms, err := k.TensorMaps(2, 4, 2, 100, 300, 1<<20, 2<<20, 3<<20)
		if err != nil {
			t.Fatal(err)
		}
		v := tms[2]
		if v.Tensor != "v" || v.Global != 3<<20 || fmt.Sprint(v.Dims, v.Strides, v.Box) != fmt.Sprint([]uint64{128, 300, 2, 2}, []uint64{256, 300 * 256, 2 * 300 * 256}, []uint32{64, 64, 1, 1}) {
			t.Errorf("tensor map of v: %+v", v)
		}
		if _, err := (&Forward{Target: SM80}).TensorMaps(1, 1, 1, 1, 1, 0, 0, 0); err == nil {
			t.Error("an sm_80 kernel described tensor maps")
		}
	}
	if err := (Target{SM: 80, Elem: "bf16", Accel: true}).Check(); err == nil || !strings.Contains(err.Error(), "sm_80a") {
		t.Errorf("sm_80a: %v", err)
	}
	if err := SM80.Check(); err != nil {
		t.Errorf("sm_80 after the wgmma ops joined the table: %v", err)
	}
}

func TestHopperDeterministic(t *testing.T) {
	for _, name := range exampleNames(t) {
		_, p := hopperPlan(t, "../../spec/examples/"+name+".yaml", SM90a)
		a, err := GenerateForward(p, Config{Target: SM90a})
		if err != nil {
			t.Fatal(err)
		}
		b, err := GenerateForward(p, Config{Target: SM90a})
		if err != nil {
			t.Fatal(err)
		}
		if a.PTX != b.PTX {
			t.Errorf("%s: two generations differ", name)
		}
	}
}

// assembleHopper assembles every example's sm_90a kernel (bf16 and f16)
// with ptxas 12 for sm_90a (assembleAll: once per test process).
func assembleHopper(t *testing.T, ptxas string) []cubin {
	t.Helper()
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	var cs []cubin
	var jobs []asmJob
	for _, f := range files {
		for _, tg := range []Target{SM90a, f16SM90a} {
			_, p := hopperPlan(t, f, tg)
			k := forwardOf(t, p, Config{Target: tg})
			cs = append(cs, cubin{name: fmt.Sprintf("%s %s %s", filepath.Base(f), tg.Elem, tg.Arch()), k: k})
			jobs = append(jobs, asmJob{ptxas, tg.Arch(), k.PTX})
		}
	}
	return assembled(t, cs, jobs)
}

// ptxasPlain matches the lines of ptxas -v that report resources; any
// other line is a remark (a wgmma ptxas had to serialize is reported as
// "ptxas info : (C7515) Potential Performance Loss: ...").
var ptxasPlain = regexp.MustCompile(`^(ptxas info\s+: (\d+ bytes gmem|Compiling entry function '[^']+' for 'sm_90a'|Function properties for \S+|Used \d+ registers(, \d+ bytes \S+)*)|\s+\d+ bytes stack frame, \d+ bytes spill stores, \d+ bytes spill loads)$`)

// TestHopperPtxas12 assembles every example's sm_90a kernel (bf16, f16)
// with ptxas 12 and requires success, no spills, and no ptxas remark.
func TestHopperPtxas12(t *testing.T) {
	t.Parallel()
	p := ptxas12(t)
	for _, c := range assembleHopper(t, p) {
		m := spillRE.FindStringSubmatch(c.log)
		if m == nil || m[1] != "0" || m[2] != "0" {
			t.Errorf("%s: spills or no report:\n%s", c.name, c.log)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(c.log), "\n") {
			if !ptxasPlain.MatchString(line) {
				t.Errorf("%s: ptxas says: %s", c.name, line)
			}
		}
		regs := regsRE.FindStringSubmatch(c.log)
		if regs == nil {
			t.Fatalf("%s: no register count:\n%s", c.name, c.log)
		}
		t.Logf("%s: %s registers, no spills, %d bytes dynamic shared memory", c.name, regs[1], c.k.DynShared)
	}
}

// wantHopperLoop is what the sm_90a kernel's structure implies per warp
// and key tile of tk = hopTileK(d) keys, head dimension d:
//
//   - Every tile: O += P V, tk/16 HGMMA.64xdx16; the exponentials (a
//     thread holds 2 rows x tk/4 scores), tk/2 + 2 MUFU.EX2.
//   - Conditional: S = Q K^T of the next tile (none after the last), d/16
//     HGMMA.64xtkx16, in flight during this tile's softmax; restore's
//     product for sanitized tiles, (d/64)*(tk/16) HGMMA.64x64x16; the copies
//     of the tile after next, 2*d/64 UTMALDG (K and V, one box per 64
//     columns).
//   - Outside: the first tile's S, d/16 HGMMA; the copies of Q and of the
//     first two tiles, 5*d/64 UTMALDG.
//   - One WARPGROUP.DEPBAR per wgmma.wait_group: every tile one (after P
//     V), sanitized tiles d/64 more (restore, a box at a time), one outside
//     (the first S). More would mean ptxas serialized the wgmma (it waits
//     after each one), which it does not always report.
//
// With a producer warpgroup (hopProducer) the consumers' loop issues no
// copy: the producer's code, outside it, holds the copies of Q and one
// site for a K/V tile, 3*d/64 UTMALDG. The score stage adds its MUFU.EX2
// as on sm_80 (scoreEX2).
func wantHopperLoop(d int, producer bool, sc mask.Score) sassLoop {
	tk := hopTileK(d)
	l := sassLoop{
		Every:   sassCounts{HGMMA: tk / 16, DEPBAR: 1, EX2: tk/2 + 2},
		Cond:    sassCounts{HGMMA: d/16 + d/64*(tk/16), DEPBAR: d / 64, UTMALDG: 2 * d / 64},
		Outside: sassCounts{HGMMA: d / 16, DEPBAR: 1, UTMALDG: 5 * d / 64},
	}
	if producer {
		l.Cond.UTMALDG, l.Outside.UTMALDG = 0, 3*d/64
	}
	scoreEX2(&l, tk, sc)
	return l
}

// TestHopperSASS disassembles every example's sm_90a kernel and checks the
// key-tile loop's counts against wantHopperLoop.
func TestHopperSASS(t *testing.T) {
	t.Parallel()
	p := ptxas12(t)
	dis := nvdisasm(t, p)
	seen := map[string]bool{}
	cs := assembleHopper(t, p)
	lists := disassembled(t, dis, cs)
	for x, c := range cs {
		got, err := readSASSLoop(lists[x])
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		producer := c.k.Threads > hopThreads
		want := wantHopperLoop(c.k.HeadDim, producer, c.k.Score)
		insts := got.Insts
		got.Insts = 0
		if got != want {
			t.Errorf("%s (D=%d): SASS of the key-tile loop\n every tile: %v\n  want      %v\n conditional: %v\n  want        %v\n outside: %v\n  want    %v",
				c.name, c.k.HeadDim, got.Every, want.Every, got.Cond, want.Cond, got.Outside, want.Outside)
			continue
		}
		if key := fmt.Sprint(c.k.HeadDim, producer); !seen[key] {
			seen[key] = true
			t.Logf("%s (D=%d, producer %v): %d instructions in the loop; every tile %v; conditional %v; outside %v", c.name, c.k.HeadDim, producer, insts, got.Every, got.Cond, got.Outside)
		}
	}
}

// TestHopperExtremeSpecsGenerate: the extreme specs of
// TestExtremeSpecsGenerate compile into plans and sm_90a kernels.
func TestHopperExtremeSpecsGenerate(t *testing.T) {
	t.Parallel()
	n := 240
	if testing.Short() {
		n = 80
	}
	for _, s := range extremeSpecs(t, 1, n) {
		for _, tg := range []Target{SM90a, f16SM90a} {
			p, err := gen.Compile(s, tg, nil)
			if err != nil {
				t.Errorf("%s (causal %v): compile for %s: %v", s.Mask, s.Causal, tg, err)
				continue
			}
			if _, err := GenerateForward(p, Config{Target: tg}); err != nil {
				t.Errorf("%s (causal %v): generate for %s: %v", s.Mask, s.Causal, tg, err)
			}
		}
	}
}

// TestHopperExtremeKernels runs the sm_90a kernels of the extreme specs of
// TestExtremeKernels under the interpreter against the reference. Residue
// layouts run on the shapes rounded up to their stride where that stays
// small; larger strides must be refused by Geometry with an error naming
// the stride.
func TestHopperExtremeKernels(t *testing.T) {
	t.Parallel()
	for k, c := range extremeKernelSpecs {
		s := parseSpec(t, fmt.Sprintf("ext%d", k), c.causal, 64, c.mask)
		cfg := Config{Target: SM90a, SoftLg2: true}
		if k%3 == 2 {
			cfg.Target = f16SM90a
		}
		p, err := gen.Compile(s, cfg.Target, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range []shape{{1, 2, 1, 150, 200}, {1, 1, 1, 1, 150}} {
			fit := fitStride(p, sh)
			t.Run(fmt.Sprintf("%d/%v", k, fit), func(t *testing.T) {
				t.Logf("causal %v, %s, layout %s", c.causal, c.mask, layoutText(p.Layout))
				if fit.sk > 2048 {
					kk, err := GenerateForward(p, cfg)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := kk.Geometry(sh.batch, sh.hq, sh.hkv, sh.sq, sh.sk, 0); err == nil || !strings.Contains(err.Error(), "multiples of the stride") {
						t.Fatalf("shape %v, stride %d: error %v", sh, p.Layout.Stride, err)
					}
					return
				}
				var ids []int32
				switch {
				case p.UsesTree():
					ids = treeParents(fit.sk, uint64(fit.sq))
				case p.Pred.UsesDocs():
					ids = docIDs(fit.sk)
				}
				runForwardDocs(t, p, cfg, fit, nil, true, ids)
			})
		}
	}
}

func paramsHave(ps []Param, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// sm90aRecorded reports why a results document (docs/gpu-results.md) does
// not record a passing GPU verification of the sm_90a forward: the section
// gpu-check.sh run-verify-sm90a writes, "# GPU verification of the sm_90a
// forward", with its verify results and the verdict "every step passed".
func sm90aRecorded(doc string) error {
	const head = "# GPU verification of the sm_90a forward\n"
	i := strings.Index(doc, head)
	if i < 0 {
		return fmt.Errorf("no section %q", strings.TrimSpace(head))
	}
	sec := doc[i+len(head):]
	if j := strings.Index(sec, "\n# "); j >= 0 {
		sec = sec[:j]
	}
	switch {
	case !strings.Contains(sec, "## attngen verify -gpu -sm 90a"):
		return fmt.Errorf("the sm_90a section has no verify results")
	case !strings.Contains(sec, "## verdict\n\nevery step passed"):
		return fmt.Errorf("the sm_90a section's verdict is not \"every step passed\"")
	}
	return nil
}

// TestSM90aVerifiedRecorded: SM90aVerified, which makes the sm_90a kernel
// the default of generated packages on 9.0 devices, may be set only when
// docs/gpu-results.md records a passing sm_90a GPU verification; the
// reading of that record is checked on documents that do and do not.
func TestSM90aVerifiedRecorded(t *testing.T) {
	good := "# GPU verification\n\n## verdict\n\nFAILED\n\n# GPU verification of the sm_90a forward\n\n- date: x\n\n## attngen verify -gpu -sm 90a\n```\ncausal: all checks passed\n```\n## verdict\n\nevery step passed (100s)\n"
	if err := sm90aRecorded(good); err != nil {
		t.Errorf("a passing record: %v", err)
	}
	for _, bad := range []string{
		"",
		strings.Replace(good, "every step passed (100s)", "FAILED (100s):\n- x", 1),
		strings.Replace(good, "## attngen verify -gpu -sm 90a", "## something else", 1),
		// the verdict belongs to another section
		"# GPU verification of the sm_90a forward\n\n## attngen verify -gpu -sm 90a\n## verdict\n\nFAILED\n\n# GPU timing\n\n## verdict\n\nevery step passed\n",
	} {
		if sm90aRecorded(bad) == nil {
			t.Errorf("accepted as a passing record:\n%s", bad)
		}
	}
	if !SM90aVerified {
		return
	}
	doc, err := os.ReadFile("../../docs/gpu-results.md")
	if err != nil {
		t.Fatalf("SM90aVerified is set, but: %v", err)
	}
	if err := sm90aRecorded(string(doc)); err != nil {
		t.Fatalf("SM90aVerified is set, but docs/gpu-results.md does not record a passing sm_90a verification: %v", err)
	}
}

// TestHopperPersistentGrids runs the persistent kernel on grids of 1, 2
// and 3 CTAs (fewer than the shapes' work items) and on more CTAs than
// work items, on random awkward shapes, against the reference (outputs
// poisoned before every launch).
func TestHopperPersistentGrids(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(101, 102))
	masks := exampleMasks(t)
	keep := map[string]bool{"causal": true, "bigbird": true, "dilated": true, "document": true, "streaming": true, "window": true}
	var ms []testMask
	for _, m := range masks {
		if keep[m.name] {
			ms = append(ms, m)
		}
	}
	ms = append(ms, randomMasks(12, 3)...)
	if len(ms) < 8 {
		t.Fatalf("only %d masks", len(ms))
	}
	for k, mk := range ms {
		d := 64
		if !testing.Short() && k%4 == 3 {
			d = 128
		}
		p := compileFor(t, SM90a, mk.name, mk.p.Mask, mk.p.Causal, d)
		hkv := 1 + r.IntN(2)
		sq := 1 + r.IntN(300)
		sh := fitStride(p, shape{1 + r.IntN(2), hkv * (1 + r.IntN(2)), hkv, sq, sq + r.IntN(120)})
		var ids []int32
		switch {
		case p.UsesTree():
			ids = treeParents(sh.sk, uint64(sh.sq))
		case p.Pred.UsesDocs():
			ids = docIDs(sh.sk)
		}
		k, err := GenerateForward(p, Config{Target: SM90a, SoftLg2: true})
		if err != nil {
			t.Fatal(err)
		}
		l, err := k.Geometry(sh.batch, sh.hq, sh.hkv, sh.sq, sh.sk, 0)
		if err != nil {
			t.Fatal(err)
		}
		items := l.Grid[0]
		st := max(p.Layout.Stride, 1)
		if want := (sh.sq/st + hopTileQ - 1) / hopTileQ * sh.hq * sh.batch * st; items != want {
			t.Fatalf("%s %v: %d work items, want %d", mk.name, sh, items, want)
		}
		for _, g := range []int{1, 2, 3, items + 2} {
			t.Run(fmt.Sprintf("%s/d%d/%v/grid%d_of_%d", mk.name, d, sh, g, items), func(t *testing.T) {
				t.Logf("%s", mk.p)
				runForwardGrid(t, p, Config{Target: SM90a, SoftLg2: true}, sh, nil, true, ids, nil, g)
			})
		}
	}
}

// TestHopperPersistentOrder reads the order in which each CTA of the
// persistent kernel writes its outputs (Device.OnGlobalStore) and checks
// it against the work list written out here: query tiles heaviest first
// (last first for causal and window, whose hull grows with the query;
// first first for bigbird, whose first queries are global), and within a
// query tile the heads of one batch element consecutive, CTA b taking
// items b, b+G, ... of that list. It also checks the weights: along the
// order, the kernel's scan visits no fewer key tiles than in the reverse
// order's position-weighted sum.
func TestHopperPersistentOrder(t *testing.T) {
	t.Parallel()
	lastFirst := map[string]bool{"causal": true, "window": true, "bigbird": false, "longformer": false}
	for _, m := range exampleMasks(t) {
		want, ok := lastFirst[m.name]
		if !ok {
			continue
		}
		p := compileFor(t, SM90a, m.name, m.p.Mask, m.p.Causal, 64)
		if got := heaviestFirst(p); got != want {
			t.Errorf("%s: heaviestFirst %v, want %v", m.name, got, want)
		}
		sh := shape{2, 3, 1, 530, 600}
		tiles := (sh.sq + hopTileQ - 1) / hopTileQ
		var order [][3]int // query tile, head, batch
		for rank := 0; rank < tiles; rank++ {
			qt := rank
			if want {
				qt = tiles - 1 - rank
			}
			for b := 0; b < sh.batch; b++ {
				for h := 0; h < sh.hq; h++ {
					order = append(order, [3]int{qt, h, b})
				}
			}
		}
		for _, g := range []int{1, 4} {
			seen := make([][][3]int, g) // per CTA, the items in the order it stored them
			launchOn(t, p, SM90a, sh, nil, nil, g, func(dev *ptxi.Device, o uint64) {
				dev.OnGlobalStore = func(cta [3]int, a uint64, n int) {
					if a < o || a >= o+uint64(2*sh.batch*sh.hq*sh.sq*p.HeadDim) {
						return // lse
					}
					row := int(a-o) / (2 * p.HeadDim)
					it := [3]int{row % sh.sq / hopTileQ, row / sh.sq % sh.hq, row / sh.sq / sh.hq}
					if s := seen[cta[0]]; len(s) == 0 || s[len(s)-1] != it {
						seen[cta[0]] = append(s, it)
					}
				}
			})
			for b := 0; b < g; b++ {
				var exp [][3]int
				for i := b; i < len(order); i += g {
					exp = append(exp, order[i])
				}
				if fmt.Sprint(seen[b]) != fmt.Sprint(exp) {
					t.Errorf("%s, grid %d: CTA %d wrote items (query tile, head, batch)\n %v\nwant\n %v", m.name, g, b, seen[b], exp)
				}
			}
		}
		// heaviest first: the order's position-weighted visits are at most the reverse order's
		var fwd, rev int64
		for i, it := range order {
			q0 := it[0]*hopTileQ + sh.sk - sh.sq
			q1 := min(q0+hopTileQ-1, sh.sk-1)
			w := int64(len(planTiles(p, q0, q1, sh.sk, nil)))
			fwd += int64(i/(sh.batch*sh.hq)) * w
			rev += int64(tiles-1-i/(sh.batch*sh.hq)) * w
		}
		if fwd > rev {
			t.Errorf("%s: the order puts less work first (position-weighted visits %d, reversed %d)", m.name, fwd, rev)
		}
		t.Logf("%s: last first %v; position-weighted key tiles %d (reversed order %d)", m.name, want, fwd, rev)
	}
}

// TestHopperProducerPtxas12 assembles every example's sm_90a kernel at
// head dimensions 64 and 128 (bf16) with ptxas 12 and requires no spills
// and no remark, and, for the kernels with a producer warpgroup
// (hopProducer), that ptxas kept both setmaxnreg (two USETMAXREG in the
// SASS; ptxas 12.4 drops them without .minnctapersm) and that the
// consumers' registers stay within their budget (hopRegs).
func TestHopperProducerPtxas12(t *testing.T) {
	t.Parallel()
	ptxas := ptxas12(t)
	dis := nvdisasm(t, ptxas)
	reg := regexp.MustCompile(`\bR(\d+)\b`)
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	producers := map[int]int{}
	var cs []cubin
	var jobs []asmJob
	var plans []*gen.Plan
	for _, file := range files {
		s, err := spec.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []int{64, 128} {
			p := compilePattern(t, SM90a, s.Name, s.Pattern(), d)
			k := forwardOf(t, p, Config{Target: SM90a})
			cs = append(cs, cubin{name: fmt.Sprintf("%s_d%d", s.Name, d), k: k})
			jobs = append(jobs, asmJob{ptxas, "sm_90a", k.PTX})
			plans = append(plans, p)
		}
	}
	cs = assembled(t, cs, jobs)
	lists := disassembled(t, dis, cs)
	for x, c := range cs {
		p, k, d, name, log := plans[x], c.k, c.k.HeadDim, c.name, c.log
		if m := spillRE.FindStringSubmatch(log); m == nil || m[1] != "0" || m[2] != "0" {
			t.Errorf("%s: spills or no report:\n%s", name, log)
		}
		for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
			if !ptxasPlain.MatchString(line) {
				t.Errorf("%s: ptxas says: %s", name, line)
			}
		}
		sass := lists[x]
		top := 0
		for _, m := range reg.FindAllStringSubmatch(sass, -1) {
			var r int
			fmt.Sscan(m[1], &r)
			top = max(top, r)
		}
		prod := hopProducer(p, d)
		n := strings.Count(sass, "USETMAXREG")
		switch {
		case prod != (k.Threads == hopThreads+128) || prod != strings.Contains(k.PTX, ".minnctapersm 1"):
			t.Errorf("%s: producer %v, but %d threads", name, prod, k.Threads)
		case prod && n != 2:
			t.Errorf("%s: %d USETMAXREG in the SASS, want 2 (ptxas dropped setmaxnreg)", name, n)
		case !prod && n != 0:
			t.Errorf("%s: %d USETMAXREG without a producer", name, n)
		}
		if cr, _ := hopRegs(d); prod && top >= cr {
			t.Errorf("%s: register R%d beyond the consumers' %d", name, top, cr)
		}
		if prod {
			producers[d]++
		} else if d == 64 && !strings.Contains(name, "bigbird") && !strings.Contains(name, "neighborhood") {
			t.Errorf("%s: no producer at head_dim 64 (only the scans above bigScan64, bigbird's and the neighbourhood's, have none)", name)
		}
		t.Logf("%s: producer %v, %s, highest register R%d", name, prod, regsRE.FindString(log), top)
	}
	if producers[64] != len(files)-2 || producers[128] == 0 {
		t.Errorf("producer kernels: %v of %d examples per head dimension", producers, len(files))
	}
}
