package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/attngen/attngen/examples/decoder/engine"
)

func main() {
	bench := flag.Bool("bench", false, "time prefill and decode against a Go-loop attention")
	batch := flag.Int("batch", 4, "-bench: sequences in the batch")
	prompt := flag.Int("prompt", 512, "-bench: prompt length of each sequence")
	steps := flag.Int("steps", 32, "-bench: decode steps")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "decoder: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	if *batch < 1 || *prompt < 1 || *steps < 1 {
		fmt.Fprintln(os.Stderr, "decoder: -batch, -prompt and -steps must be at least 1")
		os.Exit(2)
	}
	for _, c := range engine.Configs {
		if err := c.Check(); err != nil {
			fail(err)
		}
		if err := engine.CheckGenerated(c); err != nil {
			fail(err)
		}
	}
	if *bench {
		if err := engine.Bench(os.Stdout, []engine.Attention{engine.Generated{}, engine.Loops{}}, *batch, *prompt, *steps); err != nil {
			fail(err)
		}
		return
	}
	for _, c := range engine.Configs {
		if err := demo(c); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "decoder:", err)
	os.Exit(1)
}

// demo serves five requests that join and leave at different steps.
func demo(c *engine.Config) error {
	w := engine.NewWeights(c)
	e := engine.NewEngine(c, w, engine.Generated{}, 256)
	r := rand.New(rand.NewPCG(7, 7))
	var reqs []*engine.Request
	for i, n := range []int{12, 3, 40, 7, 25} {
		p := make([]int, n)
		for j := range p {
			p[j] = r.IntN(c.Vocab)
		}
		reqs = append(reqs, &engine.Request{Arrive: 3 * i, Prompt: p, MaxNew: 6 + 2*i})
	}
	t0 := time.Now()
	steps, err := engine.Serve(e, reqs, false)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Name, err)
	}
	fmt.Printf("%s: %d layers, windows %v, %d steps in %v\n", c.Name, c.Layers(), c.Windows, steps, time.Since(t0).Round(time.Millisecond))
	for i, q := range reqs {
		fmt.Printf("  request %d: prompt %2d tokens, steps %2d-%2d, generated %v\n", i, len(q.Prompt), q.Joined, q.Left, q.Tokens[len(q.Prompt):])
	}
	return nil
}
