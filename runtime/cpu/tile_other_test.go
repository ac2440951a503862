//go:build !(amd64 || arm64) || purego

package cpu

// atVariants: no assembly tile kernels in this build.
func atVariants() []atVariant { return nil }
