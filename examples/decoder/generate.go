package main

// The attention layers' packages, one per layer type, generated from specs/
// into attn/ (CPU targets only: the program runs on the CPU, so the
// packages embed no PTX). go generate ./examples/... rewrites them
// byte for byte; they are never edited by hand.

//go:generate go run ../../cmd/attngen -spec specs/llama.yaml -out attn/llama -sm none
//go:generate go run ../../cmd/attngen -spec specs/gemma2local.yaml -out attn/gemma2local -sm none
//go:generate go run ../../cmd/attngen -spec specs/gemma2global.yaml -out attn/gemma2global -sm none
//go:generate go run ../../cmd/attngen -spec specs/gptosslocal.yaml -out attn/gptosslocal -sm none
//go:generate go run ../../cmd/attngen -spec specs/gptossglobal.yaml -out attn/gptossglobal -sm none
