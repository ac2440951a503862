package wgmmarec

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/attngen/attngen/verify"
)

// The tests here read the recorded cases with this file's own reading of
// the ISA's canonical layouts (refAddr), independently of the
// interpreter's: the exact cases must come out as a plain matrix product of
// the elements refAddr finds, and every read, even with LBO and SBO swapped,
// must stay inside the shared memory the kernel fills.

type refDesc struct{ start, lbo, sbo, swz int }

func decodeRef(v uint64) refDesc {
	return refDesc{
		start: int(v&0x3fff) << 4,
		lbo:   int(v>>16&0x3fff) << 4,
		sbo:   int(v>>32&0x3fff) << 4,
		swz:   map[uint64]int{0: 0, 1: 128, 2: 64, 3: 32}[v>>62],
	}
}

// refAddr is the byte offset (from the 1024-byte aligned image) of element
// (r, k) of an operand, r along M or N.
func refAddr(d refDesc, r, k int, mn bool) int {
	var off int
	switch {
	case d.swz == 0 && !mn: // 8x8 core matrices, rows of 16 bytes
		off = r%8*16 + k%8*2 + r/8*d.sbo + k/8*d.lbo
	case d.swz == 0: // core matrices of 8 K rows of 8 M/N elements
		off = k%8*16 + r%8*2 + r/8*d.sbo + k/8*d.lbo
	case !mn: // rows of swz bytes, 8-row atoms SBO apart
		off = r%8*d.swz + k*2 + r/8*d.sbo
	default: // K rows of swz bytes holding swz/2 M/N elements
		e := d.swz / 2
		off = k%8*d.swz + r%e*2 + r/e*d.lbo + k/8*d.sbo
	}
	a := d.start + off
	if d.swz != 0 {
		a ^= (a >> 7 & (d.swz/16 - 1)) << 4
	}
	return a
}

func caseDescs(t *testing.T, c *WgmmaCase) (a, b refDesc, aOK bool) {
	t.Helper()
	db, err := parseHex(c.DescB)
	if err != nil {
		t.Fatal(err)
	}
	if c.A != ARegs {
		da, err := parseHex(c.DescA)
		if err != nil {
			t.Fatal(err)
		}
		return decodeRef(da), decodeRef(db), true
	}
	return refDesc{}, decodeRef(db), false
}

// TestLayoutBounds: each operand's reads lie inside the image, and inside
// the filled shared memory when LBO and SBO are swapped.
func TestLayoutBounds(t *testing.T) {
	for _, s := range specs() {
		c := s.build()
		da, db, aDesc := caseDescs(t, c)
		check := func(d refDesc, rows int, mn bool, what string) {
			hi, hiSwap := 0, 0
			sw := d
			sw.lbo, sw.sbo = d.sbo, d.lbo
			for r := 0; r < rows; r++ {
				for k := 0; k < 16; k++ {
					hi = max(hi, refAddr(d, r, k, mn)+2)
					hiSwap = max(hiSwap, refAddr(sw, r, k, mn)+2)
				}
			}
			if hi > 4*len(c.Image) {
				t.Errorf("%s: %s reads up to byte %d of an image of %d", c.Name, what, hi, 4*len(c.Image))
			}
			if hiSwap > c.Fill {
				t.Errorf("%s: %s with LBO and SBO swapped reads up to byte %d, past the %d filled", c.Name, what, hiSwap, c.Fill)
			}
		}
		if aDesc {
			check(da, 64, c.A == ADescMN, "A")
		}
		check(db, c.N, c.BMN, "B")
	}
}

// TestExactCasesByReference: for the cases of exact small integers, the
// interpreter's outputs equal C + A*B with A and B read by refAddr (and the
// A fragment of mma.m16n8k16 for A in registers).
func TestExactCasesByReference(t *testing.T) {
	b := NewInterp()
	src, err := WgmmaModule(Variants())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Load("wgmma.ptx", src); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, s := range specs() {
		if s.fam != famInt {
			continue
		}
		c := s.build()
		if err := runWgmma(b, c); err != nil {
			t.Fatal(err)
		}
		img := words(c.Image)
		dec := verify.FromBF16
		if c.Type == "f16" {
			dec = verify.FromF16
		}
		da, db, aDesc := caseDescs(t, c)
		elemAt := func(d refDesc, r, k int, mn bool) float64 {
			return float64(dec(binary.LittleEndian.Uint16(img[refAddr(d, r, k, mn):])))
		}
		A := make([][16]float64, 64)
		for r := range A {
			for k := 0; k < 16; k++ {
				if aDesc {
					A[r][k] = elemAt(da, r, k, c.A == ADescMN)
				}
			}
		}
		if !aDesc {
			for th := 0; th < 128; th++ {
				w, g, q := th/32, th%32/4, th%4
				for j := 0; j < 4; j++ {
					reg := c.ARegs[4*th+j]
					row, col := 16*w+g+8*(j%2), 2*q+8*(j/2)
					A[row][col] = float64(dec(uint16(reg)))
					A[row][col+1] = float64(dec(uint16(reg >> 16)))
				}
			}
		}
		sa, sb := 1.0, 1.0
		if c.NegA {
			sa = -1
		}
		if c.NegB {
			sb = -1
		}
		bad := 0
		for th := 0; th < 128; th++ {
			for i := 0; i < c.N/2; i++ {
				row := 16*(th/32) + th%32/4 + 8*(i/2%2)
				col := 8*(i/4) + 2*(th%4) + i%2
				want := 0.0
				if c.ScaleD == 1 {
					want = float64(math.Float32frombits(c.C[th*c.N/2+i]))
				}
				for k := 0; k < 16; k++ {
					want += sa * A[row][k] * sb * elemAt(db, col, k, c.BMN)
				}
				if got := float64(math.Float32frombits(c.D[th*c.N/2+i])); got != want {
					if bad < 3 {
						t.Errorf("%s: D[%d][%d] = %v, reference %v", c.Name, row, col, got, want)
					}
					bad++
				}
			}
		}
		checked++
	}
	if checked < 40 {
		t.Fatalf("only %d exact cases", checked)
	}
}
