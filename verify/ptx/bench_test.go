package ptx

import "testing"

// loopPTX is integer and f32 work in a loop with shared memory traffic and a
// barrier per iteration: the mix of a kernel's non-mma instructions.
const loopPTX = `
.version 8.0
.target sm_80
.address_size 64
.visible .entry loop(.param .u64 pout, .param .u32 iters)
{
	.shared .align 4 .f32 buf[128];
	.reg .pred %p<2>;
	.reg .b32 %r<12>;
	.reg .f32 %f<6>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [pout];
	ld.param.u32 %r1, [iters];
	mov.u32 %r2, %tid.x;
	shl.b32 %r3, %r2, 2;
	mov.u32 %r4, buf;
	add.s32 %r4, %r4, %r3;
	xor.b32 %r9, %r3, 4;
	mov.u32 %r10, buf;
	add.s32 %r10, %r10, %r9;          // neighbour's slot
	cvt.rn.f32.u32 %f1, %r2;
	mov.f32 %f2, 0f3F800000;
	mov.u32 %r5, 0;
LOOP:
	fma.rn.f32 %f2, %f2, 0f3F7FFFF0, %f1;
	st.shared.f32 [%r4], %f2;
	bar.sync 0;
	ld.shared.f32 %f3, [%r10];
	add.rn.f32 %f1, %f1, %f3;
	mul.rn.f32 %f1, %f1, 0f3F000000;
	mad.lo.s32 %r6, %r5, 3, %r2;
	and.b32 %r6, %r6, 7;
	add.s32 %r5, %r5, 1;
	setp.lt.u32 %p1, %r5, %r1;
	bar.sync 0;
	@%p1 bra.uni LOOP;
	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.f32 [%rd3], %f1;
	ret;
}
`

func BenchmarkLoopKernel(b *testing.B) {
	m, err := Parse("loop.ptx", loopPTX)
	if err != nil {
		b.Fatal(err)
	}
	dev := NewDevice()
	out := mustAlloc(b, dev, 4*128)
	var instr, lanes int64
	b.ResetTimer()
	for range b.N {
		st, err := dev.Launch(m, "loop", [3]int{4, 1, 1}, [3]int{128, 1, 1}, 0, out, uint32(500))
		if err != nil {
			b.Fatal(err)
		}
		instr += st.WarpInstructions
		lanes += st.ThreadInstructions
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(instr)/s, "warp-instr/s")
	b.ReportMetric(float64(lanes)/s, "thread-instr/s")
}

func BenchmarkSoftmaxKernel(b *testing.B) {
	m, err := Parse("softmax.ptx", softmaxPTX)
	if err != nil {
		b.Fatal(err)
	}
	dev := NewDevice()
	const rows = 64
	in := mustAlloc(b, dev, rows*128*4)
	out := mustAlloc(b, dev, rows*128*4)
	x := make([]float32, rows*128)
	for i := range x {
		x[i] = float32(i%37) * 0.25
	}
	if err := dev.WriteF32(in, x); err != nil {
		b.Fatal(err)
	}
	var instr, lanes int64
	b.ResetTimer()
	for range b.N {
		st, err := dev.Launch(m, "softmax", [3]int{rows / 4, 1, 1}, [3]int{128, 1, 1}, 0, in, out, uint32(rows))
		if err != nil {
			b.Fatal(err)
		}
		instr += st.WarpInstructions
		lanes += st.ThreadInstructions
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(instr)/s, "warp-instr/s")
	b.ReportMetric(float64(lanes)/s, "thread-instr/s")
}
