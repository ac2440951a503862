package neon

import "fmt"

// Dims are the head dimensions of a kernel: QK of the queries and keys, V
// of the values and the output.
type Dims struct{ QK, V int }

// Square returns the dims of one head dimension d for q, k and v.
func Square(d int) Dims { return Dims{d, d} }

// KernelDims lists the head dimensions runtime/cpu has NEON tile and
// decode kernels for (Generate writes them, and the table of them,
// neonDims); a call of other dimensions runs the smallest pair that holds
// it on zero-padded tiles. A new size is one entry here.
var KernelDims = []Dims{
	Square(32), Square(64), Square(80), Square(96), Square(128), Square(192), Square(256),
	{192, 128},
}

// maxDim is the largest head dimension a kernel may have (runtime/cpu's
// maxKernelDim).
const maxDim = 256

// check panics unless both dimensions are multiples of 4 in [4, maxDim].
func (d Dims) check() {
	for _, x := range []int{d.QK, d.V} {
		if x < 4 || x > maxDim || x%4 != 0 {
			panic(fmt.Sprintf("BUG: head dims %d, %d: each must be a multiple of 4 in [4, %d]", d.QK, d.V, maxDim))
		}
	}
}

// suffix is the part of a kernel's name that gives its dims: D64 for a
// square pair, D192V128 otherwise.
func (d Dims) suffix() string {
	if d.QK == d.V {
		return fmt.Sprintf("D%d", d.QK)
	}
	return fmt.Sprintf("D%dV%d", d.QK, d.V)
}

// text is the dims in a doc comment: "D = 64", or "qk = 192, v = 128".
func (d Dims) text() string {
	if d.QK == d.V {
		return fmt.Sprintf("D = %d", d.QK)
	}
	return fmt.Sprintf("qk = %d, v = %d", d.QK, d.V)
}
