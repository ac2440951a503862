//go:build !amd64 || purego

package kernel

// tileAsm: no assembly in this build.
func tileAsm(Variant) (tileFunc, bool) { return nil, false }
