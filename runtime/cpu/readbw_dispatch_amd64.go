//go:build amd64 && !purego

package cpu

import xcpu "golang.org/x/sys/cpu"

// readSum returns the widest read loop this CPU runs (the avo-written
// readSumAVX512 or readSumAVX2, readbw_amd64.s), wrapped to sum a whole
// slice: the assembly takes whole blocks, Go the few floats after them.
func readSum() func([]float32) float32 {
	switch {
	case xcpu.X86.HasAVX512F:
		return readSum512
	case xcpu.X86.HasAVX2:
		return readSum256
	}
	return readSumGo
}

func readSum512(s []float32) float32 { return readSumAsm(readSumAVX512, 128, s) }
func readSum256(s []float32) float32 { return readSumAsm(readSumAVX2, 64, s) }

// readSumAsm sums s with an assembly loop over its whole blocks of block
// floats and Go over the rest.
func readSumAsm(f func(*float32, int) float32, block int, s []float32) float32 {
	whole := len(s) / block * block
	var sum float32
	if whole > 0 {
		sum = f(&s[0], whole)
	}
	return sum + readSumGo(s[whole:])
}
