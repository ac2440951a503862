package ptx

import (
	"testing"
)

// mmaDot is mmaDotVec over halfVal operands (test helper for references).
func mmaDot(c uint32, a *[16]halfVal, b *[16]halfVal, special bool) uint32 {
	var av, bv halfVec
	for k := 0; k < 16; k++ {
		av.sig[k], av.e[k], av.v[k] = a[k].sig, a[k].e, a[k].v
		bv.sig[k], bv.e[k], bv.v[k] = b[k].sig, b[k].e, b[k].v
	}
	frac := a[0].e - a[0].q // 7 (bf16) or 10 (f16); any nonzero operand tells
	for k := 0; k < 16; k++ {
		if a[k].cls == 1 {
			frac = a[k].e - a[k].q
		}
	}
	return mmaDotVec(c, &av, &bv, frac, special)
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
