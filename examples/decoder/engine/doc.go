// Package engine is the decoder of examples/decoder: a small transformer
// with random weights (Config, Weights) in three configurations, run in
// float32 by an Engine over a paged KV cache (pages of PageSize positions,
// one pool shared by every sequence) with continuous batching (Serve).
// Its attention is an Attention: Generated, the packages attngen
// generated from ../specs into ../attn, or Loops, a straightforward Go
// attention on the same cache (the baseline of Bench). The GoMLX baseline
// lives in the separate module ../gomlx, which implements Attention.
package engine
