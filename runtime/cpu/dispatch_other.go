//go:build !amd64 || purego

package cpu

// tileAsm: no assembly in this build.
func tileAsm(Variant) (tileFunc, bool) { return nil, false }
