package cpu

import (
	"fmt"
	"slices"
)

// Target is one CPU variant as a value: what it needs and what it
// supports. Generated APIs and attngen's commands loop over Targets
// instead of naming variants, so a new variant is one entry here (plus
// its microkernel).
type Target struct {
	Variant  Variant
	Name     string   // flag and report name: "avx512"
	Ident    string   // Go identifier generated packages give it: "AVX512"
	Doc      string   // one line
	Arch     string   // GOARCH it needs; "" runs everywhere
	HeadDims []int    // head dimensions its microkernels exist for
	Elems    []string // element types of q, k, v and out
}

// Targets lists every CPU variant, best first.
var Targets = []Target{
	{AVX512, "avx512", "AVX512", "AVX-512 Foundation, 16 floats a vector", "amd64", []int{64, 128}, []string{"f32"}},
	{AVX2, "avx2", "AVX2", "AVX2 with FMA3 and F16C, 8 floats a vector", "amd64", []int{64, 128}, []string{"f32"}},
	{NEON, "neon", "NEON", "Advanced SIMD (NEON), 4 floats a vector", "arm64", []int{64, 128}, []string{"f32"}},
	{PureGo, "purego", "PureGo", "portable Go, the same function", "", []int{64, 128}, []string{"f32"}},
}

// TargetOf returns the target of a variant (Auto has none).
func TargetOf(v Variant) (Target, bool) {
	for _, t := range Targets {
		if t.Variant == v {
			return t, true
		}
	}
	return Target{}, false
}

// Supports reports whether the target runs head dimension d, with an error
// saying what it supports.
func (t Target) Supports(d int) error {
	if !slices.Contains(t.HeadDims, d) {
		return fmt.Errorf("%w: %d (%s supports %v)", ErrHeadDim, d, t.Name, t.HeadDims)
	}
	return nil
}

func (v Variant) String() string {
	if v == Auto {
		return "auto"
	}
	if t, ok := TargetOf(v); ok {
		return t.Name
	}
	return fmt.Sprintf("Variant(%d)", int(v))
}
