package ptx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
	"github.com/attngen/attngen/verify"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// bf16 rounds to the nearest bfloat16 (ties to even) and returns its bits.
func bf16(x float32) uint16 {
	b := math.Float32bits(x)
	if x != x {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f16 rounds to the nearest IEEE half (ties to even) for values in the
// normal range and returns its bits; the tests only feed it such values.
func f16(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	if x == 0 {
		return sign
	}
	e := int(b>>23&0xff) - 127 + 15
	m := b & 0x7fffff
	if e <= 0 || e >= 31 {
		panic("f16: out of the normal range")
	}
	h := uint32(e)<<10 | m>>13
	rest := m & 0x1fff
	if rest > 0x1000 || rest == 0x1000 && h&1 == 1 {
		h++
	}
	return sign | uint16(h)
}

func fromF16(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 31
	m := float32(h & 0x3ff)
	switch e {
	case 0:
		return sign * m * float32(math.Ldexp(1, -24))
	case 31:
		if m == 0 {
			return sign * float32(math.Inf(1))
		}
		return float32(math.NaN())
	}
	return sign * (1 + m/1024) * float32(math.Ldexp(1, e-15))
}

type shape struct{ batch, hq, hkv, sq, sk int }

// bounds returns, per output element, the error a straightforward
// implementation that rounds the probabilities P and the output to the
// element type may make against the float64 reference: with unit roundoff
// u (2^-8 for bf16, 2^-11 for f16: half an ulp of an 8- or 11-bit significand), rounding each weight moves the output
// by at most u * sum_j w_j |v_jd|, and rounding the output by u |out_d|.
// A pattern with head parameters is bound per head to s.HeadParams.
// Accumulation in f32 and ex2.approx add orders of magnitude less; the
// bound is widened by 10% for them.
func bounds(pat spec.Pattern, docs *spec.Docs, q, k, v []float32, s verify.Shape, u float64) []float64 {
	D, scale := s.HeadDim, s.EffScale()
	group := s.HeadsQ / s.HeadsKV
	out := make([]float64, s.Batch*s.HeadsQ*s.SeqQ*D)
	sc := make([]float64, s.SeqK)
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsQ; h++ {
			p := headPattern(pat, s, h)
			kv := (b*s.HeadsKV + h/group) * s.SeqK * D
			for r := 0; r < s.SeqQ; r++ {
				row := (b*s.HeadsQ+h)*s.SeqQ + r
				i := spec.Row(r, s.SeqQ, s.SeqK)
				m := math.Inf(-1)
				for j := range sc {
					sc[j] = math.Inf(-1)
					if p.AtDocs(i, j, docs) {
						dot := 0.0
						for d := 0; d < D; d++ {
							dot += float64(q[row*D+d]) * float64(k[kv+j*D+d])
						}
						sc[j] = dot * scale
						m = math.Max(m, sc[j])
					}
				}
				if math.IsInf(m, -1) {
					continue
				}
				sum := 0.0
				for j := range sc {
					sum += math.Exp(sc[j] - m)
				}
				o := out[row*D : row*D+D]
				for j := range sc {
					w := math.Exp(sc[j]-m) / sum
					for d := range o {
						o[d] += w * math.Abs(float64(v[kv+j*D+d]))
					}
				}
			}
		}
	}
	for x := range out {
		out[x] *= u
	}
	return out
}

// runForward runs the kernel of plan p under the interpreter on random
// inputs rounded to the element type and compares with the float64
// reference of mask want (p.Source when nil). It returns the number of
// mismatches, reporting the first few when report is set.
func runForward(t *testing.T, p *gen.Plan, cfg Config, s shape, want *spec.Pattern, report bool) int {
	return runForwardDocs(t, p, cfg, s, want, report, nil)
}

// runForwardDocs is runForward with document ids (nil: none).
func runForwardDocs(t *testing.T, p *gen.Plan, cfg Config, s shape, want *spec.Pattern, report bool, ids []int32) int {
	t.Helper()
	return runForwardGrid(t, p, cfg, s, want, report, ids, nil, 0)
}

// runForwardHeads is runForwardDocs with head parameter values (head-major
// [heads_q][n], verify.Shape.HeadParams) for a plan with head parameters;
// nil draws them (verify.RandomHeadParams).
func runForwardHeads(t *testing.T, p *gen.Plan, cfg Config, s shape, want *spec.Pattern, report bool, ids []int32, heads []int32) int {
	return runForwardGrid(t, p, cfg, s, want, report, ids, heads, 0)
}

// runForwardGrid is runForwardHeads on a grid of grid CTAs along x, for a
// persistent kernel (0: Geometry's grid).
func runForwardGrid(t *testing.T, p *gen.Plan, cfg Config, s shape, want *spec.Pattern, report bool, ids []int32, heads []int32, grid int) int {
	t.Helper()
	k, mod := generated(t, p, cfg)
	D := p.HeadDim
	vs := verify.Shape{Batch: s.batch, HeadsQ: s.hq, HeadsKV: s.hkv, SeqQ: s.sq, SeqK: s.sk, HeadDim: D}
	nq, nkv, nl := vs.Sizes()
	rng := rand.New(rand.NewPCG(uint64(s.sq), uint64(s.sk*7+D)))
	vs.HeadParams = callHeads(p, heads, rng, s)
	drawScore(p, &vs, rng)
	round, unround, u := bf16, fromBF16, math.Ldexp(1, -8)
	if k.Elem == F16 {
		round, unround, u = f16, fromF16, math.Ldexp(1, -11)
	}
	gen16 := func(n int) ([]uint16, []float32) {
		h, f := make([]uint16, n), make([]float32, n)
		for i := range h {
			x := float32(rng.NormFloat64())
			if x == 0 || math.Abs(float64(x)) < 1e-4 {
				x = 1e-4
			}
			h[i] = round(x)
			f[i] = unround(h[i])
		}
		return h, f
	}
	qh, qf := gen16(nq)
	kh, kf := gen16(nkv)
	vh, vf := gen16(nkv)
	dev := ptxi.NewDevice()
	alloc := func(n int) uint64 {
		a, err := dev.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	qa, ka, va, oa, la := alloc(2*nq), alloc(2*nkv), alloc(2*nkv), alloc(2*nq), alloc(4*nl)
	for _, w := range []struct {
		a uint64
		h []uint16
	}{{qa, qh}, {ka, kh}, {va, vh}} {
		if err := dev.WriteU16(w.a, w.h); err != nil {
			t.Fatal(err)
		}
	}
	l, err := k.Geometry(s.batch, s.hq, s.hkv, s.sq, s.sk, 0)
	if err != nil {
		t.Fatal(err)
	}
	if grid > 0 {
		if !l.Persistent {
			t.Fatalf("a grid of %d CTAs for kernel %s, which is not persistent", grid, k.Name)
		}
		l.Grid = [3]int{grid, 1, 1}
	}
	poison(t, dev, oa, la, nq, nl)
	ptrs := []uint64{qa, ka, va, oa, la}
	if k.Target.Accel {
		ptrs = ptrs[3:] // q, k and v through tensor maps
	}
	var docs *spec.Docs
	switch {
	case ids != nil && p.UsesTree():
		if docs, err = spec.NewTree(ids); err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, treeArrays(t, dev, alloc, ids)...)
	case ids != nil:
		docs = &spec.Docs{}
		if err := docs.Reset(ids); err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, docArrays(t, dev, alloc, ids)...)
	}
	ptrs = append(ptrs, headArray(t, dev, alloc, vs.HeadParams)...)
	sp, softCap := scoreArrays(t, dev, alloc, k.Params, k.Score, vs)
	ptrs = append(ptrs, sp...)
	l.SoftCap = softCap
	if k.Target.Accel {
		ptrs = append(ptrs, tensorMaps(t, dev, k, s, qa, ka, va)...)
	}
	args, err := l.Args(ptrs...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Launch(mod, k.Name, l.Grid, l.Block, l.DynShared, args...); err != nil {
		t.Fatal(err)
	}
	oh, err := dev.ReadU16(oa, nq)
	if err != nil {
		t.Fatal(err)
	}
	lse, err := dev.ReadF32(la, nl)
	if err != nil {
		t.Fatal(err)
	}
	pat := p.Source
	if want != nil {
		pat = *want
	}
	ref, refLse, err := verify.Reference(pat, docs, qf, kf, vf, vs)
	if err != nil {
		t.Fatal(err)
	}
	tol := bounds(pat, docs, qf, kf, vf, vs, u)
	bad, worst := 0, 0.0
	for i := range ref {
		got := float64(unround(oh[i]))
		lim := 1.1*(tol[i]+u*math.Abs(ref[i])) + 1e-6
		d := math.Abs(got - ref[i])
		worst = math.Max(worst, d/lim)
		if !(d <= lim) {
			if report && bad < 5 {
				t.Errorf("out[row %d, col %d] = %g, want %g (diff %g > bound %g)", i/D, i%D, got, ref[i], d, lim)
			}
			bad++
		}
	}
	for i := range refLse {
		got, w := float64(lse[i]), refLse[i]
		if math.IsInf(w, -1) {
			if !math.IsInf(got, -1) {
				if report {
					t.Errorf("lse[%d] = %g, want -Inf", i, got)
				}
				bad++
			}
			continue
		}
		if d := math.Abs(got - w); !(d <= 1e-5*(1+math.Abs(w))) {
			if report && bad < 10 {
				t.Errorf("lse[%d] = %g, want %g", i, got, w)
			}
			bad++
		}
	}
	if report {
		t.Logf("worst error / bound = %.3f", worst)
		if bad > 0 {
			t.Fatalf("%d mismatches", bad)
		}
	}
	return bad
}

func compile(t *testing.T, name string, m *spec.Mask, causal bool, d int) *gen.Plan {
	t.Helper()
	return compileFor(t, SM80, name, m, causal, d)
}

// compileFor is compile for target tg.
func compileFor(t *testing.T, tg Target, name string, m *spec.Mask, causal bool, d int) *gen.Plan {
	t.Helper()
	p, err := gen.Compile(&spec.Spec{Name: name, Mask: m, Causal: causal, HeadDim: d}, tg, nil)
	if err != nil {
		t.Fatalf("%s (causal %v, mask %s): %v", name, causal, m, err)
	}
	return p
}

// testMask is a named pattern of the test lists.
type testMask struct {
	name string
	p    spec.Pattern
}

// exampleMasks are the patterns of spec/examples/*.yaml.
func exampleMasks(t *testing.T) []testMask {
	t.Helper()
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example specs")
	}
	var ms []testMask
	for _, file := range files {
		s, err := spec.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, testMask{s.Name, s.Pattern()})
	}
	return ms
}

// randomMasks returns n random patterns (spec/spectest) with parameters
// scaled to sequences of about 200 positions, seeded by seed: half single
// primitives, every fourth of them dilated (the residue layout), half
// nested unions and intersections.
func randomMasks(seed uint64, n int) []testMask {
	r := rand.New(rand.NewPCG(seed, 17))
	var ms []testMask
	for k := 0; k < n; k++ {
		p := spectest.Pattern(r, 200, 3)
		if k%2 == 0 {
			p.Mask = spectest.Primitive(r, 200)
		}
		for k%4 == 2 && p.Mask.Op != spec.OpDilated {
			p.Mask = spectest.Primitive(r, 200)
		}
		ms = append(ms, testMask{fmt.Sprintf("rand%d_%d", seed, k), p})
	}
	return ms
}

// randomDocMasks returns n random document patterns: document alone or
// intersected with a random mask (the forms the parser accepts).
func randomDocMasks(seed uint64, n int) []testMask {
	r := rand.New(rand.NewPCG(seed, 19))
	var ms []testMask
	for k := 0; k < n; k++ {
		p := spectest.Pattern(r, 60, 2)
		p.Mask = spec.Intersect(spec.Document(), p.Mask)
		if k == 0 {
			p.Mask = spec.Document()
		}
		ms = append(ms, testMask{fmt.Sprintf("doc%d_%d", seed, k), p})
	}
	return ms
}

var shapes = []shape{
	{1, 2, 1, 70, 130}, // grouped heads, SeqQ < SeqK, not multiples of 64
	{1, 1, 1, 1, 77},   // decode
	{2, 4, 2, 65, 100},
}

func TestInterpExamples(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../spec/examples/*.yaml")
	for _, file := range files {
		s, err := spec.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := gen.Compile(s, SM80, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range shapes {
			var ids []int32
			switch {
			case p.UsesTree():
				ids = treeParents(sh.sk, uint64(sh.sq))
			case p.Pred.UsesDocs():
				ids = docIDs(sh.sk)
			}
			t.Run(fmt.Sprintf("%s/%v", s.Name, sh), func(t *testing.T) { runForwardDocs(t, p, Config{SoftLg2: true}, sh, nil, true, ids) })
		}
	}
}

// TestInterpRandomMasks runs random masks of small parameters (head_dim
// 64, and 128 for every other one without -short) on shapes that are not
// multiples of the tiles.
func TestInterpRandomMasks(t *testing.T) {
	t.Parallel()
	for k, mk := range randomMasks(1, 16) {
		dims := []int{64}
		if !testing.Short() && k%2 == 1 {
			dims = append(dims, 128)
		}
		for _, d := range dims {
			p := compile(t, mk.name, mk.p.Mask, mk.p.Causal, d)
			for _, sh := range []shape{{1, 2, 1, 150, 200}, {1, 1, 1, 1, 150}} {
				t.Run(fmt.Sprintf("%s/d%d/%v", mk.name, d, sh), func(t *testing.T) {
					t.Logf("%s, layout %s", mk.p, layoutText(p.Layout))
					runForward(t, p, Config{SoftLg2: true}, sh, nil, true)
				})
			}
		}
	}
}

// TestInterpCatchesWrongMask checks that the comparison is sharp enough to
// see a mask off by one key.
func TestInterpCatchesWrongMask(t *testing.T) {
	p := compile(t, "window40", spec.Window(40), true, 64)
	wrong := spec.Pattern{Mask: spec.Window(41), Causal: true}
	if bad := runForward(t, p, Config{SoftLg2: true}, shape{1, 1, 1, 100, 130}, &wrong, false); bad == 0 {
		t.Fatal("a kernel for window 40 passed as window 41")
	}
}

func TestInterpF16(t *testing.T) {
	for k, mk := range randomMasks(2, 2) {
		d := 64 * (k + 1)
		p := compile(t, mk.name, mk.p.Mask, mk.p.Causal, d)
		t.Logf("%s: %s, head_dim %d", mk.name, mk.p, d)
		runForward(t, p, Config{Target: f16SM80, SoftLg2: true}, shape{1, 2, 1, 90, 150}, nil, true)
	}
}

// docIDs packs documents of lengths 1, 50, 3, 90, 1, 20, 35, ... into n
// positions.
func docIDs(n int) []int32 {
	lens := []int{1, 50, 3, 90, 1, 20, 35}
	var ids []int32
	for d := 0; len(ids) < n; d++ {
		for k := 0; k < lens[d%len(lens)] && len(ids) < n; k++ {
			ids = append(ids, int32(3*d+1))
		}
	}
	return ids
}

func TestInterpDocuments(t *testing.T) {
	t.Parallel()
	masks := randomDocMasks(3, 5)
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
			p := compile(t, mk.name, mk.p.Mask, mk.p.Causal, d)
			for _, sh := range []shape{{1, 2, 1, 150, 200}, {2, 1, 1, 1, 200}, {1, 1, 1, 200, 200}} {
				t.Run(fmt.Sprintf("%s/d%d/%v", mk.name, d, sh), func(t *testing.T) {
					t.Logf("%s", mk.p)
					runForwardDocs(t, p, Config{SoftLg2: true}, sh, nil, true, ids)
				})
			}
		}
	}
}

// planTiles scans the key tiles query positions [q0, q1] of a segment
// with nk keys visit the way the kernel does, evaluating the plan's
// programs with Prog.Eval: every tile of the clipped hull(q0, q1, 0) whose
// class(q0, q1, k0, k1) is not empty, full tiles past nk demoted to
// partial.
func planTiles(p *gen.Plan, q0, q1, nk int, docs *spec.Docs) []gen.TileRef {
	var h [2]int64
	p.Hull.Eval([]int64{int64(q0), int64(q1), 0}, docs, nil, h[:])
	lo, hi := max(h[0], 0), min(h[1], int64(nk-1))
	var refs []gen.TileRef
	if lo > hi {
		return nil
	}
	var c [1]int64
	for kt := int(lo) / p.TileK; kt <= int(hi)/p.TileK; {
		k0 := kt * p.TileK
		k1 := min(k0+p.TileK, nk) - 1
		p.Class.Eval([]int64{int64(q0), int64(q1), int64(k0), int64(k1)}, docs, nil, c[:])
		cls := mask.Class(c[0])
		if cls == mask.Full && k0+p.TileK > nk {
			cls = mask.Partial
		}
		if cls != mask.Empty {
			refs = append(refs, gen.TileRef{K: kt, Class: cls})
			kt++
			continue
		}
		// the kernel jumps over an empty tile with the hull
		var hn [2]int64
		p.Hull.Eval([]int64{int64(q0), int64(q1), int64(k0 + p.TileK)}, docs, nil, hn[:])
		kt = max(kt+1, int(floorDivI(hn[0], int64(p.TileK))))
	}
	return refs
}

// TestInterpVisits counts the key tiles the kernel visits through its
// barriers (one for Q, two per visited tile and one more per partial
// tile, sanitize's vote on finite data; none in CTAs that visit
// no tile or lie past a residue class's queries, but the barrier after
// stageRow's stores in every CTA of a kernel that stages its row values,
// stagedBarriers) and compares them with a
// scan of the plan's hull and class programs (planTiles). It also checks
// that the plan's exact schedule (Visit, refined by keep words) is a
// subset of that scan and agrees on full tiles: the class program is
// sound, so the kernel may visit more tiles, never fewer.
func TestInterpVisits(t *testing.T) {
	t.Parallel()
	masks := append(exampleMasks(t), randomMasks(4, 16)...)
	masks = append(masks, randomDocMasks(5, 4)...)
	checkVisits(t, SM80, masks, nil, func(_ *gen.Plan, tiles, partial int) int64 { return int64(1 + 2*tiles + partial) }, 0, nil)
}

// stagedBarriers is the barriers stageRow adds to every CTA (sm_80: one
// after the stores) or work item (sm_90a: one before and one after them)
// of plan p's forward for target tg at head_dim 64, whether or not it
// visits a tile: none for a kernel that does not stage (geom.stage).
func stagedBarriers(t *testing.T, p *gen.Plan, tg Target) int64 {
	t.Helper()
	g, err := planGeom(p, tg)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !g.stage:
		return 0
	case tg.Accel && hopProducer(p, 64):
		return 0 // the design with a producer does not stage (generateHopper)
	case tg.Accel:
		return 2
	}
	return 1
}

// checkVisits is TestInterpVisits for the kernel of target tg, whose CTAs
// with tiles and partial of them partial pass barriers(tiles, partial)
// barriers (finite data).
// Shapes pass through adjust (nil: none) for the plan.
//
// For a persistent kernel, grid is the CTAs launched (0: Geometry's, one
// per work item) and setup(ctas, items) the barriers outside the work
// items.
func checkVisits(t *testing.T, tg Target, masks []testMask, adjust func(*gen.Plan, shape) shape, barriers func(p *gen.Plan, tiles, partial int) int64, grid int, setup func(ctas, items int) int64) {
	t.Helper()
	for _, c := range masks {
		p := compilePattern(t, tg, c.name, c.p, 64)
		for _, sh := range []shape{{1, 2, 1, 300, 700}, {1, 1, 1, 1, 500}} {
			if adjust != nil {
				sh = adjust(p, sh)
			}
			var ids []int32
			var docs *spec.Docs
			switch {
			case p.UsesTree():
				ids = treeParents(sh.sk, 5)
				var err error
				if docs, err = spec.NewTree(ids); err != nil {
					t.Fatal(err)
				}
			case p.Pred.UsesDocs():
				ids = docIDs(sh.sk)
				var err error
				if docs, err = spec.NewDocs(ids); err != nil {
					t.Fatal(err)
				}
			}
			heads := callHeads(p, nil, rand.New(rand.NewPCG(uint64(sh.sk), 11)), sh)
			st := launchOn(t, p, tg, sh, ids, heads, grid, nil)
			var want int64
			items := 0
			var refs []gen.TileRef
			// heads with the same values visit the same tiles: one pass
			// per head with head parameters, one for every head without
			passes, mult := sh.hq, 1
			if heads == nil {
				passes, mult = 1, sh.hq
			}
			docs0 := docs
			for h := 0; h < passes; h++ {
				docs := headDocs(p, docs0, heads, h)
				for _, seg := range p.Segments(sh.sq, sh.sk) {
					off := seg.SeqK - seg.SeqQ
					for qt := 0; qt < p.QueryTiles(seg); qt++ {
						if h == 0 {
							items += sh.batch * sh.hq
						}
						q0 := qt*p.TileQ + off
						q1 := min(qt*p.TileQ+p.TileQ, seg.SeqQ) - 1 + off
						scan := planTiles(p, q0, q1, seg.SeqK, docs)
						partial := 0
						for _, r := range scan {
							if r.Class == mask.Partial {
								partial++ // sanitize's vote (the data is finite)
							}
						}
						if len(scan) > 0 {
							want += barriers(p, len(scan), partial)
						}
						classes := map[int]mask.Class{}
						for _, r := range scan {
							classes[r.K] = r.Class
						}
						refs = p.Visit(refs[:0], seg, qt, docs)
						for _, r := range refs {
							sc, ok := classes[r.K]
							switch {
							case !ok:
								t.Errorf("%s %v: segment %+v query tile %d: the plan visits key tile %d (%s), the kernel's scan does not", c.name, sh, seg, qt, r.K, r.Class)
							case sc == mask.Full && r.Class != mask.Full:
								t.Errorf("%s %v: segment %+v query tile %d: key tile %d is full by the class program, %s by keep words", c.name, sh, seg, qt, r.K, r.Class)
							}
						}
					}
				}
			}
			want *= int64(sh.batch * mult)
			want += stagedBarriers(t, p, tg) * int64(items)
			if setup != nil {
				ctas := grid
				if ctas == 0 {
					ctas = items
				}
				want += setup(ctas, items)
			}
			if st.Barriers != want {
				t.Errorf("%s (%s) %v: %d barriers, the plan's hull and class programs give %d", c.name, c.p, sh, st.Barriers, want)
			}
		}
	}
}

// launchCount runs the kernel of p for target tg on shape sh (document
// ids ids, nil for none) and returns the interpreter's statistics.
func launchCount(t *testing.T, p *gen.Plan, tg Target, sh shape, ids []int32) *ptxi.Stats {
	t.Helper()
	return launchOn(t, p, tg, sh, ids, nil, 0, nil)
}

// launchOn is launchCount with head parameter values (head-major; nil:
// none), on a grid of grid CTAs along x for a persistent kernel (0:
// Geometry's grid), with hook (if not nil) called with the device and the
// output's address before the launch.
func launchOn(t *testing.T, p *gen.Plan, tg Target, sh shape, ids []int32, heads []int32, grid int, hook func(dev *ptxi.Device, o uint64)) *ptxi.Stats {
	t.Helper()
	k, mod := generated(t, p, Config{Target: tg, SoftLg2: true})
	dev := ptxi.NewDevice()
	nq, nkv, nl := verify.Shape{Batch: sh.batch, HeadsQ: sh.hq, HeadsKV: sh.hkv, SeqQ: sh.sq, SeqK: sh.sk, HeadDim: p.HeadDim}.Sizes()
	var ptrs []uint64
	sizes := []int{2 * nq, 2 * nkv, 2 * nkv, 2 * nq, 4 * nl}
	var arrays [][]int32
	if ids != nil && !p.UsesTree() {
		start, end, err := DocArrays(ids)
		if err != nil {
			t.Fatal(err)
		}
		arrays = [][]int32{ids, start, end}
		sizes = append(sizes, 4*len(ids), 4*len(ids), 4*len(ids))
	}
	for x, n := range sizes {
		a, err := dev.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, a)
		if x >= 5 {
			u := make([]uint32, len(ids))
			for i, v := range arrays[x-5] {
				u[i] = uint32(v)
			}
			if err := dev.WriteU32(a, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ids != nil && p.UsesTree() {
		ptrs = append(ptrs, treeArrays(t, dev, func(n int) uint64 {
			a, err := dev.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			return a
		}, ids)...)
	}
	ptrs = append(ptrs, headArray(t, dev, func(n int) uint64 {
		a, err := dev.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}, heads)...)
	vs := verify.Shape{Batch: sh.batch, HeadsQ: sh.hq, HeadsKV: sh.hkv, SeqQ: sh.sq, SeqK: sh.sk, HeadDim: p.HeadDim}
	drawScore(p, &vs, rand.New(rand.NewPCG(uint64(sh.sk), 12)))
	sp, softCap := scoreArrays(t, dev, func(n int) uint64 {
		a, err := dev.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}, k.Params, k.Score, vs)
	ptrs = append(ptrs, sp...)
	l, err := k.Geometry(sh.batch, sh.hq, sh.hkv, sh.sq, sh.sk, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.SoftCap = softCap
	oAddr := ptrs[3]
	if k.Target.Accel {
		ptrs = append(ptrs[3:], tensorMaps(t, dev, k, sh, ptrs[0], ptrs[1], ptrs[2])...)
	}
	args, err := l.Args(ptrs...)
	if err != nil {
		t.Fatal(err)
	}
	if grid > 0 {
		l.Grid = [3]int{grid, 1, 1}
	}
	if hook != nil {
		hook(dev, oAddr)
	}
	st, err := dev.Launch(mod, k.Name, l.Grid, l.Block, l.DynShared, args...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestInterpHardwareLg2 runs the default kernel (lg2.approx) once the
// interpreter accepts lg2; until then it is skipped.
func TestInterpHardwareLg2(t *testing.T) {
	mk := randomMasks(6, 1)[0]
	p := compile(t, mk.name, mk.p.Mask, mk.p.Causal, 64)
	k, err := GenerateForward(p, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ptxi.Parse(k.Name, k.PTX); err != nil {
		if strings.Contains(err.Error(), "lg2") {
			t.Skipf("the interpreter lacks lg2.approx.ftz.f32: %v", err)
		}
		t.Fatal(err)
	}
	runForward(t, p, Config{}, shape{1, 2, 1, 100, 150}, nil, true)
}

// poison fills the output (n elements) and the log-sum-exp (nl) with NaN
// bits, so that an element the kernel does not write fails the comparison.
func poison(t *testing.T, dev *ptxi.Device, o, lse uint64, n, nl int) {
	t.Helper()
	h := make([]uint16, n)
	for i := range h {
		h[i] = 0x7fff
	}
	w := make([]uint32, nl)
	for i := range w {
		w[i] = 0x7fffffff
	}
	if err := dev.WriteU16(o, h); err != nil {
		t.Fatal(err)
	}
	if err := dev.WriteU32(lse, w); err != nil {
		t.Fatal(err)
	}
}

// docArrays copies the document id, start and end arrays of ids to the
// interpreter's memory and returns their addresses, in kernel parameter
// order.
func docArrays(t *testing.T, dev *ptxi.Device, alloc func(int) uint64, ids []int32) []uint64 {
	t.Helper()
	start, end, err := DocArrays(ids)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []uint64
	for _, a := range [][]int32{ids, start, end} {
		addr := alloc(4 * len(a))
		u := make([]uint32, len(a))
		for i, x := range a {
			u[i] = uint32(x)
		}
		if err := dev.WriteU32(addr, u); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, addr)
	}
	return addrs
}

// TestInterpJumpsEmptyTiles: a sink+window decode costs the same work at
// any cache length: after an empty tile the kernel jumps with the hull to
// the window instead of stepping through every tile between (it stepped
// through all of them before: 1024 steps at 64k keys).
func TestInterpJumpsEmptyTiles(t *testing.T) {
	p := compile(t, "sinkwin", spec.Union(spec.Global(4), spec.Window(1024)), true, 64)
	var ins []int64
	for _, sk := range []int{8192, 65536} {
		st := launchCount(t, p, SM80, shape{1, 1, 1, 1, sk}, nil)
		ins = append(ins, st.WarpInstructions)
	}
	if float64(ins[1]) > 1.1*float64(ins[0]) {
		t.Errorf("warp instructions %d at 8k keys, %d at 64k: the scan grows with the cache", ins[0], ins[1])
	}
}
