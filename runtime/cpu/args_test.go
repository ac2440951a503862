package cpu_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// testMask is a compiled mask with a name.
type testMask struct {
	name string
	m    mask.Mask
}

// argsMasks compiles masks that take the driver's different paths: causal
// (hand-written), a sliding window with sinks (empty tiles skipped), a
// dilated mask (residue classes: key rows gathered a stride apart) and
// documents (ids per key).
func argsMasks(t *testing.T, d int) []testMask {
	t.Helper()
	ms := []testMask{{"causal", causal{}}}
	for _, c := range []struct {
		name string
		m    *spec.Mask
	}{
		{"sinks+window", spec.Union(spec.Global(3), spec.Window(100))},
		{"dilated", spec.Dilated(3, 0)},
		{"document", spec.Intersect(spec.Document(), spec.Window(90))},
	} {
		p, err := gen.Compile(&spec.Spec{Name: "t", Mask: c.m, Causal: true, HeadDim: d}, gen.CPUTarget, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, testMask{c.name, p.Mask()})
	}
	return ms
}

// docIDs returns n non-decreasing document ids with a few boundaries.
func docIDs(r *rand.Rand, n int) []int32 {
	ids := make([]int32, n)
	for i := 1; i < n; i++ {
		ids[i] = ids[i-1]
		if r.IntN(40) == 0 {
			ids[i]++
		}
	}
	return ids
}

// to16 rounds float32 values to elem (bf16 or f16) bits with verify's
// float64-based rounding.
func to16(elem cpu.Elem, x float32) uint16 {
	if elem == cpu.BF16 {
		return verify.BF16(x)
	}
	return verify.F16(x)
}

func slice16(elem cpu.Elem, x []float32) []uint16 {
	b := make([]uint16, len(x))
	for i, v := range x {
		b[i] = to16(elem, v)
	}
	return b
}

// nan16 is elem's quiet NaN, inf16 its +Inf.
func nan16(elem cpu.Elem) uint16 {
	if elem == cpu.BF16 {
		return 0x7fc0
	}
	return 0x7e00
}

func inf16(elem cpu.Elem) uint16 {
	if elem == cpu.BF16 {
		return 0x7f80
	}
	return 0x7c00
}

func isNaN16(elem cpu.Elem, h uint16) bool {
	if elem == cpu.BF16 {
		return h&0x7fff > 0x7f80
	}
	return h&0x7fff > 0x7c00
}

// poisoned returns n elements of the poison bits p: outputs start as
// values the call never writes, different in the runs compared, so an
// element a call leaves unwritten shows as a difference.
func poisoned32(n int, p uint32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(p)
	}
	return x
}

func poisoned16(n int, p uint16) []uint16 {
	x := make([]uint16, n)
	for i := range x {
		x[i] = p
	}
	return x
}

func sameBits32(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func sameBits16(a, b []uint16) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestPaged16: a 16-bit paged cache (pages shuffled, the last page of
// every batch partly filled, NaN and Inf bits in every unused slot and
// spare page) gives the outputs of the same 16-bit values in a contiguous
// cache, bit for bit, for float32 and 16-bit output, bf16 and f16, on
// every variant, for several masks, page sizes (below, equal to, above a
// key tile, and not dividing it), table strides and awkward shapes (one
// query, grouped heads, lengths off the tile sizes). Outputs are poisoned
// differently before each of the two runs.
func TestPaged16(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 41))
	shapes := []cpu.Shape{
		{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 300, HeadDim: 64},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 130, SeqK: 250, HeadDim: 128},
		{Batch: 3, HeadsQ: 2, HeadsKV: 2, SeqQ: 5, SeqK: 77, HeadDim: 64},
		{Batch: 1, HeadsQ: 6, HeadsKV: 2, SeqQ: 61, SeqK: 199, HeadDim: 64},
	}
	masks := map[int][]testMask{64: argsMasks(t, 64), 128: argsMasks(t, 128)}
	runs := 0
	for _, tg := range cpu.Targets {
		if !cpu.Supported(tg.Variant) || emulated && tg.Variant == cpu.PureGo {
			continue
		}
		for _, elem := range []cpu.Elem{cpu.BF16, cpu.F16} {
			for si, s := range shapes {
				a := newArgs(r, s)
				q16, k16, v16 := slice16(elem, a.q), slice16(elem, a.k), slice16(elem, a.v)
				for mi, tm := range masks[s.HeadDim] {
					var docs []int32
					if tm.m.UsesDocs() {
						docs = docIDs(r, s.SeqK*(1+si%2*(s.Batch-1))) // shared, or one row per batch
					}
					for pi, p := range []int{16, 64, 7, 100} {
						need := (s.SeqK + p - 1) / p
						stride := []int{0, need + 2}[(pi+mi)%2]
						st := max(stride, need)
						pk, pv, table := pagedCacheOf(r, k16, v16, s, p, st, nan16(elem), inf16(elem))
						for _, out16 := range []bool{false, true} {
							name := fmt.Sprintf("%s %s %s %+v page %d stride %d out16 %v", tg.Name, elem, tm.name, s, p, stride, out16)
							call := func(k, v []uint16, pg cpu.Paged, poison uint32) ([]float32, []uint16, []float32) {
								ca := cpu.Args{Elem: elem, Q16: q16, K16: k, V16: v, LSE: poisoned32(len(a.lse), poison), Docs: docs, Paged: pg, Shape: s}
								if out16 {
									ca.Out16 = poisoned16(len(q16), uint16(poison))
								} else {
									ca.Out = poisoned32(len(q16), poison)
								}
								if err := cpu.ForwardArgs(tm.m, tg.Variant, ca); err != nil {
									t.Fatalf("%s: %v", name, err)
								}
								return ca.Out, ca.Out16, ca.LSE
							}
							wo, wo16, wl := call(k16, v16, cpu.Paged{}, 0x7fc0_0001)
							go_, go16, gl := call(pk, pv, cpu.Paged{PageSize: p, Table: table, TableStride: stride}, 0xffc0_0002)
							runs++
							if i := sameBits32(go_, wo); i >= 0 {
								t.Fatalf("%s: out[%d] = %v, contiguous %v", name, i, go_[i], wo[i])
							}
							if i := sameBits16(go16, wo16); i >= 0 {
								t.Fatalf("%s: out16[%d] = %#04x, contiguous %#04x", name, i, go16[i], wo16[i])
							}
							if i := sameBits32(gl, wl); i >= 0 {
								t.Fatalf("%s: lse[%d] = %v, contiguous %v", name, i, gl[i], wl[i])
							}
							for i, x := range wl {
								if x != x {
									t.Fatalf("%s: lse[%d] is NaN: a row was not written", name, i)
								}
							}
						}
					}
				}
			}
		}
	}
	if runs == 0 {
		t.Fatal("no variant ran")
	}
}

// TestOut16Rounded: Out16 holds exactly the float32 output of the same
// call (Out) rounded to the inputs' format, and lse is the same, on every
// variant, for bf16 and f16, several masks and shapes, with inputs that
// give ordinary outputs, outputs in the f16 subnormal range, rows that
// keep only -Inf scores (0 and -Inf), and NaN and Inf kept in values
// (NaN and infinite outputs), in contiguous and paged caches.
func TestOut16Rounded(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 43))
	shapes := []cpu.Shape{
		{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 257, HeadDim: 64},
		{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 150, HeadDim: 128},
		{Batch: 1, HeadsQ: 3, HeadsKV: 3, SeqQ: 9, SeqK: 9, HeadDim: 64, Scale: 0.5},
	}
	masks := map[int][]testMask{64: argsMasks(t, 64), 128: argsMasks(t, 128)}
	kinds := []string{"plain", "tiny", "nonfinite"}
	for _, tg := range cpu.Targets {
		if !cpu.Supported(tg.Variant) {
			continue
		}
		for _, elem := range []cpu.Elem{cpu.BF16, cpu.F16} {
			for si, s := range shapes {
				for ki, kind := range kinds {
					a := newArgs(r, s)
					D := s.HeadDim
					switch kind {
					case "plain":
						// Query row 0 of every head scores -Inf against every
						// key: key dimension 0 is positive, the query's -Inf.
						for i := 0; i < len(a.k); i += D {
							a.k[i] = 1 + float32(math.Abs(float64(a.k[i])))
						}
						for i := 0; i < len(a.q); i += s.SeqQ * D {
							a.q[i] = float32(math.Inf(-1))
						}
					case "tiny": // outputs around 2^-20: f16 subnormals
						for i := range a.v {
							a.v[i] *= 0x1p-20
						}
					case "nonfinite": // kept non-finite values
						for n := 0; n < 6; n++ {
							a.v[r.IntN(len(a.v))] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[n%3]
						}
					}
					q16, k16, v16 := slice16(elem, a.q), slice16(elem, a.k), slice16(elem, a.v)
					tm := masks[D][(si+ki)%len(masks[D])]
					var docs []int32
					if tm.m.UsesDocs() {
						docs = docIDs(r, s.SeqK)
					}
					var pg cpu.Paged
					k, v := k16, v16
					if ki == 1 { // one of three on a paged cache
						var table []int32
						k, v, table = pagedCacheOf(r, k16, v16, s, 16, (s.SeqK+15)/16, nan16(elem), nan16(elem))
						pg = cpu.Paged{PageSize: 16, Table: table}
					}
					name := fmt.Sprintf("%s %s %s %s %+v", tg.Name, elem, tm.name, kind, s)
					base := cpu.Args{Elem: elem, Q16: q16, K16: k, V16: v, Docs: docs, Paged: pg, Shape: s}
					a32, a16 := base, base
					a32.Out, a32.LSE = poisoned32(len(a.out), 0x7fc0_0003), poisoned32(len(a.lse), 0x7fc0_0003)
					a16.Out16, a16.LSE = poisoned16(len(a.out), 0x7fff), poisoned32(len(a.lse), 0x7fc0_0004)
					if err := cpu.ForwardArgs(tm.m, tg.Variant, a32); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if err := cpu.ForwardArgs(tm.m, tg.Variant, a16); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if i := sameBits32(a16.LSE, a32.LSE); i >= 0 {
						t.Fatalf("%s: lse[%d] = %v with Out16, %v with Out", name, i, a16.LSE[i], a32.LSE[i])
					}
					nonFinite, zeros := 0, 0
					for i, x := range a32.Out {
						got := a16.Out16[i]
						if x != x {
							nonFinite++
							if !isNaN16(elem, got) || got&0x8000 != uint16(math.Float32bits(x)>>16)&0x8000 {
								t.Fatalf("%s: out16[%d] = %#04x, out %v (%#08x): want NaN of the same sign", name, i, got, x, math.Float32bits(x))
							}
							continue
						}
						if math.IsInf(float64(x), 0) {
							nonFinite++
						}
						if x == 0 {
							zeros++
						}
						if want := to16(elem, x); got != want {
							t.Fatalf("%s: out16[%d] = %#04x, out %v rounds to %#04x", name, i, got, x, want)
						}
					}
					switch {
					case kind == "nonfinite" && nonFinite == 0:
						t.Fatalf("%s: no non-finite output", name)
					case kind == "plain" && zeros < s.Batch*s.HeadsQ*D:
						t.Fatalf("%s: %d zeros, want the rows that keep only -Inf scores", name, zeros)
					}
				}
			}
		}
	}
}

// TestArgsErrors: every bad Args is an error wrapping the documented
// value, never a panic, and nothing is written.
func TestArgsErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 45))
	s := cpu.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 9, SeqK: 40, HeadDim: 64}
	a := newArgs(r, s)
	nq, nkv, nl := len(a.q), len(a.k), len(a.lse)
	q16, k16, v16 := slice16(cpu.BF16, a.q), slice16(cpu.BF16, a.k), slice16(cpu.BF16, a.v)
	out16 := make([]uint16, nq)
	f32 := cpu.Args{Q: a.q, K: a.k, V: a.v, Out: a.out, LSE: a.lse, Shape: s}
	b16 := cpu.Args{Elem: cpu.BF16, Q16: q16, K16: k16, V16: v16, Out16: out16, LSE: a.lse, Shape: s}
	pk, pv, table := pagedCacheOf(r, k16, v16, s, 16, 3, 0x7fc0, 0x7fc0)
	paged := b16
	paged.K16, paged.V16, paged.Paged = pk, pv, cpu.Paged{PageSize: 16, Table: table}
	// Memory shared by slices of different types (the aliasing checks
	// compare bytes).
	raw := make([]float32, nq+nkv)
	as16 := func(x []float32) []uint16 { return unsafe.Slice((*uint16)(unsafe.Pointer(&x[0])), 2*len(x)) }
	as32 := func(x []int32) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&x[0])), len(x)) }
	with := func(base cpu.Args, f func(*cpu.Args)) cpu.Args { f(&base); return base }
	cases := []struct {
		name string
		m    mask.Mask
		a    cpu.Args
		want error
	}{
		{"fp32 with Q16", causal{}, with(f32, func(a *cpu.Args) { a.Q16 = q16 }), cpu.ErrShape},
		{"fp32 with V16", causal{}, with(f32, func(a *cpu.Args) { a.V16 = v16 }), cpu.ErrShape},
		{"fp32 with Out16", causal{}, with(f32, func(a *cpu.Args) { a.Out, a.Out16 = nil, out16 }), cpu.ErrShape},
		{"bf16 with Q", causal{}, with(b16, func(a *cpu.Args) { a.Q = f32.Q }), cpu.ErrShape},
		{"bf16 with K", causal{}, with(b16, func(a *cpu.Args) { a.K = f32.K }), cpu.ErrShape},
		{"f32 reading 16-bit only", causal{}, with(b16, func(a *cpu.Args) { a.Elem = cpu.F32 }), cpu.ErrShape},
		{"unknown Elem", causal{}, with(b16, func(a *cpu.Args) { a.Elem = 7 }), cpu.ErrShape},
		{"both outputs", causal{}, with(b16, func(a *cpu.Args) { a.Out = make([]float32, nq) }), cpu.ErrShape},
		{"no output", causal{}, with(b16, func(a *cpu.Args) { a.Out16 = nil }), cpu.ErrShort},
		{"no output, fp32", causal{}, with(f32, func(a *cpu.Args) { a.Out = nil }), cpu.ErrShort},
		{"short Out16", causal{}, with(b16, func(a *cpu.Args) { a.Out16 = out16[:nq-1] }), cpu.ErrShort},
		{"short Q16", causal{}, with(b16, func(a *cpu.Args) { a.Q16 = q16[:nq-1] }), cpu.ErrShort},
		{"short V16", causal{}, with(b16, func(a *cpu.Args) { a.V16 = v16[:nkv-1] }), cpu.ErrShort},
		{"short LSE", causal{}, with(b16, func(a *cpu.Args) { a.LSE = a.LSE[:nl-1] }), cpu.ErrShort},
		{"Out16 is Q16", causal{}, with(b16, func(a *cpu.Args) { a.Out16 = q16 }), cpu.ErrAlias},
		{"Out16 overlaps K16", causal{}, with(b16, func(a *cpu.Args) {
			buf := make([]uint16, nq+nkv)
			a.K16, a.Out16 = buf[:nkv], buf[nkv-1:]
		}), cpu.ErrAlias},
		{"Out16 inside V16", causal{}, with(b16, func(a *cpu.Args) { a.V16 = make([]uint16, nq+nkv); copy(a.V16, v16); a.Out16 = a.V16[nkv/2:][:nq] }), cpu.ErrAlias},
		{"Out16 overlaps LSE", causal{}, with(b16, func(a *cpu.Args) { a.LSE = raw[:nl]; a.Out16 = as16(raw)[2*nl-1:][:nq] }), cpu.ErrAlias},
		{"LSE overlaps Out16", causal{}, with(b16, func(a *cpu.Args) { a.Out16 = as16(raw)[:nq]; a.LSE = raw[nq/2-1:][:nl] }), cpu.ErrAlias},
		{"LSE inside Q16", causal{}, with(b16, func(a *cpu.Args) {
			buf := make([]float32, nq)
			a.Q16 = as16(buf)[:nq]
			a.LSE = buf[1 : 1+nl]
		}), cpu.ErrAlias},
		{"Out16 over the document ids", docMask{}, with(b16, func(a *cpu.Args) {
			ids := make([]int32, nq)
			a.Docs = ids[:s.SeqK]
			a.Out16 = as16(as32(ids))[:nq]
		}), cpu.ErrAlias},
		{"Out16 over the page table", causal{}, with(paged, func(a *cpu.Args) {
			tb := make([]int32, nq)
			copy(tb, table)
			a.Paged.Table = tb[:len(table)]
			a.Out16 = as16(as32(tb))[:nq]
		}), cpu.ErrAlias},
		{"Out over the page table", causal{}, with(paged, func(a *cpu.Args) {
			tb := make([]int32, nq)
			copy(tb, table)
			a.Paged.Table = tb[:len(table)]
			a.Out16, a.Out = nil, as32(tb)
			a.Elem, a.Q16, a.K16, a.V16, a.Q, a.K = cpu.F32, nil, nil, nil, f32.Q, make([]float32, len(pk))
			a.V = a.K
		}), cpu.ErrAlias},
		{"LSE over the page table", causal{}, with(paged, func(a *cpu.Args) {
			tb := make([]int32, nl+len(table))
			copy(tb, table)
			a.Paged.Table = tb[:len(table)]
			a.LSE = as32(tb)[len(table)-1:][:nl]
		}), cpu.ErrAlias},
		{"Docs without documents", causal{}, with(b16, func(a *cpu.Args) { a.Docs = make([]int32, s.SeqK) }), cpu.ErrDocument},
		{"no Docs for documents", docMask{}, b16, cpu.ErrDocument},
		{"table without a page size", causal{}, with(paged, func(a *cpu.Args) { a.Paged.PageSize = 0 }), cpu.ErrPage},
		{"stride without a page size", causal{}, with(b16, func(a *cpu.Args) { a.Paged.TableStride = 3 }), cpu.ErrPage},
		{"page past the 16-bit cache", causal{}, with(paged, func(a *cpu.Args) { a.K16 = a.K16[:len(a.K16)/2] }), cpu.ErrPage},
		{"short table, 16-bit", causal{}, with(paged, func(a *cpu.Args) { a.Paged.Table = table[:4] }), cpu.ErrPage},
		{"overflowing shape, 16-bit", causal{}, with(b16, func(a *cpu.Args) { a.Shape.Batch = 1 << 57 }), cpu.ErrShape},
		{"head dim 100", causal{}, with(b16, func(a *cpu.Args) { a.Shape.HeadDim = 100 }), cpu.ErrHeadDim},
	}
	for _, c := range cases {
		err := cpu.ForwardArgs(c.m, cpu.Auto, c.a)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
	if err := cpu.ForwardArgs(causal{}, 99, b16); !errors.Is(err, cpu.ErrVariant) {
		t.Errorf("variant 99: error %v, want ErrVariant", err)
	}
	// Allowed: one buffer for q, k and v (self-attention), Out16 and LSE
	// side by side in one allocation, no LSE, paged 16-bit caches with
	// either output.
	self := cpu.Shape{Batch: 2, HeadsQ: 1, HeadsKV: 1, SeqQ: 40, SeqK: 40, HeadDim: 64}
	ok := []cpu.Args{
		{Elem: cpu.F16, Q16: k16, K16: k16, V16: k16, Out16: make([]uint16, nkv), Shape: self},
		with(b16, func(a *cpu.Args) { a.Out16 = as16(raw)[:nq]; a.LSE = raw[nq/2:][:nl] }),
		with(b16, func(a *cpu.Args) { a.LSE = nil }),
		paged,
		with(paged, func(a *cpu.Args) { a.Out16, a.Out = nil, make([]float32, nq) }),
	}
	for i, a := range ok {
		if err := cpu.ForwardArgs(causal{}, cpu.Auto, a); err != nil {
			t.Errorf("allowed case %d: %v", i, err)
		}
	}
	// Only nil counts as absent: an empty Out16 with fp32 inputs is a
	// 16-bit output for an fp32 call.
	if err := cpu.ForwardArgs(causal{}, cpu.Auto, with(f32, func(a *cpu.Args) { a.Out16 = []uint16{} })); !errors.Is(err, cpu.ErrShape) {
		t.Errorf("fp32 with an empty, non-nil Out16: error %v, want ErrShape", err)
	}
}

// TestArgsNoAllocs: after warm-up a call through ForwardArgs, 16-bit,
// paged, with 16-bit output, allocates nothing.
func TestArgsNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := rand.New(rand.NewPCG(46, 47))
	s := cpu.Shape{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 3, SeqK: 700, HeadDim: 64}
	a := newArgs(r, s)
	q16, k16, v16 := slice16(cpu.F16, a.q), slice16(cpu.F16, a.k), slice16(cpu.F16, a.v)
	pk, pv, table := pagedCacheOf(r, k16, v16, s, 16, 44, 0, 0)
	args := cpu.Args{Elem: cpu.F16, Q16: q16, K16: pk, V16: pv, Out16: make([]uint16, len(q16)), LSE: a.lse,
		Paged: cpu.Paged{PageSize: 16, Table: table}, Shape: s}
	for _, tg := range cpu.Targets {
		if !cpu.Supported(tg.Variant) {
			continue
		}
		allocs := testing.AllocsPerRun(5, func() {
			if err := cpu.ForwardArgs(causal{}, tg.Variant, args); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per call", tg.Name, allocs)
		}
	}
}
