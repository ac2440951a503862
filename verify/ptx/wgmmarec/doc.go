// Package wgmmarec records what a GPU computes for wgmma.mma_async and
// cp.async.bulk.tensor, and replays such recordings through the PTX
// interpreter (verify/ptx) bit for bit.
//
// It exists because the interpreter's sm_90a model (verify/ptx/doc.go: the
// accumulation of wgmma, scale-d = 0, imm-scale-a/b, the shared-memory
// matrix layouts and the tensor copy's swizzled placement) was written from
// the PTX ISA alone, and the first GPU session must pin it to the hardware
// without debugging anything: so the recorder needs no nvcc. Its kernels are
// PTX generated here as text, which the CUDA driver JIT-compiles (package
// cuda) and which the interpreter runs unchanged; the same case list and the
// same kernels feed both backends, and ptxas 12.4 assembles the kernels for
// sm_90a in the tests.
//
// # Recording
//
// On a GPU host (an H100/H200, sm_90):
//
//	ATTNGEN_RECORD=/abs/dir go test ./verify/ptx/wgmmarec -run 'TestRecordWgmma$' -v
//
// or the test binary scripts/gpu-check.sh puts in its bundle. It writes
// dir/wgmma.json.gz and dir/tensorcopy.json.gz, then replays both through
// the interpreter and logs how many outputs differ (the recording itself
// succeeds either way: a difference is what the recording is for).
//
// Each wgmma case is one block of 128 threads (one warpgroup) running one
// wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T: the kernel copies the case's
// image into dynamic shared memory at a 1024-byte aligned address, loads the
// input accumulators and (A in registers) the A fragments, adds the image's
// shared address to the descriptors' start fields, and stores the
// accumulators after wgmma.wait_group 0. A case records its inputs exactly
// (the image as little-endian words, the descriptors relative to the image,
// the per-thread accumulators and A registers, scale-d, imm-scale-a/b) and
// the raw output registers, and what the device used (the image's shared
// address and the absolute descriptors).
//
// Each tensor-copy case copies one box of a 2-D u16 tensor with
// cp.async.bulk.tensor.2d (an mbarrier with expect_tx) into shared memory
// and copies the box's shared bytes back to global memory verbatim.
//
// # Files
//
// Both are gzip-compressed JSON in the style of testdata/h200's goldens
// (every value a raw 32-bit word; 64-bit descriptors as hex strings); see
// WgmmaFile and CopyFile.
package wgmmarec
