package ptx

import "testing"

// refDot is one mma output element for a row of A and a column of B given
// as 16 bf16 (or f16) values: the model the golden tests pin, for use by
// reference computations.
func refDot(c uint32, a, b []uint16, f16 bool) uint32 {
	dec := decodeBF16
	if f16 {
		dec = decodeF16
	}
	var av, bv halfVec
	special := false
	for k := 0; k < 16; k++ {
		var sa, sb bool
		av.v[k], av.e[k], sa = dec(a[k])
		bv.v[k], bv.e[k], sb = dec(b[k])
		special = special || sa || sb
	}
	return mmaDot(c, &av, &bv, special)
}

func BenchmarkMmaWarp(b *testing.B) {
	var a, c, d [128]uint32
	var bb [64]uint32
	for i := range a {
		a[i] = 0x3f803f80 + uint32(i)*0x10001
		c[i] = 0x3f800000 + uint32(i)
	}
	for i := range bb {
		bb[i] = 0xbf813f70 + uint32(i)*0x10003
	}
	for range b.N {
		mmaWarp(&a, &bb, &c, &d, false)
	}
}
