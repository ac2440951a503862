// Package gen owns the plan, the only contract between a mask and its
// targets. Compile runs the declared Pipeline of passes (layout, tiles,
// predicate, schedule, word) and lowers a spec into target-free programs of
// a small integer SSA IR (ir.go): the partial-tile predicate pred(i, j),
// the key hull of a query tile hull(q0, q1, x) -> (next, last), the query
// hull of a key tile qhull(k0, k1, x) -> (next, last) (the key hull
// transposed, for a backward pass: Plan.VisitColumn), the tile class
// class(q0, q1, k0, k1), the CPU keep word word(i, k0) (the
// predicate bit-sliced over 64 keys, word.go) and the residue-layout
// arithmetic residue(c, sq, sk, st) (layout.go). The lowering table in
// lower.go is the only place outside spec that knows what a primitive
// means; targets render the programs: emit/ptx as PTX, GoBody (gosrc.go,
// through jennifer) as Go for generated packages and runtime/mask, and
// Prog.Eval evaluates them (the reference renderers are tested against,
// and Plan.Mask, which attngen's own commands run).
//
// Programs read run-time data through one op, IRLoad, whose immediate is
// a Field of an input (inputs.go): document ids and their documents'
// bounds, summaries of a parent array, and head parameters (the value at
// the query head being computed, Plan.HeadParams giving each one's
// declared range), so a mask whose window or sink count varies by head
// still has a closed-form hull and class per head. Tree ancestry
// (treeanc, wtree) keeps ops of its own.
//
// The tile schedule of a call is not stored: Visit walks it with the
// runtime's own functions (mask.Visit, mask.Refine), jumping over keys the
// hull excludes and refining partial tiles exactly by their keep words, so
// no empty tile is visited and the schedule checked here is the one users
// run. A Plan prints as text (Text) and parses back (ParseText).
//
// gen also writes generated packages (PackageFiles: the API, the compiled
// mask, the GPU kernels an emitter produced) that import the runtime
// instead of copying it, into a folder (WritePackage) where they leave the
// package comment to a user's file that has one (PackageDocIn,
// PackageOptions). It never imports an emitter: the GPU kernels
// arrive as GPUKernel data, and a test enforces the layering with go list.
package gen
