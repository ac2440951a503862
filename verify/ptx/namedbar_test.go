package ptx

import (
	"strings"
	"testing"
)

// Named barriers (bar.sync a{, b}, barrier.sync, bar.arrive a, b): a
// barrier completes when b threads, counted by whole warps, have arrived;
// bar.arrive does not wait; accesses are ordered by the barriers a warp
// takes part in, and only by those.

// prodCons is a producer warp (warp 3) handing two rounds of 32 words to
// three consumer warps through one buffer: barrier 1 (128 threads: the
// producer arrives, the consumers wait) says the data is there, barrier 2
// (the consumers arrive, the producer waits) that the buffer is free
// again, and barrier 3 (96) joins the consumers. SYNC2 and ID1 are
// replaced by the variants the tests need.
const prodCons = `
	.shared .align 4 .b8 buf[128];
	mov.u32 %r1, %tid.x;
	shr.u32 %r2, %r1, 5;
	and.b32 %r5, %r1, 31;
	shl.b32 %r6, %r5, 2;
	mov.u32 %r7, buf;
	add.s32 %r7, %r7, %r6;
	ld.param.u64 %rd1, [p0];
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	mov.u32 %r12, ID1;
	mov.u32 %r13, 128;
	setp.eq.u32 %p1, %r2, 3;
	@%p1 bra PRODUCER;
	barrier.sync %r12, %r13;
	ld.shared.u32 %r9, [%r7];
	bar.arrive 2, 128;
	bar.sync 1, 128;
	ld.shared.u32 %r10, [%r7];
	add.s32 %r9, %r9, %r10;
	st.global.u32 [%rd3], %r9;
	bar.sync 3, 96;
	ret;
PRODUCER:
	add.s32 %r11, %r5, 100;
	st.shared.u32 [%r7], %r11;
	bar.arrive 1, 128;
	SYNC2
	add.s32 %r11, %r5, 1000;
	st.shared.u32 [%r7], %r11;
	barrier.arrive 1, 128;
	st.global.u32 [%rd3], %r11;`

func prodConsKernel(id1, sync2 string) string {
	return errKernel(strings.NewReplacer("ID1", id1, "SYNC2", sync2).Replace(prodCons))
}

func TestNamedBarrierProducerConsumer(t *testing.T) {
	m, err := Parse("k.ptx", prodConsKernel("1", "bar.sync 2, 128;"))
	if err != nil {
		t.Fatal(err)
	}
	dev := NewDevice()
	out := mustAlloc(t, dev, 4*128)
	st, err := dev.Launch(m, "k", [3]int{1, 1, 1}, [3]int{128, 1, 1}, 0, out, uint32(0))
	if err != nil {
		t.Fatal(err)
	}
	got, err := dev.ReadU32(out, 128)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		want := uint32(2*(i%32) + 1100) // both rounds
		if i >= 96 {
			want = uint32(i%32 + 1000) // the producer's second round
		}
		if v != want {
			t.Fatalf("out[%d] = %d, want %d", i, v, want)
		}
	}
	// barrier 1 twice, 2 and 3 once
	if st.Barriers != 4 {
		t.Errorf("%d barriers completed, want 4", st.Barriers)
	}
}

// TestNamedBarrierOrdering: without the producer's wait for the free
// buffer its second round races with the consumers' first reads; a barrier
// of two warps does not order a third warp's accesses.
func TestNamedBarrierOrdering(t *testing.T) {
	m, err := Parse("k.ptx", prodConsKernel("1", ""))
	if err != nil {
		t.Fatal(err)
	}
	dev := NewDevice()
	out := mustAlloc(t, dev, 4*128)
	_, err = dev.Launch(m, "k", [3]int{1, 1, 1}, [3]int{128, 1, 1}, 0, out, uint32(0))
	if err == nil || !strings.Contains(err.Error(), "race: load of shared offset 0x0 written by warp 3 since the last barrier") {
		t.Errorf("the producer overwriting without waiting: error %v", err)
	}
	sub := errKernel(`
	.shared .align 4 .b8 buf[128];
	mov.u32 %r1, %tid.x;
	shr.u32 %r2, %r1, 5;
	and.b32 %r5, %r1, 31;
	shl.b32 %r6, %r5, 2;
	mov.u32 %r7, buf;
	add.s32 %r7, %r7, %r6;
	setp.eq.u32 %p1, %r2, 0;
	@%p1 st.shared.u32 [%r7], %r1;
	setp.eq.u32 %p2, %r2, 2;
	@%p2 bra READ;
	bar.sync 1, 64;
READ:
	ld.shared.u32 %r9, [%r7];`)
	m, err = Parse("k.ptx", sub)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dev.Launch(m, "k", [3]int{1, 1, 1}, [3]int{96, 1, 1}, 0, out, uint32(0))
	if err == nil || !strings.Contains(err.Error(), "race: load of shared offset 0x0 written by warp 0 since the last barrier") || !strings.Contains(err.Error(), "thread (64,0,0)") {
		t.Errorf("warp 2 reading past a barrier of warps 0 and 1: error %v", err)
	}
}

// TestNamedBarrierWholeWarps: a warp with 16 threads counts 32 arrivals.
func TestNamedBarrierWholeWarps(t *testing.T) {
	src := errKernel(`
	ld.param.u64 %rd1, [p0];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	bar.sync 5, 64;
	st.global.u32 [%rd3], %r1;`)
	m, err := Parse("k.ptx", src)
	if err != nil {
		t.Fatal(err)
	}
	dev := NewDevice()
	out := mustAlloc(t, dev, 4*48)
	st, err := dev.Launch(m, "k", [3]int{1, 1, 1}, [3]int{48, 1, 1}, 0, out, uint32(0))
	if err != nil {
		t.Fatal(err)
	}
	if st.Barriers != 1 {
		t.Errorf("%d barriers, want 1", st.Barriers)
	}
}

// TestNamedBarrierErrors: illegal ids and counts, disagreeing counts,
// deadlocks and exited warps end the launch with an error naming the
// instruction, never a hang.
func TestNamedBarrierErrors(t *testing.T) {
	head := `
	mov.u32 %r1, %tid.x;
	shr.u32 %r2, %r1, 5;
	and.b32 %r5, %r1, 31;
	setp.eq.u32 %p1, %r2, 3;
`
	cases := []struct {
		name  string
		body  string
		block int
		msg   []string
	}{
		{"count not a multiple of 32", "\tmov.u32 %r3, 48;\n\tbar.sync 1, %r3;", 128, []string{"bar.sync 1, %r3", "thread count 48 is not a positive multiple of the warp size"}},
		{"count above the block", "\tbar.sync 1, 256;", 128, []string{"thread count 256 exceeds the block's 128 threads"}},
		{"id above 15", "\tmov.u32 %r3, 17;\n\tbarrier.sync %r3;", 128, []string{"barrier 17: named barriers are 0 to 15"}},
		{"operands differ across lanes", "\tbar.sync %r5, 128;", 128, []string{"lanes of the warp give different operands"}},
		{"counts disagree", "\t@%p1 bra B;\n\tbar.sync 1, 128;\n\tret;\nB:\n\tbar.sync 1, 96;", 128, []string{"bar.sync 1, 96", "expecting 96 threads, others (bar.sync 1, 128) expect 128"}},
		{"deadlock", "\t@%p1 bra B;\n\tbar.sync 1, 128;\n\tret;\nB:\n\tbar.sync 2, 128;", 128, []string{"deadlock", "warp 0: bar.sync 1 (96 of 128 threads arrived)", "warp 3: bar.sync 2 (32 of 128 threads arrived)"}},
		// warps 0-2 arrive (96), then warp 0's sync completes the barrier
		// (128) and it exits; warps 1 and 2 wait in the next generation
		{"a warp's arrive and sync both count", "\t@%p1 bra B;\n\tbar.arrive 1, 128;\n\tbar.sync 1, 128;\n\tret;\nB:\n\tbar.sync 2, 64;", 128, []string{"thread(s) of warp 0 have exited", "64 of 128 arrived"}},
		{"exited warp", "\t@%p1 ret;\n\tbar.sync 1, 128;", 128, []string{"barrier reached while thread(s) of warp 3 have exited", "96 of 128 arrived"}},
		{"exited warp, barrier 0", "\t@%p1 ret;\n\tbar.sync 0;", 128, []string{"barrier reached while thread(s) of warp 3 have exited"}},
		{"some lanes", "\tsetp.lt.u32 %p2, %r5, 8;\n\t@%p2 bar.sync 1, 128;", 128, []string{"executed by only some lanes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Parse("k.ptx", errKernel(head+c.body))
			if err != nil {
				t.Fatal(err)
			}
			dev := NewDevice()
			dev.MaxWarpInstructions = 100000
			p0 := mustAlloc(t, dev, 1024)
			_, err = dev.Launch(m, "k", [3]int{1, 1, 1}, [3]int{c.block, 1, 1}, 0, p0, uint32(32))
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range c.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
	for _, c := range []struct{ body, msg string }{
		{"\tbar.arrive 1;", "bar.arrive 1: bar takes 2 operands"},
		{"\tbar.sync 1, 40;", "barrier thread count 40: it must be a positive multiple of the warp size"},
		{"\tbarrier.sync 16, 64;", "barrier 16: named barriers are 0 to 15"},
		{"\tbar.red.popc.u32 %r1, 1, %p1;", "only bar.sync, barrier.sync, bar.arrive and barrier.arrive"},
	} {
		if _, err := Parse("k.ptx", errKernel(c.body)); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want %q", strings.TrimSpace(c.body), err, c.msg)
		}
	}
}
