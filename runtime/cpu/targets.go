package cpu

import (
	"fmt"
	"slices"
	"strings"
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
	HeadDims []int    // head dimensions of q/k and of v it runs (every multiple of 8 up to 256)
	Elems    []string // element types of q, k, v and out
}

// Targets lists every CPU variant, best first.
var Targets = []Target{
	{AVX512, "avx512", "AVX512", "AVX-512 Foundation, 16 floats a vector", "amd64", headDims, []string{"f32"}},
	{AVX2, "avx2", "AVX2", "AVX2 with FMA3 and F16C, 8 floats a vector", "amd64", headDims, []string{"f32"}},
	{NEON, "neon", "NEON", "Advanced SIMD (NEON), 4 floats a vector", "arm64", headDims, []string{"f32"}},
	{PureGo, "purego", "PureGo", "portable Go, the same function", "", headDims, []string{"f32"}},
}

// headDims are the head dimensions every CPU target runs, for q and k
// and for v independently: the multiples of 8 from 8 to maxKernelDim.
// Sizes without kernels of their own run those of the next size up on
// zero-padded tiles (kernels.kernelDims).
var headDims = func() []int {
	var d []int
	for x := 8; x <= maxKernelDim; x += 8 {
		d = append(d, x)
	}
	return d
}()

// HeadDimText says which head dimensions t runs, for messages.
func (t Target) HeadDimText() string {
	d := t.HeadDims
	run := len(d) > 2
	for i := 1; run && i < len(d); i++ {
		run = d[i] == d[i-1]+8
	}
	if run && d[0] == 8 {
		return fmt.Sprintf("multiples of 8 from %d to %d", d[0], d[len(d)-1])
	}
	return strings.ReplaceAll(strings.Trim(fmt.Sprint(d), "[]"), " ", ", ")
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

// Supports reports whether the target runs head dimensions qk (of q and
// k) and v (of v and the output), with an error saying what it supports.
func (t Target) Supports(qk, v int) error {
	for _, d := range []int{qk, v} {
		if !slices.Contains(t.HeadDims, d) {
			return fmt.Errorf("%w: %d (%s supports %s)", ErrHeadDim, d, t.Name, t.HeadDimText())
		}
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
