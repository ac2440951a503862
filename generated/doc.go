// Package generated holds, one folder per spec in spec/examples, the
// packages attngen generates. They are written by go generate ./... (the
// lines below), byte-identical on every run, and never edited by hand; CI
// regenerates them and fails on any difference. generated_test.go runs the
// kernel checks of attngen verify on every one of them, through the table
// internal/registry writes from spec/examples (packages_test.go), and a
// test checks that the lines below cover every example.
package generated

//go:generate go run ../cmd/attngen -spec ../spec/examples/alibi.yaml -out alibi
//go:generate go run ../cmd/attngen -spec ../spec/examples/bigbird.yaml -out bigbird
//go:generate go run ../cmd/attngen -spec ../spec/examples/block.yaml -out block
//go:generate go run ../cmd/attngen -spec ../spec/examples/bridge.yaml -out bridge
//go:generate go run ../cmd/attngen -spec ../spec/examples/causal.yaml -out causal
//go:generate go run ../cmd/attngen -spec ../spec/examples/chunked.yaml -out chunked
//go:generate go run ../cmd/attngen -spec ../spec/examples/dilated.yaml -out dilated
//go:generate go run ../cmd/attngen -spec ../spec/examples/document.yaml -out document
//go:generate go run ../cmd/attngen -spec ../spec/examples/except.yaml -out except
//go:generate go run ../cmd/attngen -spec ../spec/examples/gemma2.yaml -out gemma2
//go:generate go run ../cmd/attngen -spec ../spec/examples/gemma2_global.yaml -out gemma2global
//go:generate go run ../cmd/attngen -spec ../spec/examples/gptoss.yaml -out gptoss
//go:generate go run ../cmd/attngen -spec ../spec/examples/hetero.yaml -out hetero
//go:generate go run ../cmd/attngen -spec ../spec/examples/hybrid.yaml -out hybrid
//go:generate go run ../cmd/attngen -spec ../spec/examples/longformer.yaml -out longformer
//go:generate go run ../cmd/attngen -spec ../spec/examples/neighborhood.yaml -out neighborhood
//go:generate go run ../cmd/attngen -spec ../spec/examples/offsets.yaml -out offsets
//go:generate go run ../cmd/attngen -spec ../spec/examples/perhead.yaml -out perhead
//go:generate go run ../cmd/attngen -spec ../spec/examples/prefix_lm.yaml -out prefixlm
//go:generate go run ../cmd/attngen -spec ../spec/examples/se_bridge.yaml -out sebridge
//go:generate go run ../cmd/attngen -spec ../spec/examples/streaming.yaml -out streaming
//go:generate go run ../cmd/attngen -spec ../spec/examples/tree.yaml -out tree
//go:generate go run ../cmd/attngen -spec ../spec/examples/window.yaml -out window
//go:generate go run ./internal/registry
