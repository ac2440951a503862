//go:build !amd64 || purego

package cpu

// tileAsm: no assembly in this build.
func tileAsm(Variant) (tileFunc, bool) { return nil, false }

// transposeAsm: no assembly in this build.
func transposeAsm(kt, k []float32, pitch, d int, scale float32) bool { return false }

// widenAsm: no assembly in this build.
func widenAsm(dst []float32, src []uint16, elem Elem) bool { return false }
