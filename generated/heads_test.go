package generated_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// headShapes are shapes of the head parameter checks, each with values per
// query head chosen to be awkward: every min (a window of one key, no
// sinks) at the first head of the first shape, every max, values next to them and in
// between, heads of one kv head on different values (the first visiting
// fewer key tiles than the next: they share one numbering of the packed
// tiles), and a pair of heads with equal values (decoding groups them
// into one job).
func headShapes(p spec.Pattern, d int) []verify.Shape {
	shapes := []verify.Shape{
		{Batch: 1, HeadsQ: 4, HeadsKV: 1, SeqQ: 150, SeqK: 150},
		{Batch: 2, HeadsQ: 6, HeadsKV: 2, SeqQ: 61, SeqK: 200},
		{Batch: 2, HeadsQ: 6, HeadsKV: 2, SeqQ: 3, SeqK: 700},
		{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: 1, SeqK: 1300},
	}
	n := len(p.Params)
	for x := range shapes {
		s := &shapes[x]
		s.HeadDim = d
		s.HeadParams = make([]int32, s.HeadsQ*n)
		for h := 0; h < s.HeadsQ; h++ {
			for k, hp := range p.Params {
				top := min(hp.Max, hp.Min+s.SeqK)
				vals := []int{hp.Min, hp.Max, hp.Min + (top-hp.Min)/3, hp.Min + 1, top - 1, hp.Min + (top-hp.Min)/7}
				v := vals[(h+k*x)%len(vals)] // the first shape: head 0 at every min
				if h == s.HeadsQ-1 {
					v = int(s.HeadParams[(h-1)*n+k]) // the last two heads are equal
				}
				s.HeadParams[h*n+k] = int32(max(hp.Min, min(hp.Max, v)))
			}
		}
	}
	return shapes
}

// TestHeadParamPackages: the packages of specs with head parameters, on
// every variant, each query head computing the mask bound to its own
// values (the float64 reference, outputs poisoned with NaN first): the
// float32 forward, bf16 and f16 inputs, the paged cache where the spec
// has one, and the backward; values of a wrong length or out of range are
// the package's ErrHeadParam.
func TestHeadParamPackages(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(141, 142))
	n := 0
	for _, p := range packages() {
		s := load(t, p)
		pat := s.Pattern()
		if !pat.HasParams() {
			continue
		}
		n++
		for _, tg := range cpu.Targets {
			v := int(tg.Variant)
			if !p.supported(v) {
				continue
			}
			name := p.file + "/" + tg.Name
			for _, sh := range headShapes(pat, s.HeadDim) {
				if _, err := verify.CheckNumeric(pat, p.run(v), sh, r); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for _, e := range []struct {
					elem cpu.Elem
					opt  verify.NumericOptions
				}{{cpu.BF16, verify.BF16Inputs}, {cpu.F16, verify.F16Inputs}} {
					if _, err := verify.CheckNumericWith(pat, p.run16(v, int(e.elem)), sh, r, e.opt); err != nil {
						t.Fatalf("%s/%s: %v", name, e.elem, err)
					}
				}
				if p.paged != nil {
					paged := func(out, lse, q, k, vv []float32, docs []int32, sh verify.Shape) error {
						pk, pv, table := pagesOf(r, k, vv, sh, p.pageSize, math.Float32frombits(0x7fc00000))
						return p.paged(v)(out, lse, q, pk, pv, table, docs, sh)
					}
					if _, err := verify.CheckNumeric(pat, paged, sh, r); err != nil {
						t.Fatalf("%s paged: %v", name, err)
					}
				}
				if sh.SeqQ*sh.SeqK <= 40000 {
					if _, err := verify.CheckGrad(pat, p.run(v), p.bwd(v), sh, r); err != nil {
						t.Fatalf("%s backward: %v", name, err)
					}
				}
			}
		}
		// errors through the package's API
		sh := headShapes(pat, s.HeadDim)[0]
		nq, nkv, nl := sh.Sizes()
		q, k, vv := randVec(r, nq), randVec(r, nkv), randVec(r, nkv)
		out, lse := make([]float32, nq), make([]float32, nl)
		ids := plainData(p, sh.SeqK)
		run := p.run(int(cpu.Auto))
		if err := run(out, lse, q, k, vv, ids, sh); err != nil {
			t.Fatalf("%s: %v", p.file, err)
		}
		np := len(pat.Params)
		bad := sh
		bad.HeadParams = append([]int32(nil), sh.HeadParams...)
		bad.HeadParams[2*np] = int32(pat.Params[0].Max + 1) // head 2
		want := "head parameter " + pat.Params[0].Name + " of query head 2 is "
		if err := run(out, lse, q, k, vv, ids, bad); !errors.Is(err, p.errs["headParam"]) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: a value past the max: %v, want ErrHeadParam naming it", p.file, err)
		}
		none := sh
		none.HeadParams = nil
		if err := run(out, lse, q, k, vv, ids, none); !errors.Is(err, p.errs["headParam"]) {
			t.Errorf("%s: no values: %v, want ErrHeadParam", p.file, err)
		}
		if err := p.bwd(int(cpu.Auto))(make([]float32, nq), make([]float32, nkv), make([]float32, nkv), randVec(r, nq), q, k, vv, out, lse, ids, bad, nil); !errors.Is(err, p.errs["headParam"]) {
			t.Errorf("%s: backward with a value past the max: %v, want ErrHeadParam", p.file, err)
		}
	}
	if n == 0 {
		t.Fatal("no example spec has head parameters")
	}
}
