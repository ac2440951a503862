package ptx

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// tmaPTX: warp 4 (a producer) loads `tiles` boxes of rows x 64 bf16 (128-byte
// rows, 128B swizzle) from a 2-D tensor through a 2-stage ring guarded by
// full/empty mbarriers; the four consumer warps wait on full[s] with
// try_wait.parity, copy the stage to global with ld.shared (so the test can
// check the swizzled placement byte for byte), and arrive on empty[s].
const tmaPTX = `
.version 8.0
.target sm_90a
.address_size 64
.shared .align 8 .b64 full[2];
.shared .align 8 .b64 empty[2];
.extern .shared .align 1024 .b8 stage[];
.visible .entry tma(.param .u64 tmap, .param .u64 out, .param .u32 tiles, .param .u32 rows)
{
	.reg .pred %p<8>;
	.reg .b32 %r<32>;
	.reg .b64 %rd<16>;
	mov.u32 %r1, %tid.x;
	setp.eq.u32 %p1, %r1, 0;
	mov.u32 %r2, full;
	@%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
	@%p1 mbarrier.init.shared::cta.b64 [%r2+8], 1;
	mov.u32 %r2, empty;
	@%p1 mbarrier.init.shared::cta.b64 [%r2], 128;
	@%p1 mbarrier.init.shared::cta.b64 [%r2+8], 128;
	fence.mbarrier_init.release.cluster;
	bar.sync 0;
	ld.param.u32 %r3, [tiles];
	ld.param.u32 %r20, [rows];
	shl.b32 %r21, %r20, 7;            // stage bytes
	mov.u32 %r4, 0;                    // tile index
	setp.lt.u32 %p2, %r1, 128;
	@%p2 bra CONSUMER;
	setmaxnreg.dec.sync.aligned.u32 40;
	setp.ne.u32 %p3, %r1, 128;         // one elected producer thread
PLOOP:
	setp.ge.u32 %p4, %r4, %r3;
	@%p4 bra PDONE;
	and.b32 %r5, %r4, 1;               // stage
	shr.u32 %r6, %r4, 1;               // ring pass
	setp.lt.u32 %p5, %r4, 2;
	@%p5 bra PFILL;
	// wait until the consumers released this stage in the previous pass
	and.b32 %r7, %r6, 1;
	xor.b32 %r7, %r7, 1;
	mov.u32 %r8, empty;
	mad.lo.u32 %r8, %r5, 8, %r8;
PWAIT:
	mbarrier.try_wait.parity.shared::cta.b64 %p6, [%r8], %r7;
	@!%p6 bra PWAIT;
PFILL:
	mov.u32 %r9, full;
	mad.lo.u32 %r9, %r5, 8, %r9;
	@!%p3 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r9], %r21;
	mov.u32 %r10, stage;
	mad.lo.u32 %r10, %r5, %r21, %r10;
	ld.param.u64 %rd1, [tmap];
	mov.u32 %r11, 0;
	mul.lo.u32 %r12, %r4, %r20;         // row coordinate
	sub.s32 %r12, %r12, 3;              // starts 3 rows above the tensor: zero fill
	@!%p3 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r10], [%rd1, {%r11, %r12}], [%r9];
	add.s32 %r4, %r4, 1;
	bra PLOOP;
PDONE:
	ret;
CONSUMER:
	setmaxnreg.inc.sync.aligned.u32 232;
	ld.param.u64 %rd2, [out];
CLOOP:
	setp.ge.u32 %p4, %r4, %r3;
	@%p4 bra CDONE;
	and.b32 %r5, %r4, 1;
	shr.u32 %r6, %r4, 1;
	and.b32 %r7, %r6, 1;
	mov.u32 %r9, full;
	mad.lo.u32 %r9, %r5, 8, %r9;
CWAIT:
	mbarrier.try_wait.parity.shared::cta.b64 %p6, [%r9], %r7;
	@!%p6 bra CWAIT;
	// thread t copies 16-byte units t, t+128, ... of the stage
	mov.u32 %r10, stage;
	mad.lo.u32 %r10, %r5, %r21, %r10;
	shl.b32 %r13, %r1, 4;
CCOPY:
	setp.ge.u32 %p5, %r13, %r21;
	@%p5 bra CCOPIED;
	add.s32 %r14, %r10, %r13;
	ld.shared.v4.u32 {%r15, %r16, %r17, %r18}, [%r14];
	mul.lo.u32 %r19, %r4, %r21;
	add.s32 %r19, %r19, %r13;
	cvt.u64.u32 %rd3, %r19;
	add.s64 %rd4, %rd2, %rd3;
	st.global.v4.u32 [%rd4], {%r15, %r16, %r17, %r18};
	add.s32 %r13, %r13, 2048;
	bra CCOPY;
CCOPIED:
	mov.u32 %r8, empty;
	mad.lo.u32 %r8, %r5, 8, %r8;
	mbarrier.arrive.shared::cta.b64 %rd5, [%r8];
	add.s32 %r4, %r4, 1;
	bra CLOOP;
CDONE:
	ret;
}
`

// tmaPlace is where element (row, col) of a box with 128-byte rows lands
// with the 128B swizzle, as the CUDA tensor-map documentation draws it: in
// each row the 16-byte chunk c moves to c XOR (row mod 8) (the stage is
// 1024-byte aligned).
func tmaPlace(row, col int) int {
	return row*128 + (col*2/16^row%8)*16 + col*2%16
}

func TestBulkTensorPipeline(t *testing.T) {
	const (
		rows  = 16 // box rows per tile
		tiles = 5
		H     = 70 // tensor rows: the last tile runs past the end (zero fill)
		W     = 80 // tensor columns: the box covers columns 0..63
	)
	rng := rand.New(rand.NewSource(7))
	dev := NewDevice()
	src := make([]uint16, H*W)
	for i := range src {
		src[i] = uint16(rng.Intn(0xffff) + 1)
	}
	g := mustAlloc(t, dev, 2*len(src))
	if err := dev.WriteU16(g, src); err != nil {
		t.Fatal(err)
	}
	tm, err := dev.NewTensorMap(TensorMap{Global: g, ElemSize: 2, Dims: []uint64{W, H}, Strides: []uint64{2 * W}, Box: []uint32{64, rows}, Swizzle: Swizzle128B})
	if err != nil {
		t.Fatal(err)
	}
	out := mustAlloc(t, dev, tiles*rows*128)
	launch(t, dev, tmaPTX, "tma", [3]int{1, 1, 1}, [3]int{160, 1, 1}, 2*rows*128, tm, out, uint32(tiles), uint32(rows))
	got, err := dev.ReadU16(out, tiles*rows*64)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for tile := 0; tile < tiles; tile++ {
		for r := 0; r < rows; r++ {
			for c := 0; c < 64; c++ {
				gr := tile*rows + r - 3
				want := uint16(0)
				if gr >= 0 && gr < H {
					want = src[gr*W+c]
				}
				if v := got[tile*rows*64+tmaPlace(r, c)/2]; v != want {
					if bad < 5 {
						t.Errorf("tile %d box (%d, %d): %#x, want %#x", tile, r, c, v, want)
					}
					bad++
				}
			}
		}
	}
}

// mbarErr runs a small kernel body (with %r1 = tid, a 16-byte-aligned
// mbarrier `bar` and a 1024-byte aligned buffer `buf`) and returns the
// launch error text.
func mbarErr(t *testing.T, body string, threads int, params ...any) string {
	t.Helper()
	return mbarErrOn(t, NewDevice(), body, threads, params...)
}

// mbarErrOn is mbarErr on device dev (whose tensor maps the body may use).
func mbarErrOn(t *testing.T, dev *Device, body string, threads int, params ...any) string {
	t.Helper()
	src := `
.version 8.0
.target sm_90a
.address_size 64
.shared .align 16 .b64 bar[2];
.shared .align 1024 .b8 buf[4096];
.visible .entry k(.param .u64 tmap)
{
	.reg .pred %p<8>;
	.reg .b32 %r<32>;
	.reg .b64 %rd<16>;
	.reg .f32 %f<8>;
	mov.u32 %r1, %tid.x;
` + body + `
}
`
	m, err := Parse("k.ptx", src)
	if err != nil {
		return "parse: " + err.Error()
	}
	if len(params) == 0 {
		params = []any{uint64(0)}
	}
	_, err = dev.Launch(m, "k", [3]int{1, 1, 1}, [3]int{threads, 1, 1}, 0, params...)
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestMbarrierSemantics(t *testing.T) {
	// phases: two arrivals complete phase 0; parity 0 then reads complete,
	// parity 1 not; the arrive token of phase 0 tests complete
	ok := mbarErr(t, `
	mov.u32 %r2, bar;
	mbarrier.init.shared::cta.b64 [%r2], 2;
	mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r2], 0;
	@%p1 bra BAD;
	mbarrier.arrive.shared::cta.b64 %rd1, [%r2];
	mbarrier.arrive.release.cta.shared::cta.b64 %rd2, [%r2];
	mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r2], 0;
	@!%p1 bra BAD;
	mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r2], 1;
	@%p1 bra BAD;
	mbarrier.test_wait.shared::cta.b64 %p1, [%r2], %rd1;
	@!%p1 bra BAD;
	// expect_tx keeps the phase open until the bytes arrive
	mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r2], 64;
	mbarrier.arrive.shared::cta.b64 %rd1, [%r2];
	mbarrier.arrive.shared::cta.b64 %rd1, [%r2];
	mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r2], 1;
	@%p1 bra BAD;
	ret;
BAD:
	st.shared.u32 [0x100000], %r1;`, 1)
	if ok != "" {
		t.Fatalf("mbarrier phase sequence failed: %s", ok)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"arrive past the count", `
	mov.u32 %r2, bar;
	mbarrier.init.shared::cta.b64 [%r2], 1;
	mbarrier.arrive.shared::cta.b64 %rd1, [%r2], 2;`, "awaits only 1"},
		{"uninitialized", `
	mov.u32 %r2, bar;
	mbarrier.arrive.shared::cta.b64 %rd1, [%r2];`, "no mbarrier is initialized"},
		{"ld of the object", `
	mov.u32 %r2, bar;
	mbarrier.init.shared::cta.b64 [%r2], 1;
	ld.shared.u32 %r3, [%r2+4];`, "only mbarrier instructions"},
		{"try_wait never completes", `
	mov.u32 %r2, bar;
	mbarrier.init.shared::cta.b64 [%r2], 2;
	mbarrier.arrive.shared::cta.b64 %rd1, [%r2];
W:
	mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
	@!%p1 bra W;`, "deadlock"},
		{"bad parity", `
	mov.u32 %r2, bar;
	mbarrier.init.shared::cta.b64 [%r2], 2;
	mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r2], 2;`, "parity 2"},
		{"count zero", `
	mov.u32 %r2, bar;
	mbarrier.init.shared::cta.b64 [%r2], 0;`, "count 0"},
	} {
		if got := mbarErr(t, tc.body, 1); !strings.Contains(got, tc.want) {
			t.Errorf("%s: error %q, want it to contain %q", tc.name, got, tc.want)
		}
	}
}

func TestBulkTensorErrors(t *testing.T) {
	dev := NewDevice()
	g := mustAlloc(t, dev, 64*64*2)
	if _, err := dev.NewTensorMap(TensorMap{Global: g, ElemSize: 2, Dims: []uint64{64, 64}, Strides: []uint64{128}, Box: []uint32{32, 8}, Swizzle: Swizzle128B}); err == nil {
		t.Error("an inner box of 64 bytes with the 128B swizzle was accepted")
	}
	if _, err := dev.NewTensorMap(TensorMap{Global: g, ElemSize: 2, Dims: []uint64{64, 64}, Strides: []uint64{100}, Box: []uint32{64, 8}}); err == nil {
		t.Error("a stride of 100 bytes was accepted")
	}
	tm, err := dev.NewTensorMap(TensorMap{Global: g, ElemSize: 2, Dims: []uint64{64, 64}, Strides: []uint64{128}, Box: []uint32{64, 8}, Swizzle: Swizzle128B})
	if err != nil {
		t.Fatal(err)
	}
	copyBox := `
	mov.u32 %r2, bar;
	mbarrier.init.shared::cta.b64 [%r2], 1;
	mov.u32 %r3, buf;
	mov.u32 %r4, 0;
	ld.param.u64 %rd1, [tmap];
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1, {%r4, %r4}], [%r2];
`
	run := func(body string) string {
		m, err := Parse("k.ptx", strings.Replace(`
.version 8.0
.target sm_90a
.address_size 64
.shared .align 16 .b64 bar[2];
.shared .align 1024 .b8 buf[4096];
.visible .entry k(.param .u64 tmap)
{
	.reg .pred %p<8>;
	.reg .b32 %r<32>;
	.reg .b64 %rd<16>;
	BODY
}`, "BODY", body, 1))
		if err != nil {
			return "parse: " + err.Error()
		}
		_, err = dev.Launch(m, "k", [3]int{1, 1, 1}, [3]int{1, 1, 1}, 0, tm)
		if err == nil {
			return ""
		}
		return err.Error()
	}
	for _, tc := range []struct{ name, body, want string }{
		{"read before the phase completes", copyBox + `
	ld.shared.u32 %r5, [%r3];`, "has not completed"},
		{"phase never completes", copyBox, "still pending"},
		{"complete, then read", copyBox + `
	mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r2], 1024;
W:
	mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
	@!%p1 bra W;
	ld.shared.u32 %r5, [%r3];`, ""},
		{"complete, read without waiting", copyBox + `
	mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r2], 1024;
	ld.shared.u32 %r5, [%r3];`, "before this warp observed the completion of its mbarrier"},
		{"not a tensor map", `
	mov.u32 %r2, bar;
	mbarrier.init.shared::cta.b64 [%r2], 1;
	mov.u32 %r3, buf;
	mov.u64 %rd1, 64;
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1, {%r3, %r3}], [%r2];`, "not the address of a tensor map"},
	} {
		got := run(tc.body)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: error %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestBulkTensorObserved: bytes a bulk copy wrote are readable by a warp
// once it has observed the completion of the copy's mbarrier phase, by its
// own wait or through a bar.sync after another warp's wait; the copy
// completing (in the interpreter, at issue) is not enough.
func TestBulkTensorObserved(t *testing.T) {
	dev := NewDevice()
	g := mustAlloc(t, dev, 64*64*2)
	tm, err := dev.NewTensorMap(TensorMap{Global: g, ElemSize: 2, Dims: []uint64{64, 64}, Strides: []uint64{128}, Box: []uint32{64, 8}, Swizzle: Swizzle128B})
	if err != nil {
		t.Fatal(err)
	}
	body := func(sync string) string {
		return `
	setp.eq.u32 %p2, %r1, 0;
	mov.u32 %r2, bar;
	@%p2 mbarrier.init.shared::cta.b64 [%r2], 1;
	fence.mbarrier_init.release.cluster;
	bar.sync 0;
	mov.u32 %r3, buf;
	mov.u32 %r4, 0;
	ld.param.u64 %rd1, [tmap];
	@%p2 mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r2], 1024;
	@%p2 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1, {%r4, %r4}], [%r2];
	setp.lt.u32 %p3, %r1, 32;
	@!%p3 bra SKIP;
W:
	mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
	@!%p1 bra W;
SKIP:
` + sync + `
	ld.shared.u32 %r5, [%r3];
	ret;`
	}
	if got := mbarErrOn(t, dev, body("bar.sync 0;"), 64, tm); got != "" {
		t.Errorf("warp 1 reading after a bar.sync that follows warp 0's wait: %s", got)
	}
	if got := mbarErrOn(t, dev, body(""), 64, tm); !strings.Contains(got, "before this warp observed") || !strings.Contains(got, "thread (32,0,0)") {
		t.Errorf("warp 1 reading without a wait or a barrier: error %q", got)
	}
}

// wgErr runs a one-warpgroup kernel body with wgmma declarations and returns
// the parse or launch error text.
func wgErr(t *testing.T, body string, target string) string {
	t.Helper()
	src := fmt.Sprintf(`
.version 8.0
.target %s
.address_size 64
.shared .align 1024 .b8 buf[4096];
.visible .entry k()
{
	.reg .pred %%p<8>;
	.reg .b32 %%r<32>;
	.reg .b64 %%rd<16>;
	.reg .f32 %%d<4>;
	mov.u32 %%r1, %%tid.x;
	shl.b32 %%r2, %%r1, 5;
	mov.u32 %%r3, 0;
	st.shared.v4.u32 [%%r2], {%%r3, %%r3, %%r3, %%r3};
	st.shared.v4.u32 [%%r2+16], {%%r3, %%r3, %%r3, %%r3};
	bar.sync 0;
	mov.u64 %%rd1, 0x0000000800010000;
	%s
}`, target, body)
	m, err := Parse("k.ptx", src)
	if err != nil {
		return "parse: " + err.Error()
	}
	_, err = NewDevice().Launch(m, "k", [3]int{1, 1, 1}, [3]int{128, 1, 1}, 0)
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestWgmmaErrors(t *testing.T) {
	const mma = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3}, %rd1, %rd1, 0, 1, 1, 0, 0;"
	for _, tc := range []struct{ name, body, target, want string }{
		{"ok", "wgmma.fence.sync.aligned;\n" + mma + "\nwgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\nmov.b32 %r4, %d0;", "sm_90a", ""},
		{"read before wait", "wgmma.fence.sync.aligned;\n" + mma + "\nwgmma.commit_group.sync.aligned;\nmov.b32 %r4, %d0;", "sm_90a", "committed but not waited"},
		{"read before commit", "wgmma.fence.sync.aligned;\n" + mma + "\nwgmma.wait_group.sync.aligned 0;\nmov.b32 %r4, %d0;", "sm_90a", "not yet committed"},
		{"wait 1 leaves the newest", "wgmma.fence.sync.aligned;\n" + mma + "\nwgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 1;\nmov.b32 %r4, %d0;", "sm_90a", "committed but not waited"},
		{"no fence", mma, "sm_90a", "before any wgmma.fence"},
		{"write after fence", "wgmma.fence.sync.aligned;\nmov.f32 %d0, 0f00000000;\n" + mma, "sm_90a", "written after the last wgmma.fence"},
		{"sm_90 without a", "wgmma.fence.sync.aligned;", "sm_90", "needs .target sm_90a"},
		{"one warp skips", "wgmma.fence.sync.aligned;\nsetp.lt.u32 %p1, %r1, 32;\n@%p1 bra X;\n" + mma + "\nX:\nret;", "sm_90a", "deadlock"},
		{"uneven descriptor", "wgmma.fence.sync.aligned;\ncvt.u64.u32 %rd2, %r1;\nshr.u64 %rd2, %rd2, 5;\nadd.s64 %rd1, %rd1, %rd2;\nwgmma.fence.sync.aligned;\n" + mma, "sm_90a", "differs across the warpgroup"},
		{"reserved bits", "wgmma.fence.sync.aligned;\nmov.u64 %rd1, 0x2000000000000000;\nwgmma.fence.sync.aligned;\n" + mma, "sm_90a", "reserved bits"},
		{"outside shared", "wgmma.fence.sync.aligned;\nmov.u64 %rd1, 0x0000004000013fff;\nwgmma.fence.sync.aligned;\n" + mma, "sm_90a", "outside the 4096 bytes"},
		{"bad N", "wgmma.mma_async.sync.aligned.m64n12k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3}, %rd1, %rd1, 0, 1, 1, 0, 0;", "sm_90a", "multiple of 8"},
		{"bad scale", "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%d0, %d1, %d2, %d3}, %rd1, %rd1, 0, 2, 1, 0, 0;", "sm_90a", "imm-scale-a must be 1 or -1"},
		{"setmaxnreg range", "setmaxnreg.inc.sync.aligned.u32 260;", "sm_90a", "multiple of 8 in 24..256"},
		{"setmaxnreg step", "setmaxnreg.dec.sync.aligned.u32 100;", "sm_90a", "multiple of 8 in 24..256"},
		{"setmaxnreg ok", "setmaxnreg.dec.sync.aligned.u32 24;\nsetmaxnreg.inc.sync.aligned.u32 256;", "sm_90a", ""},
		{"fence.proxy.async", "fence.proxy.async;\nfence.proxy.async.shared::cta;\nfence.proxy.async.global;", "sm_90a", ""},
		{"fence.proxy.async on sm_80", "fence.proxy.async;", "sm_80", "needs .target sm_90"},
		{"fence.proxy.tensormap", "fence.proxy.tensormap::generic.acquire.sys [%rd1], 128;\nfence.proxy.tensormap::generic.acquire.gpu [%rd1+128], 128;", "sm_90a", ""},
		{"fence.proxy.tensormap size", "fence.proxy.tensormap::generic.acquire.sys [%rd1], 64;", "sm_90a", "must be 128"},
		{"fence.proxy.tensormap scope", "fence.proxy.tensormap::generic.acquire [%rd1], 128;", "sm_90a", "expected fence.proxy.tensormap"},
		{"fence.proxy.tensormap release", "fence.proxy.tensormap::generic.release.sys;", "sm_90a", "expected fence.proxy.tensormap"},
		{"fence.proxy.tensormap on sm_80", "fence.proxy.tensormap::generic.acquire.sys [%rd1], 128;", "sm_80", "needs .target sm_90"},
		{"fence.proxy.tensormap address", "fence.proxy.tensormap::generic.acquire.sys %rd1, 128;", "sm_90a", "expected an address"},
	} {
		target := tc.target
		if target == "" {
			target = "sm_90a"
		}
		got := wgErr(t, tc.body, target)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: error %q, want %q", tc.name, got, tc.want)
		}
	}
}
