package ptx_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
	"github.com/attngen/attngen/verify/gpurun"
)

// posSpecs are the masks of the positions tests: a window with sinks, a
// document mask (with a window), blocks of 24 keys, which tiles of 64
// keys at offset positions straddle, and ALiBi (whose distances are
// absolute: key chunks see the query's distance to each key), and a
// dilated mask in the residue layout (stride 4: a row's residue classes
// are its positions mod 4, so a chunk at an offset starts its classes on
// other tensor rows).
var posSpecs = []struct{ name, yaml string }{
	{"sinkwin", "name: sinkwin\nmask:\n  streaming: {sinks: 4, window: 48}\nhead_dim: 64\n"},
	{"document", "name: document\nmask:\n  intersect:\n    - document: {}\n    - streaming: {sinks: 2, window: 60}\nhead_dim: 64\n"},
	{"block", "name: block\nmask:\n  block: {size: 24}\nhead_dim: 64\n"},
	{"alibi", "name: alibi\nmask:\n  full: {}\nhead_dim: 64\nscore:\n  alibi: {}\n"},
	// hull and class programs above bigScan (the kernels stage the row's
	// values in shared memory), and a tree, whose parent array covers
	// every position a row reaches
	{"bigbird", "name: bigbird\nmask:\n  bigbird: {block: 16, blocks: 16, window: 3, global: 1, random: 2, seed: 7}\ncausal: false\nhead_dim: 64\n"},
	{"tree", "name: tree\nmask: {tree: {}}\nhead_dim: 64\n"},
	{"dilated", "name: dilated\nmask:\n  dilated: {stride: 4, size: 9}\nhead_dim: 64\n"},
}

// posDims are the head dimensions above 128 (whose kernels stage the
// row's values in shared memory) the positions tests run, each with one
// mask of posSpecs: {qk, v}.
var posDims = []struct {
	spec  string
	d, dv int
}{{"sinkwin", 192, 192}, {"document", 256, 256}, {"block", 192, 128}}

// withDims is spec text y at head_dim {qk: d, v: dv}.
func withDims(y string, d, dv int) string {
	hd := fmt.Sprintf("head_dim: %d\n", d)
	if dv != d {
		hd = fmt.Sprintf("head_dim: {qk: %d, v: %d}\n", d, dv)
	}
	return strings.Replace(y, "head_dim: 64\n", hd, 1)
}

// posSpec returns the text of posSpecs' name.
func posSpec(t *testing.T, name string) string {
	for _, ps := range posSpecs {
		if ps.name == name {
			return ps.yaml
		}
	}
	t.Fatalf("no spec %s", name)
	return ""
}

// posCall is one call of a chunked batch: its shape (positions included)
// and its inputs, contiguous BHSD.
type posCall struct {
	s       verify.Shape
	q, k, v []float32
}

// rowsOf returns rows [r0, r1) of every (batch, head) of x, a [batch][heads][n][d] tensor.
func rowsOf(x []float32, batch, heads, n, d, r0, r1 int) []float32 {
	var o []float32
	for bh := 0; bh < batch*heads; bh++ {
		o = append(o, x[(bh*n+r0)*d:(bh*n+r1)*d]...)
	}
	return o
}

// posKernels compiles the kernels of spec text y for target tg under the
// interpreter (the backward's with bwd).
func posKernels(t *testing.T, y string, tg ptx.Target, bwd bool) (*spec.Spec, *gpurun.Kernel, *gpurun.BackwardKernel) {
	t.Helper()
	s, err := spec.Parse("pos.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.Compile(s, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ptx.Kernels(p, ptx.Config{Target: tg, SoftLg2: true})
	if err != nil {
		t.Fatal(err)
	}
	fk, err := gpurun.Interp(ks.Forward)
	if err != nil {
		t.Fatal(err)
	}
	var bk *gpurun.BackwardKernel
	if bwd {
		if bk, err = gpurun.InterpBackward(ks.Backward); err != nil {
			t.Fatal(err)
		}
	}
	return s, fk, bk
}

// TestInterpPositions runs the sm_80 and sm_90a forwards on a batch whose rows sit at
// positions (q_pos, k_pos: row 1's keys start at 37), cut into query
// chunks and key chunks, each chunk at its own positions (the first key
// chunk is shorter than the queries: seq_q > seq_k): every chunk's
// out and lse must match verify's reference at those positions
// (verify.CheckOutput, bf16 tolerance), and the key chunks merged by
// their lse must give the single call's out and lse within the chunks'
// bf16 rounding (2^-8 relative to the row's sum of p|v| per rounding, the
// reference's out of |v|) and float32 rounding of lse.
func TestInterpPositions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tg   ptx.Target
	}{{"sm80", ptx.SM80}, {"sm90a", ptx.SM90a}} {
		for _, ps := range posSpecs {
			testPositions(t, tc.name, tc.tg, ps.name, ps.yaml, 64, 64)
		}
		for _, pd := range posDims {
			name := fmt.Sprintf("%s_d%d", pd.spec, pd.d)
			if pd.dv != pd.d {
				name += fmt.Sprintf("_v%d", pd.dv)
			}
			testPositions(t, tc.name, tc.tg, name, withDims(posSpec(t, pd.spec), pd.d, pd.dv), pd.d, pd.dv)
		}
	}
}

// testPositions is TestInterpPositions for one target and mask at head
// dimensions {qk: d, v: dv}.
func testPositions(t *testing.T, tgName string, tg ptx.Target, name, yaml string, d, dv int) {
	{
		t.Run(tgName+"/"+name, func(t *testing.T) {
			t.Parallel()
			sp, fk, _ := posKernels(t, yaml, tg, false)
			if name == "dilated" && fk.F.Stride != 4 {
				t.Fatalf("the dilated mask runs at residue stride %d, want 4", fk.F.Stride)
			}
			pat := sp.Pattern()
			const batch, hq, hkv = 2, 2, 1
			sq, sk := 40, 150
			qcuts, kcuts := []int{0, 17, sq}, []int{0, 30, 90, sk}
			if st := fk.F.Stride; tg.Accel && st > 1 {
				// the sm_90a residue kernel's tensors: multiples of the stride
				up := func(x int) int { return (x + st - 1) / st * st }
				sq, sk = up(sq), up(sk)
				qcuts, kcuts = []int{0, 17 / st * st, sq}, []int{0, 30 / st * st, 90 / st * st, sk}
			}
			r := rand.New(rand.NewPCG(11, uint64(len(name))))
			kpos := []int32{0, 37}
			qpos := []int32{int32(sk - sq), int32(37 + sk - sq + 3)} // row 1: 3 past the default
			draw := func(n int) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = verify.FromBF16(verify.BF16(float32(r.NormFloat64())))
				}
				return x
			}
			full := posCall{verify.Shape{Batch: batch, HeadsQ: hq, HeadsKV: hkv, SeqQ: sq, SeqK: sk, HeadDim: d, HeadDimV: dv, QPos: qpos, KPos: kpos},
				draw(batch * hq * sq * d), draw(batch * hkv * sk * d), draw(batch * hkv * sk * dv)}
			full.s = verify.WithScore(pat, full.s, r) // ALiBi's slopes (nil: no score stage)
			var ids []int32
			if pat.Mask.HasData() {
				// documents or a tree's parent array over every position
				// a row reaches (row 1's last query)
				ids = verify.RandomData(pat, r, int(qpos[1])+sq)
			}
			run := func(c posCall) ([]float32, []float32) {
				_, _, nl := c.s.Sizes()
				_, no := c.s.SizesV()
				out, lse := make([]float32, no), make([]float32, nl)
				for i := range out {
					out[i] = float32(math.NaN())
				}
				for i := range lse {
					lse[i] = float32(math.NaN())
				}
				if err := fk.Run()(out, lse, c.q, c.k, c.v, ids, c.s); err != nil {
					t.Fatal(err)
				}
				_, err := verify.CheckOutput(pat, ids, c.q, c.k, c.v, c.s, out, lse, verify.BF16Kernel, nil)
				if err != nil {
					t.Fatalf("queries at %v, keys at %v (%d x %d): %v", c.s.QPos, c.s.KPos, c.s.SeqQ, c.s.SeqK, err)
				}
				return out, lse
			}
			shift := func(x []int32, by int) []int32 {
				o := make([]int32, len(x))
				for i := range x {
					o[i] = x[i] + int32(by)
				}
				return o
			}
			fo, fl := run(full)
			// query chunks: rows [0, 17) and [17, 40), each at its positions
			for x := range len(qcuts) - 1 {
				c := [2]int{qcuts[x], qcuts[x+1]}
				s := full.s
				s.SeqQ, s.QPos = c[1]-c[0], shift(qpos, c[0])
				run(posCall{s, rowsOf(full.q, batch, hq, sq, d, c[0], c[1]), full.k, full.v})
			}
			// key chunks [0, 30), [30, 90) and [90, 150), merged by lse;
			// the first has fewer keys than the 40 queries
			var outs, lses [][]float32
			for x := range len(kcuts) - 1 {
				c := [2]int{kcuts[x], kcuts[x+1]}
				s := full.s
				s.SeqK, s.KPos = c[1]-c[0], shift(kpos, c[0])
				o, l := run(posCall{s, full.q, rowsOf(full.k, batch, hkv, sk, d, c[0], c[1]), rowsOf(full.v, batch, hkv, sk, dv, c[0], c[1])})
				outs, lses = append(outs, o), append(lses, l)
			}
			abs := make([]float32, len(full.v))
			for i, x := range full.v {
				abs[i] = float32(math.Abs(float64(x)))
			}
			var docs *spec.Docs
			if ids != nil {
				var err error
				if docs, err = verify.DataOf(pat, ids); err != nil {
					t.Fatal(err)
				}
			}
			pv, _, err := verify.Reference(pat, docs, full.q, full.k, abs, full.s)
			if err != nil {
				t.Fatal(err)
			}
			const u = 1.0 / 256
			for row := range fl {
				m := math.Inf(-1)
				for _, l := range lses {
					m = math.Max(m, float64(l[row]))
				}
				sum := 0.0
				for _, l := range lses {
					sum += math.Exp(float64(l[row]) - m)
				}
				lse := m + math.Log(sum)
				if math.IsInf(m, -1) {
					lse = m
				}
				if w := float64(fl[row]); lse != w && !(math.Abs(lse-w) <= 2e-5*(1+math.Abs(w))) {
					t.Fatalf("row %d: merged lse %g, single call %g", row, lse, w)
				}
				for c := 0; c < dv; c++ {
					x := 0.0
					for i, o := range outs {
						if !math.IsInf(float64(lses[i][row]), -1) {
							x += math.Exp(float64(lses[i][row])-lse) * float64(o[row*dv+c])
						}
					}
					w := float64(fo[row*dv+c])
					if tol := 4*u*pv[row*dv+c] + 1e-6; !(math.Abs(x-w) <= tol) {
						t.Fatalf("row %d col %d: merged out %g, single call %g (diff %g > %g)", row, c, x, w, math.Abs(x-w), tol)
					}
				}
			}
		})
	}
}

// TestInterpPositionsGrad runs the sm_80 forward and both backward
// kernels (dq; dk and dv) at positions against verify's gradient
// reference (verify.CheckGradWith, bf16 tolerance): row 0 at the default
// alignment with a query chunk 3 before it, row 1's keys from 37 and its
// queries past its last key, ragged, so that key tiles straddle the
// masks' blocks and windows at offsets; then a call of more queries than
// keys (seq_q > seq_k) at positions, ragged.
func TestInterpPositionsGrad(t *testing.T) {
	t.Parallel()
	type gcase struct {
		name, yaml string
		d, dv      int
	}
	var cs []gcase
	for _, ps := range posSpecs {
		cs = append(cs, gcase{ps.name, ps.yaml, 64, 64})
	}
	for _, pd := range posDims {
		cs = append(cs, gcase{fmt.Sprintf("%s_d%d_v%d", pd.spec, pd.d, pd.dv), withDims(posSpec(t, pd.spec), pd.d, pd.dv), pd.d, pd.dv})
	}
	for _, ps := range cs {
		t.Run(ps.name, func(t *testing.T) {
			t.Parallel()
			sp, fk, bk := posKernels(t, ps.yaml, ptx.SM80, true)
			r := rand.New(rand.NewPCG(12, uint64(len(ps.name))))
			sh := verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqK: 100, HeadDim: ps.d, HeadDimV: ps.dv,
				SeqLensQ: []int32{40, 33}, SeqLensK: []int32{100, 71},
				QPos: []int32{57, 37 + 71 + 4}, KPos: []int32{0, 37}}
			rep, err := verify.CheckGradWith(sp.Pattern(), fk.Run(), bk.Run(), sh, r, verify.GradBF16)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%v", rep)
			// a query chunk longer than its key chunk (seq_q > seq_k):
			// row 0's queries run past its keys, row 1's keys lie within
			// its queries, ragged
			sh = verify.Shape{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 70, SeqK: 45, HeadDim: ps.d, HeadDimV: ps.dv,
				SeqLensQ: []int32{70, 61}, SeqLensK: []int32{45, 29},
				QPos: []int32{20, 3}, KPos: []int32{0, 30}}
			if rep, err = verify.CheckGradWith(sp.Pattern(), fk.Run(), bk.Run(), sh, r, verify.GradBF16); err != nil {
				t.Fatalf("seq_q > seq_k: %v", err)
			}
			t.Logf("seq_q > seq_k: %v", rep)
		})
	}
}

// TestPositionsRefused: kernels that take no positions (a residue
// layout's above head_dim 128: dilated at 192) refuse non-zero
// Launch.QPos or KPos with an error naming them, and take an address of
// 0; the others (a residue layout's up to 128, a tree mask's, a long
// scan's: bigbird, and those at head_dim 192 and 256) take both. A call of
// more queries than keys (seq_q > seq_k) is refused by Geometry for the
// kernels without positions, and by Args when it gives no positions.
func TestPositionsRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"dilated", "dilated@192", "tree", "bigbird", "causal", "causal@192", "bigbird@256", "gemma2@192,128"} {
		name, dims, _ := strings.Cut(name, "@")
		s, err := spec.ParseFile("../../spec/examples/" + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if dims != "" {
			qk, v, split := strings.Cut(dims, ",")
			s.HeadDim, _ = strconv.Atoi(qk)
			s.HeadDimV = s.HeadDim
			if split {
				s.HeadDimV, _ = strconv.Atoi(v)
			}
		}
		p, err := gen.Compile(s, ptx.SM80, nil)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := ptx.GenerateForward(p, ptx.Config{Target: ptx.SM80})
		if err != nil {
			t.Fatal(err)
		}
		l, err := fw.Geometry(1, 1, 1, 64, 128, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, pr := range fw.Params {
			if pr.T == ptx.U64 && pr.Name != "seq_lens_q" && pr.Name != "seq_lens_k" && pr.Name != "q_pos" && pr.Name != "k_pos" {
				n++
			}
		}
		ptrs := make([]uint64, n)
		for i := range ptrs {
			ptrs[i] = uint64(0x1000 * (i + 1))
		}
		if _, err := l.Args(ptrs...); err != nil {
			t.Fatalf("%s: no positions: %v", name, err)
		}
		takes := name != "dilated" || dims == ""
		for _, set := range []func(*ptx.Launch){func(l *ptx.Launch) { l.KPos = 0x9000 }, func(l *ptx.Launch) { l.QPos = 0x9000 }} {
			lp := l
			set(&lp)
			_, err = lp.Args(ptrs...)
			if takes != (err == nil) {
				t.Errorf("%s%s: positions given: err = %v, want a refusal: %v", name, dims, err, !takes)
			} else if err != nil && !strings.Contains(err.Error(), "takes no positions") {
				t.Errorf("%s: err = %v, want it to say the kernel takes no positions", name, err)
			}
		}
		wide, err := fw.Geometry(1, 1, 1, 100, 64, 0)
		if !takes {
			if err == nil || !strings.Contains(err.Error(), "exceeds seq_k") {
				t.Errorf("%s: seq_q > seq_k: err = %v, want a refusal", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: seq_q > seq_k: %v", name, err)
		}
		if _, err := wide.Args(ptrs...); err == nil || !strings.Contains(err.Error(), "exceeds seq_k") {
			t.Errorf("%s: seq_q > seq_k without positions: err = %v, want a refusal", name, err)
		}
		wide.QPos = 0x9000
		if _, err := wide.Args(ptrs...); err != nil {
			t.Errorf("%s: seq_q > seq_k at positions: %v", name, err)
		}
		l.KPos, l.SeqLensK = 0, 0x9000
		_, err = l.Args(ptrs...)
		if takes != (err == nil) {
			t.Errorf("%s%s: lengths given: err = %v, want a refusal: %v", name, dims, err, !takes)
		}
	}
}
