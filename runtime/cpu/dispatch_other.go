//go:build !amd64 || purego

package cpu

import "unsafe"

// tileAsm: no assembly in this build.
func tileAsm(Variant) (tileFunc, bool) { return nil, false }

// transposeAsm: no assembly in this build.
func transposeAsm(kt, k []float32, pitch, d int, scale float32) bool { return false }

// widenAsm: no assembly in this build.
func widenAsm(dst []float32, src []uint16, elem Elem) bool { return false }

// hasDecode: no decode kernels in this build.
func hasDecode(Variant) bool { return false }

// decodeAsm is never called in this build.
func decodeAsm(Elem, []float32, unsafe.Pointer, unsafe.Pointer, *[TK]int, []float32, []float32, []float32, int, int) {
	panic("BUG: no decode kernels in this build")
}

// scaleRowAsm: no assembly in this build.
func scaleRowAsm(dst, src []float32, s float32) bool { return false }

// nonFiniteAsm: no assembly in this build.
func nonFiniteAsm(v []float32, d int) (uint64, bool) { return 0, false }

// lseAsm: no assembly in this build.
func lseAsm(dst, m, l []float32, n int) bool { return false }

// narrowAsm: no assembly in this build.
func narrowAsm(dst []uint16, src []float32, s float32, elem Elem) bool { return false }
