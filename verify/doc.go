// Package verify owns the ground truth kernels are judged against: the
// float64 dense reference, the reachability model of a layer schedule
// (dependency sets, coverage, hop counts, the K-way boundary-copy bound) and
// exact pair counting. It trusts no emitter's claims: it evaluates masks only
// through spec.Pattern.
package verify
