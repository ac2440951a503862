package cpu_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// The masks of the shape tests: a causal window with sinks (empty and
// full tiles), a dilated mask (residue classes) and documents with a
// window (run-time data).
var shapeSpecs = []string{
	"name: s\nmask: {union: [{global: {tokens: 3}}, {window: {size: 100}}]}\n",
	"name: s\nmask: {dilated: {stride: 3}}\n",
	"name: s\nmask: {intersect: [{document: {}}, {window: {size: 90}}]}\n",
}

// shapeCall is one forward call of the shape tests: float32 inputs in
// BHSD unless a test changes them, out and lse poisoned.
type shapeCall struct {
	a        cpu.Args
	q, k, v  []float32
	docs     []int32
	ids      *spec.Docs
	s        cpu.Shape
	pos      int // positions the document ids cover
	nOut, nL int
}

func newShapeCall(t testing.TB, r *rand.Rand, m mask.Mask, s cpu.Shape, dv, pos int) *shapeCall {
	t.Helper()
	if dv == 0 {
		dv = s.HeadDim
	}
	c := &shapeCall{s: s, pos: pos}
	c.q = randSlice(r, s.Batch*s.HeadsQ*s.SeqQ*s.HeadDim)
	c.k = randSlice(r, s.Batch*s.HeadsKV*s.SeqK*s.HeadDim)
	c.v = randSlice(r, s.Batch*s.HeadsKV*s.SeqK*dv)
	c.nOut, c.nL = s.Batch*s.HeadsQ*s.SeqQ*dv, s.Batch*s.HeadsQ*s.SeqQ
	if m.UsesDocs() {
		c.docs = docIDs(r, pos)
		var err error
		if c.ids, err = spec.NewDocs(c.docs); err != nil {
			t.Fatal(err)
		}
	}
	c.a = cpu.Args{Q: c.q, K: c.k, V: c.v, Out: poisoned32(c.nOut, 0x7fc0_0011), LSE: poisoned32(c.nL, 0x7fc0_0012), Docs: c.docs, Shape: s, HeadDimV: dv}
	return c
}

// verifyShape is the reference's shape of a call.
func verifyShape(a *cpu.Args) verify.Shape {
	s := a.Shape
	return verify.Shape{Batch: s.Batch, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: s.SeqQ, SeqK: s.SeqK, HeadDim: s.HeadDim,
		HeadDimV: a.HeadDimV, Scale: float64(s.Scale), SeqLensQ: a.SeqLensQ, SeqLensK: a.SeqLensK, QPos: a.QPos, KPos: a.KPos}
}

// closeTo checks a call's BHSD out and lse against the float64 reference:
// every element written (the poison gone), within float32 rounding of
// sums over a few hundred keys.
func closeTo(t *testing.T, name string, out, lse []float32, wo, wl []float64) {
	t.Helper()
	for i, w := range wo {
		if g := float64(out[i]); math.IsNaN(g) || math.Abs(g-w) > 2e-4*(1+math.Abs(w)) {
			t.Fatalf("%s: out[%d] = %v, reference %v", name, i, g, w)
		}
	}
	for i, w := range wl {
		g := float64(lse[i])
		if math.IsInf(w, -1) {
			if !math.IsInf(g, -1) {
				t.Fatalf("%s: lse[%d] = %v, reference -Inf", name, i, g)
			}
			continue
		}
		if math.IsNaN(g) || math.Abs(g-w) > 2e-4*(1+math.Abs(w)) {
			t.Fatalf("%s: lse[%d] = %v, reference %v", name, i, g, w)
		}
	}
}

// TestHeadDims: every variant runs head sizes with kernels of their own
// and sizes it pads to the next kernel (multiples of 8 from 8 to 256),
// different sizes for q/k and v, prefill and decoding, float32 and
// bfloat16, contiguous and paged, against the float64 reference.
func TestHeadDims(t *testing.T) {
	r := rand.New(rand.NewPCG(301, 302))
	dims := [][2]int{{8, 8}, {40, 40}, {64, 64}, {80, 80}, {96, 96}, {104, 104}, {192, 128}, {256, 256}, {24, 56}}
	if testing.Short() {
		dims = [][2]int{{40, 40}, {96, 96}, {192, 128}, {256, 256}}
	}
	shapes := []cpu.Shape{
		{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 150},
		{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 300},
	}
	for si, src := range shapeSpecs {
		p, m := headsPlan(t, src)
		for di, d := range dims {
			for _, v := range supported() {
				for x, s := range shapes {
					s.HeadDim = d[0]
					c := newShapeCall(t, r, m, s, d[1], s.SeqK)
					name := fmt.Sprintf("%s %s dims %v %+v", p.Mask, v, d, s)
					wo, wl, err := verify.Reference(p, c.ids, c.q, c.k, c.v, verifyShape(&c.a))
					if err != nil {
						t.Fatal(err)
					}
					a := c.a
					switch (si + di + x) % 3 {
					case 1: // bfloat16 inputs: the reference of the rounded values
						q16, k16, v16 := slice16(cpu.BF16, c.q), slice16(cpu.BF16, c.k), slice16(cpu.BF16, c.v)
						a.Q, a.K, a.V, a.Elem, a.Q16, a.K16, a.V16 = nil, nil, nil, cpu.BF16, q16, k16, v16
						if wo, wl, err = verify.Reference(p, c.ids, widen16(cpu.BF16, q16), widen16(cpu.BF16, k16), widen16(cpu.BF16, v16), verifyShape(&c.a)); err != nil {
							t.Fatal(err)
						}
					case 2: // a paged cache of 16 positions a page, stale pages NaN
						a.K, a.V, a.Paged = pagedOf(r, c.k, c.v, s, d[1], 16)
					}
					if err := cpu.ForwardArgs(m, v, a); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					closeTo(t, name, a.Out, a.LSE, wo, wl)
				}
			}
		}
	}
}

// widen16 returns 16-bit values as float32, exactly.
func widen16(elem cpu.Elem, x []uint16) []float32 {
	out := make([]float32, len(x))
	for i, h := range x {
		if elem == cpu.BF16 {
			out[i] = math.Float32frombits(uint32(h) << 16)
		} else {
			out[i] = verify.FromF16(h)
		}
	}
	return out
}

// pagedOf lays k and v (BHSD, their own head sizes) out as a paged cache
// of p positions a page in shuffled pages, the rest NaN, and returns the
// Paged value.
func pagedOf(r *rand.Rand, k, v []float32, s cpu.Shape, dv, p int) ([]float32, []float32, cpu.Paged) {
	if dv == 0 {
		dv = s.HeadDim
	}
	need := (s.SeqK + p - 1) / p
	pages := s.Batch*need + 2
	pk, pv := poisoned32(pages*s.HeadsKV*p*s.HeadDim, 0x7fc0_0013), poisoned32(pages*s.HeadsKV*p*dv, 0x7fc0_0014)
	order := r.Perm(pages)
	table := make([]int32, s.Batch*need)
	for b := 0; b < s.Batch; b++ {
		for i := 0; i < need; i++ {
			pg := order[b*need+i]
			table[b*need+i] = int32(pg)
			for h := 0; h < s.HeadsKV; h++ {
				for x := 0; x < p && i*p+x < s.SeqK; x++ {
					row := (b*s.HeadsKV+h)*s.SeqK + i*p + x
					at := (pg*s.HeadsKV+h)*p + x
					copy(pk[at*s.HeadDim:][:s.HeadDim], k[row*s.HeadDim:])
					copy(pv[at*dv:][:dv], v[row*dv:])
				}
			}
		}
	}
	return pk, pv, cpu.Paged{PageSize: p, Table: table}
}

// strided copies a BHSD tensor of n = (batches, heads, positions) rows of
// w elements into a buffer with strides x (filled with NaN elsewhere),
// from offset base on.
func strided(src []float32, n [3]int, w int, x cpu.Strides, base, size int) []float32 {
	dst := poisoned32(size, 0x7fc0_0015)
	copyStrided(dst[base:], src, n, w, x)
	return dst
}

// TestLayouts: BSHD, a packed QKV buffer, padded strides and a paged
// cache with its own strides give the bits of the BHSD call on the same
// values, on every variant, float32 and f16, prefill and decoding.
func TestLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(303, 304))
	for _, src := range shapeSpecs[:2] {
		_, m := headsPlan(t, src)
		for _, s := range []cpu.Shape{
			{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 130, SeqK: 130, HeadDim: 64},
			{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 200, HeadDim: 96},
		} {
			for _, v := range supported() {
				for _, elem := range []cpu.Elem{cpu.F32, cpu.F16} {
					c := newShapeCall(t, r, m, s, 0, s.SeqK)
					ref := c.a
					if err := cpu.ForwardArgs(m, v, ref); err != nil {
						t.Fatal(err)
					}
					D := s.HeadDim
					nq, nk := [3]int{s.Batch, s.HeadsQ, s.SeqQ}, [3]int{s.Batch, s.HeadsKV, s.SeqK}
					layouts := map[string]cpu.Layout{"BSHD": cpu.BSHD(s, 0), "BHSD": cpu.BHSD(s, 0),
						"padded": {Q: cpu.Strides{Batch: s.SeqQ*2*s.HeadsQ*D + 17, Head: 2 * D, Pos: 2 * s.HeadsQ * D}, K: cpu.Strides{Batch: 1, Head: 7 * D, Pos: 14 * D},
							V: cpu.Strides{Batch: 29 * 201 * D, Head: D + 3, Pos: 3*D + 9}, Out: cpu.Strides{Batch: 8000 + s.SeqQ*s.HeadsQ*D, Head: D + 1, Pos: s.HeadsQ*D + 5}}}
					if s.SeqQ == s.SeqK {
						layouts["packed"] = cpu.PackedQKV(s)
					}
					for name, l := range layouts {
						var a cpu.Args
						a.Shape, a.Layout, a.Docs = s, l, c.docs
						ext := func(x cpu.Strides, n [3]int) int {
							return (n[0]-1)*x.Batch + (n[1]-1)*x.Head + (n[2]-1)*x.Pos + D + 1
						}
						if name == "padded" {
							l.K.Batch = 0 // every batch row reads the same keys: broadcast
						}
						var q, k, vv []float32
						if name == "packed" {
							w := (s.HeadsQ + 2*s.HeadsKV) * D
							buf := poisoned32(s.Batch*s.SeqK*w, 0x7fc0_0016)
							q = buf
							k, vv = buf[s.HeadsQ*D:], buf[(s.HeadsQ+s.HeadsKV)*D:]
							copyStrided(q, c.q, nq, D, l.Q)
							copyStrided(k, c.k, nk, D, l.K)
							copyStrided(vv, c.v, nk, D, l.V)
						} else {
							q = strided(c.q, nq, D, l.Q, 0, ext(l.Q, nq))
							kk := c.k
							if name == "padded" {
								// batch row 1 reads row 0's keys and values
								kk = append(append([]float32{}, c.k[:len(c.k)/2]...), c.k[:len(c.k)/2]...)
							}
							k = strided(kk, nk, D, l.K, 0, ext(l.K, nk))
							vv = strided(c.v, nk, D, l.V, 0, ext(l.V, nk))
						}
						a.Layout = l
						out := poisoned32(ext(l.Out, nq), 0x7fc0_0017)
						a.LSE = poisoned32(c.nL, 0x7fc0_0018)
						if elem == cpu.F32 {
							a.Q, a.K, a.V, a.Out = q, k, vv, out
						} else {
							a.Elem, a.Q16, a.K16, a.V16, a.Out = elem, slice16(elem, q), slice16(elem, k), slice16(elem, vv), out
						}
						want := ref
						if name == "padded" || elem != cpu.F32 {
							// the reference call on the same values in BHSD
							want.Out, want.LSE = poisoned32(c.nOut, 0x7fc0_0019), poisoned32(c.nL, 0x7fc0_001a)
							bq, bk, bv := c.q, c.k, c.v
							if name == "padded" {
								bk = append(append([]float32{}, c.k[:len(c.k)/2]...), c.k[:len(c.k)/2]...)
							}
							if elem != cpu.F32 {
								want.Q, want.K, want.V, want.Elem = nil, nil, nil, elem
								want.Q16, want.K16, want.V16 = slice16(elem, bq), slice16(elem, bk), slice16(elem, bv)
							} else {
								want.K = bk
							}
							if err := cpu.ForwardArgs(m, v, want); err != nil {
								t.Fatal(err)
							}
						}
						if err := cpu.ForwardArgs(m, v, a); err != nil {
							t.Fatalf("%s %s %s: %v", v, elem, name, err)
						}
						got := make([]float32, c.nOut)
						gatherStrided(got, out, nq, D, l.Out)
						if i := sameBits32(got, want.Out); i >= 0 {
							t.Fatalf("%s %s %s %+v: out[%d] = %v, BHSD %v", v, elem, name, s, i, got[i], want.Out[i])
						}
						if i := sameBits32(a.LSE, want.LSE); i >= 0 {
							t.Fatalf("%s %s %s %+v: lse[%d] = %v, BHSD %v", v, elem, name, s, i, a.LSE[i], want.LSE[i])
						}
					}
				}
			}
		}
	}
}

// copyStrided writes a BHSD tensor into dst with strides x.
func copyStrided(dst, src []float32, n [3]int, w int, x cpu.Strides) {
	for b := 0; b < n[0]; b++ {
		for h := 0; h < n[1]; h++ {
			for p := 0; p < n[2]; p++ {
				copy(dst[b*x.Batch+h*x.Head+p*x.Pos:][:w], src[((b*n[1]+h)*n[2]+p)*w:][:w])
			}
		}
	}
}

// gatherStrided reads a tensor with strides x into BHSD dst.
func gatherStrided(dst, src []float32, n [3]int, w int, x cpu.Strides) {
	for b := 0; b < n[0]; b++ {
		for h := 0; h < n[1]; h++ {
			for p := 0; p < n[2]; p++ {
				copy(dst[((b*n[1]+h)*n[2]+p)*w:][:w], src[b*x.Batch+h*x.Head+p*x.Pos:][:w])
			}
		}
	}
}

// TestLayoutErrors: strides that overlap the output's own rows or an
// input are ErrAlias, negative strides ErrShape, a slice its strides
// overrun ErrShort; nothing is written then.
func TestLayoutErrors(t *testing.T) {
	s := cpu.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 5, SeqK: 9, HeadDim: 64}
	r := rand.New(rand.NewPCG(305, 306))
	base := newShapeCall(t, r, causal{}, s, 0, s.SeqK)
	pk := cpu.PackedQKV(cpu.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 9, SeqK: 9, HeadDim: 64})
	for _, c := range []struct {
		name string
		f    func(a *cpu.Args)
		want error
	}{
		{"out rows overlap", func(a *cpu.Args) { a.Layout.Out = cpu.Strides{Batch: 640, Head: 320, Pos: 32} }, cpu.ErrAlias},
		{"out heads overlap", func(a *cpu.Args) { a.Layout.Out = cpu.Strides{Batch: 640, Head: 0, Pos: 64} }, cpu.ErrAlias},
		{"out inside packed q", func(a *cpu.Args) {
			buf := make([]float32, 2*9*256)
			a.Shape.SeqQ = 9
			a.Layout = pk
			a.Q, a.K, a.V = buf, buf[128:], buf[192:]
			a.Out = buf[64:]
			a.Layout.Out = cpu.Strides{Batch: 9 * 256, Head: 64, Pos: 256}
			a.LSE = make([]float32, 36)
		}, cpu.ErrAlias},
		{"negative stride", func(a *cpu.Args) { a.Layout.Q = cpu.Strides{Batch: -1, Head: 320, Pos: 64} }, cpu.ErrShape},
		{"q short for its strides", func(a *cpu.Args) { a.Layout.Q = cpu.Strides{Batch: 1000, Head: 320, Pos: 64} }, cpu.ErrShort},
		{"v stride overflow", func(a *cpu.Args) { a.Layout.V = cpu.Strides{Batch: 576, Head: 576, Pos: math.MaxInt / 4} }, cpu.ErrShape},
	} {
		a := base.a
		a.Out = poisoned32(base.nOut, 0x7fc0_0020)
		c.f(&a)
		err := cpu.ForwardArgs(causal{}, cpu.PureGo, a)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
}

// TestRagged: a batch of rows with their own query and key counts (and
// positions) equals one call per row, bit for bit, on every variant:
// contiguous and paged, decoding and prefill; stale keys past a row's
// length (NaN) never reach an output; rows past a row's queries are 0
// and -Inf; and the reference agrees.
func TestRagged(t *testing.T) {
	r := rand.New(rand.NewPCG(307, 308))
	for _, src := range shapeSpecs {
		p, m := headsPlan(t, src)
		for _, s := range []cpu.Shape{
			{Batch: 4, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 300, HeadDim: 64},
			{Batch: 3, HeadsQ: 2, HeadsKV: 1, SeqQ: 60, SeqK: 200, HeadDim: 128},
		} {
			lensQ, lensK := make([]int32, s.Batch), make([]int32, s.Batch)
			for b := range lensK {
				lensK[b] = int32(1 + r.IntN(s.SeqK))
				lensQ[b] = int32(min(int(lensK[b]), 1+r.IntN(s.SeqQ)))
			}
			lensK[0], lensQ[0] = int32(s.SeqK), int32(s.SeqQ)
			for _, v := range supported() {
				for _, paged := range []bool{false, true} {
					c := newShapeCall(t, r, m, s, 0, s.SeqK)
					// stale data past each row's keys
					for b := range lensK {
						for h := 0; h < s.HeadsKV; h++ {
							for j := int(lensK[b]); j < s.SeqK; j++ {
								row := ((b*s.HeadsKV+h)*s.SeqK + j) * s.HeadDim
								c.k[row], c.v[row] = float32(math.NaN()), float32(math.Inf(1))
							}
						}
					}
					a := c.a
					a.SeqLensQ, a.SeqLensK = lensQ, lensK
					if paged {
						a.K, a.V, a.Paged = pagedOf(r, c.k, c.v, s, 0, 16)
						// table entries past a row's pages are never read
						for b := range lensK {
							need := (s.SeqK + 15) / 16
							for i := (int(lensK[b]) + 15) / 16; i < need; i++ {
								a.Paged.Table[b*need+i] = -1
							}
						}
					}
					name := fmt.Sprintf("%s %s %+v paged %v", p.Mask, v, s, paged)
					if err := cpu.ForwardArgs(m, v, a); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					D := s.HeadDim
					for b := 0; b < s.Batch; b++ {
						nq, nk := int(lensQ[b]), int(lensK[b])
						one := cpu.Shape{Batch: 1, HeadsQ: s.HeadsQ, HeadsKV: s.HeadsKV, SeqQ: nq, SeqK: nk, HeadDim: D}
						var q, k, vv []float32
						for h := 0; h < s.HeadsQ; h++ {
							q = append(q, c.q[((b*s.HeadsQ+h)*s.SeqQ)*D:][:nq*D]...)
						}
						for h := 0; h < s.HeadsKV; h++ {
							k = append(k, c.k[((b*s.HeadsKV+h)*s.SeqK)*D:][:nk*D]...)
							vv = append(vv, c.v[((b*s.HeadsKV+h)*s.SeqK)*D:][:nk*D]...)
						}
						var docs []int32
						if m.UsesDocs() {
							docs = c.docs[:nk]
						}
						w := cpu.Args{Q: q, K: k, V: vv, Out: poisoned32(len(q), 0x7fc0_0021), LSE: poisoned32(s.HeadsQ*nq, 0x7fc0_0022), Docs: docs, Shape: one}
						if err := cpu.ForwardArgs(m, v, w); err != nil {
							t.Fatalf("%s: row %d alone: %v", name, b, err)
						}
						for h := 0; h < s.HeadsQ; h++ {
							for x := 0; x < s.SeqQ; x++ {
								got := a.Out[((b*s.HeadsQ+h)*s.SeqQ+x)*D:][:D]
								gl := a.LSE[(b*s.HeadsQ+h)*s.SeqQ+x]
								if x >= nq {
									for _, y := range got {
										if y != 0 {
											t.Fatalf("%s: row %d head %d query %d past its %d: out %v", name, b, h, x, nq, y)
										}
									}
									if !math.IsInf(float64(gl), -1) {
										t.Fatalf("%s: row %d query %d past its queries: lse %v", name, b, x, gl)
									}
									continue
								}
								if i := sameBits32(got, w.Out[(h*nq+x)*D:][:D]); i >= 0 {
									t.Fatalf("%s: row %d head %d query %d: out[%d] = %v, alone %v", name, b, h, x, i, got[i], w.Out[(h*nq+x)*D+i])
								}
								if math.Float32bits(gl) != math.Float32bits(w.LSE[h*nq+x]) {
									t.Fatalf("%s: row %d head %d query %d: lse %v, alone %v", name, b, h, x, gl, w.LSE[h*nq+x])
								}
							}
						}
					}
					if !paged {
						wo, wl, err := verify.Reference(p, c.ids, c.q, c.k, c.v, verifyShape(&a))
						if err != nil {
							t.Fatal(err)
						}
						closeTo(t, name, a.Out, a.LSE, wo, wl)
					}
				}
			}
		}
	}
}

// TestPositions: a long call cut into query chunks and key chunks at
// their absolute positions (QPos, KPos), each chunk's out and lse merged
// over the key chunks by log-sum-exp, gives the single call's output
// within float32 rounding; each chunk is the reference's at its
// positions; and per-row positions (a batch whose rows sit at different
// offsets) equal one call per row.
func TestPositions(t *testing.T) {
	r := rand.New(rand.NewPCG(309, 310))
	for _, src := range shapeSpecs {
		p, m := headsPlan(t, src)
		s := cpu.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 333, SeqK: 333, HeadDim: 64}
		for _, v := range supported() {
			c := newShapeCall(t, r, m, s, 0, s.SeqK)
			whole := c.a
			if err := cpu.ForwardArgs(m, v, whole); err != nil {
				t.Fatal(err)
			}
			D := s.HeadDim
			qcuts, kcuts := []int{0, 100, 101, 250, 333}, []int{0, 64, 170, 333}
			for qi := 0; qi+1 < len(qcuts); qi++ {
				q0, q1 := qcuts[qi], qcuts[qi+1]
				nq := q1 - q0
				merged := make([]float64, s.HeadsQ*nq*D)
				mlse := make([]float64, s.HeadsQ*nq)
				for i := range mlse {
					mlse[i] = math.Inf(-1)
				}
				for ki := 0; ki+1 < len(kcuts); ki++ {
					k0, k1 := kcuts[ki], kcuts[ki+1]
					nk := k1 - k0
					var q, k, vv []float32
					for h := 0; h < s.HeadsQ; h++ {
						q = append(q, c.q[(h*s.SeqQ+q0)*D:][:nq*D]...)
					}
					k = append(k, c.k[k0*D:][:nk*D]...)
					vv = append(vv, c.v[k0*D:][:nk*D]...)
					cs := cpu.Shape{Batch: 1, HeadsQ: s.HeadsQ, HeadsKV: 1, SeqQ: nq, SeqK: nk, HeadDim: D}
					a := cpu.Args{Q: q, K: k, V: vv, Out: poisoned32(len(q), 0x7fc0_0023), LSE: poisoned32(s.HeadsQ*nq, 0x7fc0_0024),
						QPos: []int32{int32(q0)}, KPos: []int32{int32(k0)}, Shape: cs}
					if m.UsesDocs() {
						a.Docs = c.docs[:max(q1, k1)]
					}
					name := fmt.Sprintf("%s %s queries [%d, %d) keys [%d, %d)", p.Mask, v, q0, q1, k0, k1)
					if err := cpu.ForwardArgs(m, v, a); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					wo, wl, err := verify.Reference(p, c.ids, q, k, vv, verifyShape(&a))
					if err != nil {
						t.Fatal(err)
					}
					closeTo(t, name, a.Out, a.LSE, wo, wl)
					for row := range mlse {
						l := float64(a.LSE[row])
						if math.IsInf(l, -1) {
							continue
						}
						mx := math.Max(mlse[row], l)
						fa, fb := math.Exp(mlse[row]-mx), math.Exp(l-mx)
						for d := 0; d < D; d++ {
							merged[row*D+d] = (merged[row*D+d]*fa + float64(a.Out[row*D+d])*fb) / (fa + fb)
						}
						mlse[row] = mx + math.Log(fa+fb)
					}
				}
				for h := 0; h < s.HeadsQ; h++ {
					for x := 0; x < nq; x++ {
						row := h*nq + x
						wrow := h*s.SeqQ + q0 + x
						want := float64(whole.LSE[wrow])
						if math.IsInf(want, -1) != math.IsInf(mlse[row], -1) || !math.IsInf(want, -1) && math.Abs(mlse[row]-want) > 1e-5*(1+math.Abs(want)) {
							t.Fatalf("%s %s query %d head %d: merged lse %v, one call %v", p.Mask, v, q0+x, h, mlse[row], want)
						}
						for d := 0; d < D; d++ {
							if g, w := merged[row*D+d], float64(whole.Out[wrow*D+d]); math.Abs(g-w) > 1e-5*(1+math.Abs(w)) {
								t.Fatalf("%s %s query %d head %d dim %d: merged %v, one call %v", p.Mask, v, q0+x, h, d, g, w)
							}
						}
					}
				}
			}
		}
	}
}

// TestBackwardHeadDims: the backward of every variant at head sizes with
// and without kernels of their own, against the float64 gradients.
func TestBackwardHeadDims(t *testing.T) {
	r := rand.New(rand.NewPCG(311, 312))
	dims := []int{8, 40, 96, 256}
	if testing.Short() {
		dims = []int{40, 96}
	}
	for _, src := range shapeSpecs[:2] {
		p, m := headsPlan(t, src)
		for _, d := range dims {
			for _, v := range supported() {
				s := verify.Shape{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 130, HeadDim: d}
				if _, err := verify.CheckGrad(p, headsRun(p, m, v), headsBackward(p, m, v), s, r); err != nil {
					t.Fatalf("%s %s D %d: %v", p.Mask, v, d, err)
				}
			}
		}
	}
}

// TestBackwardLayouts: the backward of BSHD and packed-QKV tensors (dq,
// dk, dv in the layouts of q, k, v) gives the bits of the BHSD backward
// on every variant; overlapping gradients are ErrAlias.
func TestBackwardLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(313, 314))
	_, m := headsPlan(t, shapeSpecs[0])
	s := cpu.Shape{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 100, SeqK: 100, HeadDim: 64}
	D := s.HeadDim
	nq, nk := [3]int{s.Batch, s.HeadsQ, s.SeqQ}, [3]int{s.Batch, s.HeadsKV, s.SeqK}
	for _, v := range supported() {
		c := newShapeCall(t, r, m, s, 0, s.SeqK)
		if err := cpu.ForwardArgs(m, v, c.a); err != nil {
			t.Fatal(err)
		}
		dout := randSlice(r, c.nOut)
		want := cpu.BackArgs{DQ: make([]float32, len(c.q)), DK: make([]float32, len(c.k)), DV: make([]float32, len(c.v)),
			DOut: dout, Q: c.q, K: c.k, V: c.v, Out: c.a.Out, LSE: c.a.LSE, Shape: s}
		if err := cpu.BackwardArgs(m, v, want); err != nil {
			t.Fatal(err)
		}
		for name, l := range map[string]cpu.Layout{"BSHD": cpu.BSHD(s, 0), "packed": cpu.PackedQKV(s)} {
			w := (s.HeadsQ + 2*s.HeadsKV) * D
			in := make([]float32, s.Batch*s.SeqK*w)
			q, k, vv := in, in[s.HeadsQ*D:], in[(s.HeadsQ+s.HeadsKV)*D:]
			if name == "BSHD" {
				q, k, vv = make([]float32, len(c.q)), make([]float32, len(c.k)), make([]float32, len(c.v))
			}
			copyStrided(q, c.q, nq, D, l.Q)
			copyStrided(k, c.k, nk, D, l.K)
			copyStrided(vv, c.v, nk, D, l.V)
			out, do := make([]float32, c.nOut), make([]float32, c.nOut)
			copyStrided(out, c.a.Out, nq, D, l.Out)
			copyStrided(do, dout, nq, D, l.Out)
			grads := poisoned32(len(in), 0x7fc0_0031)
			dq, dk, dv := poisoned32(len(c.q), 0x7fc0_0032), poisoned32(len(c.k), 0x7fc0_0033), poisoned32(len(c.v), 0x7fc0_0034)
			if name == "packed" { // the gradients in one packed buffer too
				dq, dk, dv = grads, grads[s.HeadsQ*D:], grads[(s.HeadsQ+s.HeadsKV)*D:]
			}
			a := cpu.BackArgs{DQ: dq, DK: dk, DV: dv, DOut: do, Q: q, K: k, V: vv, Out: out, LSE: c.a.LSE, Shape: s, Layout: l}
			if err := cpu.BackwardArgs(m, v, a); err != nil {
				t.Fatalf("%s %s: %v", v, name, err)
			}
			for _, g := range []struct {
				what      string
				got, want []float32
				n         [3]int
				x         cpu.Strides
			}{{"dq", dq, want.DQ, nq, l.Q}, {"dk", dk, want.DK, nk, l.K}, {"dv", dv, want.DV, nk, l.V}} {
				back := make([]float32, len(g.want))
				gatherStrided(back, g.got, g.n, D, g.x)
				if i := sameBits32(back, g.want); i >= 0 {
					t.Fatalf("%s %s: %s[%d] = %v, BHSD %v", v, name, g.what, i, back[i], g.want[i])
				}
			}
			a.DK = a.DQ // dq and dk overlap
			if err := cpu.BackwardArgs(m, v, a); !errors.Is(err, cpu.ErrAlias) {
				t.Fatalf("%s %s: overlapping gradients: %v", v, name, err)
			}
		}
	}
}

// TestPagedBSHD: a paged cache in vLLM's layout ([page][PageSize][HeadsKV]
// [HeadDim], PagedBSHD) with a fixed-width table (TableStride) gives the
// bits of the contiguous call, decoding and prefill, on every variant.
func TestPagedBSHD(t *testing.T) {
	r := rand.New(rand.NewPCG(315, 316))
	_, m := headsPlan(t, shapeSpecs[0])
	for _, s := range []cpu.Shape{
		{Batch: 3, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqK: 300, HeadDim: 64},
		{Batch: 2, HeadsQ: 2, HeadsKV: 2, SeqQ: 70, SeqK: 150, HeadDim: 96},
	} {
		for _, v := range supported() {
			c := newShapeCall(t, r, m, s, 0, s.SeqK)
			want := c.a
			if err := cpu.ForwardArgs(m, v, want); err != nil {
				t.Fatal(err)
			}
			const ps = 16
			pk, pv, pg := pagedOf(r, c.k, c.v, s, 0, ps)
			// the same pages with each position's heads side by side
			D, H := s.HeadDim, s.HeadsKV
			vk, vv := make([]float32, len(pk)), make([]float32, len(pv))
			for p := 0; p < len(pk)/(H*ps*D); p++ {
				for h := 0; h < H; h++ {
					for x := 0; x < ps; x++ {
						copy(vk[((p*ps+x)*H+h)*D:][:D], pk[((p*H+h)*ps+x)*D:])
						copy(vv[((p*ps+x)*H+h)*D:][:D], pv[((p*H+h)*ps+x)*D:])
					}
				}
			}
			// a table of 40 entries a row, the tail never read
			need := (s.SeqK + ps - 1) / ps
			wide := make([]int32, s.Batch*40)
			for i := range wide {
				wide[i] = -1
			}
			for b := 0; b < s.Batch; b++ {
				copy(wide[b*40:], pg.Table[b*need:(b+1)*need])
			}
			a := c.a
			a.K, a.V, a.Paged = vk, vv, cpu.Paged{PageSize: ps, Table: wide, TableStride: 40}
			a.Layout = cpu.PagedBSHD(s, ps, 0)
			a.Layout.Q, a.Layout.Out = cpu.Strides{}, cpu.Strides{} // q and out BHSD
			a.Out, a.LSE = poisoned32(c.nOut, 0x7fc0_0041), poisoned32(c.nL, 0x7fc0_0042)
			if err := cpu.ForwardArgs(m, v, a); err != nil {
				t.Fatalf("%s %+v: %v", v, s, err)
			}
			if i := sameBits32(a.Out, want.Out); i >= 0 {
				t.Fatalf("%s %+v: out[%d] = %v, contiguous %v", v, s, i, a.Out[i], want.Out[i])
			}
			if i := sameBits32(a.LSE, want.LSE); i >= 0 {
				t.Fatalf("%s %+v: lse[%d] = %v, contiguous %v", v, s, i, a.LSE[i], want.LSE[i])
			}
		}
	}
}

// TestSideHeads: in layouts whose heads sit side by side (BSHD, packed
// QKV) a prefill job holds several query heads of a kv head at fewer
// positions (4 heads of 12 positions for 4:1 grouped-query attention, 3
// of 16, 6 of 8); that gives the BHSD call's bits, on every variant, with
// masks that skip and refine tiles (windows, documents, residue
// classes), head parameters whose runs of equal values split the heads
// of a job, score stages with per-head slopes and sinks, 16-bit inputs,
// and ragged rows with positions.
func TestSideHeads(t *testing.T) {
	r := rand.New(rand.NewPCG(305, 306))
	shapes := []cpu.Shape{
		{Batch: 2, HeadsQ: 8, HeadsKV: 2, SeqQ: 157, SeqK: 203, HeadDim: 64},
		{Batch: 1, HeadsQ: 6, HeadsKV: 2, SeqQ: 131, SeqK: 131, HeadDim: 64},
		{Batch: 1, HeadsQ: 6, HeadsKV: 1, SeqQ: 100, SeqK: 170, HeadDim: 64},
	}
	for si, sp := range scoreSpecs {
		p, m := headsPlan(t, fmt.Sprintf("%shead_dim: %d\n", sp.src, 64))
		for x, s := range shapes {
			if sp.full {
				s.SeqQ = s.SeqK
			}
			if testing.Short() && (si+x)%2 == 1 {
				continue
			}
			for _, v := range supported() {
				c := newShapeCall(t, r, m, s, 0, s.SeqK)
				base := c.a
				base.SoftCap, base.Slopes, base.Sinks = verify.RandomScore(p.Score, s.HeadsQ, r).Float32()
				if n := len(p.Params); n > 0 {
					// runs of equal values (heads 0-2, 4-5) and single ones
					hv := verify.RandomHeadParams(p, r, s.HeadsQ, s.SeqK)
					for h := 1; h < s.HeadsQ; h++ {
						if h != 3 && h != 6 {
							copy(hv[h*n:(h+1)*n], hv[(h-1)*n:h*n])
						}
					}
					base.HeadParams = cpu.SplitHeadParams(hv, n, s.HeadsQ)
				}
				if x == 0 {
					// ragged rows at their own positions
					base.SeqLensQ, base.SeqLensK = []int32{157, 60}, []int32{203, 190}
					base.QPos, base.KPos = []int32{46, 130}, []int32{0, 0}
				}
				for _, elem := range []cpu.Elem{cpu.F32, cpu.BF16} {
					want := base
					want.Out, want.LSE = poisoned32(c.nOut, 0x7fc0_0021), poisoned32(c.nL, 0x7fc0_0022)
					if elem != cpu.F32 {
						want.Q, want.K, want.V, want.Elem = nil, nil, nil, elem
						want.Q16, want.K16, want.V16 = slice16(elem, c.q), slice16(elem, c.k), slice16(elem, c.v)
					}
					if err := cpu.ForwardArgs(m, v, want); err != nil {
						t.Fatal(err)
					}
					D := s.HeadDim
					nq, nk := [3]int{s.Batch, s.HeadsQ, s.SeqQ}, [3]int{s.Batch, s.HeadsKV, s.SeqK}
					layouts := []string{"BSHD"}
					if s.SeqQ == s.SeqK {
						layouts = append(layouts, "packed")
					}
					for _, name := range layouts {
						a := base
						var q, k, vv []float32
						if name == "packed" {
							a.Layout = cpu.PackedQKV(s)
							w := (s.HeadsQ + 2*s.HeadsKV) * D
							buf := poisoned32(s.Batch*s.SeqK*w, 0x7fc0_0023)
							q, k, vv = buf, buf[s.HeadsQ*D:], buf[(s.HeadsQ+s.HeadsKV)*D:]
						} else {
							a.Layout = cpu.BSHD(s, 0)
							q, k, vv = poisoned32(c.nOut, 0x7fc0_0023), poisoned32(len(c.k), 0x7fc0_0023), poisoned32(len(c.v), 0x7fc0_0023)
						}
						copyStrided(q, c.q, nq, D, a.Layout.Q)
						copyStrided(k, c.k, nk, D, a.Layout.K)
						copyStrided(vv, c.v, nk, D, a.Layout.V)
						out := poisoned32(c.nOut, 0x7fc0_0024)
						a.Out, a.LSE = out, poisoned32(c.nL, 0x7fc0_0025)
						if elem == cpu.F32 {
							a.Q, a.K, a.V = q, k, vv
						} else {
							a.Q, a.K, a.V, a.Elem = nil, nil, nil, elem
							a.Q16, a.K16, a.V16 = slice16(elem, q), slice16(elem, k), slice16(elem, vv)
						}
						if err := cpu.ForwardArgs(m, v, a); err != nil {
							t.Fatalf("%s %s %s %+v: %v", p.Mask, v, name, s, err)
						}
						got := make([]float32, c.nOut)
						gatherStrided(got, out, nq, D, a.Layout.Out)
						if i := sameBits32(got, want.Out); i >= 0 {
							t.Fatalf("%s %s %s %s %+v: out[%d] = %v, BHSD %v", p.Mask, v, elem, name, s, i, got[i], want.Out[i])
						}
						if i := sameBits32(a.LSE, want.LSE); i >= 0 {
							t.Fatalf("%s %s %s %s %+v: lse[%d] = %v, BHSD %v", p.Mask, v, elem, name, s, i, a.LSE[i], want.LSE[i])
						}
					}
				}
			}
		}
	}
}
