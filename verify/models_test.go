package verify

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// The tests of this file write each model's attention as its published
// definition states it (a dense row of logits, the model's own mask, a
// softmax over the row) and compare it with the spec's evaluation: a spec
// with the model's score section, parsed, given values by RandomScore and
// run by Reference.

// modelSpec parses a one-mask spec with a score section (YAML flow
// syntax) and returns its pattern and its stage's values for heads query
// heads.
func modelSpec(t *testing.T, maskYAML, scoreYAML string, causal bool, heads int, r *rand.Rand) (spec.Pattern, *Score) {
	t.Helper()
	c := "false"
	if causal {
		c = "true"
	}
	s, err := spec.Parse("model.yaml", []byte("name: model\ncausal: "+c+"\nhead_dim: 64\nmask: "+maskYAML+"\nscore: "+scoreYAML+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return s.Pattern(), RandomScore(s.Score, heads, r)
}

// denseModel is attention written as the models write it: for each query
// head and row, logits[j] = logit(h, i, j, x) for x = scale*q.k where
// keep(i, j) and -Inf elsewhere, then extra (nil: none) appends columns
// of the row, softmax over all the columns, the first SeqK weights times
// v. It returns out and the log-sum-exp of the whole row.
func denseModel(q, k, v []float32, s Shape, keep func(i, j int) bool, logit func(h, i, j int, x float64) float64, extra func(h int) []float64) (out, lse []float64) {
	D := s.HeadDim
	nq, _, nl := s.Sizes()
	out, lse = make([]float64, nq), make([]float64, nl)
	group := s.HeadsQ / s.HeadsKV
	for b := 0; b < s.Batch; b++ {
		for h := 0; h < s.HeadsQ; h++ {
			kv := (b*s.HeadsKV + h/group) * s.SeqK
			for r := 0; r < s.SeqQ; r++ {
				row := (b*s.HeadsQ+h)*s.SeqQ + r
				i := r + s.SeqK - s.SeqQ
				logits := make([]float64, s.SeqK)
				for j := range logits {
					logits[j] = math.Inf(-1)
					if !keep(i, j) {
						continue
					}
					x := 0.0
					for d := 0; d < D; d++ {
						x += float64(q[row*D+d]) * float64(k[(kv+j)*D+d])
					}
					logits[j] = logit(h, i, j, x*s.EffScale())
				}
				if extra != nil {
					logits = append(logits, extra(h)...)
				}
				m := math.Inf(-1)
				for _, l := range logits {
					m = math.Max(m, l)
				}
				if math.IsInf(m, -1) {
					lse[row] = m
					continue
				}
				total := 0.0
				for _, l := range logits {
					total += math.Exp(l - m)
				}
				lse[row] = m + math.Log(total)
				for j := 0; j < s.SeqK; j++ { // the extra columns are dropped
					w := math.Exp(logits[j]-m) / total
					if w == 0 {
						continue
					}
					for d := 0; d < D; d++ {
						out[row*D+d] += w * float64(v[(kv+j)*D+d])
					}
				}
			}
		}
	}
	return out, lse
}

// sameRows compares a model's out and lse with Reference's row by row.
func sameRows(t *testing.T, what string, s Shape, out, lse, refOut, refLse []float64) {
	t.Helper()
	D := s.HeadDim
	for row := range lse {
		if !closeTo(lse[row], refLse[row], 1e-12) {
			t.Fatalf("%s: row %d: lse %v, Reference %v", what, row, lse[row], refLse[row])
		}
		for d := 0; d < D; d++ {
			if math.Abs(out[row*D+d]-refOut[row*D+d]) > 1e-12 {
				t.Fatalf("%s: row %d dim %d: out %v, Reference %v", what, row, d, out[row*D+d], refOut[row*D+d])
			}
		}
	}
}

// TestGemma2SoftCap: Gemma 2 (attn_logit_softcapping = 50) divides the
// scaled scores by the cap, takes tanh and multiplies by the cap, then
// adds its causal (or sliding-window) mask of -Inf, and takes the
// softmax. Pair by pair the spec's stage is that formula, and the whole
// attention equals Reference row by row, on local (window) and global
// layers; scores are drawn large enough that the cap bites.
func TestGemma2SoftCap(t *testing.T) {
	r := rand.New(rand.NewPCG(221, 222))
	const softcap = 50.0
	gemma := func(x float64) float64 {
		x = x / softcap
		x = math.Tanh(x)
		return x * softcap
	}
	for _, layer := range []struct {
		mask string
		keep func(i, j int) bool
	}{
		{"{window: {size: 8}}", func(i, j int) bool { return j <= i && i-j < 8 }}, // local layers
		{"{full: {}}", func(i, j int) bool { return j <= i }},                     // global layers
	} {
		s := Shape{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 20, SeqK: 30, HeadDim: 16}
		p, sc := modelSpec(t, layer.mask, "{softcap: 50}", true, s.HeadsQ, r)
		if sc == nil || sc.SoftCap != softcap || sc.Alibi != AlibiNone || sc.Sinks != nil {
			t.Fatalf("spec's stage %v, want the soft-cap 50 alone", sc)
		}
		s.Score = sc
		for n := 0; n < 1000; n++ {
			x := 200 * r.NormFloat64()
			if got, _ := sc.apply(x, r.IntN(4), 29, r.IntN(30)); got != gemma(x) {
				t.Fatalf("score %v: the stage gives %v, Gemma 2 %v", x, got, gemma(x))
			}
		}
		nq, nkv, _ := s.Sizes()
		q, k, v := randomSlice(r, nq, 12), randomSlice(r, nkv, 12), randomSlice(r, nkv, 1)
		refOut, refLse, err := Reference(p, nil, q, k, v, s)
		if err != nil {
			t.Fatal(err)
		}
		out, lse := denseModel(q, k, v, s, layer.keep, func(h, i, j int, x float64) float64 { return gemma(x) }, nil)
		sameRows(t, "Gemma 2 "+layer.mask, s, out, lse, refOut, refLse)
	}
}

// TestAlibiSlopesPaper: the ALiBi paper's slopes. For n a power of two
// they are 2^(-8/n), 2^(-16/n), ..., 2^-8 (8 heads: 1/2, 1/4, ...,
// 1/256); otherwise those of the largest power of two p below n,
// followed by every other slope of 2p heads from the first (12 heads:
// 2^-1 ... 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5). verify's and
// runtime/mask's implementations agree for 1 to 64 heads, to float32
// bit for bit (what kernels read).
func TestAlibiSlopesPaper(t *testing.T) {
	eight := []float64{1.0 / 2, 1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32, 1.0 / 64, 1.0 / 128, 1.0 / 256}
	twelve := append(append([]float64(nil), eight...), math.Sqrt(0.5), math.Sqrt(0.5)/2, math.Sqrt(0.5)/4, math.Sqrt(0.5)/8)
	for _, c := range []struct {
		n    int
		want []float64
	}{{8, eight}, {12, twelve}, {1, []float64{1.0 / 256}}, {2, []float64{1.0 / 16, 1.0 / 256}}} {
		got := AlibiSlopes(c.n)
		if len(got) != c.n {
			t.Fatalf("%d heads: %d slopes", c.n, len(got))
		}
		for h := range got {
			if math.Abs(got[h]-c.want[h]) > 1e-15*c.want[h] {
				t.Errorf("%d heads: slope %d = %v, want %v", c.n, h, got[h], c.want[h])
			}
		}
	}
	for n := 1; n <= 64; n++ {
		a, b := AlibiSlopes(n), mask.AlibiSlopes(n)
		if len(a) != n || len(b) != n {
			t.Fatalf("%d heads: %d and %d slopes", n, len(a), len(b))
		}
		for h := range a {
			if math.Abs(a[h]-b[h]) > 1e-13*b[h] || float32(a[h]) != float32(b[h]) {
				t.Errorf("%d heads: slope %d: verify %v, runtime/mask %v", n, h, a[h], b[h])
			}
		}
	}
}

// TestAlibiPaper: ALiBi adds m * [-(i-1), ..., -1, 0] to query i's
// scores (the paper's Figure 3: -m (i - j)), or -m |i - j| without the
// causal mask; BLOOM adds m * j instead, which differs from it by m * i
// on each row, so its softmax is the same and its log-sum-exp is m * i
// more. Pair by pair the spec's stage is the paper's bias, and both
// forms equal Reference row by row.
func TestAlibiPaper(t *testing.T) {
	r := rand.New(rand.NewPCG(223, 224))
	for _, causal := range []bool{true, false} {
		s := Shape{Batch: 1, HeadsQ: 12, HeadsKV: 4, SeqQ: 17, SeqK: 25, HeadDim: 8}
		p, sc := modelSpec(t, "{full: {}}", "{alibi: {}}", causal, s.HeadsQ, r)
		want := AlibiSigned
		if !causal {
			want = AlibiSymmetric
		}
		if sc == nil || sc.Alibi != want || sc.SoftCap != 0 || sc.Sinks != nil {
			t.Fatalf("causal %v: spec's stage %v, want ALiBi (%v) alone", causal, sc, want)
		}
		slopes := AlibiSlopes(s.HeadsQ)
		paper := func(h, i, j int, x float64) float64 {
			if causal {
				return x + slopes[h]*float64(-(i-j))
			}
			return x - slopes[h]*math.Abs(float64(i-j))
		}
		for n := 0; n < 1000; n++ {
			x, h, i, j := r.NormFloat64(), r.IntN(12), r.IntN(100), r.IntN(100)
			if got, _ := sc.apply(x, h, i, j); math.Abs(got-paper(h, i, j, x)) > 1e-13*(1+math.Abs(got)) {
				t.Fatalf("head %d, i %d, j %d, x %v: the stage gives %v, the paper %v", h, i, j, x, got, paper(h, i, j, x))
			}
		}
		s.Score = sc
		nq, nkv, _ := s.Sizes()
		q, k, v := randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv)
		refOut, refLse, err := Reference(p, nil, q, k, v, s)
		if err != nil {
			t.Fatal(err)
		}
		keep := func(i, j int) bool { return !causal || j <= i }
		out, lse := denseModel(q, k, v, s, keep, paper, nil)
		sameRows(t, "ALiBi", s, out, lse, refOut, refLse)
		if !causal {
			continue
		}
		bloom := func(h, i, j int, x float64) float64 { return x + slopes[h]*float64(j) }
		out, lse = denseModel(q, k, v, s, keep, bloom, nil)
		for row := range lse {
			h, i := row/s.SeqQ%s.HeadsQ, row%s.SeqQ+s.SeqK-s.SeqQ
			lse[row] -= slopes[h] * float64(i)
		}
		sameRows(t, "ALiBi as BLOOM adds it", s, out, lse, refOut, refLse)
	}
}

// TestGptOssSinks: gpt-oss's reference attention (its sdpa) scales q.k,
// adds its sliding-window mask (-Inf at j > i and at i - j >= the
// window), appends each query head's sink logit as one more column of
// every row's logits, takes the softmax over keys and sink, and drops the
// sink's column before multiplying V; its heads are grouped over the
// key/value heads. The spec (window 8, learned sinks) with RandomScore's
// sink logits (a head at -Inf, one at 12 that outweighs every key) gives
// the same out row by row, and the same log-sum-exp of the whole row,
// on prefill and decode shapes.
func TestGptOssSinks(t *testing.T) {
	r := rand.New(rand.NewPCG(225, 226))
	const window = 8
	for _, s := range []Shape{
		{Batch: 2, HeadsQ: 8, HeadsKV: 2, SeqQ: 24, SeqK: 24, HeadDim: 16},
		{Batch: 1, HeadsQ: 4, HeadsKV: 1, SeqQ: 3, SeqK: 40, HeadDim: 8},
	} {
		p, sc := modelSpec(t, "{window: {size: 8}}", "{learned_sinks: true}", true, s.HeadsQ, r)
		if sc == nil || sc.Sinks == nil || sc.SoftCap != 0 || sc.Alibi != AlibiNone {
			t.Fatalf("spec's stage %v, want learned sinks alone", sc)
		}
		s.Score = sc
		nq, nkv, _ := s.Sizes()
		q, k, v := randSlice(r, nq), randSlice(r, nkv), randSlice(r, nkv)
		refOut, refLse, err := Reference(p, nil, q, k, v, s)
		if err != nil {
			t.Fatal(err)
		}
		keep := func(i, j int) bool { return j <= i && i-j < window }
		plain := func(h, i, j int, x float64) float64 { return x }
		sink := func(h int) []float64 { return []float64{sc.Sinks[h]} }
		out, lse := denseModel(q, k, v, s, keep, plain, sink)
		sameRows(t, "gpt-oss", s, out, lse, refOut, refLse)
	}
}
