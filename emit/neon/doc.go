// Package neon writes the arm64 Advanced SIMD (NEON) kernels of
// runtime/cpu as Go assembly (Plan 9 syntax, ABI0: arguments read from
// name+off(FP)), in the spirit of avo's builder, which writes amd64 only:
// Go code builds each function instruction by instruction (Func) and a
// File prints the assembly and the Go declarations, byte for byte the
// same on every run (cmd/genneon, run by go generate in runtime/cpu).
//
// Registers are chosen by the code that builds a kernel, not allocated;
// each kernel's comment says which holds what. Instructions Go's arm64
// assembler knows are written in its syntax; the others (vector FADD,
// FMUL, FMAX, FRINTN, FCVTZS, FDIV, ABS, FMLA by element, ...) as WORD $encoding
// with the GNU text beside it, encoded here from the A64 encoding classes
// (isa.go). TestEncodings holds every encoder to the Go toolchain: the
// ones Go assembles must give its encoding, and every WORD must
// disassemble (go tool objdump -gnu) to the text it claims.
//
// The kernels compute the functions of runtime/cpu's pure-Go code and
// amd64 kernels (emit/avo), with the same ABIs: the tile kernel (tile.go,
// 6x4 register blocking with FMLA by element), the decode kernels
// (decode.go: F32, BF16, F16; 1, 2, 4, 8 rows), both for every pair of
// head dimensions of KernelDims (dims.go: qk of q and k, v of v and the
// output, each a multiple of 4 up to 256, qk != v allowed; names such as
// tileNEOND64 and tileNEOND192V128), with the table of them that
// runtime/cpu dispatches on (neonDims, written by Table), the
// tiled backward's gemm and bwdProb (backward.go), the row helpers
// scaleRow, nonFinite, widen and transpose (rows.go), the FMA-peak and
// read-bandwidth probes (probes.go), and the score stage's kernels
// (score.go): tanhNEON (tanh32's algorithm, both halves computed and
// selected, FDIV), the tile and decode kernels with the score pass
// (tileScoreNEOND64, decodeScoreNEONBF16D128R4, ...: the plain kernel with
// soft-capping and ALiBi applied to the scores in memory between the
// products and the softmax, after one branch on runtime/cpu's scoreTile
// flags, once per tile or once per decode row) and the backward's
// scoreBwdNEON, each with emit/avo's ABI for it; the scoreTile offsets are
// held to the struct by runtime/cpu's TestScoreABINEON. All share one
// exp2 (the polynomial of runtime/cpu's exp2.go, Horner with FMLA,
// flushing below -125 to +0; tanh's large half uses it unflushed,
// exp2Clamped). runtime/cpu's kernel tests run them under qemu-aarch64 in
// CI.
package neon
