// Package ptx owns the PTX interpreter that lets CI check attngen's GPU
// kernels without a GPU: a parser for exactly the PTX subset emit/ptx emits,
// a decoder to an executable form, and a warp-lockstep executor with global
// and shared memory, barriers, cp.async, ldmatrix and mma.sync, whose
// numerics are pinned by golden data recorded on an NVIDIA H200
// (testdata/h200, replayed by golden_test.go).
//
// It does not import the emitter and trusts nothing it claims: a kernel
// outside the subset, or one that does something the hardware leaves
// undefined (a divergent branch, a data race in shared memory, a read of an
// unwritten register), is an error naming the PTX line and instruction.
//
// # Use
//
//	m, err := ptx.Parse("attn.ptx", src)      // all syntax and type errors, as an ErrorList
//	dev := ptx.NewDevice()
//	q, _ := dev.Alloc(4 * n)                  // device address, 256-byte aligned
//	dev.WriteF32(q, data)
//	st, err := dev.Launch(m, "attn", [3]int{gx, 1, 1}, [3]int{128, 1, 1}, dynSmem, q, k, v, o, uint32(n))
//	out, _ := dev.ReadF32(o, n)
//
// Launch arguments: uint64 (or int) for .u64/.s64/.b64 parameters, uint32,
// int32 or int for 32-bit integers (range-checked), float32 for .f32. Errors
// are *Error values (file:line: instruction text: message (kernel, block,
// thread)). Stats counts warp and thread instructions and barriers.
//
// # Execution model
//
// Blocks run one after another in ctaid order (x fastest). A block's threads
// are linearized x fastest and cut into warps of 32; a last partial warp has
// its missing lanes permanently inactive. Each warp runs in lockstep until it
// waits at a barrier or exits; when a barrier completes, the warps waiting
// at it are released (and run again in warp order, warp 0 first). A warp
// keeps one mask of live lanes; predicated instructions execute on live lanes
// whose guard holds.
//
//   - Branches must be warp-uniform: if the live lanes disagree on a bra, that
//     is an error (there is no reconvergence stack). Lanes may leave early
//     with @p ret/exit.
//   - Named barriers (PTX ISA "bar, barrier"): bar.sync a{, b} (the same as
//     barrier.sync.aligned), barrier.sync a{, b} and bar.arrive /
//     barrier.arrive a, b, with a the barrier (0 to 15) and b the threads
//     it completes at, a positive multiple of 32 at most the block's threads
//     rounded up to whole warps (all of them when omitted), immediates or
//     warp-uniform registers. Every arrival counts a whole warp (32 threads,
//     whatever its live lanes); the barrier completes when the count reaches
//     b, releases the warps that wait at it (bar.sync) and starts again;
//     bar.arrive never waits, and a warp's arrive and sync in one generation
//     both count. Errors: an id above 15, a bad count, arrivals disagreeing
//     on the count, lanes of a warp disagreeing on an operand or skipping the
//     instruction, a barrier that waits while threads it counts have exited,
//     and a deadlock (no warp can continue: the error lists each warp's
//     barrier and its arrivals).
//   - shfl.sync, mma.sync, ldmatrix and bar.warp.sync need all 32 lanes active.
//   - Reading a register (or predicate) in a lane that has not written it is
//     an error. Special registers are always defined.
//   - Memory: global memory is one flat space of Alloc'd blocks separated by
//     unallocated gaps, so running off a buffer is an error; accesses must be
//     aligned to their full (vector) size. Shared memory per block is the
//     static variables (module scope, then kernel scope, in order, each at its
//     .align) followed by the dynamic region sized at launch (at most 227 KiB
//     in all, 48 KiB static). Shared addresses start at 0; generic addresses
//     of shared memory (cvta.shared) lie at SharedWindow, global ones at
//     GlobalBase.
//   - Shared-memory checks (Device.CheckRaces, Device.CheckUninitShared, both
//     on by default): two warps touching the same byte, one of them writing,
//     without a happens-before order between the accesses is a race. The
//     order comes from vector clocks: each warp's clock advances at each of
//     its barrier and mbarrier arrivals; a barrier's completion gives its
//     waiters the join of its arrivers' clocks, and an mbarrier wait that
//     observes a completed phase the join of the clocks of that object's
//     arrivals up to it (bar.arrive and mbarrier.arrive release, bar.sync
//     and a successful wait acquire); so a named barrier of some warps
//     orders only their accesses. Loading a byte no thread of the block
//     has written is an error; loading or storing a byte that a cp.async has
//     not completed is an error. Without the uninitialized check, shared
//     memory starts filled with 0xff bytes. Lanes of one warp are not checked
//     against each other (the executor runs them in lockstep), and global
//     memory is not race-checked (blocks run sequentially).
//   - cp.async copies at issue; its destination bytes are pending until the
//     issuing thread's cp.async.wait_group (or wait_all) completes their
//     group, and only then count as written by that warp (so another warp
//     must also pass a barrier before reading them). commit_group closes a
//     group; wait_group N completes all but the newest N committed groups;
//     wait_all commits and completes everything.
//   - Device.MaxWarpInstructions bounds a launch (an endless loop is an
//     error).
//
// # sm_90a: wgmma, mbarrier, bulk tensor copies
//
// These were written from the PTX ISA alone, not from attngen's emitter, so
// that a misreading on either side shows as a disagreement (wgmma.go,
// mbarrier.go; tests in wgmma_test.go and mbarrier_test.go build shared
// memory with their own reading of the ISA's layout figures).
//
//   - Scheduling: warps still run one at a time, but a warp also stops at a
//     wgmma.mma_async until the other three warps of its warpgroup (warps
//     4g..4g+3, all 32 lanes active) reach the same instruction, which then
//     runs once for the 128 threads; at an mbarrier.try_wait whose phase has
//     not completed (the warp sleeps and re-executes it when the phase
//     completes); and after an mbarrier.test_wait that returned false (the
//     other warps run first). When no warp can continue (a warpgroup split
//     between a wgmma and a bar.sync or an exit, a try_wait on a phase that
//     never completes, a test_wait spin through 1000 rounds without any
//     mbarrier change) the launch fails with a deadlock error listing every
//     warp's state.
//   - wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16}, N a
//     multiple of 8 up to 256, A from a descriptor or from 4 registers, B
//     from a descriptor, scale-d as a predicate (or 0/1), imm-scale-a/b of
//     +-1 (negation flips the inputs' sign bits), imm-trans-a/b (MN-major).
//     Descriptor: bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51
//     base offset (must be 0 here), 62-63 swizzle (0 none, 1 128B, 2 64B, 3
//     32B); any other bit set is an error. Layouts (16-bit elements, units of
//     16 bytes): K-major without swizzle: 8-row x 16-byte core matrices, K
//     halves LBO apart, 8-row groups SBO apart; K-major swizzled (W bytes):
//     rows W bytes apart, 8-row groups SBO apart, LBO unused; MN-major
//     without swizzle: 8 M/N-element groups SBO apart, 8-K groups LBO apart;
//     MN-major swizzled: W/2 M/N-element groups LBO apart, 8-K groups SBO
//     apart, K rows W bytes apart. The swizzle XORs address bits 4.. with
//     address bits 7.. (1, 2 or 3 bits for 32B, 64B, 128B) of the absolute
//     shared address, so advancing the start address by 32 bytes steps K by
//     16 inside a 128B row. The accumulator fragment: warp w of the group
//     owns rows 16w..16w+15; register i of lane l is row 16w + l/4 +
//     8*(i/2%2), column 8*(i/4) + 2*(l%4) + i%2. A in registers uses
//     mma.m16n8k16's A fragment per warp. Every element reads the operand
//     bytes through the shared-memory checks (bounds, uninitialized, bytes a
//     bulk copy has not completed).
//   - wgmma numerics: each output is mmaDot, the H200 mma.sync model (16
//     exact products and the accumulator aligned at the largest exponent,
//     truncated to 2^(emax-25), summed, rounded toward zero). That wgmma's
//     tensor-core path adds the same way is an assumption no golden pins
//     yet. scale-d = 0 adds a -0 accumulator (IEEE signed-zero rules for
//     A*B alone), also unverified.
//   - wgmma asynchrony: the product is computed at issue, but its
//     accumulator registers (and A registers) are in flight until a
//     wgmma.wait_group covers its group: any other instruction reading or
//     writing them first is an error (naming whether the group was
//     committed). wgmma.fence must precede a warp's first wgmma.mma_async,
//     and an accumulator or A register written by another instruction since
//     the last wgmma.fence is an error. The descriptors and scale-d must be
//     uniform across the warpgroup. Not modelled: shared-memory writes by
//     the generic proxy without fence.proxy.async before wgmma reads them
//     (fence.proxy.async is accepted and does nothing). wgmma reads are
//     race-checked like loads, at the time the warpgroup's group runs.
//   - mbarrier.{init,arrive[.expect_tx],expect_tx,try_wait[.parity],
//     test_wait[.parity],inval}.shared::cta.b64 (.release/.acquire/.relaxed
//     and .cta accepted): a phase completes when its pending arrivals reach
//     0 and its tx-count is 0; then the pending count resets to init's
//     count. The arrive state token is the phase number; a parity wait
//     succeeds when the current phase's parity differs from the operand.
//     Errors: arriving more often than a phase expects, counts outside
//     1..2^20-1, tx-count beyond +-(2^20-1), an operation on an offset with
//     no initialized mbarrier, ld/st of an mbarrier's 8 bytes, a parity other
//     than 0/1. Arrivals and waits are per active thread.
//   - cp.async.bulk.tensor.{1d,2d,3d,4d,5d}.shared::cluster.global[.tile].
//     mbarrier::complete_tx::bytes [dst], [tmap, {c0, ..}], [mbar]: tmap is
//     a 64-bit register holding an address from Device.NewTensorMap
//     (TensorMap: base, element size, dims, byte strides, box, swizzle;
//     element strides 1, no interleave, zero fill out of bounds), of the
//     copy's rank (1 to 5), with cuTensorMapEncodeTiled's limits: base
//     16-byte aligned, dims 1..2^32, strides of dimensions 1.. positive
//     multiples of 16 below 2^40 and independent of each other (element
//     (c0, c1, ..) at base + c0*size + c1*stride1 + c2*stride2 + ..; a
//     BSHD tensor's head stride may be below its position stride), box
//     sizes 1..256 with an inner box of a multiple of 16 bytes. The
//     coordinates are s32, innermost first; an element with any coordinate
//     outside [0, dim) reads as zero (TestBulkTensorRanks holds every rank
//     to the tile mode's definition, with mutants of coordinate order and
//     strides that it tells apart). The box is copied at issue into
//     dst (128-byte aligned) densely, dimension 0 fastest, each 16-byte unit
//     placed by the same address swizzle as wgmma (a swizzled map needs an
//     inner box exactly the swizzle width); its bytes are pending (loading
//     them is an error) until mbar's current phase completes; its full box
//     size counts against the tx-count. At issue its destination bytes are
//     race-checked as a store by the issuing warp (another warp's write or
//     read of them not ordered before the issue is a race). A block that
//     ends with copies pending is an error. Since a copy completes as soon as its phase does
//     (here often at issue), completion alone does not make the bytes
//     readable: a warp may load them (ld.shared, or as a wgmma operand)
//     only after it observed that phase's completion, by an mbarrier wait
//     of its own that returned true or through a barrier after another
//     warp's wait; loading them earlier is an error (a kernel that skipped the
//     wait would read stale data on a GPU). A generic store to a byte ends
//     this requirement for it. The tensor map is passed by pointer (a .u64
//     parameter), not as a .param .b8[128] by value.
//   - setmaxnreg.{inc,dec}.sync.aligned.u32 N (N a multiple of 8 in
//     24..256, all lanes active), fence.proxy.async[.shared::cta|
//     .shared::cluster|.global], fence.mbarrier_init.release.cluster,
//     fence.proxy.tensormap::generic.acquire.{cta,cluster,gpu,sys} [a], 128:
//     accepted and checked, no effect (registers are unlimited here, and
//     NewTensorMap's maps are always visible to the tensor copy).
//   - What the first GPU session must pin (testdata/README.md): wgmma's
//     accumulation (is it mmaDot?), scale-d = 0 with signed zeros, and the
//     swizzled layouts of both wgmma and the tensor copy. The recorder is
//     package wgmmarec (scripts/gpu-check.sh record-wgmma); golden_wgmma_test.go
//     replays its files once they are under testdata/h200.
//
// # Numerics and their fidelity to the H200
//
// Every golden case recorded by testdata/record.cu is replayed through this
// interpreter by a PTX program doing what the recording kernel did.
//
//   - mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32:
//     bit-exact on all 2 x 256 cases (32768 outputs each), including the
//     accumulators 4096x larger than the products and the inf/NaN/-0 cases.
//     The model (found from those cases): the 16 products are exact; the
//     alignment exponent is the largest of exp(c) and exp(a_k)+exp(b_k) over
//     nonzero products (input exponents, not the normalized product's); c and
//     every product are truncated toward zero to 2^(emax-25) (f32 precision at
//     emax plus two bits); the truncated terms are added exactly and the sum
//     rounded toward zero to f32. NaN inputs, inf*0 and inf-inf give NaN
//     0x7fffffff. Not covered by the goldens, so unverified: subnormal inputs
//     (aligned at the minimum normal exponent), zero and subnormal results,
//     and overflow (round toward zero gives the largest finite value). The
//     model is the H200's (sm_90); other GPUs accumulate differently (an A100
//     is reported to add in smaller groups), so results there may differ in
//     the last bits.
//   - ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16: bit-exact on
//     all 6 x 64 cases.
//   - cvt.rn.bf16x2.f32 and cvt.rn.f16x2.f32: bit-exact on all 32768 cases:
//     round to nearest even, the first source in the upper half, every NaN
//     becomes 0x7fff. cvt.rn.bf16.f32 and cvt.rn.f16.f32 use the same
//     conversions.
//   - rcp.rn.f32: bit-exact on all 32768 cases (IEEE division; NaN results
//     are 0x7fffffff, as for all f32 arithmetic here).
//   - rcp.approx.ftz.f32: modelled as the correctly rounded 1/x with
//     subnormal inputs and outputs flushed; within 1 ulp of the H200 on all
//     32768 cases (28531 equal, 4237 one ulp apart).
//   - ex2.approx.f32 and ex2.approx.ftz.f32: modelled as the correctly
//     rounded 2^x (.ftz flushes subnormal inputs and outputs); within 2 ulp
//     of the H200 on all 32768 cases (non-ftz: 24682 equal, 7990 at 1 ulp, 96
//     at 2 ulp; the distribution is asserted). The hardware's table-driven
//     MUFU.EX2 is not reproduced bit for bit.
//   - lg2.approx.f32 and lg2.approx.ftz.f32 (no golden): modelled as the
//     correctly rounded log2(x) (.ftz: subnormal inputs give -inf). The PTX ISA
//     documents a maximum absolute error of about 2^-22 for the hardware, and
//     nothing here pins it; a kernel must tolerate that.
//   - add/sub/mul/div.rn.f32 are IEEE float32 (Go float32 arithmetic, each
//     result rounded once). fma.rn.f32 rounds a*b+c once: the exact product in
//     float64, the sum with its exact error (TwoSum), moved to round-to-odd,
//     then rounded to float32 (Boldo and Melquiond 2008), which is correct
//     including subnormals; float32(math.FMA(...)) would double-round (for
//     example fma(641, 6700417, 2^56)). .ftz flushes subnormal inputs and
//     results to signed zero. min/max.f32 return the non-NaN operand and order
//     -0 below +0. f32 arithmetic without a rounding modifier is rejected:
//     ptxas may contract mul+add into fma, which would make the interpreter
//     and the GPU disagree.
//
// # Accepted grammar
//
// Whitespace and // and /* */ comments separate tokens anywhere. Numbers:
// decimal, 0x hex, 0b binary, leading-0 octal (optional U suffix), 0fXXXXXXXX
// (f32 bits), 0dXXXXXXXXXXXXXXXX (f64 bits), decimal floats (1.5, 2e-3) which
// are rounded to f32 where an f32 is expected; a leading '-' negates.
//
//	module   = { header | sharedvar | entry } .
//	header   = ".version" NUM | ".target" "sm_NN"["a"] {"," IDENT} | ".address_size" "64" .
//	           (NN >= 80; .address_size 64 is the only size)
//	sharedvar= [".extern"] ".shared" [".align" N] TYPE NAME ( "[" N "]" | "[" "]" | ) ";" .
//	           ("[]" only with .extern: the dynamic region, sized at launch)
//	entry    = [".visible"|".weak"] ".entry" NAME "(" [param {"," param}] ")"
//	           { ".maxntid" dims | ".reqntid" dims | ".minnctapersm" N | ".maxnreg" N } "{" body "}" .
//	param    = ".param" (".u32"|".s32"|".b32"|".u64"|".s64"|".b64"|".f32")
//	           [".ptr" [".global"|".shared"|".const"|".local"] [".align" N]] NAME .
//	body     = { ".reg" TYPE regs ";" | sharedvar | LABEL ":" | "{" body "}" | instr } .
//	regs     = reg {"," reg} ;  reg = "%"NAME | "%"NAME "<" N ">"   (%r<4> declares %r0..%r3)
//	instr    = ["@" ["!"] PRED] OPCODE [operand {"," operand}] ";" .
//	operand  = REG | "!"PRED | NUM | NAME | "{" REG {"," REG} "}"
//	         | REG "|" PRED | "[" (REG | NAME | NUM) [("+"|"-"|"+-") NUM] "]" .
//
// Register types: .pred .b8 .b16 .b32 .b64 .u8 .u16 .u32 .u64 .s8 .s16 .s32
// .s64 .f16 .f16x2 .bf16 .bf16x2 .f32 .f64. Special registers (read-only
// .u32): %tid.{x,y,z} %ntid.{x,y,z} %ctaid.{x,y,z} %nctaid.{x,y,z} %laneid
// %warpid %nwarpid. Operand types follow PTX: a bit-size type (.bN) matches
// any register of its size, signed and unsigned integers of one size match,
// float types match only themselves; ld, st and integer cvt accept integer
// registers wider than the instruction type (zero- or sign-extending by the
// type). A shared variable's name as a source operand is its shared address;
// in brackets it may carry an offset. Global and generic addresses need
// 64-bit registers; shared ones may use 32-bit registers.
//
// Instructions (TI = .s16/.u16/.s32/.u32/.s64/.u64 unless narrowed):
//
//	ld.param.{u32,s32,b32,u64,s64,b64,f32}      d, [param(+off)]
//	mov.{b16,b32,b64,u16,u32,u64,s16,s32,s64,f32,pred}  d, reg|imm|special|sharedvar
//	mov.b32 d, {h0, h1}; mov.b64 d, {r0, r1}; mov.b32 {h0, h1}, s; mov.b64 {r0, r1}, s
//	add, sub.TI; mul.{lo,hi}.TI; mul.wide.{s16,u16,s32,u32}; mad.lo.TI; mad.wide.{s32,u32}
//	div, rem, min, max.{s32,u32,s64,u64}   (division by zero is an error)
//	and, or, xor.{b16,b32,b64,pred}; not.{b16,b32,b64,pred}
//	shl.{b16,b32,b64}; shr.{b,u,s}{16,32,64}   (shift amount .u32, clamped)
//	neg, abs.{s16,s32,s64,f32}   (.ftz allowed for .f32)
//	setp.CMP[.and|.or|.xor][.ftz].TYPE p[|q], a, b[, [!]c]
//	     CMP: eq ne lt le gt ge; lo ls hi hs (unsigned); equ neu ltu leu gtu geu num nan (.f32)
//	     TYPE: .b16/.b32/.b64 (eq, ne only), TI (lo..hs: unsigned only), .f32
//	selp.{b16,b32,b64,u16,u32,u64,s16,s32,s64,f32}  d, a, b, p
//	cvta.{global,shared}.u64 d, a;  cvta.to.{global,shared}.u64 d, a
//	cvt.{u,s}{8,16,32,64}.{u,s}{8,16,32,64}  d, r  (integer widen/narrow)
//	cvt.{rn,rz,rm,rp}.f32.{u,s}{8..64}; cvt.{rni,rzi,rmi,rpi}[.ftz].{u,s}{8..64}.f32 (saturating, NaN -> 0)
//	cvt.rn.{bf16x2,f16x2}.f32 d, a, b (a -> upper half); cvt.rn.{bf16,f16}.f32 d16, a; cvt.f32.{bf16,f16} d, a16
//	add, sub, mul, div.rn[.ftz].f32; fma.rn[.ftz].f32; min, max[.ftz].f32
//	ex2.approx[.ftz].f32; lg2.approx[.ftz].f32; rcp.approx.ftz.f32; rcp.rn.f32
//	ld[.global|.shared[::cta]][.CACHE][.v2|.v4].TYPE  d|{d..}, [a]
//	st[.global|.shared[::cta]][.CACHE][.v2|.v4].TYPE  [a], s|{s..}
//	     TYPE: .b8 .u8 .s8 (scalar only) .b16 .u16 .s16 .b32 .u32 .s32 .f32 .b64 .u64 .s64
//	     CACHE (ignored): .ca .cg .cs .lu .cv .wb .wt .nc .volatile .relaxed .weak, .L2::{64,128,256}B
//	     no state space: generic addressing (global or the shared window)
//	cp.async.{ca,cg}.shared[::cta].global[.L2::NB] [dst], [src], {4,8,16}[, src-size]  (.cg: 16; src-size < size zero-fills)
//	cp.async.commit_group; cp.async.wait_group N; cp.async.wait_all
//	bar[.cta].sync a{, b}; barrier[.cta].sync[.aligned] a{, b}; bar[.cta].arrive a, b; barrier[.cta].arrive[.aligned] a, b; bar.warp.sync 0xffffffff
//	shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, 0xffffffff
//	mma.sync.aligned.m16n8k16.row.col.f32.{bf16.bf16,f16.f16}.f32 {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}
//	ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared[::cta].b16 {d..}, [a]
//	wgmma.fence.sync.aligned; wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned N
//	wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16.bf16,f16.f16} {d..}, adesc|{a0..a3}, bdesc, scale-d, +-1, +-1[, tA], tB
//	mbarrier.init/inval/arrive[.expect_tx]/expect_tx/try_wait[.parity]/test_wait[.parity][.SEM][.cta].shared::cta.b64 ...
//	cp.async.bulk.tensor.{1d..5d}.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [tmap, {c..}], [mbar]
//	setmaxnreg.{inc,dec}.sync.aligned.u32 N; fence.proxy.async[.SPACE]; fence.mbarrier_init.release.cluster
//	fence.proxy.tensormap::generic.acquire.SCOPE [a], 128
//	     (wgmma and setmaxnreg need .target sm_90a; mbarrier, the bulk copy and the fences sm_90 or later)
//	bra[.uni] LABEL; ret; exit
//
// Anything else (another modifier, state space, barrier id, member mask,
// rounding mode, .sat, f64 arithmetic, .local/.const/.global variables,
// calls) is a parse error naming the line, column and instruction.
package ptx
