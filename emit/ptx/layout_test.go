package ptx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
	ptxi "github.com/attngen/attngen/verify/ptx"
)

// A layoutCall is one call's tensors as the kernels see them: each
// tensor's element strides and its offset (elements) in its buffer; q, k
// and v share one buffer when packed (a fused QKV projection's output).
type layoutCall struct {
	name   string
	ly     gpu.Layout // resolved
	packed bool
}

// layoutCalls are the layouts the strided tests run: BHSD with padded
// rows, BSHD, a mix of both (each tensor's strides differ from the
// others') and packed QKV (seq_q = seq_k), the output BSHD but in the mix.
func layoutCalls(s shape, d int) []layoutCall {
	bshd := gpu.Layout{
		Q:   gpu.Strides{Batch: s.sq * s.hq * d, Head: d, Pos: s.hq * d},
		K:   gpu.Strides{Batch: s.sk * s.hkv * d, Head: d, Pos: s.hkv * d},
		V:   gpu.Strides{Batch: s.sk * s.hkv * d, Head: d, Pos: s.hkv * d},
		Out: gpu.Strides{Batch: s.sq * s.hq * d, Head: d, Pos: s.hq * d},
	}
	pd := d + 8 // padded rows: 16 more bytes a row, poisoned
	pad := gpu.Layout{
		Q:   gpu.Strides{Batch: s.hq * s.sq * pd, Head: s.sq * pd, Pos: pd},
		K:   gpu.Strides{Batch: s.hkv * s.sk * pd, Head: s.sk * pd, Pos: pd},
		V:   gpu.Strides{Batch: s.hkv * s.sk * pd, Head: s.sk * pd, Pos: pd},
		Out: bshd.Out,
	}
	// every tensor at other strides than the others: q and v BSHD, k and
	// the output padded BHSD
	mixed := gpu.Layout{Q: bshd.Q, K: pad.K, V: bshd.V, Out: gpu.Strides{Batch: s.hq * s.sq * pd, Head: s.sq * pd, Pos: pd}}
	cs := []layoutCall{{"padded", pad, false}, {"bshd", bshd, false}, {"mixed", mixed, false}}
	if s.sq == s.sk {
		w := (s.hq + 2*s.hkv) * d
		in := gpu.Strides{Batch: s.sk * w, Head: d, Pos: w}
		cs = append(cs, layoutCall{"packed", gpu.Layout{Q: in, K: in, V: in, Out: bshd.Out}, true})
	}
	return cs
}

// extentOf is one past the last element a tensor of n (batch, heads,
// positions) rows of w elements reaches at strides x.
func extentOf(x gpu.Strides, n [3]int, w int) int {
	return (n[0]-1)*x.Batch + (n[1]-1)*x.Head + (n[2]-1)*x.Pos + w
}

// offsetOf is the element offset of row (b, h, r) at strides x.
func offsetOf(x gpu.Strides, b, h, r int) int { return b*x.Batch + h*x.Head + r*x.Pos }

// stridedDev is a device holding one call's tensors at a layout, every
// element no row owns poisoned.
type stridedDev struct {
	t   *testing.T
	dev *ptxi.Device
}

func (sd stridedDev) alloc(n int) uint64 {
	a, err := sd.dev.Alloc(n)
	if err != nil {
		sd.t.Fatal(err)
	}
	return a
}

// put16 writes contiguous [n0][n1][n2][w] values at strides x into a
// buffer of ext elements filled with fill, returning the buffer's words.
func scatter16(buf []uint16, off int, x gpu.Strides, n [3]int, w int, vals []uint16) {
	for b := 0; b < n[0]; b++ {
		for h := 0; h < n[1]; h++ {
			for r := 0; r < n[2]; r++ {
				copy(buf[off+offsetOf(x, b, h, r):][:w], vals[((b*n[1]+h)*n[2]+r)*w:][:w])
			}
		}
	}
}

// gather returns the contiguous rows of a strided buffer of words.
func gather[T any](buf []T, x gpu.Strides, n [3]int, w int) []T {
	out := make([]T, 0, n[0]*n[1]*n[2]*w)
	for b := 0; b < n[0]; b++ {
		for h := 0; h < n[1]; h++ {
			for r := 0; r < n[2]; r++ {
				out = append(out, buf[offsetOf(x, b, h, r):][:w]...)
			}
		}
	}
	return out
}

// owned marks the elements of a strided buffer that rows own.
func owned(ext int, x gpu.Strides, n [3]int, w int) []bool {
	m := make([]bool, ext)
	for b := 0; b < n[0]; b++ {
		for h := 0; h < n[1]; h++ {
			for r := 0; r < n[2]; r++ {
				for i := 0; i < w; i++ {
					m[offsetOf(x, b, h, r)+i] = true
				}
			}
		}
	}
	return m
}

// stridedOut is what a strided run returns, gathered to contiguous rows.
type stridedOut struct {
	out        []uint16
	lse        []float32
	dq, dk, dv []uint32 // f32 bits
}

// runStrided runs the forward (and, with bwd, both backward kernels) of
// plan p on the contiguous inputs q, k, v and dout (16-bit words) laid
// out at lc's strides (lc nil: the default layout, through a zero
// Layout), every element outside the rows NaN, the outputs NaN before the
// launch. It checks that the kernels write no element outside the rows of
// the strided outputs and returns the outputs gathered. lens, when not
// nil, are the call's per-row lengths (seq_lens_q, seq_lens_k: [2][batch]).
func runStrided(t *testing.T, p *gen.Plan, cfg Config, s shape, lc *layoutCall, q, k, v, dout []uint16, bwd bool, lens ...[]int32) stridedOut {
	t.Helper()
	fk, fmod := generated(t, p, cfg)
	d, dv := p.HeadDim, fk.HeadDimV
	ly := gpu.BHSD(s.hq, s.hkv, s.sq, s.sk, d, dv)
	packed := false
	if lc != nil {
		ly, packed = lc.ly, lc.packed
	}
	nq, nk := [3]int{s.batch, s.hq, s.sq}, [3]int{s.batch, s.hkv, s.sk}
	sd := stridedDev{t, ptxi.NewDevice()}
	const nan16 = 0x7fc0
	fill16 := func(n int) []uint16 {
		x := make([]uint16, n)
		for i := range x {
			x[i] = nan16
		}
		return x
	}
	// inputs
	var qa, ka, va uint64
	if packed {
		w := (s.hq + 2*s.hkv) * d
		ext := extentOf(ly.Q, nq, w)
		buf := fill16(ext)
		scatter16(buf, 0, ly.Q, nq, d, q)
		scatter16(buf, s.hq*d, ly.K, nk, d, k)
		scatter16(buf, (s.hq+s.hkv)*d, ly.V, nk, dv, v)
		qa = sd.alloc(2 * ext)
		if err := sd.dev.WriteU16(qa, buf); err != nil {
			t.Fatal(err)
		}
		ka, va = qa+uint64(2*s.hq*d), qa+uint64(2*(s.hq+s.hkv)*d)
	} else {
		put := func(x gpu.Strides, n [3]int, w int, vals []uint16) uint64 {
			ext := extentOf(x, n, w)
			buf := fill16(ext)
			scatter16(buf, 0, x, n, w, vals)
			a := sd.alloc(2 * ext)
			if err := sd.dev.WriteU16(a, buf); err != nil {
				t.Fatal(err)
			}
			return a
		}
		qa, ka, va = put(ly.Q, nq, d, q), put(ly.K, nk, d, k), put(ly.V, nk, dv, v)
	}
	oExt := extentOf(ly.Out, nq, dv)
	oa := sd.alloc(2 * oExt)
	if err := sd.dev.WriteU16(oa, fill16(oExt)); err != nil {
		t.Fatal(err)
	}
	nl := s.batch * s.hq * s.sq
	la := sd.alloc(4 * nl)
	nanF := func(a uint64, n int) {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(math.NaN())
		}
		if err := sd.dev.WriteF32(a, x); err != nil {
			t.Fatal(err)
		}
	}
	nanF(la, nl)
	call := gpu.Layout{}
	if lc != nil {
		call = ly
	}
	fl, err := fk.Geometry(s.batch, s.hq, s.hkv, s.sq, s.sk, 0)
	if err != nil {
		t.Fatal(err)
	}
	fl.Layout = call
	var lensQ, lensK uint64
	if lens != nil {
		put := func(x []int32) uint64 {
			a := sd.alloc(4 * len(x))
			w := make([]uint32, len(x))
			for i, v := range x {
				w[i] = uint32(v)
			}
			if err := sd.dev.WriteU32(a, w); err != nil {
				t.Fatal(err)
			}
			return a
		}
		lensQ, lensK = put(lens[0]), put(lens[1])
	}
	fl.SeqLensQ, fl.SeqLensK = lensQ, lensK
	ptrs := []uint64{qa, ka, va, oa, la}
	if fk.Target.Accel {
		ptrs = append(ptrs[3:], tensorMapsWith(t, sd.dev, fk, s, qa, ka, va, call)...)
	}
	args, err := fl.Args(ptrs...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sd.dev.Launch(fmod, fk.Name, fl.Grid, fl.Block, fl.DynShared, args...); err != nil {
		t.Fatal(err)
	}
	var r stridedOut
	oBuf, err := sd.dev.ReadU16(oa, oExt)
	if err != nil {
		t.Fatal(err)
	}
	own := owned(oExt, ly.Out, nq, dv)
	for i, x := range oBuf {
		if !own[i] && x != nan16 {
			t.Fatalf("out: element %d, outside every row, was written (%#x)", i, x)
		}
	}
	r.out = gather(oBuf, ly.Out, nq, dv)
	if r.lse, err = sd.dev.ReadF32(la, nl); err != nil {
		t.Fatal(err)
	}
	if !bwd {
		return r
	}
	bk, bmod := generatedBackward(t, p, cfg)
	// dout at the output's strides, the gradients at q's, k's and v's
	// (f32): each in a buffer of its own
	doExt := oExt
	doBuf := fill16(doExt)
	scatter16(doBuf, 0, ly.Out, nq, dv, dout)
	doa := sd.alloc(2 * doExt)
	if err := sd.dev.WriteU16(doa, doBuf); err != nil {
		t.Fatal(err)
	}
	grad := func(x gpu.Strides, n [3]int, w int) (uint64, int) {
		ext := extentOf(x, n, w)
		a := sd.alloc(4 * ext)
		nanF(a, ext)
		return a, ext
	}
	dqa, dqExt := grad(ly.Q, nq, d)
	dka, dkExt := grad(ly.K, nk, d)
	dva, dvExt := grad(ly.V, nk, dv)
	dea := sd.alloc(4 * nl)
	nanF(dea, nl)
	bl, err := bk.Geometry(s.batch, s.hq, s.hkv, s.sq, s.sk, 0)
	if err != nil {
		t.Fatal(err)
	}
	bl.DQ.Layout, bl.DKV.Layout = call, call
	bl.DQ.SeqLensQ, bl.DQ.SeqLensK, bl.DKV.SeqLensQ, bl.DKV.SeqLensK = lensQ, lensK, lensQ, lensK
	args, err = bl.Args(bl.DQ, qa, ka, va, oa, doa, la, dea, dqa)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sd.dev.Launch(bmod, bk.DQ, bl.DQ.Grid, bl.DQ.Block, bl.DQ.DynShared, args...); err != nil {
		t.Fatal(err)
	}
	args, err = bl.Args(bl.DKV, qa, ka, va, doa, la, dea, dka, dva)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sd.dev.Launch(bmod, bk.DKV, bl.DKV.Grid, bl.DKV.Block, bl.DKV.DynShared, args...); err != nil {
		t.Fatal(err)
	}
	readG := func(what string, a uint64, ext int, x gpu.Strides, n [3]int, w int) []uint32 {
		buf, err := sd.dev.ReadU32(a, ext)
		if err != nil {
			t.Fatal(err)
		}
		own := owned(ext, x, n, w)
		for i, v := range buf {
			if !own[i] && v != math.Float32bits(float32(math.NaN())) {
				t.Fatalf("%s: element %d, outside every row, was written (%#x)", what, i, v)
			}
		}
		return gather(buf, x, n, w)
	}
	r.dq = readG("dq", dqa, dqExt, ly.Q, nq, d)
	r.dk = readG("dk", dka, dkExt, ly.K, nk, d)
	r.dv = readG("dv", dva, dvExt, ly.V, nk, dv)
	return r
}

// closeTo reports the first output of b more than a bf16 step and a
// little (2^-7 relative, plus 2^-7) from a's, or an lse more than 1e-3
// away (or -Inf in one only).
func closeTo(a, b stridedOut) error {
	if len(a.out) != len(b.out) || len(a.lse) != len(b.lse) {
		return fmt.Errorf("%d and %d outputs", len(a.out), len(b.out))
	}
	for i := range a.out {
		x, y := float64(fromBF16(a.out[i])), float64(fromBF16(b.out[i]))
		if !(math.Abs(x-y) <= (1+math.Abs(x))/128) {
			return fmt.Errorf("out[%d] = %v, want %v", i, y, x)
		}
	}
	for i := range a.lse {
		x, y := float64(a.lse[i]), float64(b.lse[i])
		if math.IsInf(x, -1) != math.IsInf(y, -1) || !math.IsInf(x, -1) && !(math.Abs(x-y) <= 1e-3) {
			return fmt.Errorf("lse[%d] = %v, want %v", i, y, x)
		}
	}
	return nil
}

// sameBits reports the first element where two runs' outputs differ.
func sameBits(a, b stridedOut) error {
	cmp := func(what string, x, y []uint32) error {
		if len(x) != len(y) {
			return fmt.Errorf("%s: %d and %d elements", what, len(x), len(y))
		}
		for i := range x {
			if x[i] != y[i] {
				return fmt.Errorf("%s[%d] = %#x, the contiguous call's %#x", what, i, y[i], x[i])
			}
		}
		return nil
	}
	w16 := func(x []uint16) []uint32 {
		o := make([]uint32, len(x))
		for i, v := range x {
			o[i] = uint32(v)
		}
		return o
	}
	wf := func(x []float32) []uint32 {
		o := make([]uint32, len(x))
		for i, v := range x {
			o[i] = math.Float32bits(v)
		}
		return o
	}
	for _, c := range []struct {
		what string
		x, y []uint32
	}{{"out", w16(a.out), w16(b.out)}, {"lse", wf(a.lse), wf(b.lse)}, {"dq", a.dq, b.dq}, {"dk", a.dk, b.dk}, {"dv", a.dv, b.dv}} {
		if err := cmp(c.what, c.x, c.y); err != nil {
			return err
		}
	}
	return nil
}

// TestInterpStrides runs the sm_80 forward and backward and the sm_90a
// forward (q, k and v through its rank-4 and rank-5 tensor maps) on BHSD
// with padded rows, BSHD, a mix and packed QKV layouts (the output BSHD,
// the gradients at the inputs' strides), every element
// outside the tensors' rows NaN, and requires the bits of the contiguous
// call on the same values, and no write outside the outputs' rows. The
// masks: causal, a sliding window with sinks (streaming) and the dilated
// mask in the residue layout, whose segment rows are a multiple of the
// pos stride apart.
func TestInterpStrides(t *testing.T) {
	t.Parallel()
	masks := []string{"causal", "streaming", "dilated"}
	shapes := []shape{{2, 4, 2, 67, 67}, {1, 2, 1, 40, 75}}
	type target struct {
		name string
		tg   Target
		bwd  bool
	}
	for _, tc := range []target{{"sm80", SM80, true}, {"sm90a", SM90a, false}} {
		for _, name := range masks {
			p := dimPlan(t, name, 64, tc.tg)
			cfg := Config{Target: tc.tg, SoftLg2: true}
			for _, s := range shapes {
				if tc.tg.Accel {
					s = fitStride(p, s)
				}
				t.Run(fmt.Sprintf("%s/%s/%v", tc.name, name, s), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(s.sq), uint64(s.sk)))
					draw := func(n int) []uint16 {
						x := make([]uint16, n)
						for i := range x {
							x[i] = bf16(float32(rng.NormFloat64()))
						}
						return x
					}
					nq, nk := s.batch*s.hq*s.sq*64, s.batch*s.hkv*s.sk*64
					q, k, v, do := draw(nq), draw(nk), draw(nk), draw(nq)
					base := runStrided(t, p, cfg, s, nil, q, k, v, do, tc.bwd)
					if tc.tg.Accel {
						// the sm_90a kernel's contiguous call against the
						// sm_80 kernel's (other products, so within bf16
						// rounding), so that a tensor map that reads the
						// wrong rows in every layout alike still fails here
						p80 := dimPlan(t, name, 64, SM80)
						if err := closeTo(runStrided(t, p80, Config{Target: SM80, SoftLg2: true}, s, nil, q, k, v, do, false), base); err != nil {
							t.Errorf("sm_90a against sm_80, BHSD: %v", err)
						}
					}
					if tc.tg.Accel {
						// strides a tensor map cannot hold are refused: a pos
						// stride of 68 elements (136 bytes)
						fk, _ := generated(t, p, cfg)
						odd := gpu.Layout{K: gpu.Strides{Batch: s.hkv * s.sk * 68, Head: s.sk * 68, Pos: 68}}
						if _, err := fk.TensorMapsWith(s.batch, s.hq, s.hkv, s.sq, s.sk, 1<<20, 2<<20, 3<<20, odd); err == nil || !strings.Contains(err.Error(), "multiple of 16 bytes") {
							t.Errorf("tensor maps of k at pos stride 68: err = %v, want a refusal", err)
						}
					}
					for _, lc := range layoutCalls(s, 64) {
						got := runStrided(t, p, cfg, s, &lc, q, k, v, do, tc.bwd)
						if err := sameBits(base, got); err != nil {
							t.Errorf("%s: %v", lc.name, err)
						}
					}
				})
			}
		}
	}
}
