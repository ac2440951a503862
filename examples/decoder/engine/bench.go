package engine

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"time"
)

// Bench times, for every configuration and each attention of attns, one
// prefill of batch sequences of prompt tokens in one step, then steps
// decode steps of the batch, and prints tokens per second and the time in
// attention.
func Bench(wr io.Writer, attns []Attention, batch, prompt, steps int) error {
	fmt.Fprintf(wr, "batch %d, prompt %d, %d decode steps, GOMAXPROCS %d\n", batch, prompt, steps, runtime.GOMAXPROCS(0))
	fmt.Fprintf(wr, "%-8s %-8s %14s %14s %14s %14s\n", "config", "attn", "prefill tok/s", "(attn ms)", "decode tok/s", "(attn ms)")
	for _, c := range Configs {
		w := NewWeights(c)
		for _, a := range attns {
			pre, preAttn, dec, decAttn, err := benchOne(c, w, a, batch, prompt, steps)
			if err != nil {
				return err
			}
			fmt.Fprintf(wr, "%-8s %-8s %14.1f %14.1f %14.1f %14.1f\n", c.Name, a.Name(),
				float64(batch*prompt)/pre.Seconds(), ms(preAttn), float64(batch*steps)/dec.Seconds(), ms(decAttn))
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func benchOne(c *Config, w *Weights, a Attention, batch, prompt, steps int) (pre, preAttn, dec, decAttn time.Duration, err error) {
	pages := batch * ((prompt+steps+PageSize-1)/PageSize + 1)
	e := NewEngine(c, w, a, pages)
	r := rand.New(rand.NewPCG(11, 11))
	seqs := make([]*Seq, batch)
	toks := make([][]int, batch)
	for b := range seqs {
		seqs[b] = &Seq{}
		toks[b] = make([]int, prompt)
		for i := range toks[b] {
			toks[b][i] = r.IntN(c.Vocab)
		}
	}
	t0 := time.Now()
	lg, err := e.Step(seqs, toks, false)
	if err != nil {
		return
	}
	pre, preAttn = time.Since(t0), e.AttnTime
	e.AttnTime = 0
	t0 = time.Now()
	for range steps {
		for b := range toks {
			toks[b] = []int{Argmax(lg[b])}
		}
		if lg, err = e.Step(seqs, toks, false); err != nil {
			return
		}
	}
	dec, decAttn = time.Since(t0), e.AttnTime
	return
}
