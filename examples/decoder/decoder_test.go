package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/attngen/attngen/examples/decoder/engine"
)

// The test serves the same requests in every configuration: they join at
// different steps (two at step 0, prefilled together), decode their
// forced tokens one a step in one batch, and leave at different steps;
// later ones take the pages earlier ones gave back (stale data the
// attention must not read). One prompt is longer than gpt-oss's window of
// 128, so the sliding layers drop keys.
type reqSpec struct{ arrive, prompt, gen int }

var schedule = []reqSpec{
	{0, 40, 24},
	{0, 7, 10},
	{3, 140, 14},
	{12, 1, 16},
	{12, 63, 4},
	{18, 100, 3},
}

// requests returns the schedule's requests with forced tokens, and the
// token list each one feeds (its prompt and its picks but the last).
func requests(c *engine.Config) ([]*engine.Request, [][]int) {
	r := rand.New(rand.NewPCG(c.Seed, 99))
	var reqs []*engine.Request
	var fed [][]int
	for _, s := range schedule {
		t := make([]int, s.prompt+s.gen)
		for i := range t {
			t[i] = r.IntN(c.Vocab)
		}
		reqs = append(reqs, &engine.Request{Arrive: s.arrive, Prompt: t[:s.prompt], MaxNew: s.gen, Forced: t[s.prompt:]})
		fed = append(fed, t[:len(t)-1])
	}
	return reqs, fed
}

// served is one configuration's run: the logits of every position each
// request fed, from the engine with attngen's attention and with the
// loops, and the float64 reference's.
type served struct {
	fed       [][]int
	gen, loop [][][]float32
	ref       [][][]float64
}

var (
	servedMu sync.Mutex
	servedBy = map[string]*served{}
)

func serve(t *testing.T, c *engine.Config) *served {
	t.Helper()
	servedMu.Lock()
	defer servedMu.Unlock()
	if s := servedBy[c.Name]; s != nil {
		return s
	}
	if err := engine.CheckGenerated(c); err != nil {
		t.Fatal(err)
	}
	w := engine.NewWeights(c)
	s := &served{}
	for _, a := range []engine.Attention{engine.Generated{}, engine.Loops{}} {
		reqs, fed := requests(c)
		s.fed = fed
		// Few pages, so that later requests reuse pages earlier ones left.
		e := engine.NewEngine(c, w, a, 32)
		steps, err := engine.Serve(e, reqs, true)
		if err != nil {
			t.Fatalf("%s, %s: %v", c.Name, a.Name(), err)
		}
		var out [][][]float32
		for i, r := range reqs {
			if len(r.Logits) != len(fed[i]) {
				t.Fatalf("%s: request %d: %d logits rows for %d positions", a.Name(), i, len(r.Logits), len(fed[i]))
			}
			out = append(out, r.Logits)
		}
		if a.Name() == "attngen" {
			s.gen = out
			t.Logf("%s: %d steps", c.Name, steps)
		} else {
			s.loop = out
		}
	}
	s.ref = reference(c, w, s.fed, bug{})
	servedBy[c.Name] = s
	return s
}

// bug is a deliberate mistake in the reference, for TestDetectsBugs.
type bug struct {
	window    int  // added to every sliding window
	noSoftCap bool // no soft-cap
	noSinks   bool // no learned sinks
	scale     bool // 1/sqrt(HeadDim) instead of the configuration's scale
	gqa       bool // query head h reads key/value head h % HeadsKV
	noRoPEK   bool // keys not rotated
}

// reference computes, in float64 and by dense attention over every key of
// the sequence with the mask written from the model's definition, the
// logits of every position of each token list.
func reference(c *engine.Config, w *engine.Weights, seqs [][]int, b bug) [][][]float64 {
	out := make([][][]float64, len(seqs))
	var wg sync.WaitGroup
	for i, toks := range seqs {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = refModel(c, w, toks, b) }()
	}
	wg.Wait()
	return out
}

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// mv is W x for W [out][in] in float32, computed in float64.
func mv(w []float32, x []float64) []float64 {
	in := len(x)
	y := make([]float64, len(w)/in)
	for j := range y {
		var s float64
		for i, v := range w[j*in : (j+1)*in] {
			s += float64(v) * x[i]
		}
		y[j] = s
	}
	return y
}

func norm64(x []float64, w []float32) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+1e-6)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * inv * float64(w[i])
	}
	return y
}

func rope64(x []float64, heads, d, pos int, theta float64) {
	half := d / 2
	for h := range heads {
		v := x[h*d : (h+1)*d]
		for i := range half {
			a := float64(pos) * math.Pow(theta, -float64(2*i)/float64(d))
			c, s := math.Cos(a), math.Sin(a)
			x0, x1 := v[i], v[i+half]
			v[i], v[i+half] = x0*c-x1*s, x1*c+x0*s
		}
	}
}

func refModel(c *engine.Config, w *engine.Weights, toks []int, b bug) [][]float64 {
	n, H, D := len(toks), c.Hidden, c.HeadDim
	x := make([][]float64, n)
	for i, t := range toks {
		x[i] = f64(w.Embed[t*H : (t+1)*H])
	}
	scale := c.Scale()
	if b.scale {
		scale = 1 / math.Sqrt(float64(D))
	}
	for l := range w.Layers {
		L := &w.Layers[l]
		q, k, v := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for i := range n {
			h := norm64(x[i], L.AttnNorm)
			q[i], k[i], v[i] = mv(L.Wq, h), mv(L.Wk, h), mv(L.Wv, h)
			rope64(q[i], c.HeadsQ, D, i, c.RopeTheta)
			if !b.noRoPEK {
				rope64(k[i], c.HeadsKV, D, i, c.RopeTheta)
			}
		}
		window := c.Windows[l]
		if window > 0 {
			window += b.window
		}
		// keep is the layer's mask: causal, and within the window.
		keep := func(i, j int) bool { return j <= i && (window == 0 || i-j < window) }
		for i := range n {
			att := make([]float64, c.HeadsQ*D)
			for h := range c.HeadsQ {
				kh := h / (c.HeadsQ / c.HeadsKV)
				if b.gqa {
					kh = h % c.HeadsKV
				}
				qh := q[i][h*D : (h+1)*D]
				s := make([]float64, n)
				m := math.Inf(-1)
				for j := range n {
					if !keep(i, j) {
						s[j] = math.Inf(-1)
						continue
					}
					var d float64
					for e, qe := range qh {
						d += qe * k[j][kh*D+e]
					}
					d *= scale
					if c.SoftCap > 0 && !b.noSoftCap {
						d = c.SoftCap * math.Tanh(d/c.SoftCap)
					}
					s[j] = d
					m = max(m, d)
				}
				var sum float64
				if c.Sinks && !b.noSinks {
					sk := float64(L.Sinks[h])
					m = max(m, sk)
					sum = math.Exp(sk - m)
				}
				for j := range n {
					if keep(i, j) {
						s[j] = math.Exp(s[j] - m)
						sum += s[j]
					}
				}
				for j := range n {
					if keep(i, j) {
						for e := range D {
							att[h*D+e] += s[j] / sum * v[j][kh*D+e]
						}
					}
				}
			}
			o := mv(L.Wo, att)
			for e := range x[i] {
				x[i][e] += o[e]
			}
			h := norm64(x[i], L.MLPNorm)
			g, u := mv(L.Wgate, h), mv(L.Wup, h)
			for e := range g {
				g[e] = g[e] / (1 + math.Exp(-g[e])) * u[e]
			}
			d := mv(L.Wdown, g)
			for e := range x[i] {
				x[i][e] += d[e]
			}
		}
	}
	lg := make([][]float64, n)
	for i := range n {
		lg[i] = mv(w.Unembed, norm64(x[i], w.FinalNorm))
	}
	return lg
}

// tolerance bounds the error of a logit against the float64 reference,
// relative to the largest logit of the position (see
// TestDecoderMatchesFloat64).
func tolerance(c *engine.Config) float64 {
	if c.SoftCap > 0 {
		return 1e-3
	}
	return 2e-5
}

// maxErr is the largest error of got against want over every position of
// every request, each relative to the position's largest |logit|, with
// where it is.
func maxErr[T float32 | float64](got [][][]T, want [][][]float64) (float64, string) {
	var worst float64
	var where string
	for r := range want {
		for p := range want[r] {
			var big, e float64
			for v, x := range want[r][p] {
				big = max(big, math.Abs(x))
				e = max(e, math.Abs(float64(got[r][p][v])-x))
			}
			if e /= max(big, 1); e > worst || math.IsNaN(e) {
				worst, where = e, fmt.Sprintf("request %d, position %d", r, p)
			}
		}
	}
	return worst, where
}

// TestDecoderMatchesFloat64 serves the schedule in each configuration and
// compares the logits of every position fed, prompt and decode steps
// alike, with the float64 dense model. The engine computes in float32
// (matrix products of up to 1024 terms, attention over up to 153 keys,
// four layers, the kernels' own exp2). With scores of order 1 (Llama,
// gpt-oss) the measured errors are below 1e-6 of the largest logit, and
// the tolerance is 2e-5. Gemma's scores are tens (QKGain 4, so that the
// cap at 50 matters): a score's float32 error, about 1e-7 of the sums of
// |q_e k_e| it adds, is amplified by the softmax and the measured errors
// are about 6e-5, for the Go loops as for attngen; its tolerance is 1e-3.
// Each leaves a margin above 15, and each bug of TestDetectsBugs is at
// least 10 times above it.
func TestDecoderMatchesFloat64(t *testing.T) {
	for _, c := range engine.Configs {
		t.Run(c.Name, func(t *testing.T) {
			s := serve(t, c)
			for _, x := range []struct {
				name string
				got  [][][]float32
			}{{"attngen", s.gen}, {"loops", s.loop}} {
				e, where := maxErr(x.got, s.ref)
				t.Logf("%s: largest relative error %.3g (%s)", x.name, e, where)
				if tol := tolerance(c); !(e <= tol) {
					t.Errorf("%s: logits differ from the float64 model by %.3g of the largest logit at %s (tolerance %.3g)", x.name, e, where, tol)
				}
			}
		})
	}
}

// TestPrefillThenDecodeIsRecompute prefills every request's whole token
// list in one batch (one ragged call a layer, a fresh engine) and checks
// that each position's logits equal those of the incremental run, in which
// the position came in its prompt or in a decode step.
func TestPrefillThenDecodeIsRecompute(t *testing.T) {
	for _, c := range engine.Configs {
		t.Run(c.Name, func(t *testing.T) {
			s := serve(t, c)
			e := engine.NewEngine(c, engine.NewWeights(c), engine.Generated{}, 64)
			seqs := make([]*engine.Seq, len(s.fed))
			for i := range seqs {
				seqs[i] = &engine.Seq{}
			}
			lg, err := e.Step(seqs, s.fed, true)
			if err != nil {
				t.Fatal(err)
			}
			full := make([][][]float32, len(lg))
			for i := range lg {
				for p := 0; p < len(lg[i]); p += c.Vocab {
					full[i] = append(full[i], lg[i][p:p+c.Vocab])
				}
			}
			inc := make([][][]float64, len(s.gen))
			for i := range s.gen {
				for _, row := range s.gen[i] {
					inc[i] = append(inc[i], f64(row))
				}
			}
			// Both runs are float32; they differ only in how the kernels
			// split the keys (tiles, decode passes), so their difference
			// is within the same bound as either's error.
			e1, where := maxErr(full, inc)
			t.Logf("largest relative difference %.3g (%s)", e1, where)
			if !(e1 <= tolerance(c)) {
				t.Errorf("recomputed logits differ from prefill-then-decode by %.3g at %s", e1, where)
			}
		})
	}
}

// TestDetectsBugs checks that the comparison of TestDecoderMatchesFloat64
// can fail: a reference with each deliberate mistake differs from the
// engine by more than the tolerance (and from the correct reference too,
// so each mistake is one the schedule exercises).
func TestDetectsBugs(t *testing.T) {
	for _, x := range []struct {
		c   *engine.Config
		why string
		b   bug
	}{
		{&engine.GptOss, "window 127 instead of 128", bug{window: -1}},
		{&engine.GptOss, "window 129 instead of 128", bug{window: 1}},
		{&engine.GptOss, "no learned sinks", bug{noSinks: true}},
		{&engine.Gemma2, "no soft-cap", bug{noSoftCap: true}},
		{&engine.Gemma2, "1/sqrt(head_dim) instead of query_pre_attn_scalar", bug{scale: true}},
		{&engine.Llama, "query head h on key/value head h % HeadsKV", bug{gqa: true}},
		{&engine.Llama, "keys without RoPE", bug{noRoPEK: true}},
	} {
		t.Run(x.c.Name+"/"+x.why, func(t *testing.T) {
			s := serve(t, x.c)
			ref := reference(x.c, engine.NewWeights(x.c), s.fed, x.b)
			e, where := maxErr(s.gen, ref)
			t.Logf("relative error %.3g (%s)", e, where)
			if e <= 10*tolerance(x.c) {
				t.Errorf("the engine matches a reference with %s within %.3g (%s): the test could not see this bug", x.why, e, where)
			}
		})
	}
}
