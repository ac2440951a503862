package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
)

// Config is one decoder: its sizes, its attention layers and the score
// stage each layer's attention applies.
type Config struct {
	Name                 string
	Vocab, Hidden, Inter int
	HeadsQ, HeadsKV      int
	HeadDim              int
	RopeTheta            float64
	// Windows holds each layer's attention: 0 is full causal attention,
	// w > 0 a causal sliding window of w keys, the query's own included
	// (keys i-w+1 .. i; Hugging Face's sliding_window = w).
	Windows []int
	// QueryPreAttnScalar is Gemma 2's query_pre_attn_scalar: the scores
	// are scaled by its inverse square root. 0 means HeadDim (the usual
	// 1/sqrt(HeadDim)).
	QueryPreAttnScalar float64
	// SoftCap is the attention-logit soft-cap (Gemma 2's
	// attn_logit_softcapping), 0 for none: s <- c*tanh(s/c).
	SoftCap float64
	// Sinks: every layer has a learned sink logit per query head (gpt-oss).
	Sinks bool
	// QKGain multiplies the initial q and k projection weights, so that
	// scores are large enough for a soft-cap to matter.
	QKGain float64
	Seed   uint64
}

// Layers is the number of decoder layers.
func (c *Config) Layers() int { return len(c.Windows) }

// Scale is the factor of the scores q.k.
func (c *Config) Scale() float64 {
	s := c.QueryPreAttnScalar
	if s == 0 {
		s = float64(c.HeadDim)
	}
	return 1 / math.Sqrt(s)
}

// The three configurations of the example.
var (
	Llama = Config{
		Name: "llama3", Vocab: 512, Hidden: 256, Inter: 512,
		HeadsQ: 8, HeadsKV: 2, HeadDim: 128, RopeTheta: 500000,
		Windows: []int{0, 0, 0, 0}, QKGain: 1, Seed: 1,
	}
	Gemma2 = Config{
		Name: "gemma2", Vocab: 512, Hidden: 256, Inter: 512,
		HeadsQ: 4, HeadsKV: 2, HeadDim: 256, RopeTheta: 10000,
		Windows:            []int{4096, 0, 4096, 0},
		QueryPreAttnScalar: 144, SoftCap: 50, QKGain: 4, Seed: 2,
	}
	GptOss = Config{
		Name: "gptoss", Vocab: 512, Hidden: 256, Inter: 512,
		HeadsQ: 8, HeadsKV: 1, HeadDim: 64, RopeTheta: 150000,
		Windows: []int{128, 0, 128, 0}, Sinks: true, QKGain: 1, Seed: 3,
	}
	Configs = []*Config{&Llama, &Gemma2, &GptOss}
)

// Layer holds one decoder layer's weights. Matrices are [out][in], row
// major: y[j] = dot(W[j*in:], x).
type Layer struct {
	AttnNorm, MLPNorm []float32
	Wq, Wk, Wv, Wo    []float32
	Wgate, Wup, Wdown []float32
	Sinks             []float32 // HeadsQ logits, with Config.Sinks
}

// Weights are a model's parameters, drawn from a seeded generator.
type Weights struct {
	Embed     []float32 // [Vocab][Hidden]
	Layers    []Layer
	FinalNorm []float32
	Unembed   []float32 // [Vocab][Hidden]
}

// NewWeights draws the weights of c from its seed.
func NewWeights(c *Config) *Weights {
	r := rand.New(rand.NewPCG(c.Seed, 0x5eed))
	normal := func(n int, std float64) []float32 {
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(r.NormFloat64() * std)
		}
		return w
	}
	norm := func(n int) []float32 {
		w := normal(n, 0.1)
		for i := range w {
			w[i] += 1
		}
		return w
	}
	h, dq, dkv := c.Hidden, c.HeadsQ*c.HeadDim, c.HeadsKV*c.HeadDim
	in := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	w := &Weights{Embed: normal(c.Vocab*h, 1), FinalNorm: norm(h), Unembed: normal(c.Vocab*h, in(h))}
	for range c.Layers() {
		l := Layer{
			AttnNorm: norm(h), MLPNorm: norm(h),
			Wq: normal(dq*h, c.QKGain*in(h)), Wk: normal(dkv*h, c.QKGain*in(h)), Wv: normal(dkv*h, in(h)),
			Wo:    normal(h*dq, in(dq)),
			Wgate: normal(c.Inter*h, in(h)), Wup: normal(c.Inter*h, in(h)), Wdown: normal(h*c.Inter, in(c.Inter)),
		}
		if c.Sinks {
			l.Sinks = normal(c.HeadsQ, 1)
			for i := range l.Sinks {
				l.Sinks[i] += 2
			}
		}
		w.Layers = append(w.Layers, l)
	}
	return w
}

// matMul sets y = W x for the given rows of x (xs elements apart)
// and of y (ys elements apart): W is [out][in]. Output columns are split
// across GOMAXPROCS goroutines.
func matMul(y []float32, ys int, x []float32, xs int, rows []int, w []float32, out, in int) {
	workers := min(runtime.GOMAXPROCS(0), max(1, out*in*len(rows)/(1<<16)))
	chunk := (out + workers - 1) / workers
	var wg sync.WaitGroup
	for c0 := 0; c0 < out; c0 += chunk {
		c1 := min(out, c0+chunk)
		work := func() {
			for _, r := range rows {
				xr, yr := x[r*xs:r*xs+in], y[r*ys:r*ys+out]
				for j := c0; j < c1; j++ {
					yr[j] = dot(w[j*in:j*in+in], xr)
				}
			}
		}
		if c1 == out {
			work()
		} else {
			wg.Add(1)
			go func() { defer wg.Done(); work() }()
		}
	}
	wg.Wait()
}

// dot is the float32 dot product with four accumulators.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// rmsNorm writes x / rms(x) * w to y.
func rmsNorm(y, x, w []float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(ss/float64(len(x))+1e-6))
	for i, v := range x {
		y[i] = v * inv * w[i]
	}
}

// rope holds the rotary embedding's cos and sin per position and
// frequency, computed in float64 and rounded once.
type rope struct {
	half     int
	cos, sin []float32 // [pos][half]
	theta    float64
}

func (r *rope) grow(n int) {
	for p := len(r.cos) / r.half; p < n; p++ {
		for i := range r.half {
			a := float64(p) * math.Pow(r.theta, -float64(2*i)/float64(2*r.half))
			r.cos = append(r.cos, float32(math.Cos(a)))
			r.sin = append(r.sin, float32(math.Sin(a)))
		}
	}
}

// apply rotates the heads of x (heads rows of 2*half) at position p, the
// halves paired as Hugging Face's rotate_half pairs them.
func (r *rope) apply(x []float32, heads, p int) {
	c, s := r.cos[p*r.half:][:r.half], r.sin[p*r.half:][:r.half]
	for h := range heads {
		v := x[h*2*r.half:][:2*r.half]
		for i := range r.half {
			a, b := v[i], v[i+r.half]
			v[i], v[i+r.half] = a*c[i]-b*s[i], b*c[i]+a*s[i]
		}
	}
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// Check reports a configuration the program cannot run.
func (c *Config) Check() error {
	if c.HeadsQ%c.HeadsKV != 0 || c.HeadDim%2 != 0 || len(c.Windows) == 0 {
		return fmt.Errorf("%s: bad configuration", c.Name)
	}
	return nil
}
