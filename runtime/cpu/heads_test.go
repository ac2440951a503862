package cpu_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// headsPlan compiles a spec with head parameters (the mask names them)
// and returns its pattern and the plan as a compiled mask.
func headsPlan(t testing.TB, src string) (spec.Pattern, mask.Mask) {
	t.Helper()
	s, err := spec.Parse("heads.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.Compile(s, gen.CPUTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s.Pattern(), p.Mask()
}

// The masks of the tests: sinks and a window per head (the issue's
// example), a non-causal band with both sides per head over documents, and
// a dilated layout whose window varies by head.
const (
	headsSinksWindow = "name: h\nhead_dim: 64\nhead_params:\n  window: {min: 1, max: 300}\n  sinks: {min: 0, max: 5}\n" +
		"mask: {union: [{global: {tokens: sinks}}, {window: {size: window}}]}\n"
	headsBandDocs = "name: h\nhead_dim: 64\ncausal: false\nhead_params:\n  l: {min: 0, max: 90}\n  r: {min: 0, max: 40}\n" +
		"mask: {intersect: [{document: {}}, {window: {left: l, right: r}}]}\n"
	headsDilated = "name: h\nhead_dim: 64\nhead_params:\n  w: {min: 1, max: 64}\n" +
		"mask: {intersect: [{dilated: {stride: 3}}, {window: {size: w}}]}\n"
)

func cpuShapeOf(s verify.Shape) cpu.Shape {
	return cpu.Shape{Batch: s.Batch, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: s.SeqQ, SeqK: s.SeqK, HeadDim: s.HeadDim, Scale: float32(s.Scale)}
}

// headsRun is a verify.Run of ForwardArgs with the shape's head values.
func headsRun(p spec.Pattern, m mask.Mask, v cpu.Variant) verify.Run {
	return func(out, lse, q, k, v2 []float32, docs []int32, s verify.Shape) error {
		return cpu.ForwardArgs(m, v, cpu.Args{Q: q, K: k, V: v2, Out: out, LSE: lse, Docs: docs,
			HeadParams: cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), Shape: cpuShapeOf(s)})
	}
}

func headsBackward(p spec.Pattern, m mask.Mask, v cpu.Variant) verify.RunBackward {
	return func(dq, dk, dv, dout, q, k, v2, out, lse []float32, docs []int32, s verify.Shape, _ []float32) error {
		return cpu.BackwardHeads(m, v, dq, dk, dv, dout, q, k, v2, out, lse, docs, cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), cpuShapeOf(s))
	}
}

// headShapes are shapes whose query heads of one kv head get different
// values (fixed ones: min, max, and values in between that put the heads'
// visited key tiles apart), on prefill, chunked and decoding shapes.
func headShapes(p spec.Pattern, r *rand.Rand) []verify.Shape {
	var out []verify.Shape
	for _, s := range []verify.Shape{
		{Batch: 1, HeadsQ: 4, HeadsKV: 1, SeqQ: 200, SeqK: 200},
		{Batch: 2, HeadsQ: 6, HeadsKV: 2, SeqQ: 97, SeqK: 161},
		{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 700},   // decoding
		{Batch: 2, HeadsQ: 8, HeadsKV: 2, SeqQ: 3, SeqK: 900},   // decoding, grouped heads
		{Batch: 1, HeadsQ: 8, HeadsKV: 1, SeqQ: 16, SeqK: 1500}, // decoding, split parts
	} {
		s.HeadDim = 64
		// one set of values per head that cycles through the ends and
		// the middle of each range
		n := len(p.Params)
		s.HeadParams = make([]int32, s.HeadsQ*n)
		for h := 0; h < s.HeadsQ; h++ {
			for k, hp := range p.Params {
				mid := hp.Min + (min(hp.Max, hp.Min+s.SeqK)-hp.Min)/(2+h%3)
				s.HeadParams[h*n+k] = int32([]int{hp.Min, hp.Max, mid, hp.Min + 1, mid / 2}[(h+k)%5])
				s.HeadParams[h*n+k] = int32(max(hp.Min, min(hp.Max, int(s.HeadParams[h*n+k]))))
			}
		}
		out = append(out, s)
		// and random values
		s.HeadParams = verify.RandomHeadParams(p, r, s.HeadsQ, s.SeqK)
		out = append(out, s)
	}
	return out
}

func supported() []cpu.Variant {
	var out []cpu.Variant
	for _, t := range cpu.Targets {
		if cpu.Supported(t.Variant) && !(emulated && t.Variant == cpu.PureGo) {
			out = append(out, t.Variant)
		}
	}
	return out
}

// emulated: the tests run under user-mode emulation (.ci/run sets
// ATTNGEN_EMULATED for its arm64 run under qemu), where the driver tests
// check the architecture's assembly variants only; the pure-Go variant is
// the same Go on every architecture and runs natively in the amd64 run.
var emulated = os.Getenv("ATTNGEN_EMULATED") != ""

// TestHeadParamsNumeric: each query head computes the mask bound to its
// own values (float64 reference, verify), forward and backward, on every
// variant, with the heads of one kv head on different values.
func TestHeadParamsNumeric(t *testing.T) {
	r := rand.New(rand.NewPCG(111, 112))
	for _, src := range []string{headsSinksWindow, headsBandDocs, headsDilated} {
		p, m := headsPlan(t, src)
		for _, v := range supported() {
			for _, s := range headShapes(p, r) {
				if s.SeqQ < s.SeqK && !p.Causal {
					s.SeqQ = s.SeqK // non-causal bands: every row
				}
				if _, err := verify.CheckNumeric(p, headsRun(p, m, v), s, r); err != nil {
					t.Fatalf("%v %s %+v: %v", p, v, s, err)
				}
				if s.SeqQ*s.SeqK > 40000 {
					continue // the float64 gradient is slow
				}
				if _, err := verify.CheckGrad(p, headsRun(p, m, v), headsBackward(p, m, v), s, r); err != nil {
					t.Fatalf("%v %s %+v backward: %v", p, v, s, err)
				}
			}
		}
	}
}

// TestHeadParams16: 16-bit inputs (bf16 and f16), float32 and 16-bit
// outputs, and a paged cache, each head with its own values.
func TestHeadParams16(t *testing.T) {
	r := rand.New(rand.NewPCG(113, 114))
	p, m := headsPlan(t, headsSinksWindow)
	for _, v := range supported() {
		for _, s := range headShapes(p, r) {
			for _, c := range []struct {
				elem cpu.Elem
				opt  verify.NumericOptions
			}{{cpu.BF16, verify.BF16Inputs}, {cpu.F16, verify.F16Inputs}} {
				run := func(out, lse, q, k, vv []float32, docs []int32, s verify.Shape) error {
					return cpu.ForwardArgs(m, v, cpu.Args{Elem: c.elem, Q16: slice16(c.elem, q), K16: slice16(c.elem, k), V16: slice16(c.elem, vv),
						Out: out, LSE: lse, HeadParams: cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), Shape: cpuShapeOf(s)})
				}
				if _, err := verify.CheckNumericWith(p, run, s, r, c.opt); err != nil {
					t.Fatalf("%s %s %+v: %v", v, c.elem, s, err)
				}
			}
			// paged: pages of 16 positions in a shuffled order
			paged := func(out, lse, q, k, vv []float32, docs []int32, s verify.Shape) error {
				const P = 16
				D := s.HeadDim
				need := (s.SeqK + P - 1) / P
				pages := s.Batch * need
				pk, pv := make([]float32, pages*s.HeadsKV*P*D), make([]float32, pages*s.HeadsKV*P*D)
				for i := range pk {
					pk[i], pv[i] = float32(math.NaN()), float32(math.NaN())
				}
				order := r.Perm(pages)
				table := make([]int32, pages)
				for b := 0; b < s.Batch; b++ {
					for i := 0; i < need; i++ {
						page := order[b*need+i]
						table[b*need+i] = int32(page)
						for h := 0; h < s.HeadsKV; h++ {
							for x := 0; x < P && i*P+x < s.SeqK; x++ {
								src := ((b*s.HeadsKV+h)*s.SeqK + i*P + x) * D
								dst := ((page*s.HeadsKV+h)*P + x) * D
								copy(pk[dst:dst+D], k[src:src+D])
								copy(pv[dst:dst+D], vv[src:src+D])
							}
						}
					}
				}
				return cpu.ForwardArgs(m, v, cpu.Args{Q: q, K: pk, V: pv, Out: out, LSE: lse, Paged: cpu.Paged{PageSize: P, Table: table},
					HeadParams: cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), Shape: cpuShapeOf(s)})
			}
			if _, err := verify.CheckNumeric(p, paged, s, r); err != nil {
				t.Fatalf("%s paged %+v: %v", v, s, err)
			}
		}
	}
}

// TestHeadParamsOneHead: a call with head parameters gives each query head
// what a call of that head alone gives (its own rows of q, its kv head's
// keys and values, one head), within float32 rounding (the calls split
// their keys across parts differently): the values reach the right head,
// and the schedule and packed tiles the heads of a group share do not mix
// up their tiles.
func TestHeadParamsOneHead(t *testing.T) {
	r := rand.New(rand.NewPCG(115, 116))
	p, m := headsPlan(t, headsSinksWindow)
	n := len(p.Params)
	for _, v := range supported() {
		for _, vs := range headShapes(p, r) {
			s := cpuShapeOf(vs)
			a := newArgs(r, s)
			hp := cpu.SplitHeadParams(vs.HeadParams, n, s.HeadsQ)
			if err := cpu.ForwardArgs(m, v, cpu.Args{Q: a.q, K: a.k, V: a.v, Out: a.out, LSE: a.lse, HeadParams: hp, Shape: s}); err != nil {
				t.Fatal(err)
			}
			D, group := s.HeadDim, s.HeadsQ/s.HeadsKV
			one := s
			one.Batch, one.HeadsQ, one.HeadsKV = 1, 1, 1
			out, lse := make([]float32, s.SeqQ*D), make([]float32, s.SeqQ)
			for b := 0; b < s.Batch; b++ {
				for h := 0; h < s.HeadsQ; h++ {
					var h1 [mask.MaxHeadParams][]int32
					for k := 0; k < n; k++ {
						h1[k] = hp[k][h : h+1]
					}
					qo := (b*s.HeadsQ + h) * s.SeqQ * D
					ko := (b*s.HeadsKV + h/group) * s.SeqK * D
					if err := cpu.ForwardArgs(m, v, cpu.Args{Q: a.q[qo : qo+s.SeqQ*D], K: a.k[ko : ko+s.SeqK*D], V: a.v[ko : ko+s.SeqK*D],
						Out: out, LSE: lse, HeadParams: h1, Shape: one}); err != nil {
						t.Fatal(err)
					}
					if i := near(out, a.out[qo:qo+s.SeqQ*D]); i >= 0 {
						t.Fatalf("%s %+v: batch %d head %d (values %v): out[%d] = %v, the head alone %v", v, s, b, h, vs.HeadParams[h*n:h*n+n], i, a.out[qo+i], out[i])
					}
					if i := near(lse, a.lse[qo/D:qo/D+s.SeqQ]); i >= 0 {
						t.Fatalf("%s %+v: batch %d head %d (values %v): lse[%d] = %v, the head alone %v", v, s, b, h, vs.HeadParams[h*n:h*n+n], i, a.lse[qo/D+i], lse[i])
					}
				}
			}
		}
	}
}

// TestHeadParamsThreads: results with head parameters do not depend on
// the number of threads, forward and backward.
func TestHeadParamsThreads(t *testing.T) {
	r := rand.New(rand.NewPCG(117, 118))
	p, m := headsPlan(t, headsSinksWindow)
	for _, vs := range headShapes(p, r) {
		s := cpuShapeOf(vs)
		hp := cpu.SplitHeadParams(vs.HeadParams, len(p.Params), s.HeadsQ)
		a := newBargs(r, s)
		var first [][]float32
		for _, procs := range []int{1, 3, 8} {
			old := runtime.GOMAXPROCS(procs)
			if err := cpu.ForwardArgs(m, cpu.Auto, cpu.Args{Q: a.q, K: a.k, V: a.v, Out: a.out, LSE: a.lse, HeadParams: hp, Shape: s}); err != nil {
				t.Fatal(err)
			}
			err := cpu.BackwardHeads(m, cpu.Auto, a.dq, a.dk, a.dv, a.dout, a.q, a.k, a.v, a.out, a.lse, nil, hp, s)
			runtime.GOMAXPROCS(old)
			if err != nil {
				t.Fatal(err)
			}
			got := [][]float32{a.out, a.lse, a.dq, a.dk, a.dv}
			if first == nil {
				for _, x := range got {
					first = append(first, append([]float32(nil), x...))
				}
				continue
			}
			for i, x := range got {
				if j := sameBits32(x, first[i]); j >= 0 {
					t.Fatalf("%+v: GOMAXPROCS %d: result %d differs at %d", s, procs, i, j)
				}
			}
		}
	}
}

// TestHeadParamErrors: head parameter values are checked before anything
// runs, forward and backward, with messages naming the parameter, the
// head and the value.
func TestHeadParamErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(119, 120))
	_, m := headsPlan(t, headsSinksWindow)
	s := cpu.Shape{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 20, SeqK: 30, HeadDim: 64}
	a := newBargs(r, s)
	good := [mask.MaxHeadParams][]int32{{1, 300, 7, 20}, {0, 5, 2, 0}}
	with := func(f func(hp *[mask.MaxHeadParams][]int32)) [mask.MaxHeadParams][]int32 {
		hp := good
		hp[0], hp[1] = append([]int32(nil), good[0]...), append([]int32(nil), good[1]...)
		f(&hp)
		return hp
	}
	for _, c := range []struct {
		m    mask.Mask
		hp   [mask.MaxHeadParams][]int32
		want string
	}{
		{m, [mask.MaxHeadParams][]int32{}, "head parameter window has 0 values; the shape needs one per query head, HeadsQ = 4"},
		{m, with(func(hp *[mask.MaxHeadParams][]int32) { hp[1] = hp[1][:3] }), "head parameter sinks has 3 values"},
		{m, with(func(hp *[mask.MaxHeadParams][]int32) { hp[0][3] = 0 }), "head parameter window of query head 3 is 0, outside [1, 300]"},
		{m, with(func(hp *[mask.MaxHeadParams][]int32) { hp[0][1] = 301 }), "head parameter window of query head 1 is 301, outside [1, 300]"},
		{m, with(func(hp *[mask.MaxHeadParams][]int32) { hp[1][2] = -1 }), "head parameter sinks of query head 2 is -1, outside [0, 5]"},
		{m, with(func(hp *[mask.MaxHeadParams][]int32) { hp[2] = []int32{1, 1, 1, 1} }), "values given for head parameter 2, but the mask has 2 head parameters"},
		{causal{}, good, "but the mask has no head parameters"},
		{causal{}, [mask.MaxHeadParams][]int32{7: {}}, "0 values given for head parameter 7, but the mask has no head parameters"},
	} {
		errs := []error{
			cpu.ForwardArgs(c.m, cpu.PureGo, cpu.Args{Q: a.q, K: a.k, V: a.v, Out: a.out, LSE: a.lse, HeadParams: c.hp, Shape: s}),
			cpu.BackwardHeads(c.m, cpu.PureGo, a.dq, a.dk, a.dv, a.dout, a.q, a.k, a.v, a.out, a.lse, nil, c.hp, s),
		}
		for i, err := range errs {
			if !errors.Is(err, cpu.ErrHeadParam) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("call %d: got %v, want ErrHeadParam with %q", i, err, c.want)
			}
		}
	}
	// the entry points without head values reject a mask with parameters
	for i, err := range []error{
		cpu.Forward(m, cpu.PureGo, a.out, a.lse, a.q, a.k, a.v, nil, s),
		cpu.Backward(m, cpu.PureGo, a.dq, a.dk, a.dv, a.dout, a.q, a.k, a.v, a.out, a.lse, nil, s),
	} {
		if !errors.Is(err, cpu.ErrHeadParam) {
			t.Errorf("entry %d without values: %v, want ErrHeadParam", i, err)
		}
	}
	if err := cpu.ForwardArgs(m, cpu.PureGo, cpu.Args{Q: a.q, K: a.k, V: a.v, Out: a.out, LSE: a.lse, HeadParams: good, Shape: s}); err != nil {
		t.Fatal(err)
	}
}

// TestHeadParamsNoAllocs: once a shape has run, calls with head parameters
// allocate nothing, forward (prefill and decoding) and backward.
func TestHeadParamsNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := rand.New(rand.NewPCG(121, 122))
	p, m := headsPlan(t, headsSinksWindow)
	for _, vs := range headShapes(p, r)[:6] {
		s := cpuShapeOf(vs)
		hp := cpu.SplitHeadParams(vs.HeadParams, len(p.Params), s.HeadsQ)
		a := newBargs(r, s)
		for _, v := range supported() {
			fwd := func() {
				if err := cpu.ForwardArgs(m, v, cpu.Args{Q: a.q, K: a.k, V: a.v, Out: a.out, LSE: a.lse, HeadParams: hp, Shape: s}); err != nil {
					panic(err)
				}
			}
			bwd := func() {
				if err := cpu.BackwardHeads(m, v, a.dq, a.dk, a.dv, a.dout, a.q, a.k, a.v, a.out, a.lse, nil, hp, s); err != nil {
					panic(err)
				}
			}
			for name, f := range map[string]func(){"forward": fwd, "backward": bwd} {
				f()
				if n := testing.AllocsPerRun(5, f); n != 0 {
					t.Errorf("%s %s %+v: %v allocations per call", v, name, s, n)
				}
			}
		}
	}
}

// near returns the first index where a and b differ by more than float32
// rounding (relative 1e-5, or both the same infinity), or -1.
func near(a, b []float32) int {
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		if x == y {
			continue
		}
		if math.IsNaN(x) || math.IsNaN(y) || math.Abs(x-y) > 1e-5*max(1, math.Abs(x)) {
			return i
		}
	}
	return -1
}
