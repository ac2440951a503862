package ptx

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// The wgmma tests build operands in shared memory with their own reading of
// the ISA's layout figures (placeElem, written per atom and row, not from
// addresses), run one wgmma.mma_async through the interpreter and compare
// every accumulator with a Go matrix product of the same logical matrices
// (refDot, the mma.sync model the H200 goldens pin).

// placeElem is the byte offset, from a 1024-byte aligned region, of element
// (r, k) of an operand with its rows along M or N, in the layout a
// descriptor with this swizzle width (0 for none, else 32, 64 or 128 bytes),
// LBO and SBO describes. mn selects MN-major.
func placeElem(r, k int, mn bool, swz, lbo, sbo int) int {
	if swz == 0 {
		if !mn { // core matrix: 8 rows of 8 K elements; K halves LBO apart, row groups SBO apart
			return r/8*sbo + k/8*lbo + r%8*16 + k%8*2
		}
		// core matrix: 8 K rows of 8 M/N elements; M/N groups SBO apart, K groups LBO apart
		return r/8*sbo + k/8*lbo + k%8*16 + r%8*2
	}
	// an atom is 8 rows of swz bytes; in row j the 16-byte chunks are
	// permuted by XOR with the index of the 128-byte line the row lies in,
	// taken modulo the chunks per row
	var atom, row, inRow int
	if !mn {
		atom, row, inRow = r/8*sbo, r%8, k*2
	} else {
		per := swz / 2
		atom, row, inRow = r/per*lbo+k/8*sbo, k%8, r%per*2
	}
	line := row * swz / 128
	chunk := inRow/16 ^ line%(swz/16)
	return atom + row*swz + chunk*16 + inRow%16
}

func mkDesc(start, lbo, sbo, swz int) uint64 {
	mode := map[int]uint64{0: 0, 128: 1, 64: 2, 32: 3}[swz]
	return uint64(start>>4) | uint64(lbo>>4)<<16 | uint64(sbo>>4)<<32 | mode<<62
}

// operandLayout picks LBO and SBO (bytes) and the region size for a rows x
// kfull operand, and the K column the instruction's 16 start at.
type operandLayout struct {
	mn             bool
	swz, lbo, sbo  int
	kfull, k0, len int
}

func newLayout(rows int, mn bool, swz int, kSlice bool) operandLayout {
	l := operandLayout{mn: mn, swz: swz, kfull: 16}
	switch {
	case swz == 0:
		l.lbo, l.sbo = 128*((rows+7)/8), 128 // K halves far apart, row groups adjacent
		if mn {
			l.lbo, l.sbo = 128*((rows+7)/8), 128
		}
		l.len = 2 * l.lbo
	case !mn:
		if kSlice { // a wider K in the row: the instruction reads the last 16 columns
			l.kfull = swz / 2
			l.k0 = l.kfull - 16
		}
		l.sbo = 8 * swz
		l.len = (rows + 7) / 8 * l.sbo
	default:
		per := swz / 2
		l.sbo = 8 * swz     // the second group of 8 K rows is the next atom
		l.lbo = 2 * 8 * swz // the next per M/N elements come after both K atoms
		l.len = (rows + per - 1) / per * l.lbo
	}
	l.len = (l.len + 1023) / 1024 * 1024
	return l
}

// awkward fills n bf16 or f16 values: ordinary values, a wide exponent
// spread, and when specials is set some -0, inf and NaN.
func awkward(rng *rand.Rand, n int, f16, specials bool) []uint16 {
	v := make([]uint16, n)
	for i := range v {
		x := float32(rng.NormFloat64()) * float32(math.Ldexp(1, rng.Intn(12)-6))
		if f16 {
			v[i] = f32ToF16(math.Float32bits(x))
		} else {
			v[i] = f32ToBF16(math.Float32bits(x))
		}
		if specials {
			switch rng.Intn(40) {
			case 0:
				v[i] = 0x8000 // -0
			case 1:
				v[i] = 0
			case 2:
				if f16 {
					v[i] = 0x7e00
				} else {
					v[i] = 0x7fc0 // NaN
				}
			case 3:
				if f16 {
					v[i] = 0xfc00
				} else {
					v[i] = 0xff80 // -inf
				}
			}
		}
	}
	return v
}

type wgCase struct {
	n            int
	swz          int
	aRegs        bool
	aMN, bMN     bool
	negA, negB   bool
	scaleD       bool
	f16          bool
	specials     bool
	kSlice       bool
	seed         int64
	mutateOutput bool
}

func (c wgCase) String() string {
	a := "Adesc-K"
	if c.aRegs {
		a = "Aregs"
	} else if c.aMN {
		a = "Adesc-MN"
	}
	b := "B-K"
	if c.bMN {
		b = "B-MN"
	}
	return fmt.Sprintf("n%d/swz%d/%s/%s/neg%v%v/scale%v/f16=%v/sp=%v", c.n, c.swz, a, b, c.negA, c.negB, c.scaleD, c.f16, c.specials)
}

func wgmmaPTX(c wgCase) string {
	var b strings.Builder
	n := c.n
	typ := "bf16"
	if c.f16 {
		typ = "f16"
	}
	fmt.Fprintf(&b, `.version 8.0
.target sm_90a
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.visible .entry wg(.param .u64 img, .param .u32 nimg, .param .u64 cin, .param .u64 dout, .param .u64 ain, .param .u64 da, .param .u64 db, .param .u32 sc)
{
	.reg .pred %%p<4>;
	.reg .b32 %%r<16>;
	.reg .b64 %%rd<16>;
	.reg .f32 %%d<%d>;
	.reg .b32 %%a<4>;
	ld.param.u64 %%rd1, [img];
	ld.param.u32 %%r1, [nimg];
	mov.u32 %%r2, %%tid.x;
	shl.b32 %%r3, %%r2, 4;
LOOP:
	setp.ge.u32 %%p1, %%r3, %%r1;
	@%%p1 bra DONE;
	cvt.u64.u32 %%rd2, %%r3;
	add.s64 %%rd3, %%rd1, %%rd2;
	ld.global.v4.u32 {%%r4, %%r5, %%r6, %%r7}, [%%rd3];
	st.shared.v4.u32 [%%r3], {%%r4, %%r5, %%r6, %%r7};
	add.s32 %%r3, %%r3, 2048;
	bra LOOP;
DONE:
	bar.sync 0;
	fence.proxy.async.shared::cta;
	ld.param.u64 %%rd4, [cin];
	mul.wide.u32 %%rd5, %%r2, %d;
	add.s64 %%rd6, %%rd4, %%rd5;
`, n/2, 2*n)
	for i := 0; i < n/2; i++ {
		fmt.Fprintf(&b, "\tld.global.f32 %%d%d, [%%rd6+%d];\n", i, 4*i)
	}
	b.WriteString(`	ld.param.u64 %rd7, [ain];
	mul.wide.u32 %rd8, %r2, 16;
	add.s64 %rd9, %rd7, %rd8;
	ld.global.v4.u32 {%a0, %a1, %a2, %a3}, [%rd9];
	ld.param.u64 %rd10, [da];
	ld.param.u64 %rd11, [db];
	ld.param.u32 %r8, [sc];
	setp.ne.b32 %p2, %r8, 0;
	wgmma.fence.sync.aligned;
`)
	var d []string
	for i := 0; i < n/2; i++ {
		d = append(d, fmt.Sprintf("%%d%d", i))
	}
	sa, sb := 1, 1
	if c.negA {
		sa = -1
	}
	if c.negB {
		sb = -1
	}
	bt := 0
	if c.bMN {
		bt = 1
	}
	if c.aRegs {
		fmt.Fprintf(&b, "\twgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {%s}, {%%a0, %%a1, %%a2, %%a3}, %%rd11, %%p2, %d, %d, %d;\n", n, typ, typ, strings.Join(d, ", "), sa, sb, bt)
	} else {
		at := 0
		if c.aMN {
			at = 1
		}
		fmt.Fprintf(&b, "\twgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {%s}, %%rd10, %%rd11, %%p2, %d, %d, %d, %d;\n", n, typ, typ, strings.Join(d, ", "), sa, sb, at, bt)
	}
	b.WriteString(`	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
	ld.param.u64 %rd12, [dout];
	add.s64 %rd13, %rd12, %rd5;
`)
	for i := 0; i < n/2; i++ {
		fmt.Fprintf(&b, "\tst.global.f32 [%%rd13+%d], %%d%d;\n", 4*i, i)
	}
	b.WriteString("\tret;\n}\n")
	return b.String()
}

// accumPos lists, for one thread of the warpgroup, the (row, column) of
// each accumulator register, built the way the ISA's figure for the m64nNk16
// D fragment draws it: each warp owns 16 rows; in every 8-column block a
// lane holds two adjacent columns of row lane/4, then the same two columns
// 8 rows further down.
func accumPos(t, n int) [][2]int {
	w, lane := t/32, t%32
	var out [][2]int
	for j := 0; j < n/8; j++ {
		r0, c0 := 16*w+lane/4, 8*j+2*(lane%4)
		out = append(out, [2]int{r0, c0}, [2]int{r0, c0 + 1}, [2]int{r0 + 8, c0}, [2]int{r0 + 8, c0 + 1})
	}
	return out
}

// aFragment is the 4 registers of thread t holding A (64 x 16, row-major in
// a) in the ISA's register fragment for wgmma .m64nNk16 with 16-bit A: per
// warp the 16 rows of mma.m16n8k16's A fragment.
func aFragment(t int, a []uint16) [4]uint32 {
	w, lane := t/32, t%32
	g, q := lane/4, lane%4
	at := func(r, k int) uint32 { return uint32(a[(16*w+r)*16+k]) }
	var f [4]uint32
	f[0] = at(g, 2*q) | at(g, 2*q+1)<<16
	f[1] = at(g+8, 2*q) | at(g+8, 2*q+1)<<16
	f[2] = at(g, 2*q+8) | at(g, 2*q+9)<<16
	f[3] = at(g+8, 2*q+8) | at(g+8, 2*q+9)<<16
	return f
}

// runWgCase runs one case and returns the number of mismatching outputs and
// a description of the first.
func runWgCase(t *testing.T, c wgCase) (int, string) {
	t.Helper()
	rng := rand.New(rand.NewSource(c.seed))
	n := c.n
	la := newLayout(64, c.aMN, c.swz, c.kSlice && !c.aMN && !c.aRegs)
	lb := newLayout(n, c.bMN, c.swz, c.kSlice && !c.bMN)
	// logical matrices: A 64 x kfull, B n x kfull (B stored by rows of N)
	A := awkward(rng, 64*la.kfull, c.f16, c.specials)
	B := awkward(rng, n*lb.kfull, c.f16, c.specials)
	img := make([]byte, (la.len+lb.len+2047)/2048*2048)
	for r := 0; r < 64; r++ {
		for k := 0; k < la.kfull; k++ {
			binary.LittleEndian.PutUint16(img[placeElem(r, k, la.mn, la.swz, la.lbo, la.sbo):], A[r*la.kfull+k])
		}
	}
	for r := 0; r < n; r++ {
		for k := 0; k < lb.kfull; k++ {
			binary.LittleEndian.PutUint16(img[la.len+placeElem(r, k, lb.mn, lb.swz, lb.lbo, lb.sbo):], B[r*lb.kfull+k])
		}
	}
	// the 16 K columns the instruction reads
	a16 := make([]uint16, 64*16)
	for r := 0; r < 64; r++ {
		copy(a16[r*16:], A[r*la.kfull+la.k0:r*la.kfull+la.k0+16])
	}
	b16 := make([]uint16, n*16)
	for r := 0; r < n; r++ {
		copy(b16[r*16:], B[r*lb.kfull+lb.k0:r*lb.kfull+lb.k0+16])
	}
	var afrag []uint32
	for th := 0; th < 128; th++ {
		f := aFragment(th, a16)
		afrag = append(afrag, f[:]...)
	}
	C := make([]uint32, 128*n/2)
	for i := range C {
		C[i] = math.Float32bits(float32(rng.NormFloat64() * 4))
		if c.specials && i%97 == 0 {
			C[i] = 0x80000000
		}
	}
	dev := NewDevice()
	gimg := mustAlloc(t, dev, len(img))
	if err := dev.Write(gimg, img); err != nil {
		t.Fatal(err)
	}
	gc := putU32(t, dev, C)
	gd := mustAlloc(t, dev, 4*len(C))
	ga := putU32(t, dev, afrag)
	// the K slice starts 2*k0 bytes into each K-major swizzled row
	da := mkDesc(2*la.k0, la.lbo, la.sbo, la.swz)
	db := mkDesc(la.len+2*lb.k0, lb.lbo, lb.sbo, lb.swz)
	sc := uint32(0)
	if c.scaleD {
		sc = 1
	}
	launch(t, dev, wgmmaPTX(c), "wg", [3]int{1, 1, 1}, [3]int{128, 1, 1}, len(img), gimg, uint32(len(img)), gc, gd, ga, da, db, sc)
	got := getU32(t, dev, gd, len(C))
	bad, first := 0, ""
	neg := func(v []uint16, on bool) []uint16 {
		if !on {
			return v
		}
		o := make([]uint16, len(v))
		for i, x := range v {
			o[i] = x ^ 0x8000
		}
		return o
	}
	for th := 0; th < 128; th++ {
		for i, pos := range accumPos(th, n) {
			cv := uint32(0x80000000)
			if c.scaleD {
				cv = C[th*n/2+i]
			}
			want := refDot(cv, neg(a16[pos[0]*16:pos[0]*16+16], c.negA), neg(b16[pos[1]*16:pos[1]*16+16], c.negB), c.f16)
			g := got[th*n/2+i]
			if g != want && !(isNaN32(g) && isNaN32(want)) {
				if bad == 0 {
					first = fmt.Sprintf("thread %d reg %d (row %d col %d): got %#x want %#x", th, i, pos[0], pos[1], g, want)
				}
				bad++
			}
		}
	}
	return bad, first
}

func TestWgmmaLayouts(t *testing.T) {
	seed := int64(1)
	for _, n := range []int{8, 64, 128, 256} {
		for _, swz := range []int{0, 32, 64, 128} {
			for _, a := range []string{"K", "MN", "regs"} {
				for _, bmn := range []bool{false, true} {
					seed++
					c := wgCase{n: n, swz: swz, aRegs: a == "regs", aMN: a == "MN", bMN: bmn, scaleD: true, kSlice: true, seed: seed}
					if bad, first := runWgCase(t, c); bad > 0 {
						t.Errorf("%v: %d of %d outputs differ; first: %s", c, bad, 64*n, first)
					}
				}
			}
		}
	}
}

// TestWgmmaNumerics covers the scalars: negation by imm-scale-a/b, scale-d
// 0 (the accumulators are not read, even uninitialized), f16, and inputs with
// -0, inf and NaN.
func TestWgmmaNumerics(t *testing.T) {
	seed := int64(1000)
	for _, f16 := range []bool{false, true} {
		for _, sp := range []bool{false, true} {
			for _, neg := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				for _, scale := range []bool{true, false} {
					for _, aRegs := range []bool{false, true} {
						seed++
						c := wgCase{n: 64, swz: 128, aRegs: aRegs, negA: neg[0], negB: neg[1], scaleD: scale, f16: f16, specials: sp, seed: seed}
						if bad, first := runWgCase(t, c); bad > 0 {
							t.Errorf("%v: %d of %d outputs differ; first: %s", c, bad, 64*c.n, first)
						}
					}
				}
			}
		}
	}
}

// TestWgmmaDescriptorSpots pins a few addresses read off the ISA's figures
// by hand, independently of placeElem.
func TestWgmmaDescriptorSpots(t *testing.T) {
	for _, tc := range []struct {
		desc  uint64
		r, k  int
		trans bool
		want  uint32
	}{
		// 128B swizzle, K-major, atom at 0: row 1's first chunk is its second 16-byte slot
		{mkDesc(0, 16, 1024, 128), 1, 0, false, 128 + 16},
		{mkDesc(0, 16, 1024, 128), 1, 8, false, 128 + 0},
		{mkDesc(0, 16, 1024, 128), 7, 15, false, 7*128 + (1^7)*16 + 14},
		{mkDesc(0, 16, 1024, 128), 9, 0, false, 1024 + 128 + 16},
		// K advanced by 16 elements inside the 128B row: chunk 2 of row 3 is slot 2^3 = 1
		{mkDesc(32, 16, 1024, 128), 3, 0, false, 3*128 + 16},
		// 32B swizzle: rows 0-3 unpermuted, rows 4-7 swap their two chunks
		{mkDesc(0, 16, 256, 32), 3, 8, false, 3*32 + 16},
		{mkDesc(0, 16, 256, 32), 4, 8, false, 4 * 32},
		// 64B swizzle: row 2 is in 128-byte line 1: chunk 0 goes to slot 1
		{mkDesc(0, 16, 512, 64), 2, 0, false, 2*64 + 16},
		// no swizzle, K-major: K half at LBO, row group at SBO
		{mkDesc(0, 1024, 128, 0), 9, 10, false, 128 + 1024 + 16 + 4},
		// no swizzle, MN-major: M group at SBO, K group at LBO
		{mkDesc(0, 2048, 128, 0), 9, 10, true, 128 + 2048 + 2*16 + 2},
		// 128B swizzle, MN-major: 64 M elements per row, K row 1 permutes slot 0 to 1
		{mkDesc(0, 2048, 1024, 128), 0, 1, true, 128 + 16},
		{mkDesc(0, 2048, 1024, 128), 64, 8, true, 2048 + 1024},
	} {
		md, msg := decodeDesc(tc.desc)
		if msg != "" {
			t.Fatal(msg)
		}
		if got := md.elemAddr(tc.r, tc.k, tc.trans); got != tc.want {
			t.Errorf("desc %#x (r %d, k %d, trans %v): address %#x, want %#x", tc.desc, tc.r, tc.k, tc.trans, got, tc.want)
		}
	}
	if _, msg := decodeDesc(mkDesc(0, 16, 1024, 128) | 1<<61); msg == "" {
		t.Error("reserved bit 61 accepted")
	}
	if _, msg := decodeDesc(1 << 49); msg == "" {
		t.Error("nonzero base offset accepted")
	}
}
