package generated_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/verify"
)

// poison32 and poison16 fill new outputs with bits no call writes (NaN
// payloads), different per run, so that an element left unwritten shows.
func poison32(n int, p uint32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(p)
	}
	return x
}

func poison16(n int, p uint16) []uint16 {
	x := make([]uint16, n)
	for i := range x {
		x[i] = p
	}
	return x
}

// widen16 returns the float32 values of 16-bit bits.
func widen16(elem int, b []uint16) []float32 {
	x := make([]float32, len(b))
	for i, h := range b {
		if elem == int(cpu.BF16) {
			x[i] = verify.FromBF16(h)
		} else {
			x[i] = verify.FromF16(h)
		}
	}
	return x
}

func diff32(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func randDocs(r *rand.Rand, n int) []int32 {
	ids := make([]int32, n)
	for i := 1; i < n; i++ {
		ids[i] = ids[i-1]
		if r.IntN(50) == 0 {
			ids[i]++
		}
	}
	return ids
}

// pagesOf lays contiguous caches out in shuffled pages of p positions
// (two spare pages; stale in every unused slot) and returns them with the
// table, ceil(SeqK/p) entries per batch.
func pagesOf[T float32 | uint16](r *rand.Rand, k, v []T, s verify.Shape, p int, stale T) (pk, pv []T, table []int32) {
	D := s.HeadDim
	need := (s.SeqK + p - 1) / p
	pages := s.Batch*need + 2
	per := s.HeadsKV * p * D
	pk, pv = make([]T, pages*per), make([]T, pages*per)
	for i := range pk {
		pk[i], pv[i] = stale, stale
	}
	order := r.Perm(pages)
	table = make([]int32, s.Batch*need)
	for b := 0; b < s.Batch; b++ {
		for i := 0; i < need; i++ {
			pg := order[b*need+i]
			table[b*need+i] = int32(pg)
			for h := 0; h < s.HeadsKV; h++ {
				for x := 0; x < p && i*p+x < s.SeqK; x++ {
					src := ((b*s.HeadsKV+h)*s.SeqK + i*p + x) * D
					dst := ((pg*s.HeadsKV+h)*p + x) * D
					copy(pk[dst:dst+D], k[src:src+D])
					copy(pv[dst:dst+D], v[src:src+D])
				}
			}
		}
	}
	return pk, pv, table
}

// TestArgsEntryPoint: every package's ForwardArgs gives, on every
// variant, what its other entry points give, bit for bit: float32 inputs
// as ForwardVariant, 16-bit inputs as ForwardVariant16, 16-bit output as
// that float32 output rounded to the format (f16 and bf16), and, in
// packages with page_size, the same from a paged cache in shuffled pages
// with NaN in every unused slot. Shapes: one decoding query with grouped
// heads, lengths off the tile sizes, a full prefill with a scale.
func TestArgsEntryPoint(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(91, 92))
	for _, p := range packages() {
		for _, tg := range cpu.Targets {
			v := int(tg.Variant)
			if !p.supported(v) {
				continue
			}
			args := p.args(v)
			for _, sh := range []verify.Shape{
				{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 333, HeadDim: p.headDim},
				{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 61, SeqK: 130, HeadDim: p.headDim},
				{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 150, SeqK: 150, HeadDim: p.headDim, Scale: 0.3},
			} {
				sh = withHeads(t, p, sh, r)
				name := fmt.Sprintf("%s/%s %v", p.file, tg.Name, sh)
				nq, nkv, nl := sh.Sizes()
				q, k, vv := randVec(r, nq), randVec(r, nkv), randVec(r, nkv)
				docs := randData(p, r, sh.SeqK)
				// call runs ForwardArgs with outputs poisoned by poison and
				// returns them (Out16 widened) with lse.
				call := func(a genArgs, out16 bool, poison uint32) (out, lse []float32, bits []uint16) {
					a.Docs, a.Shape, a.LSE = docs, sh, poison32(nl, poison)
					if out16 {
						a.Out16 = poison16(nq, uint16(poison))
					} else {
						a.Out = poison32(nq, poison)
					}
					if err := args(a); err != nil {
						t.Fatalf("%s: elem %d out16 %v paged %v: %v", name, a.Elem, out16, a.Table != nil, err)
					}
					return a.Out, a.LSE, a.Out16
				}
				check := func(what string, got, want []float32) {
					t.Helper()
					if i := diff32(got, want); i >= 0 {
						t.Fatalf("%s: %s[%d] = %v, want %v", name, what, i, got[i], want[i])
					}
				}

				// float32 inputs and output: ForwardVariant
				want, wantLSE := poison32(nq, 0x7fc0_0010), poison32(nl, 0x7fc0_0010)
				if err := p.run(v)(want, wantLSE, q, k, vv, docs, sh); err != nil {
					t.Fatal(err)
				}
				out, lse, _ := call(genArgs{Q: q, K: k, V: vv}, false, 0x7fc0_0011)
				check("fp32 out", out, want)
				check("fp32 lse", lse, wantLSE)
				var pk, pv []float32
				var table []int32
				if p.pageSize > 0 {
					pk, pv, table = pagesOf(r, k, vv, sh, p.pageSize, float32(math.NaN()))
					out, lse, _ = call(genArgs{Q: q, K: pk, V: pv, Table: table}, false, 0x7fc0_0012)
					check("fp32 paged out", out, want)
					check("fp32 paged lse", lse, wantLSE)
				}

				for _, elem := range []int{int(cpu.BF16), int(cpu.F16)} {
					q16, k16, v16 := bits16(elem, q), bits16(elem, k), bits16(elem, vv)
					want, wantLSE := poison32(nq, 0x7fc0_0020), poison32(nl, 0x7fc0_0020)
					if err := p.run16(v, elem)(want, wantLSE, q, k, vv, docs, sh); err != nil {
						t.Fatal(err)
					}
					wantBits := bits16(elem, want) // the float32 output rounded
					ways := []genArgs{{Elem: elem, Q16: q16, K16: k16, V16: v16}}
					if p.pageSize > 0 {
						stale := uint16(0x7e00) // f16 NaN
						if elem == int(cpu.BF16) {
							stale = 0x7fc0 // bf16 NaN
						}
						pk, pv, table := pagesOf(r, k16, v16, sh, p.pageSize, stale)
						ways = append(ways, genArgs{Elem: elem, Q16: q16, K16: pk, V16: pv, Table: table})
					}
					for _, a := range ways {
						kind := fmt.Sprintf("%s paged %v", cpu.Elem(elem), a.Table != nil)
						out, lse, _ := call(a, false, 0x7fc0_0021)
						check(kind+" out", out, want)
						check(kind+" lse", lse, wantLSE)
						_, lse, bits := call(a, true, 0x7fc0_0022)
						check(kind+" lse with out16", lse, wantLSE)
						for i, b := range bits {
							if want[i] != want[i] {
								if got := widen16(elem, bits[i:i+1])[0]; got == got {
									t.Fatalf("%s: %s out16[%d] = %#04x, want NaN", name, kind, i, b)
								}
								continue
							}
							if b != wantBits[i] {
								t.Fatalf("%s: %s out16[%d] = %#04x, want %v rounded: %#04x", name, kind, i, b, want[i], wantBits[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestArgsFields: Args has Docs exactly in document packages, Tree in
// tree packages, and Table
// exactly in packages with page_size (what a mask cannot take does not
// compile), and the fields every package shares.
func TestArgsFields(t *testing.T) {
	for _, p := range packages() {
		at := p.argsType
		if at.PkgPath() != "github.com/attngen/attngen/generated/"+p.dir {
			t.Errorf("%s: Args is %s.%s, not the package's own type", p.file, at.PkgPath(), at.Name())
		}
		for _, f := range []string{"Elem", "Q", "K", "V", "Q16", "K16", "V16", "Out", "Out16", "LSE", "Shape"} {
			if _, ok := at.FieldByName(f); !ok {
				t.Errorf("%s: Args has no field %s", p.file, f)
			}
		}
		if _, ok := at.FieldByName("Docs"); ok != (p.docs && !p.tree) {
			t.Errorf("%s: Args has Docs: %v, the mask has documents: %v", p.file, ok, p.docs && !p.tree)
		}
		if _, ok := at.FieldByName("Tree"); ok != p.tree {
			t.Errorf("%s: Args has Tree: %v, the mask has a tree: %v", p.file, ok, p.tree)
		}
		if _, ok := at.FieldByName("Table"); ok != (p.pageSize > 0) {
			t.Errorf("%s: Args has Table: %v, page_size %d", p.file, ok, p.pageSize)
		}
	}
}

// TestArgsErrors: each package's ForwardArgs rejects, with its own
// errors, slices of the wrong element type, both outputs or none, a
// 16-bit output for float32 inputs, an unknown element type, an output
// over an input, a head dimension not its own, an unknown variant,
// missing document ids and a bad page table.
func TestArgsErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(93, 94))
	for _, p := range packages() {
		s := withHeads(t, p, verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 10, SeqK: 40, HeadDim: p.headDim}, r)
		nq, nkv, nl := s.Sizes()
		q, k, v := randVec(r, nq), randVec(r, nkv), randVec(r, nkv)
		q16, k16, v16 := bits16(int(cpu.F16), q), bits16(int(cpu.F16), k), bits16(int(cpu.F16), v)
		docs := plainData(p, s.SeqK)
		f32 := genArgs{Q: q, K: k, V: v, Out: make([]float32, nq), LSE: make([]float32, nl), Docs: docs, Shape: s}
		h16 := genArgs{Elem: int(cpu.F16), Q16: q16, K16: k16, V16: v16, Out16: make([]uint16, nq), LSE: make([]float32, nl), Docs: docs, Shape: s}
		run := p.args(int(cpu.Auto))
		for _, a := range []genArgs{f32, h16} {
			if err := run(a); err != nil {
				t.Fatalf("%s: %v", p.file, err)
			}
		}
		with := func(a genArgs, f func(*genArgs)) genArgs { f(&a); return a }
		cases := []struct {
			what, err string
			a         genArgs
		}{
			{"fp32 with Q16", "shape", with(f32, func(a *genArgs) { a.Q16 = q16 })},
			{"fp32 with Out16", "shape", with(f32, func(a *genArgs) { a.Out, a.Out16 = nil, make([]uint16, nq) })},
			{"f16 with K", "shape", with(h16, func(a *genArgs) { a.K = k })},
			{"both outputs", "shape", with(h16, func(a *genArgs) { a.Out = make([]float32, nq) })},
			{"Elem 9", "shape", with(h16, func(a *genArgs) { a.Elem = 9 })},
			{"no output", "short", with(h16, func(a *genArgs) { a.Out16 = nil })},
			{"short Out16", "short", with(h16, func(a *genArgs) { a.Out16 = a.Out16[:nq-1] })},
			{"Out16 over Q16", "alias", with(h16, func(a *genArgs) { a.Out16 = q16 })},
			{"head dim", "headDim", with(h16, func(a *genArgs) { a.Shape.HeadDim = p.headDim ^ (64 | 128) })},
		}
		if p.docs {
			cases = append(cases, struct {
				what, err string
				a         genArgs
			}{"no document ids or parent array", "data", with(h16, func(a *genArgs) { a.Docs = nil })})
		}
		if p.pageSize > 0 {
			pk, pv, table := pagesOf(r, k16, v16, s, p.pageSize, 0)
			paged := with(h16, func(a *genArgs) { a.K16, a.V16, a.Table = pk, pv, table })
			if err := run(paged); err != nil {
				t.Fatalf("%s: paged: %v", p.file, err)
			}
			cases = append(cases, struct {
				what, err string
				a         genArgs
			}{"page past the cache", "page", with(paged, func(a *genArgs) { a.Table = append([]int32{1 << 20}, table[1:]...) })},
				struct {
					what, err string
					a         genArgs
				}{"short table", "page", with(paged, func(a *genArgs) { a.Table = table[:1] })})
		}
		for _, c := range cases {
			if err := run(c.a); !errors.Is(err, p.errs[c.err]) {
				t.Errorf("%s: %s: error %v, want %s.Err%s", p.file, c.what, err, p.dir, c.err)
			}
		}
		if err := p.args(99)(h16); !errors.Is(err, p.errs["variant"]) {
			t.Errorf("%s: variant 99: error %v, want %s.ErrVariant", p.file, err, p.dir)
		}
	}
}

// TestArgsNonFinite: through ForwardArgs with 16-bit inputs and 16-bit
// output, masked NaN and infinities never reach an output and kept ones
// give the reference's kinds of results, on every package and variant.
func TestArgsNonFinite(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(95, 96))
	for _, p := range packages() {
		s := load(t, p)
		for _, tg := range cpu.Targets {
			if !p.supported(int(tg.Variant)) {
				continue
			}
			for _, elem := range []int{int(cpu.BF16), int(cpu.F16)} {
				args := p.args(int(tg.Variant))
				run := func(out, lse, q, k, v []float32, docs []int32, sh verify.Shape) error {
					a := genArgs{Elem: elem, Q16: bits16(elem, q), K16: bits16(elem, k), V16: bits16(elem, v), Out16: poison16(len(out), 0x7fff),
						LSE: lse, Docs: docs, Shape: sh}
					if err := args(a); err != nil {
						return err
					}
					copy(out, widen16(elem, a.Out16))
					return nil
				}
				for _, sh := range hostileShapes(s.HeadDim)[1:] {
					if err := verify.CheckNonFinite(s.Pattern(), run, sh, r, 2); err != nil {
						t.Errorf("%s/%s/%s: %v", p.file, tg.Name, cpu.Elem(elem), err)
					}
				}
			}
		}
	}
}

// TestArgsNoAllocs: after the first call of a shape, a package's
// ForwardArgs (16-bit inputs and output, the paged cache where the package
// has one) allocates nothing.
func TestArgsNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := rand.New(rand.NewPCG(97, 98))
	for _, p := range packages() {
		s := withHeads(t, p, verify.Shape{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 2, SeqK: 300, HeadDim: p.headDim}, r)
		nq, nkv, nl := s.Sizes()
		elem := int(cpu.BF16)
		a := genArgs{Elem: elem, Q16: bits16(elem, randVec(r, nq)), K16: bits16(elem, randVec(r, nkv)), V16: bits16(elem, randVec(r, nkv)),
			Out16: make([]uint16, nq), LSE: make([]float32, nl), Shape: s}
		a.Docs = randData(p, r, s.SeqK)
		if p.pageSize > 0 {
			a.K16, a.V16, a.Table = pagesOf(r, a.K16, a.V16, s, p.pageSize, 0)
		}
		run := p.args(int(cpu.Auto))
		if allocs := testing.AllocsPerRun(5, func() {
			if err := run(a); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("%s: %v allocations per call", p.file, allocs)
		}
	}
}
