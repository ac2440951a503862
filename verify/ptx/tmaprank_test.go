package ptx

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// rankPTX is a kernel that copies one box through a tensor map of rank
// {R} (cp.async.bulk.tensor.{R}d at the coordinates of parameters c0..c4,
// in the order {C}) into shared memory and then stores the box's bytes,
// as they landed, to out: thread t stores 16-byte units t, t+32, ... (guarded: branches stay warp-uniform)
const rankPTX = `
.version 8.0
.target sm_90a
.address_size 64
.shared .align 16 .b64 bar[1];
.extern .shared .align 1024 .b8 buf[];
.visible .entry k(.param .u64 tmap, .param .u64 out, .param .u32 bytes, .param .u32 c0, .param .u32 c1, .param .u32 c2, .param .u32 c3, .param .u32 c4)
{
	.reg .pred %p<4>;
	.reg .b32 %r<32>;
	.reg .b64 %rd<8>;
	mov.u32 %r1, %tid.x;
	setp.eq.u32 %p1, %r1, 0;
	mov.u32 %r2, bar;
	@%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
	fence.mbarrier_init.release.cluster;
	bar.sync 0;
	ld.param.u32 %r3, [bytes];
	ld.param.u64 %rd1, [tmap];
	ld.param.u32 %r10, [c0];
	ld.param.u32 %r11, [c1];
	ld.param.u32 %r12, [c2];
	ld.param.u32 %r13, [c3];
	ld.param.u32 %r14, [c4];
	mov.u32 %r4, buf;
	@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r2], %r3;
	@%p1 cp.async.bulk.tensor.{R}d.shared::cluster.global.mbarrier::complete_tx::bytes [%r4], [%rd1, {{C}}], [%r2];
WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
	@!%p2 bra WAIT;
	mov.u32 %r5, 0;
	shl.b32 %r7, %r1, 4;
	ld.param.u64 %rd2, [out];
LOOP:
	setp.ge.u32 %p3, %r5, %r3;
	@%p3 bra DONE;
	add.s32 %r8, %r5, %r7;
	setp.lt.u32 %p3, %r8, %r3;
	add.s32 %r6, %r4, %r8;
	@%p3 ld.shared.v4.u32 {%r15, %r16, %r17, %r18}, [%r6];
	cvt.u64.u32 %rd3, %r8;
	add.s64 %rd4, %rd2, %rd3;
	@%p3 st.global.v4.u32 [%rd4], {%r15, %r16, %r17, %r18};
	add.s32 %r5, %r5, 512;
	bra LOOP;
DONE:
	ret;
}
`

// rankCase is one box copy: a tensor map (its Global filled in by the
// test) and the box's coordinates.
type rankCase struct {
	name string
	tm   TensorMap
	crd  []int32
}

// boxRef is the box of a copy as the ISA's tile mode defines it, written
// here on its own: box element e (dense, dimension 0 fastest) has, in
// dimension i, index (e / prod(box[:i])) mod box[i]; its coordinates are
// the copy's plus those; it is the tensor's element there (at byte
// Global + c0*size + sum c_i*Strides[i-1]) when every coordinate lies in
// [0, Dims[i]), else zero. mem holds the tensor's bytes from Global; perm
// and strides are the coordinate order and strides the reference uses
// (the map's, or a mutant's).
func boxRef(tm TensorMap, mem []byte, crd []int32, perm []int, strides []uint64) []byte {
	rank := len(tm.Dims)
	n := tm.ElemSize
	for _, b := range tm.Box {
		n *= int(b)
	}
	out := make([]byte, n)
	for e := 0; e < n/tm.ElemSize; e++ {
		div, in, off := 1, true, uint64(0)
		for i := 0; i < rank; i++ {
			c := int64(crd[perm[i]]) + int64(e/div%int(tm.Box[i]))
			div *= int(tm.Box[i])
			if c < 0 || uint64(c) >= tm.Dims[i] {
				in = false
				continue
			}
			if i == 0 {
				off += uint64(c) * uint64(tm.ElemSize)
			} else {
				off += uint64(c) * strides[i-1]
			}
		}
		switch {
		case in && off+uint64(tm.ElemSize) > uint64(len(mem)):
			// a mutant's address past the tensor's bytes
			copy(out[e*tm.ElemSize:][:tm.ElemSize], bytes.Repeat([]byte{0xee}, tm.ElemSize))
		case in:
			copy(out[e*tm.ElemSize:][:tm.ElemSize], mem[off:])
		}
	}
	return out
}

// rankCases are copies of every rank: element sizes 2 and 4, strides
// padded, strides out of order (a BSHD tensor seen as (D, seq, heads,
// batch): the head stride below the position stride), boxes that start
// before the tensor and run past its end in several dimensions.
func rankCases() []rankCase {
	return []rankCase{
		{"1d", TensorMap{ElemSize: 2, Dims: []uint64{100}, Box: []uint32{64}}, []int32{50}},
		{"1d-before", TensorMap{ElemSize: 4, Dims: []uint64{20}, Box: []uint32{16}}, []int32{-9}},
		{"2d", TensorMap{ElemSize: 2, Dims: []uint64{40, 9}, Strides: []uint64{96}, Box: []uint32{16, 8}}, []int32{30, 3}},
		{"3d", TensorMap{ElemSize: 2, Dims: []uint64{24, 5, 4}, Strides: []uint64{64, 5 * 64}, Box: []uint32{8, 4, 3}}, []int32{-3, 1, 2}},
		// (D, seq, heads, batch) of a BSHD tensor with 3 heads of 16 elements,
		// rows of 3*16+8 elements (padded)
		{"4d-bshd", TensorMap{ElemSize: 2, Dims: []uint64{16, 7, 3, 2}, Strides: []uint64{2 * 56, 2 * 16, 2 * 56 * 7}, Box: []uint32{16, 4, 2, 2}}, []int32{0, 5, 1, 0}},
		{"4d-f32", TensorMap{ElemSize: 4, Dims: []uint64{8, 6, 3, 3}, Strides: []uint64{48, 16 * 48, 48 * 6}, Box: []uint32{4, 3, 2, 2}}, []int32{6, -1, 0, 2}},
		// (D, class, group, heads, batch): a residue layout of stride 3 over
		// BSHD rows
		{"5d-residue", TensorMap{ElemSize: 2, Dims: []uint64{16, 3, 3, 2, 2}, Strides: []uint64{2 * 40, 2 * 40 * 3, 2 * 16, 2 * 40 * 9}, Box: []uint32{16, 1, 4, 1, 2}}, []int32{0, 2, 1, 1, 0}},
		{"5d-swizzle", TensorMap{ElemSize: 2, Dims: []uint64{64, 2, 5, 3, 2}, Strides: []uint64{2 * 64 * 3, 2 * 64, 2 * 64 * 3 * 2, 2 * 64 * 3 * 2 * 5}, Box: []uint32{64, 2, 4, 1, 1}, Swizzle: Swizzle128B}, []int32{0, 0, 3, 2, 1}},
	}
}

// unswizzle undoes a 128B swizzle of a 1024-byte aligned buffer: the
// 16-byte unit u of 128-byte row r lies at unit u XOR (r mod 8).
func unswizzle(b []byte, sw Swizzle) []byte {
	if sw == SwizzleNone {
		return b
	}
	out := make([]byte, len(b))
	for a := 0; a < len(b); a += 16 {
		row, u := a/128, a/16%8
		copy(out[a:a+16], b[row*128+(u^row%8)*16:][:16])
	}
	return out
}

// runRank copies case c's box through the interpreter (coordinates in the
// order of perm: the kernel passes c[perm[0]], c[perm[1]], ...) and returns
// the box's bytes in dense order, with the tensor's bytes.
func runRank(t *testing.T, c rankCase, perm []int, rng *rand.Rand) (got, mem []byte) {
	t.Helper()
	dev := NewDevice()
	rank := len(c.tm.Dims)
	// the tensor's extent: its last element plus one, and a margin
	ext := uint64(c.tm.ElemSize) * c.tm.Dims[0]
	for i := 1; i < rank; i++ {
		ext += (c.tm.Dims[i] - 1) * c.tm.Strides[i-1]
	}
	mem = make([]byte, ext+64)
	for i := range mem {
		mem[i] = byte(rng.Intn(255) + 1) // no zero: a zero-filled element shows
	}
	g := mustAlloc(t, dev, len(mem))
	if err := dev.Write(g, mem); err != nil {
		t.Fatal(err)
	}
	tm := c.tm
	tm.Global = g
	a, err := dev.NewTensorMap(tm)
	if err != nil {
		t.Fatal(err)
	}
	n := tm.ElemSize
	for _, b := range tm.Box {
		n *= int(b)
	}
	out := mustAlloc(t, dev, n)
	var regs []string
	for i := 0; i < rank; i++ {
		regs = append(regs, fmt.Sprintf("%%r%d", 10+perm[i]))
	}
	src := strings.NewReplacer("{R}", fmt.Sprint(rank), "{C}", strings.Join(regs, ", ")).Replace(rankPTX)
	var crd [5]uint32
	for i, x := range c.crd {
		crd[i] = uint32(x)
	}
	launch(t, dev, src, "k", [3]int{1, 1, 1}, [3]int{32, 1, 1}, n, a, out, uint32(n), crd[0], crd[1], crd[2], crd[3], crd[4])
	got = make([]byte, n)
	if err := dev.Read(out, got); err != nil {
		t.Fatal(err)
	}
	return unswizzle(got, tm.Swizzle), mem
}

// TestBulkTensorRanks copies a box through tensor maps of rank 1 to 5
// and compares it, byte for byte, with boxRef, the tile mode's own
// definition. So that the test can fail, it also requires that two
// mutants differ from the interpreter on every case of rank 2 or more: a
// reference with two coordinates swapped, and one with a stride taken
// from the wrong dimension; and that a kernel passing its coordinates in
// the wrong order differs from the reference.
func TestBulkTensorRanks(t *testing.T) {
	rng := rand.New(rand.NewSource(22))
	for _, c := range rankCases() {
		t.Run(c.name, func(t *testing.T) {
			rank := len(c.tm.Dims)
			id := []int{0, 1, 2, 3, 4}[:rank]
			got, mem := runRank(t, c, id, rng)
			want := boxRef(c.tm, mem, c.crd, id, c.tm.Strides)
			if !bytes.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("byte %d of the box: %#x, want %#x", i, got[i], want[i])
					}
				}
			}
			if rank < 2 {
				return
			}
			// mutants: the last two coordinates swapped; the last stride
			// replaced by the first
			swapped := append([]int(nil), id...)
			swapped[rank-2], swapped[rank-1] = swapped[rank-1], swapped[rank-2]
			if bytes.Equal(got, boxRef(c.tm, mem, c.crd, swapped, c.tm.Strides)) {
				t.Errorf("a reference with coordinates %d and %d swapped agrees with the interpreter: the case cannot tell them apart", rank-2, rank-1)
			}
			wrong := append([]uint64(nil), c.tm.Strides...)
			if rank == 2 {
				wrong[0] += 16
			} else {
				wrong[rank-2] = wrong[0]
			}
			if bytes.Equal(got, boxRef(c.tm, mem, c.crd, id, wrong)) {
				t.Errorf("a reference with stride %d wrong agrees with the interpreter", rank-1)
			}
			bad, _ := runRank(t, c, swapped, rand.New(rand.NewSource(22)))
			if bytes.Equal(bad, want) {
				t.Errorf("a kernel passing coordinates %d and %d swapped gives the right box", rank-2, rank-1)
			}
		})
	}
}

// TestTensorMapLimits: NewTensorMap takes what cuTensorMapEncodeTiled
// takes (of tile mode, no interleave) and refuses the rest.
func TestTensorMapLimits(t *testing.T) {
	dev := NewDevice()
	g := mustAlloc(t, dev, 4096)
	ok := TensorMap{Global: g, ElemSize: 2, Dims: []uint64{8, 4, 4, 4, 4}, Strides: []uint64{16, 64, 256, 1024}, Box: []uint32{8, 1, 1, 1, 1}}
	if _, err := dev.NewTensorMap(ok); err != nil {
		t.Fatalf("a rank-5 map: %v", err)
	}
	big := ok
	big.Dims = []uint64{8, 1 << 32, 1, 1, 1}
	big.Strides = []uint64{1<<40 - 16, 16, 16, 16}
	if _, err := dev.NewTensorMap(big); err != nil {
		t.Errorf("dimension 2^32 and stride 2^40-16: %v", err)
	}
	for _, c := range []struct {
		what string
		mod  func(*TensorMap)
		want string
	}{
		{"rank 6", func(m *TensorMap) {
			m.Dims, m.Strides, m.Box = append(m.Dims, 2), append(m.Strides, 4096), append(m.Box, 1)
		}, "rank 6"},
		{"rank 0", func(m *TensorMap) { m.Dims, m.Strides, m.Box = nil, nil, nil }, "rank 0"},
		{"stride 2^40", func(m *TensorMap) { m.Strides = []uint64{16, 64, 1 << 40, 1024} }, "below 2^40"},
		{"stride 0", func(m *TensorMap) { m.Strides = []uint64{16, 0, 256, 1024} }, "positive multiple of 16"},
		{"stride 24", func(m *TensorMap) { m.Strides = []uint64{16, 64, 24, 1024} }, "positive multiple of 16"},
		{"dimension past 2^32", func(m *TensorMap) { m.Dims = []uint64{8, 4, 1<<32 + 1, 4, 4} }, "outside 1..2^32"},
		{"box 257", func(m *TensorMap) { m.Box = []uint32{8, 257, 1, 1, 1} }, "outside 1..256"},
		{"inner box of 8 bytes", func(m *TensorMap) { m.Box = []uint32{4, 1, 1, 1, 1} }, "multiple of 16"},
		{"unaligned", func(m *TensorMap) { m.Global += 8 }, "16-byte aligned"},
	} {
		m := ok
		m.Dims, m.Strides, m.Box = append([]uint64(nil), ok.Dims...), append([]uint64(nil), ok.Strides...), append([]uint32(nil), ok.Box...)
		c.mod(&m)
		if _, err := dev.NewTensorMap(m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.what, err, c.want)
		}
	}
	// a copy whose dimension is not the map's rank
	tm, err := dev.NewTensorMap(ok)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.NewReplacer("{R}", "4", "{C}", "%r10, %r11, %r12, %r13").Replace(rankPTX)
	m, err := Parse("k.ptx", src)
	if err != nil {
		t.Fatal(err)
	}
	out := mustAlloc(t, dev, 16)
	if _, err := dev.Launch(m, "k", [3]int{1, 1, 1}, [3]int{32, 1, 1}, 16, tm, out, uint32(16), uint32(0), uint32(0), uint32(0), uint32(0), uint32(0)); err == nil || !strings.Contains(err.Error(), "a .4d copy through a rank-5 tensor map") {
		t.Errorf("a .4d copy through a rank-5 map: %v", err)
	}
}
