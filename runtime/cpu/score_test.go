package cpu_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// scoreSpecs are masks and score sections that take the driver's paths
// with a score stage: a window with sinks (empty and partial tiles), a
// dilated mask (residue classes: positions a stride apart, so ALiBi's
// distances are multiples of the stride), documents, head parameters,
// and a non-causal band with symmetric ALiBi.
var scoreSpecs = []struct {
	src  string
	d    int
	full bool // not causal: every query row (SeqQ = SeqK)
}{
	{"name: s\nmask: {union: [{global: {tokens: 3}}, {window: {size: 100}}]}\nscore: {softcap: 20, alibi: {}, learned_sinks: true}\n", 64, false},
	{"name: s\nmask: {window: {size: 300}}\nscore: {softcap: call}\n", 64, false},
	{"name: s\nmask: {dilated: {stride: 3}}\nscore: {alibi: {slopes: call}, learned_sinks: true}\n", 64, false},
	{"name: s\nmask: {intersect: [{document: {}}, {window: {size: 90}}]}\nscore: {alibi: {}}\n", 64, false},
	{"name: s\nhead_params: {w: {min: 1, max: 400}}\nmask: {window: {size: w}}\nscore: {softcap: 8, learned_sinks: true}\n", 64, false},
	{"name: s\ncausal: false\nmask: {window: {left: 40, right: 70}}\nscore: {softcap: 30, alibi: {slopes: call}}\n", 128, true},
}

// scoreRun is a verify.Run of ForwardArgs with the shape's head and score
// values.
func scoreRun(p spec.Pattern, m mask.Mask, v cpu.Variant, elem cpu.Elem) verify.Run {
	return func(out, lse, q, k, vv []float32, docs []int32, s verify.Shape) error {
		a := cpu.Args{Out: out, LSE: lse, Docs: docs, HeadParams: cpu.SplitHeadParams(s.HeadParams, len(p.Params), s.HeadsQ), Shape: cpuShapeOf(s)}
		if elem == cpu.F32 {
			a.Q, a.K, a.V = q, k, vv
		} else {
			a.Elem, a.Q16, a.K16, a.V16 = elem, slice16(elem, q), slice16(elem, k), slice16(elem, vv)
		}
		a.SoftCap, a.Slopes, a.Sinks = s.Score.Float32()
		return cpu.ForwardArgs(m, v, a)
	}
}

// TestScoreNumeric: every variant computes each score stage as the float64
// reference defines it (verify.Reference from the published definitions),
// prefill, decoding (few rows, grouped heads, split parts), 16-bit inputs,
// and the masked-data rule holds through the stage.
func TestScoreNumeric(t *testing.T) {
	r := rand.New(rand.NewPCG(211, 212))
	for _, c := range scoreSpecs {
		p, m := headsPlan(t, fmt.Sprintf("%shead_dim: %d\n", c.src, c.d))
		shapes := headShapes(p, r)
		if testing.Short() {
			shapes = []verify.Shape{shapes[1], shapes[3]} // prefill and grouped decoding
		}
		for _, v := range supported() {
			for x, s := range shapes {
				s.HeadDim = c.d
				if c.full {
					s.SeqQ = s.SeqK
				}
				if _, err := verify.CheckNumeric(p, scoreRun(p, m, v, cpu.F32), s, r); err != nil {
					t.Fatalf("%s %s %+v: %v", p.Score, v, s, err)
				}
				if x != 1 && x != 3 && !testing.Short() {
					continue // the non-finite rule on a prefill and a decoding shape
				}
				if err := verify.CheckNonFinite(p, scoreRun(p, m, v, cpu.F32), s, r, 2); err != nil {
					t.Fatalf("%s %s %+v non-finite: %v", p.Score, v, s, err)
				}
			}
			s := verify.Shape{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 3, SeqK: 800, HeadDim: c.d}
			if c.full {
				s.SeqQ = s.SeqK
			}
			for _, e := range []struct {
				elem cpu.Elem
				opt  verify.NumericOptions
			}{{cpu.BF16, verify.BF16Inputs}, {cpu.F16, verify.F16Inputs}} {
				if _, err := verify.CheckNumericWith(p, scoreRun(p, m, v, e.elem), s, r, e.opt); err != nil {
					t.Fatalf("%s %s %s %+v: %v", p.Score, v, e.elem, s, err)
				}
			}
		}
	}
}

// TestScorePaged: with a score stage, a paged cache (shuffled pages,
// stale NaN and Inf in unused slots) gives the contiguous cache's
// outputs bit for bit, decoding and prefill, on every variant.
func TestScorePaged(t *testing.T) {
	r := rand.New(rand.NewPCG(215, 216))
	p, m := headsPlan(t, scoreSpecs[0].src+"head_dim: 64\n")
	for _, v := range supported() {
		for _, s := range []cpu.Shape{
			{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 2, SeqK: 700, HeadDim: 64},
			{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 150, SeqK: 300, HeadDim: 64},
		} {
			vs := verify.RandomScore(p.Score, s.HeadsQ, r)
			_, _, sinks := vs.Float32()
			nq, nkv := s.Batch*s.HeadsQ*s.SeqQ*64, s.Batch*s.HeadsKV*s.SeqK*64
			q, k, vv := randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv)
			want, wantLSE := make([]float32, nq), make([]float32, nq/64)
			if err := cpu.ForwardArgs(m, v, cpu.Args{Q: q, K: k, V: vv, Out: want, LSE: wantLSE, Sinks: sinks, Shape: s}); err != nil {
				t.Fatal(err)
			}
			for _, ps := range []int{16, 100} {
				need := (s.SeqK + ps - 1) / ps
				pk, pv, table := pagedCache(r, k, vv, s, ps, need)
				out, lse := make([]float32, nq), make([]float32, nq/64)
				if err := cpu.ForwardArgs(m, v, cpu.Args{Q: q, K: pk, V: pv, Out: out, LSE: lse, Sinks: sinks, Paged: cpu.Paged{PageSize: ps, Table: table}, Shape: s}); err != nil {
					t.Fatal(err)
				}
				for x := range out {
					if math.Float32bits(out[x]) != math.Float32bits(want[x]) {
						t.Fatalf("%s %+v pages of %d: out[%d] = %v, contiguous %v", v, s, ps, x, out[x], want[x])
					}
				}
				for x := range lse {
					if math.Float32bits(lse[x]) != math.Float32bits(wantLSE[x]) {
						t.Fatalf("%s %+v pages of %d: lse[%d] = %v, contiguous %v", v, s, ps, x, lse[x], wantLSE[x])
					}
				}
			}
		}
	}
}

// TestScoreEmptyRows: with a learned sink, a row that keeps no key gets
// output 0 and lse = its head's sink logit (without a sink, -Inf); a sink
// of -Inf is no sink.
func TestScoreEmptyRows(t *testing.T) {
	// a bridge keeps nothing in most rows
	p, m := headsPlan(t, "name: s\nmask: {bridge: {block: 64, targets: 4, sources: 8}}\nhead_dim: 64\nscore: {learned_sinks: true}\n")
	s := cpu.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 200, SeqK: 200, HeadDim: 64}
	r := rand.New(rand.NewPCG(213, 214))
	q, k, v := randSlice(r, 2*200*64), randSlice(r, 200*64), randSlice(r, 200*64)
	for _, vr := range supported() {
		out, lse := make([]float32, 2*200*64), make([]float32, 2*200)
		sinks := []float32{1.5, float32(math.Inf(-1))}
		if err := cpu.ForwardArgs(m, vr, cpu.Args{Q: q, K: k, V: v, Out: out, LSE: lse, Sinks: sinks, Shape: s}); err != nil {
			t.Fatal(err)
		}
		empty := 0
		for row := 0; row < 400; row++ {
			i := row % 200
			kept := false
			for j := 0; j <= i; j++ {
				kept = kept || p.At(i, j)
			}
			if kept {
				continue
			}
			empty++
			want := float32(1.5)
			if row >= 200 {
				want = float32(math.Inf(-1))
			}
			if lse[row] != want {
				t.Fatalf("%s: row %d keeps no key: lse %v, want the sink %v", vr, row, lse[row], want)
			}
			for d := 0; d < 64; d++ {
				if out[row*64+d] != 0 {
					t.Fatalf("%s: row %d keeps no key: out[%d] = %v", vr, row, d, out[row*64+d])
				}
			}
		}
		if empty == 0 {
			t.Fatal("no empty row")
		}
	}
}

// TestScoreErrors: values that do not fit the stage are ErrScore, before
// anything is written.
func TestScoreErrors(t *testing.T) {
	compile := func(sc string) mask.Mask {
		s, err := spec.Parse("t.yaml", []byte("name: s\nmask: {window: {size: 8}}\nhead_dim: 64\n"+sc))
		if err != nil {
			t.Fatal(err)
		}
		p, err := gen.Compile(s, gen.CPUTarget, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.Mask()
	}
	plain, capped, callCap := compile(""), compile("score: {softcap: 30}\n"), compile("score: {softcap: call}\n")
	slopes, geo, sinks := compile("score: {alibi: {slopes: call}}\n"), compile("score: {alibi: {}}\n"), compile("score: {learned_sinks: true}\n")
	s := cpu.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 4, SeqK: 4, HeadDim: 64}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		name string
		m    mask.Mask
		a    cpu.Args
	}{
		{"cap to a mask without", plain, cpu.Args{SoftCap: 3}},
		{"cap to a fixed cap", capped, cpu.Args{SoftCap: 30}},
		{"no cap", callCap, cpu.Args{}},
		{"negative cap", callCap, cpu.Args{SoftCap: -1}},
		{"NaN cap", callCap, cpu.Args{SoftCap: nan}},
		{"infinite cap", callCap, cpu.Args{SoftCap: inf}},
		{"slopes to a mask without", plain, cpu.Args{Slopes: []float32{1, 1}}},
		{"slopes to geometric", geo, cpu.Args{Slopes: []float32{1, 1}}},
		{"no slopes", slopes, cpu.Args{}},
		{"short slopes", slopes, cpu.Args{Slopes: []float32{1}}},
		{"NaN slope", slopes, cpu.Args{Slopes: []float32{1, nan}}},
		{"infinite slope", slopes, cpu.Args{Slopes: []float32{inf, 1}}},
		{"sinks to a mask without", plain, cpu.Args{Sinks: []float32{0, 0}}},
		{"no sinks", sinks, cpu.Args{}},
		{"long sinks", sinks, cpu.Args{Sinks: []float32{0, 0, 0}}},
		{"NaN sink", sinks, cpu.Args{Sinks: []float32{nan, 0}}},
		{"+Inf sink", sinks, cpu.Args{Sinks: []float32{0, inf}}},
	} {
		out := make([]float32, 2*4*64)
		for i := range out {
			out[i] = 7
		}
		a := c.a
		a.Q, a.K, a.V, a.Out, a.Shape = make([]float32, 2*4*64), make([]float32, 4*64), make([]float32, 4*64), out, s
		err := cpu.ForwardArgs(c.m, cpu.Auto, a)
		if !errors.Is(err, cpu.ErrScore) {
			t.Errorf("%s: %v, want ErrScore", c.name, err)
		}
		if out[0] != 7 {
			t.Errorf("%s: output written", c.name)
		}
		b := cpu.BackArgs{DQ: make([]float32, 2*4*64), DK: make([]float32, 4*64), DV: make([]float32, 4*64), DOut: a.Q, Q: a.Q, K: a.K, V: a.V, Out: a.Q, LSE: make([]float32, 8),
			SoftCap: c.a.SoftCap, Slopes: c.a.Slopes, Sinks: c.a.Sinks, Shape: s}
		if err := cpu.BackwardArgs(c.m, cpu.Auto, b); !errors.Is(err, cpu.ErrScore) {
			t.Errorf("%s: backward: %v, want ErrScore", c.name, err)
		}
	}
	// -Inf is a valid sink (none), and DSinks only for learned sinks
	a := cpu.Args{Q: make([]float32, 2*4*64), K: make([]float32, 4*64), V: make([]float32, 4*64), Out: make([]float32, 2*4*64), Sinks: []float32{float32(math.Inf(-1)), 0}, Shape: s}
	if err := cpu.ForwardArgs(sinks, cpu.Auto, a); err != nil {
		t.Errorf("-Inf sink: %v", err)
	}
	b := cpu.BackArgs{DQ: make([]float32, 2*4*64), DK: make([]float32, 4*64), DV: make([]float32, 4*64), DOut: a.Q, Q: a.Q, K: a.K, V: a.V, Out: a.Out, LSE: make([]float32, 8),
		DSinks: make([]float32, 2), Shape: s}
	if err := cpu.BackwardArgs(plain, cpu.Auto, b); !errors.Is(err, cpu.ErrScore) {
		t.Errorf("DSinks to a mask without sinks: %v", err)
	}
	b.Sinks, b.DSinks = a.Sinks, make([]float32, 1)
	if err := cpu.BackwardArgs(sinks, cpu.Auto, b); !errors.Is(err, cpu.ErrShort) {
		t.Errorf("short DSinks: %v", err)
	}
	b.DSinks = b.DQ[:2]
	if err := cpu.BackwardArgs(sinks, cpu.Auto, b); !errors.Is(err, cpu.ErrAlias) {
		t.Errorf("DSinks inside dq: %v", err)
	}
}
