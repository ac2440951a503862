// Command attngen compiles attention mask specs into fused kernels and
// analyses what a mask does. It holds only command-line handling; the
// logic lives in spec, gen, emit/ptx and verify.
//
// Usage:
//
//	attngen -spec F [-out DIR] [-pkg NAME] [-sm 80,90a|none] [-dtype bf16,f16] [-verify]
//	attngen generate ...    the same, named
//	attngen verify -spec F [-seed N] [-sm 80,90a] [-dtype bf16] [-gpu] [-layout bhsd|bshd|packed] [-sample N] [-no-ptx]
//	attngen bench -spec F [-seq S] [-seq-q Q] [-heads H] [-heads-kv H] [-batch B] [-dtype fp32] [-out-dtype fp32] [-paged PAGE] [-threads 1,2] [-reps R] [-bw-mib M] [-pass fwd|bwd|both] [-variants LIST] [-json] [-gpu [-sm 80,90a] [-warmup N] [-sample N] [-seed N]]
//	attngen check -spec F [-seq N] [-sm 80] [-dtype bf16]
//	attngen show -spec F [-seq N] [-tile T] [-o mask.png|mask.svg] [-width W]
//	attngen reach -spec F [-layers L] [-seq S] [-max-distance D] [-json] [-o coverage.png|.svg]
//	attngen plan -spec F [-seq S] [-seq-q Q] [-tile-q T] [-tile-k T] [-dump PASS]
//	attngen help [COMMAND]
//	attngen version         (also attngen -version)
//
// The commands:
//
//   - attngen -spec F (generate) writes a Go package with F's fused
//     attention kernels: the CPU variants and the PTX kernels of each GPU
//     target of -sm (SM versions, comma separated, or none; default 80,90a:
//     the sm_80 forward and backward, and the sm_90a forward, which runners
//     use only when asked for until a GPU run has verified it) and -dtype
//     (bf16, f16).
//     Every file starts with the command that regenerates it. -verify then
//     runs attngen verify on the same spec and the same GPU targets.
//   - attngen verify checks every CPU variant this machine runs against the
//     float64 reference, by perturbation, in a 3-layer stack and by the
//     masked-data rule (NaN and infinities at masked keys, values and
//     queries leave every output that reads none of them bit-identical),
//     its backward (dq, dk and dv against the float64 reference gradients
//     on the same shapes, each entry within 8x the yardstick's error or a
//     rounding floor scaled by the magnitude of its terms; their
//     dependencies on dout, masked NaN and infinities reaching no
//     gradient), and the PTX
//     kernels of -sm/-dtype under the PTX interpreter with the same
//     masked-data rule (-sm 90a: the sm_90a forward); -gpu also runs them on the GPU, reporting progress on
//     stderr, judging shapes of 1024 rows or more on -sample rows, after
//     refusing a target the device cannot run (sm_90a needs 9.0).
//   - attngen bench measures the effective GFLOP/s of every variant against
//     this CPU's FMA peak, and its GB/s (q, out and lse, and the key and
//     value rows of the keys some query keeps, per second) against this machine's
//     read bandwidth, both measured in the same run (or times the PTX
//     kernels of -sm with -gpu: random normal bf16 inputs, the median of -reps timed
//     launches after -warmup, and the output of the timed launches checked
//     against the float64 reference on -sample rows), reporting progress on
//     stderr. -seq-q Q runs the
//     last Q positions against all -seq keys (Q = 1: one decoding step),
//     -heads-kv groups the query heads; -dtype bf16 or f16 feeds 16-bit
//     q, k and v, -out-dtype (fp32 or the -dtype) chooses the output's
//     type, -paged PAGE reads k and v from shuffled pages. -pass bwd times
//     the backward instead (float32, contiguous caches, CPU only; with a
//     straightforward Go backward as naive), -pass both the two; every
//     -json row has a pass (fwd or bwd), and a backward row's gflops
//     counts 2.5 x 4*B*H*D*kept_pairs per second. -variants times only
//     the variants named (avx512, avx2, neon, purego, naive).
//   - attngen check validates a spec and prints its normalized mask and
//     density.
//   - attngen show draws the mask and its tile classes as text or an image.
//   - attngen reach prints the reachability coverage of the spec's layer
//     schedule.
//   - attngen plan prints the tiled plan and its schedule.
//   - attngen help prints the usage, or a command's usage and flags (as
//     attngen COMMAND -h does); attngen version prints the version of the
//     attngen module in the binary's build information, "(devel)" when it
//     was built from a source checkout.
//
// A command taking -spec F also takes F as its one argument (attngen check
// F); flags may come before and after it, and "--" ends them. Any other
// argument is a usage error.
//
// Inputs are bounded before any work: spec files at 1 MiB (spec.MaxFileSize)
// with at most 20 errors listed, -data files at 4 MiB (the read itself
// stops there, so a pipe or a device is bounded too), -seq of check and show at 2^22 and of plan
// at 2^18 with at most 2^24 tiles, bench's tensors (with the read-bandwidth
// probe's buffer, itself at most an eighth of the memory) at half of the
// machine's memory and -threads at 4 per CPU (at most 1024), every size
// computed with overflow checks.
//
// Exit status: 0 success; 1 failure (a spec with errors, a failed check, an
// I/O error); 2 usage error (unknown command or flag, a flag value out of
// range, a stray argument, no spec).
package main
