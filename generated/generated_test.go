package generated_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// pkg is one generated package seen through its API (packages_test.go,
// written from spec/examples by internal/registry).
type pkg struct {
	file, dir string
	mask      string
	headDim   int
	docs      bool // the mask reads run-time data: document ids, or a parent array when tree
	tree      bool
	supported func(int) bool
	compiled  mask.Mask
	geometry  func(k int, s verify.Shape) (grid, block [3]int, dynShared int, err error)
	gpus      int
	gpuKind   func(k int) string // GPUKernels[k].Kind
	kernels   []gpu.Kernel       // GPUKernels
	best      func() (int, string)
	variant   reflect.Type
	errs      map[string]error
	// run returns the package's ForwardVariant for variant v as a verify.Run.
	run func(v int) verify.Run
	// bwd returns its BackwardVariant for variant v as a verify.RunBackward.
	bwd func(v int) verify.RunBackward
	// run16 returns its ForwardVariant16 for variant v and element type
	// elem (cpu.BF16 or cpu.F16): float32 inputs are rounded to the format.
	run16 func(v, elem int) verify.Run
	// paged returns ForwardPagedVariant for packages whose spec sets
	// page_size (pageSize > 0).
	paged    func(v int) pagedRun
	pageSize int
	// args returns ForwardArgsVariant for variant v: Docs reach only
	// document packages' Args, Table only those of paged packages.
	args     func(v int) argsRun
	argsType reflect.Type
}

// genArgs holds the fields of every package's Args.
type genArgs struct {
	Elem          int
	Q, K, V       []float32
	Q16, K16, V16 []uint16
	Out           []float32
	Out16         []uint16
	LSE           []float32
	Docs, Table   []int32
	Shape         verify.Shape
}

// argsRun is a package's ForwardArgsVariant.
type argsRun func(a genArgs) error

// shape is the common layout of every generated Shape.
type shape struct {
	Batch, HeadsQ, HeadsKV int
	SeqQ, SeqK             int
	HeadDim                int
	Scale                  float32
}

func conv(s verify.Shape) shape {
	return shape{s.Batch, s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK, s.HeadDim, float32(s.Scale)}
}

// load parses a package's spec and checks the package is not stale.
func load(t *testing.T, p pkg) *spec.Spec {
	t.Helper()
	s, err := spec.ParseFile(filepath.Join("../spec/examples", p.file))
	if err != nil {
		t.Fatal(err)
	}
	if s.Mask.String() != p.mask || s.HeadDim != p.headDim || s.Mask.HasData() != p.docs || s.Mask.HasTree() != p.tree {
		t.Fatalf("%s: generated package is stale (mask %s, head_dim %d)", p.file, p.mask, p.headDim)
	}
	return s
}

// TestEveryExampleGenerated: generated/doc.go generates every example and
// the registry lists every one.
func TestEveryExampleGenerated(t *testing.T) {
	files, _ := filepath.Glob("../spec/examples/*.yaml")
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range regexp.MustCompile(`(?m)^//go:generate go run \.\./cmd/attngen -spec \.\./spec/examples/(\S+)(?: -sm none)? -out (\S+)$`).FindAllSubmatch(doc, -1) {
		lines = append(lines, string(m[1]))
	}
	var listed []string
	for _, p := range packages() {
		listed = append(listed, p.file)
	}
	for _, f := range files {
		if !slices.Contains(lines, filepath.Base(f)) {
			t.Errorf("generated/doc.go does not generate %s", f)
		}
		if !slices.Contains(listed, filepath.Base(f)) {
			t.Errorf("packages_test.go does not list %s: run go generate ./generated", f)
		}
	}
	if len(lines) != len(files) || len(listed) != len(files) {
		t.Errorf("%d examples, %d go:generate lines, %d packages under test", len(files), len(lines), len(listed))
	}
}

// TestCompiledMaskMatchesPlan: each package's compiled mask (mask.go, the
// plan's programs rendered as Go) returns what the plan's programs return
// when attngen evaluates them, on random tiles, rows and key offsets.
func TestCompiledMaskMatchesPlan(t *testing.T) {
	r := rand.New(rand.NewPCG(63, 64))
	for _, p := range packages() {
		s := load(t, p)
		plan, err := gen.Compile(s, gen.CPUTarget, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := plan.Mask()
		got := p.compiled
		if got.Stride() != want.Stride() || got.UsesDocs() != want.UsesDocs() {
			t.Fatalf("%s: stride %d docs %v, plan %d %v", p.file, got.Stride(), got.UsesDocs(), want.Stride(), want.UsesDocs())
		}
		if g, w := mask.ScoreOf(got), mask.ScoreOf(want); g != w || g.Active() != s.Score.Active() {
			t.Fatalf("%s: score stage %+v, plan %+v", p.file, g, w)
		}
		for iter := 0; iter < 3000; iter++ {
			n := 1 + r.IntN(3000)
			var docs *mask.Docs
			if p.tree {
				docs, _ = mask.NewTree(randTree(r, n))
			} else if p.docs {
				ids := make([]int32, n)
				for k := 1; k < n; k++ {
					ids[k] = ids[k-1]
					if r.IntN(200) == 0 {
						ids[k]++
					}
				}
				docs, _ = mask.NewDocs(ids)
			}
			docs = headDocs(got, docs, r, n)
			q0 := r.IntN(n)
			q1 := min(n-1, q0+r.IntN(64))
			k0 := r.IntN(n)
			k1 := min(n-1, k0+r.IntN(64))
			x := r.IntN(n)
			gn, gl := got.Hull(q0, q1, x, docs)
			wn, wl := want.Hull(q0, q1, x, docs)
			if gn != wn || gl != wl {
				t.Fatalf("%s: Hull(%d, %d, %d) = %d, %d; plan %d, %d", p.file, q0, q1, x, gn, gl, wn, wl)
			}
			if g, w := got.Class(q0, q1, k0, k1, docs), want.Class(q0, q1, k0, k1, docs); g != w {
				t.Fatalf("%s: Class(%d, %d, %d, %d) = %v; plan %v", p.file, q0, q1, k0, k1, g, w)
			}
			k64 := 64 * r.IntN((n+63)/64)
			if g, w := got.Word(q0, k64, n, docs), want.Word(q0, k64, n, docs); g != w {
				t.Fatalf("%s: Word(%d, %d, %d) = %064b; plan %064b", p.file, q0, k64, n, g, w)
			}
		}
	}
}

// TestGPUGeometry: the launch each package's GPU kernels describe is the
// one the PTX emitter computes for the same call: the sm_80 forward, the
// backward's dq and dk/dv kernels, and the sm_90a forward, whose tensor
// maps are also the emitter's and which refuses the shapes the emitter
// refuses (residue layouts off the stride).
func TestGPUGeometry(t *testing.T) {
	r := rand.New(rand.NewPCG(65, 66))
	for _, p := range packages() {
		s := load(t, p)
		if p.gpus != 4 {
			t.Fatalf("%s: %d GPU kernels, want the forward and the backward's two for sm_80 and the sm_90a forward", p.file, p.gpus)
		}
		for k, want := range []string{gpu.KindForward, gpu.KindBwdDQ, gpu.KindBwdDKV, gpu.KindForward} {
			if got := p.gpuKind(k); got != want {
				t.Fatalf("%s: GPU kernel %d has kind %q, want %q", p.file, k, got, want)
			}
		}
		if h := p.kernels[3]; h.Target != "sm_90a" || len(h.TensorMaps) != 3 || h.OptIn == ptx.SM90aVerified {
			t.Fatalf("%s: GPU kernel 3: target %s, %d tensor maps, OptIn %v", p.file, h.Target, len(h.TensorMaps), h.OptIn)
		}
		plan, err := gen.Compile(s, ptx.SM80, nil)
		if err != nil {
			t.Fatal(err)
		}
		f, err := ptx.GenerateForward(plan, ptx.Config{Target: ptx.SM80})
		if err != nil {
			t.Fatal(err)
		}
		b, err := ptx.GenerateBackward(plan, ptx.Config{Target: ptx.SM80})
		if err != nil {
			t.Fatal(err)
		}
		hplan, err := gen.Compile(s, ptx.SM90a, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ptx.GenerateForward(hplan, ptx.Config{Target: ptx.SM90a})
		if err != nil {
			t.Fatal(err)
		}
		if h.PTX != p.kernels[3].PTX[strings.Index(p.kernels[3].PTX, "\n")+1:] {
			t.Fatalf("%s: the embedded sm_90a PTX is not the emitter's", p.file)
		}
		refused := 0
		for iter := 0; iter < 200; iter++ {
			sk := 1 + r.IntN(5000)
			sh := verify.Shape{Batch: 1 + r.IntN(3), HeadsQ: 4, HeadsKV: 2, SeqQ: 1 + r.IntN(sk), SeqK: sk, HeadDim: s.HeadDim}
			l, err := f.Geometry(sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK, 0)
			if err != nil {
				t.Fatal(err)
			}
			bl, err := b.Geometry(sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK, 0)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range []ptx.Launch{l, bl.DQ, bl.DKV} {
				grid, block, dyn, err := p.geometry(k, sh)
				if err != nil {
					t.Fatal(err)
				}
				if grid != want.Grid || block != want.Block || dyn != want.DynShared {
					t.Fatalf("%s kernel %d %+v: package geometry %v %v %d, emitter %v %v %d", p.file, k, sh, grid, block, dyn, want.Grid, want.Block, want.DynShared)
				}
			}
			hl, herr := h.Geometry(sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK, 0)
			grid, block, dyn, err := p.geometry(3, sh)
			if (herr == nil) != (err == nil) {
				t.Fatalf("%s sm_90a %+v: package geometry error %v, emitter's %v", p.file, sh, err, herr)
			}
			if err != nil {
				refused++
				continue
			}
			if grid != hl.Grid || block != hl.Block || dyn != hl.DynShared || block[0] != h.Threads || block[0] != 256 && block[0] != 384 { // 384: a producer warpgroup
				t.Fatalf("%s sm_90a %+v: package geometry %v %v %d, emitter %v %v %d", p.file, sh, grid, block, dyn, hl.Grid, hl.Block, hl.DynShared)
			}
			got, err := p.kernels[3].TensorMapsOf(sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK, 1<<20, 2<<20, 3<<20)
			if err != nil {
				t.Fatal(err)
			}
			want, err := h.TensorMaps(sh.Batch, sh.HeadsQ, sh.HeadsKV, sh.SeqQ, sh.SeqK, 1<<20, 2<<20, 3<<20)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s sm_90a %+v: package tensor maps %+v, emitter %+v", p.file, sh, got, want)
			}
		}
		if st := plan.Layout.Stride; refused > 0 && !(plan.Layout.Kind == gen.Residue && st > 1) {
			t.Errorf("%s: the sm_90a kernel refused %d shapes of an identity layout", p.file, refused)
		}
		// the runner's rule on the package's list: sm_80 by default, the
		// sm_90a forward on a 9.0 device when asked for
		for _, c := range []struct {
			major, minor int
			target, want string
		}{{8, 0, "", "sm_80"}, {9, 0, "", "sm_80"}, {9, 0, "sm_90a", "sm_90a"}} {
			k, err := gpu.Select(p.kernels, gpu.KindForward, "bf16", c.major, c.minor, c.target)
			if err != nil || k.Target != c.want {
				t.Errorf("%s: Select on %d.%d asking %q: %s %v, want %s", p.file, c.major, c.minor, c.target, k.Target, err, c.want)
			}
		}
		if _, err := gpu.Select(p.kernels, gpu.KindForward, "bf16", 8, 0, "sm_90a"); err == nil {
			t.Errorf("%s: Select gave an 8.0 device the sm_90a kernel", p.file)
		}
	}
}

// TestGPUGeometryRejects: the package's geometry refuses the shapes the
// kernel cannot run, as the emitter's does, and never overflows.
func TestGPUGeometryRejects(t *testing.T) {
	for _, p := range packages() {
		for _, sh := range []verify.Shape{
			{Batch: 0, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1},
			{Batch: 1, HeadsQ: 3, HeadsKV: 2, SeqQ: 1, SeqK: 1},
			{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 9, SeqK: 8},
			{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1 << 29},
			{Batch: 1, HeadsQ: 1 << 16, HeadsKV: 1, SeqQ: 1, SeqK: 1},
			{Batch: 1 << 16, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1},
			{Batch: math.MaxInt, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1},
		} {
			for k := 0; k < p.gpus; k++ {
				if _, _, _, err := p.geometry(k, sh); err == nil {
					t.Errorf("%s: kernel %d: %+v: no error", p.file, k, sh)
				}
			}
		}
	}
}

// TestGeneratedPackages runs the checks of attngen verify on every
// generated package, through its public API, for every CPU target this
// machine supports.
func TestGeneratedPackages(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(61, 62))
	for _, p := range packages() {
		s := load(t, p)
		for _, tg := range cpu.Targets {
			v := int(tg.Variant)
			if !p.supported(v) {
				continue
			}
			name := p.file + "/" + tg.Name
			run := p.run(v)
			for _, sh := range verify.Shapes(s.HeadDim) {
				if testing.Short() && sh.SeqK > 200 {
					continue
				}
				if _, err := verify.CheckNumeric(s.Pattern(), run, sh, r); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			dep := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 50, SeqK: 70, HeadDim: s.HeadDim}
			if err := verify.CheckDependencies(s.Pattern(), run, dep, r); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !s.Mask.HasData() {
				pat, stackRun := s.Pattern(), run
				if pat.HasParams() {
					// the stack's one head on random values: the
					// pattern bound to them, the kernel given them
					vals := verify.RandomHeadParams(pat, r, 3, 60)[len(pat.Params) : 2*len(pat.Params)]
					iv := make([]int, len(vals))
					for x, v := range vals {
						iv[x] = int(v)
					}
					var err error
					if pat, err = pat.Bind(iv); err != nil {
						t.Fatal(err)
					}
					stackRun = func(out, lse, q, k, v []float32, docs []int32, sh verify.Shape) error {
						sh.HeadParams = vals
						return run(out, lse, q, k, v, docs, sh)
					}
				}
				if pat.Score.Active() {
					// the stack's runs with random score values; the
					// layers, for the reachability model, without
					sc, inner := verify.RandomScore(pat.Score, 1, r), stackRun
					pat.Score = spec.Score{}
					stackRun = func(out, lse, q, k, v []float32, docs []int32, sh verify.Shape) error {
						sh.Score = sc
						return inner(out, lse, q, k, v, docs, sh)
					}
				}
				layers := []spec.Pattern{pat, pat, pat}
				if err := verify.CheckStack(layers, []verify.Run{stackRun, stackRun, stackRun}, 60, s.HeadDim, r); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
	}
}

// TestAPI: each package exports its own errors and Variant type, says which
// variant Auto runs, and rejects a head dimension other than its own, an
// aliased output, an overflowing shape and bad document ids with its
// errors.
func TestAPI(t *testing.T) {
	r := rand.New(rand.NewPCG(67, 68))
	for _, p := range packages() {
		if p.variant.PkgPath() != "github.com/attngen/attngen/generated/"+p.dir {
			t.Errorf("%s: Variant is %s.%s, not the package's own type", p.file, p.variant.PkgPath(), p.variant.Name())
		}
		best, name := p.best()
		if best != int(cpu.Best()) || name != cpu.Best().String() || !p.supported(best) {
			t.Errorf("%s: Best() = %d %q, runtime %v", p.file, best, name, cpu.Best())
		}
		run := p.run(int(cpu.Auto))
		s := withHeads(t, p, verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 10, SeqK: 12, HeadDim: p.headDim}, r)
		nq, nkv, nl := s.Sizes()
		q, k, v := randVec(r, nq), randVec(r, nkv), randVec(r, nkv)
		out, lse := make([]float32, nq), make([]float32, nl)
		ids := plainData(p, s.SeqK)
		if err := run(out, lse, q, k, v, ids, s); err != nil {
			t.Fatalf("%s: %v", p.file, err)
		}
		// Shape.HeadDim 0 is the package's own.
		zero := s
		zero.HeadDim = 0
		out0, lse0 := make([]float32, nq), make([]float32, nl)
		if err := run(out0, lse0, q, k, v, ids, zero); err != nil {
			t.Fatalf("%s: head dim 0: %v", p.file, err)
		}
		for i := range out {
			if math.Float32bits(out[i]) != math.Float32bits(out0[i]) {
				t.Fatalf("%s: head dim 0: out[%d] = %v, %v with the package's", p.file, i, out0[i], out[i])
			}
		}
		bad := s
		bad.HeadDim = p.headDim ^ (64 | 128)
		big := s
		big.Batch = 1 << 57
		for _, c := range []struct {
			what, err string
			call      func() error
		}{
			{"other head dim", "headDim", func() error { return run(out, lse, q, k, v, ids, bad) }},
			{"batch 1<<57", "shape", func() error { return run(nil, nil, nil, nil, nil, ids, big) }},
			{"out over v", "alias", func() error { buf := make([]float32, nq); return run(buf, nil, q, k, buf[:nkv], ids, s) }},
			{"short q", "short", func() error { return run(out, lse, q[:nq-1], k, v, ids, s) }},
			{"variant 99", "variant", func() error { return p.run(99)(out, lse, q, k, v, ids, s) }},
		} {
			if err := c.call(); !errors.Is(err, p.errs[c.err]) {
				t.Errorf("%s: %s: error %v, want %s.Err%s", p.file, c.what, err, p.dir, c.err)
			}
		}
		if p.docs {
			if err := run(out, lse, q, k, v, make([]int32, s.SeqK+1), s); !errors.Is(err, p.errs["data"]) {
				t.Errorf("%s: %d entries of data: error %v, want ErrDocument (ErrTree for a tree)", p.file, s.SeqK+1, err)
			}
		}
		if p.tree {
			cyc := plainData(p, s.SeqK)
			cyc[3] = 5 // a parent after its child
			if err := run(out, lse, q, k, v, cyc, s); !errors.Is(err, p.errs["data"]) || !strings.Contains(err.Error(), "parent[3] = 5") {
				t.Errorf("%s: parent[3] = 5: error %v, want ErrTree naming it", p.file, err)
			}
		}
	}
}

func randVec(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// bits16 rounds float32 values to a 16-bit format (cpu.BF16 or cpu.F16)
// and returns the bits.
func bits16(elem int, x []float32) []uint16 {
	b := make([]uint16, len(x))
	for i, v := range x {
		if elem == int(cpu.BF16) {
			b[i] = verify.BF16(v)
		} else {
			b[i] = verify.F16(v)
		}
	}
	return b
}

// TestSixteenBitInputs: every package's Forward16, on every variant, with
// bf16 and f16 inputs, against the float64 reference on the same rounded
// inputs (within the error of a float32 implementation on them), with the
// masked-data and non-finite rules of the float32 path.
func TestSixteenBitInputs(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(87, 88))
	for _, p := range packages() {
		s := load(t, p)
		for _, tg := range cpu.Targets {
			if !p.supported(int(tg.Variant)) {
				continue
			}
			for _, e := range []struct {
				elem cpu.Elem
				opts verify.NumericOptions
			}{{cpu.BF16, verify.BF16Inputs}, {cpu.F16, verify.F16Inputs}} {
				run := p.run16(int(tg.Variant), int(e.elem))
				name := p.file + "/" + tg.Name + "/" + e.elem.String()
				for _, sh := range verify.Shapes(s.HeadDim) {
					if testing.Short() && sh.SeqK > 200 {
						continue
					}
					if _, err := verify.CheckNumericWith(s.Pattern(), run, sh, r, e.opts); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
				for _, sh := range hostileShapes(s.HeadDim)[1:] {
					if err := verify.CheckNonFinite(s.Pattern(), run, sh, r, 2); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
			}
		}
	}
}

// pagedRun is a package's ForwardPagedVariant.
type pagedRun func(out, lse, q, k, v []float32, table []int32, docs []int32, s verify.Shape) error

// TestPagedPackages: packages with page_size give, from a paged cache in
// shuffled pages with NaN in every unused slot and a partly filled last
// page, the outputs of the contiguous cache bit for bit, on every
// variant, for decoding and prefill shapes.
func TestPagedPackages(t *testing.T) {
	r := rand.New(rand.NewPCG(89, 90))
	n := 0
	for _, p := range packages() {
		if p.paged == nil {
			continue
		}
		n++
		s := load(t, p)
		for _, tg := range cpu.Targets {
			if !p.supported(int(tg.Variant)) {
				continue
			}
			for _, sh := range []verify.Shape{
				{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 1300, HeadDim: s.HeadDim},
				{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 100, SeqK: 333, HeadDim: s.HeadDim},
			} {
				sh = verify.WithHeadParams(s.Pattern(), sh, r)
				nq, nkv, nl := sh.Sizes()
				q, k, v := randVec(r, nq), randVec(r, nkv), randVec(r, nkv)
				want, wantLSE := make([]float32, nq), make([]float32, nl)
				if err := p.run(int(tg.Variant))(want, wantLSE, q, k, v, nil, sh); err != nil {
					t.Fatal(err)
				}
				P, D := p.pageSize, sh.HeadDim
				need := (sh.SeqK + P - 1) / P
				pages := sh.Batch*need + 2
				per := sh.HeadsKV * P * D
				pk, pv := make([]float32, pages*per), make([]float32, pages*per)
				for i := range pk {
					pk[i], pv[i] = float32(math.NaN()), float32(math.NaN())
				}
				order := r.Perm(pages)
				table := make([]int32, sh.Batch*need)
				for b := 0; b < sh.Batch; b++ {
					for i := 0; i < need; i++ {
						pg := order[b*need+i]
						table[b*need+i] = int32(pg)
						for h := 0; h < sh.HeadsKV; h++ {
							for x := 0; x < P && i*P+x < sh.SeqK; x++ {
								src := ((b*sh.HeadsKV+h)*sh.SeqK + i*P + x) * D
								dst := ((pg*sh.HeadsKV+h)*P + x) * D
								copy(pk[dst:dst+D], k[src:src+D])
								copy(pv[dst:dst+D], v[src:src+D])
							}
						}
					}
				}
				out, lse := make([]float32, nq), make([]float32, nl)
				if err := p.paged(int(tg.Variant))(out, lse, q, pk, pv, table, nil, sh); err != nil {
					t.Fatalf("%s/%s %v: %v", p.file, tg.Name, sh, err)
				}
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s/%s %v: paged out[%d] = %v, contiguous %v", p.file, tg.Name, sh, i, out[i], want[i])
					}
				}
				for i := range lse {
					if math.Float32bits(lse[i]) != math.Float32bits(wantLSE[i]) {
						t.Fatalf("%s/%s %v: paged lse[%d] = %v, contiguous %v", p.file, tg.Name, sh, i, lse[i], wantLSE[i])
					}
				}
				// The table holds exactly ceil(SeqK/PageSize) entries a
				// batch: one laid out with more (say a fixed number of
				// pages per batch) is refused, not read at the wrong places.
				long := append(append([]int32(nil), table...), table[len(table)-1])
				if err := p.paged(int(tg.Variant))(out, lse, q, pk, pv, long, nil, sh); !errors.Is(err, p.errs["page"]) || !strings.Contains(err.Error(), fmt.Sprintf("are exactly %d", len(table))) {
					t.Errorf("%s/%s: a table of %d entries for %d: error %v, want ErrPage naming %d", p.file, tg.Name, len(long), len(table), err, len(table))
				}
				table[0] = int32(pages)
				if err := p.paged(int(tg.Variant))(out, lse, q, pk, pv, table, nil, sh); !errors.Is(err, p.errs["page"]) {
					t.Errorf("%s/%s: page %d of %d: error %v, want ErrPage", p.file, tg.Name, pages, pages, err)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no example spec sets page_size")
	}
}

// randTree returns a parent array of n positions: a chain (a committed
// prefix) of random length, then nodes hanging off earlier positions.
func randTree(r *rand.Rand, n int) []int32 {
	par := make([]int32, n)
	prefix := r.IntN(n + 1)
	for i := range par {
		switch {
		case i < prefix:
			par[i] = int32(i - 1)
		case r.IntN(4) == 0 && prefix > 0:
			par[i] = int32(prefix - 1)
		default:
			par[i] = int32(r.IntN(i+1) - 1)
		}
	}
	return par
}

// randData returns random run-time data for a package's mask: a parent
// array, document ids, or nil.
func randData(p pkg, r *rand.Rand, n int) []int32 {
	switch {
	case p.tree:
		return randTree(r, n)
	case p.docs:
		return randDocs(r, n)
	}
	return nil
}

// plainData is the simplest valid data: one document, or one chain
// (causal attention); nil for masks without data.
func plainData(p pkg, n int) []int32 {
	if !p.docs {
		return nil
	}
	d := make([]int32, n)
	if p.tree {
		for i := range d {
			d[i] = int32(i - 1)
		}
	}
	return d
}

// headValues returns head parameter k's values, one per query head, from
// the head-major values of a shape (verify.Shape.HeadParams), as the
// fields of a package's HeadParams hold them; nil without values. The
// last values converted are kept (and compared by content), so that the
// adapters of packages_test.go allocate nothing when a shape's values are
// passed again (the tests that count allocations).
// scoreCap, scoreSlopes and scoreSinks are the call-time score values of a
// shape (verify.Score.Float32), as the packages' Score takes them.
func scoreCap(s verify.Shape) float32 {
	c, _, _ := s.Score.Float32()
	return c
}

func scoreSlopes(s verify.Shape) []float32 {
	_, sl, _ := s.Score.Float32()
	return sl
}

func scoreSinks(s verify.Shape) []float32 {
	_, _, sk := s.Score.Float32()
	return sk
}

func headValues(s verify.Shape, k int) []int32 {
	if len(s.HeadParams) == 0 {
		return nil
	}
	heads.Lock()
	defer heads.Unlock()
	n := len(s.HeadParams) / s.HeadsQ
	if !slices.Equal(heads.src, s.HeadParams) || len(heads.vals) != n {
		// fresh slices: callers may still hold the previous ones
		heads.src = slices.Clone(s.HeadParams)
		heads.vals = make([][]int32, n)
		for x := range heads.vals {
			heads.vals[x] = make([]int32, s.HeadsQ)
			for h := range heads.vals[x] {
				heads.vals[x][h] = s.HeadParams[h*n+x]
			}
		}
	}
	return heads.vals[k]
}

var heads struct {
	sync.Mutex
	src  []int32
	vals [][]int32
}

// withHeads returns s with random values of the package's head parameters
// (verify.WithHeadParams: every min at the first head, every max at the
// last) and of its score section (verify.WithScore), or s as it is for
// packages without them.
func withHeads(t *testing.T, p pkg, s verify.Shape, r *rand.Rand) verify.Shape {
	t.Helper()
	pat := load(t, p).Pattern()
	return verify.WithScore(pat, verify.WithHeadParams(pat, s, r), r)
}

// headDocs returns docs as the run-time data of one query head with random
// values of the mask's head parameters (at their min or max one time in
// four each, else in [min, min(max, min+2n)]), for calling a compiled
// mask directly; docs as it is for masks without head parameters.
func headDocs(m mask.Mask, docs *mask.Docs, r *rand.Rand, n int) *mask.Docs {
	hps := mask.HeadParams(m)
	if len(hps) == 0 {
		return docs
	}
	vals := make([]int32, len(hps))
	for k, hp := range hps {
		v := hp.Min + r.IntN(min(hp.Max, hp.Min+2*n)-hp.Min+1)
		switch r.IntN(4) {
		case 0:
			v = hp.Min
		case 1:
			v = hp.Max
		}
		vals[k] = int32(v)
	}
	d := &mask.Docs{}
	d.SetHead(docs, vals)
	return d
}
