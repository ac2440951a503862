// Command decoder is a small transformer decoder with random weights
// whose attention runs through packages attngen generated (attn/, from
// specs/), in three configurations: Llama-3-like (grouped-query 4:1,
// head_dim 128, causal), Gemma-2-like (sliding window 4096 and global
// layers alternating, head_dim 256, soft-capping at 50, Gemma's
// query_pre_attn_scalar as the scale) and gpt-oss-like (sliding window 128
// and full layers alternating, learned sinks, head_dim 64, grouped-query
// 8:1), each with RoPE, RMSNorm and a SwiGLU MLP.
//
// The KV cache is paged (16 positions a page, one pool of pages shared by
// every sequence) and batching is continuous: sequences of different
// lengths are prefilled together and decoded token by token in one batch
// per step, joining and leaving at different steps.
//
// Usage:
//
//	go run ./examples/decoder          serve a few requests greedily per configuration
//	go run ./examples/decoder -bench   tokens per second of prefill and decode, attngen against Go loops
//
// decoder_test.go compares every step's logits with a float64 dense
// model. The GoMLX comparison of -bench is a separate module, gomlx/.
package main
