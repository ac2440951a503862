package ptx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
)

// raggedCase is a batch of rows of different lengths in tensors of
// seq_q and seq_k rows: lensQ[b] queries and lensK[b] keys in row b.
type raggedCase struct {
	s            shape
	lensQ, lensK []int32
}

// raggedCases: a full row, rows shorter than a tile and ending mid-tile,
// a row with keys and no queries, a row with no keys and no queries.
var raggedCases = []raggedCase{
	{shape{4, 2, 1, 70, 100}, []int32{70, 33, 0, 0}, []int32{100, 47, 20, 0}},
}

// TestInterpRagged runs a ragged batch (per-row lengths seq_lens_q and
// seq_lens_k) through the sm_80 forward and backward and the sm_90a
// forward, every element past each row's queries (q, dout) and keys (k,
// v) NaN, and requires each row's bits to be those of a call of that row
// alone at its lengths; the tensors' rows past a row's queries hold out
// 0, lse -Inf and dq 0, past its keys dk 0 and dv 0. A launch without
// lengths (address 0) gives the bits of the plain call, which the strided
// tests already compare. It runs the masks at head_dim 64 and, at the
// head dimensions above 128 (whose kernels stage the row's lengths in
// shared memory), raggedDims.
func TestInterpRagged(t *testing.T) {
	t.Parallel()
	// block: keys past a row's length share partial and full tiles with
	// kept keys of every query (dk and dv there are computed, then zeroed)
	masks := []string{"streaming", "block", "causal", "gemma2"}
	if testing.Short() {
		masks = masks[:2]
	}
	type run struct {
		mask  string
		d, dv int
	}
	var runs []run
	for _, m := range masks {
		runs = append(runs, run{m, 64, 64})
	}
	// bigbird: hull and class programs above bigScan (staged at every
	// head_dim); the others at the sizes above 128
	runs = append(runs, run{"bigbird", 64, 64}, run{"causal", 192, 192}, run{"block", 256, 256}, run{"streaming", 192, 128})
	type target struct {
		name string
		tg   Target
		bwd  bool
	}
	for _, tc := range []target{{"sm80", SM80, true}, {"sm90a", SM90a, false}} {
		for _, rn := range runs {
			name, d, dv := rn.mask, rn.d, rn.dv
			p := dimPlanV(t, name, d, dv, tc.tg)
			cfg := Config{Target: tc.tg, SoftLg2: true}
			for _, rc := range raggedCases {
				t.Run(fmt.Sprintf("%s/%s/d%d,%d/%v", tc.name, name, d, dv, rc.s), func(t *testing.T) {
					checkRagged(t, p, cfg, rc, tc.bwd, 1, d, dv)
				})
			}
		}
	}
}

// residueRaggedCases are ragged batches for a residue layout of stride 3
// (tensors' rows multiples of 3, as the sm_90a kernel needs): a full row
// whose classes hold two query tiles and two key tiles of the sm_80
// kernels, rows whose lengths are not multiples of the stride (so the
// classes of one row hold different counts), a row with keys and no
// queries, a row with neither, a row of fewer queries than the stride.
var residueRaggedCases = []raggedCase{
	{shape{3, 2, 1, 198, 231}, []int32{198, 131, 0}, []int32{231, 170, 20}},
	{shape{3, 2, 1, 60, 63}, []int32{2, 59, 0}, []int32{61, 62, 0}},
}

// residueSpec is a dilated mask the residue tests run: the plan gathers
// its positions by i mod 3.
const residueSpec = "name: dil3\nmask:\n  dilated: {stride: 3}\nhead_dim: 64\n"

// TestInterpRaggedResidue is TestInterpRagged for a residue layout
// (stride 3): the sm_80 forward and backward and the sm_90a forward on
// ragged batches of residueRaggedCases, each row's bits those of the row
// alone, the tensors' rows past its lengths out 0, lse -Inf, dq, dk and
// dv 0. The sm_90a kernel runs rows whose lengths are not multiples of
// the stride only as a ragged call (its tensor maps need the tensors'
// rows to be): the row alone is then its rows padded to a multiple of
// the stride with NaN, at its lengths, and rows whose lengths are
// multiples run alone without lengths.
func TestInterpRaggedResidue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tg   Target
		bwd  bool
	}{{"sm80", SM80, true}, {"sm90a", SM90a, false}} {
		p := yamlPlan(t, residueSpec, tc.tg)
		if p.Layout.Kind != gen.Residue || p.Layout.Stride != 3 {
			t.Fatalf("%s plans layout %s, want residue (stride 3)", residueSpec, layoutText(p.Layout))
		}
		pad := 1
		if tc.tg.Accel {
			pad = 3
		}
		cfg := Config{Target: tc.tg, SoftLg2: true}
		for _, rc := range residueRaggedCases {
			t.Run(fmt.Sprintf("%s/%v", tc.name, rc.s), func(t *testing.T) {
				t.Parallel()
				checkRagged(t, p, cfg, rc, tc.bwd, pad, 64, 64)
			})
		}
	}
}

// yamlPlan compiles the spec text y for target tg.
func yamlPlan(t *testing.T, y string, tg Target) *gen.Plan {
	t.Helper()
	s, err := spec.Parse("test.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.Compile(s, tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkRagged runs the ragged batch rc through plan p's kernels (the
// backward's with bwd), inputs NaN past every row's lengths, and
// compares each row's bits with a call of that row alone; pad > 1 rounds
// the lone row's tensors up to a multiple of pad (NaN rows), run at the
// row's lengths when they are not multiples.
func checkRagged(t *testing.T, p *gen.Plan, cfg Config, rc raggedCase, bwd bool, pad, d, dv int) {
	t.Helper()
	s := rc.s
	rng := rand.New(rand.NewPCG(uint64(s.sq), 7))
	nan16 := uint16(0x7fc0)
	draw := func(n [3]int, lens []int32, d int) []uint16 {
		x := make([]uint16, n[0]*n[1]*n[2]*d)
		for i := range x {
			row := i / d % n[2]
			b := i / (d * n[2] * n[1])
			if row >= int(lens[b]) {
				x[i] = nan16 // past the row's length: never read
			} else {
				x[i] = bf16(float32(rng.NormFloat64()))
			}
		}
		return x
	}
	nq, nk := [3]int{s.batch, s.hq, s.sq}, [3]int{s.batch, s.hkv, s.sk}
	q, k, v, do := draw(nq, rc.lensQ, d), draw(nk, rc.lensK, d), draw(nk, rc.lensK, dv), draw(nq, rc.lensQ, dv)
	got := runStrided(t, p, cfg, s, nil, q, k, v, do, bwd, rc.lensQ, rc.lensK)
	negInf := math.Float32bits(float32(math.Inf(-1)))
	for b := 0; b < s.batch; b++ {
		lq, lk := int(rc.lensQ[b]), int(rc.lensK[b])
		// row b alone: its heads' first lq (lk) rows, in tensors of pq
		// (pk) rows, padded with NaN to a multiple of pad
		pq, pk := (lq+pad-1)/pad*pad, (lk+pad-1)/pad*pad
		one := shape{1, s.hq, s.hkv, pq, pk}
		rows := func(x []uint16, heads, n, l, pl, d int) []uint16 {
			var o []uint16
			for h := 0; h < heads; h++ {
				o = append(o, x[((b*heads+h)*n)*d:][:l*d]...)
				for range (pl - l) * d {
					o = append(o, nan16)
				}
			}
			return o
		}
		var lens [][]int32
		if pq != lq || pk != lk {
			lens = [][]int32{{int32(lq)}, {int32(lk)}}
		}
		var ref stridedOut
		if lq > 0 {
			ref = runStrided(t, p, cfg, one, nil, rows(q, s.hq, s.sq, lq, pq, d), rows(k, s.hkv, s.sk, lk, pk, d), rows(v, s.hkv, s.sk, lk, pk, dv), rows(do, s.hq, s.sq, lq, pq, dv), bwd, lens...)
		}
		// the lone row's results at row r of head h of a tensor of n rows
		check := func(what string, x []uint32, heads, n, l, pl, w int, want []uint32, past uint32) {
			for h := 0; h < heads; h++ {
				for r := 0; r < n; r++ {
					for c := 0; c < w; c++ {
						g := x[((b*heads+h)*n+r)*w+c]
						e := past
						if r < l && want != nil {
							e = want[(h*pl+r)*w+c]
						}
						if g != e {
							t.Fatalf("row %d (lengths %d, %d): %s[head %d][%d][%d] = %#x, want %#x", b, lq, lk, what, h, r, c, g, e)
						}
					}
				}
			}
		}
		w16 := func(x []uint16) []uint32 {
			if x == nil {
				return nil
			}
			o := make([]uint32, len(x))
			for i, v := range x {
				o[i] = uint32(v)
			}
			return o
		}
		wf := func(x []float32) []uint32 {
			if x == nil {
				return nil
			}
			o := make([]uint32, len(x))
			for i, v := range x {
				o[i] = math.Float32bits(v)
			}
			return o
		}
		check("out", w16(got.out), s.hq, s.sq, lq, pq, dv, w16(ref.out), 0)
		check("lse", wf(got.lse), s.hq, s.sq, lq, pq, 1, wf(ref.lse), negInf)
		if bwd {
			check("dq", got.dq, s.hq, s.sq, lq, pq, d, ref.dq, 0)
			kl := lk
			if lq == 0 {
				kl = 0 // no queries: every key's gradient is 0
			}
			check("dk", got.dk, s.hkv, s.sk, kl, pk, d, ref.dk, 0)
			check("dv", got.dv, s.hkv, s.sk, kl, pk, dv, ref.dv, 0)
		}
	}
}
