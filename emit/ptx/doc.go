// Package ptx lowers a gen.Plan to PTX text for sm_80 and later: the
// forward attention kernel (bf16 or fp16 inputs, fp32 accumulation) whose
// tile schedule is evaluated inside the kernel from the plan's mask. It
// decides no tiling: tile sizes and the predicate come from the plan.
//
// The pieces, in the order a kernel goes through them:
//
//   - ir.go: a small instruction IR: virtual registers by class (.pred,
//     .b16, .b32, .b64, .f32), operands, instructions, labels, guards.
//   - table.go: the one op-to-text table (opTable), Legalize, which checks
//     every instruction against the table and returns an error (never
//     panics) on anything it cannot render, and Module.Text, the one place
//     that writes the header (.version, .target, .address_size), the
//     .entry with its .param list, the .reg declarations derived from the
//     registers the body uses, and the dynamic shared memory declaration.
//   - pred.go: the plan's partial-tile predicate (gen.Pred) as integer PTX
//     on a score element's (row, col): floored divc/modc, setp comparisons,
//     and/or on predicates, document ids as loads from run-time arrays.
//   - sched.go: the closed-form key-tile hull of a query tile and the
//     per-primitive tile classification of spec/classify.go, as PTX.
//   - forward.go: the forward kernel and its launch geometry.
//
// Positions are non-negative and below 2^31; the predicate still floors
// divisions of negative values correctly (differences of positions).
package ptx
