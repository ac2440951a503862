//go:build !(amd64 || arm64) || purego

package cpu

// archKernels: no assembly kernels in this build; only PureGo runs.
func archKernels(Variant) *kernels { return nil }
