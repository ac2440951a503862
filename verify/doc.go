// Package verify owns the ground truth kernels are judged against: the
// float64 dense reference, the reachability model of a layer schedule
// (dependency sets, coverage, hop counts, the K-way boundary-copy bound),
// exact pair counting, kernel checks (numeric against the reference and a
// straightforward float32 implementation, dependency by perturbation, a
// 3-layer stack against the reachability model; gradients per entry
// against the yardstick's error or a rounding floor that scales with the
// magnitudes of the entry's terms, GradMagnitude, so that gradients that
// cancel to exactly 0 do not fail correct kernels; the masked-data rule,
// CheckMaskedData: NaN and infinities at masked keys, values and queries
// leave every output that reads none of them bit-identical; non-finite
// inputs, CheckNonFinite: that rule, and kept NaN and infinities give the
// reference's kinds of results; document ids one row per batch), and
// pictures of a mask and its tile classes (text, PNG, SVG) for people to
// check by eye. Masks with head parameters are bound per query head to
// Shape.HeadParams (heads.go) everywhere a row is judged, and the checks
// draw values per head (RandomHeadParams) when a shape carries none. The
// score stage (Shape.Score, score.go: soft-capping, ALiBi, learned sinks)
// is written once from its published definitions, with one float64
// softmax and one float32 twin that the reference, the yardsticks and the
// gradients (dsink included, RunBackward's last argument) all use; tests
// hold it to the models' own formulas (Gemma 2, the ALiBi paper, gpt-oss).
// It trusts no emitter's claims: it evaluates masks only through
// spec.Pattern and runs kernels only through their public entry points.
package verify
