// Package mask is the part of attngen's runtime that knows what a compiled
// mask is: the interface generated packages implement with Go code lowered
// from the plan (Mask: key hull, tile class, keep words), the tile walk
// every target shares (Visit, Refine, and Columns, the column-wise walk of a
// backward pass), document ids of packed sequences
// (Docs; also a tree's parent array, and the head parameter values of one
// query head through SetHead and Param, HeadParams), the residue segments of dilated layouts (Residue, written from
// the plan's segment program) and the small integer helpers the generated
// code calls (FloorDiv, Lanes, Every). It imports only the standard library.
//
// Generated packages import it (with runtime/cpu); attngen's planner and
// CPU driver use the same functions, so the schedule a test checks is the
// schedule a user runs.
package mask

// Version is the runtime interface version generated code is written
// against. Generated packages refer to the constant of their version
// (SupportPackageIsVersion1); a runtime that dropped it would fail to
// compile them instead of running them wrongly.
const Version = 1

// SupportPackageIsVersion1 is referenced by code generated for version 1.
const SupportPackageIsVersion1 = true
