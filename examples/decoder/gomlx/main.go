// Command gomlx is examples/decoder's -bench with a third attention:
// GoMLX's, on its pure-Go backend (simplego). It is its own module, so
// that attngen's module does not depend on GoMLX; the decoder itself is
// examples/decoder/engine, through a replace directive.
//
// GoMLX v0.26.0's attention layer, layers.MultiHeadAttention, owns its
// q, k, v and output projections (Dense, with biases) and has no grouped
// query heads, soft-cap or sinks, and no place for RoPE between the
// projections and the scores; so this attention is the core of that layer
// (Einsum of queries and keys, MaskedSoftmax, Einsum with the values)
// built from the same GoMLX ops, with the soft-cap, the sinks and the
// grouped heads added. GoMLX has no paged cache: each call gathers the
// keys and values of every sequence from the pages into dense tensors,
// with the key axis rounded up to a multiple of 128 (masked) so that the
// compiled graphs are reused across steps.
//
// Usage (from this folder):
//
//	go run . [-batch 4] [-prompt 512] [-steps 32]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/attngen/attngen/examples/decoder/engine"
)

func main() {
	batch := flag.Int("batch", 4, "sequences in the batch")
	prompt := flag.Int("prompt", 512, "prompt length of each sequence")
	steps := flag.Int("steps", 32, "decode steps")
	check := flag.Bool("check", false, "compare GoMLX's attention with the Go loops on one short run and exit")
	flag.Parse()
	if flag.NArg() > 0 || *batch < 1 || *prompt < 1 || *steps < 1 {
		fmt.Fprintln(os.Stderr, "usage: gomlx [-batch B] [-prompt P] [-steps S] [-check]")
		os.Exit(2)
	}
	g, err := New()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gomlx:", err)
		os.Exit(1)
	}
	if *check {
		if err := Check(g); err != nil {
			fmt.Fprintln(os.Stderr, "gomlx:", err)
			os.Exit(1)
		}
		return
	}
	for _, c := range engine.Configs {
		if err := engine.CheckGenerated(c); err != nil {
			fmt.Fprintln(os.Stderr, "gomlx:", err)
			os.Exit(1)
		}
	}
	if err := engine.Bench(os.Stdout, []engine.Attention{engine.Generated{}, engine.Loops{}, g}, *batch, *prompt, *steps); err != nil {
		fmt.Fprintln(os.Stderr, "gomlx:", err)
		os.Exit(1)
	}
}
