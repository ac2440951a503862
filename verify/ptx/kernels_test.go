package ptx

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// matmulPTX computes C = A * Bt^T (A: MxK bf16 row-major, Bt: NxK bf16
// row-major, C: MxN f32) in 64x32 block tiles with 4 warps. K tiles of 32 are
// double-buffered in dynamic shared memory with cp.async; fragments come from
// ldmatrix.x4 and feed mma.sync.m16n8k16.
const matmulPTX = `
.version 8.0
.target sm_80
.address_size 64

.extern .shared .align 16 .b8 dsm[];   // 2 buffers x (A 64x32 + B 32x32) bf16 = 2 x 6144 bytes

.visible .entry matmul(
	.param .u64 pA,
	.param .u64 pB,
	.param .u64 pC,
	.param .u32 pK,
	.param .u32 pN
)
.reqntid 128, 1, 1
{
	.reg .pred %p<4>;
	.reg .b32 %r<64>;
	.reg .b32 %a<4>;
	.reg .b32 %b<8>;
	.reg .f32 %c<16>;
	.reg .b64 %rd<32>;

	ld.param.u64 %rd1, [pA];
	ld.param.u64 %rd2, [pB];
	ld.param.u64 %rd3, [pC];
	ld.param.u32 %r1, [pK];
	ld.param.u32 %r2, [pN];
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	cvta.to.global.u64 %rd3, %rd3;
	mov.u32 %r3, %tid.x;
	shr.u32 %r4, %r3, 5;              // warp
	and.b32 %r5, %r3, 31;             // lane
	mov.u32 %r6, %ctaid.x;            // n tile
	mov.u32 %r7, %ctaid.y;            // m tile
	mov.u32 %r8, dsm;
	shl.b32 %r9, %r6, 5;              // n0 = 32*ctaid.x
	shl.b32 %r10, %r7, 6;             // m0 = 64*ctaid.y

	// copy sources and destinations: A chunks t and t+128 (row t/4 and t/4+32,
	// 16-byte chunk t%4), B chunk t (row t/4, chunk t%4)
	shr.u32 %r11, %r3, 2;             // t/4
	and.b32 %r12, %r3, 3;             // t%4
	add.s32 %r13, %r10, %r11;         // m0 + t/4
	shl.b32 %r14, %r12, 3;            // 8*(t%4) elements
	mad.lo.s32 %r15, %r13, %r1, %r14; // (m0+t/4)*K + 8*(t%4)
	mul.wide.u32 %rd4, %r15, 2;
	add.s64 %rd5, %rd1, %rd4;         // gA0
	shl.b32 %r16, %r1, 6;             // 32 rows * K * 2 bytes
	cvt.u64.u32 %rd6, %r16;
	add.s64 %rd7, %rd5, %rd6;         // gA1
	add.s32 %r17, %r9, %r11;          // n0 + t/4
	mad.lo.s32 %r18, %r17, %r1, %r14;
	mul.wide.u32 %rd8, %r18, 2;
	add.s64 %rd9, %rd2, %rd8;         // gB
	shl.b32 %r19, %r11, 6;            // (t/4)*64
	shl.b32 %r20, %r12, 4;            // (t%4)*16
	add.s32 %r21, %r19, %r20;
	add.s32 %r22, %r8, %r21;          // sA0
	add.s32 %r23, %r22, 2048;         // sA1
	add.s32 %r24, %r22, 4096;         // sB

	// ldmatrix row addresses
	shr.u32 %r25, %r5, 3;             // i = lane/8
	and.b32 %r26, %r5, 7;             // lane%8
	and.b32 %r27, %r25, 1;
	shl.b32 %r28, %r27, 3;            // (i&1)*8
	shr.u32 %r29, %r25, 1;
	shl.b32 %r30, %r29, 3;            // (i>>1)*8
	shl.b32 %r31, %r4, 4;             // warp*16
	add.s32 %r32, %r31, %r28;
	add.s32 %r32, %r32, %r26;         // A row
	shl.b32 %r33, %r32, 6;
	shl.b32 %r34, %r30, 1;            // A col bytes
	add.s32 %r33, %r33, %r34;
	add.s32 %r35, %r8, %r33;          // sLA
	add.s32 %r36, %r30, %r26;         // B n-row
	shl.b32 %r37, %r36, 6;
	shl.b32 %r38, %r28, 1;            // B k-col bytes
	add.s32 %r37, %r37, %r38;
	add.s32 %r37, %r37, 4096;
	add.s32 %r39, %r8, %r37;          // sLB

	mov.f32 %c0, 0f00000000;
	mov.f32 %c1, 0f00000000;
	mov.f32 %c2, 0f00000000;
	mov.f32 %c3, 0f00000000;
	mov.f32 %c4, 0f00000000;
	mov.f32 %c5, 0f00000000;
	mov.f32 %c6, 0f00000000;
	mov.f32 %c7, 0f00000000;
	mov.f32 %c8, 0f00000000;
	mov.f32 %c9, 0f00000000;
	mov.f32 %c10, 0f00000000;
	mov.f32 %c11, 0f00000000;
	mov.f32 %c12, 0f00000000;
	mov.f32 %c13, 0f00000000;
	mov.f32 %c14, 0f00000000;
	mov.f32 %c15, 0f00000000;

	shr.u32 %r40, %r1, 5;             // KT = K/32
	mov.u32 %r41, 0;                  // kt
	cp.async.cg.shared.global [%r22], [%rd5], 16;
	cp.async.cg.shared.global [%r23], [%rd7], 16;
	cp.async.cg.shared.global [%r24], [%rd9], 16;
	cp.async.commit_group;
LOOP:
	add.s32 %r42, %r41, 1;
	setp.lt.u32 %p1, %r42, %r40;
	@!%p1 bra.uni LAST;
	and.b32 %r43, %r42, 1;
	mul.lo.s32 %r44, %r43, 6144;      // next buffer
	mul.wide.u32 %rd10, %r42, 64;     // next k tile, bytes
	add.s32 %r45, %r22, %r44;
	add.s32 %r46, %r23, %r44;
	add.s32 %r47, %r24, %r44;
	add.s64 %rd11, %rd5, %rd10;
	add.s64 %rd12, %rd7, %rd10;
	add.s64 %rd13, %rd9, %rd10;
	cp.async.cg.shared.global [%r45], [%rd11], 16;
	cp.async.cg.shared.global [%r46], [%rd12], 16;
	cp.async.cg.shared.global [%r47], [%rd13], 16;
	cp.async.commit_group;
	cp.async.wait_group 1;
	bra.uni COMPUTE;
LAST:
	cp.async.wait_group 0;
COMPUTE:
	bar.sync 0;
	and.b32 %r48, %r41, 1;
	mul.lo.s32 %r49, %r48, 6144;
	add.s32 %r50, %r35, %r49;
	add.s32 %r51, %r39, %r49;
	// k 0..15 of the tile
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%a0, %a1, %a2, %a3}, [%r50];
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%b0, %b1, %b2, %b3}, [%r51];
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%b4, %b5, %b6, %b7}, [%r51+1024];
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%c0, %c1, %c2, %c3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3};
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%c4, %c5, %c6, %c7}, {%a0, %a1, %a2, %a3}, {%b2, %b3}, {%c4, %c5, %c6, %c7};
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%c8, %c9, %c10, %c11}, {%a0, %a1, %a2, %a3}, {%b4, %b5}, {%c8, %c9, %c10, %c11};
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%c12, %c13, %c14, %c15}, {%a0, %a1, %a2, %a3}, {%b6, %b7}, {%c12, %c13, %c14, %c15};
	// k 16..31
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%a0, %a1, %a2, %a3}, [%r50+32];
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%b0, %b1, %b2, %b3}, [%r51+32];
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%b4, %b5, %b6, %b7}, [%r51+1056];
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%c0, %c1, %c2, %c3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3};
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%c4, %c5, %c6, %c7}, {%a0, %a1, %a2, %a3}, {%b2, %b3}, {%c4, %c5, %c6, %c7};
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%c8, %c9, %c10, %c11}, {%a0, %a1, %a2, %a3}, {%b4, %b5}, {%c8, %c9, %c10, %c11};
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%c12, %c13, %c14, %c15}, {%a0, %a1, %a2, %a3}, {%b6, %b7}, {%c12, %c13, %c14, %c15};
	bar.sync 0;
	add.s32 %r41, %r41, 1;
	setp.lt.u32 %p2, %r41, %r40;
	@%p2 bra.uni LOOP;

	// C rows m0 + warp*16 + g (+8), columns n0 + 8j + 2t
	shr.u32 %r52, %r5, 2;             // g
	and.b32 %r53, %r5, 3;             // t
	add.s32 %r54, %r10, %r31;
	add.s32 %r54, %r54, %r52;         // row
	shl.b32 %r55, %r53, 1;
	add.s32 %r55, %r55, %r9;          // col
	mad.lo.s32 %r56, %r54, %r2, %r55;
	mul.wide.u32 %rd14, %r56, 4;
	add.s64 %rd15, %rd3, %rd14;
	shl.b32 %r57, %r2, 5;             // 8 rows * N * 4 bytes
	cvt.u64.u32 %rd16, %r57;
	add.s64 %rd17, %rd15, %rd16;
	st.global.v2.f32 [%rd15], {%c0, %c1};
	st.global.v2.f32 [%rd17], {%c2, %c3};
	st.global.v2.f32 [%rd15+32], {%c4, %c5};
	st.global.v2.f32 [%rd17+32], {%c6, %c7};
	st.global.v2.f32 [%rd15+64], {%c8, %c9};
	st.global.v2.f32 [%rd17+64], {%c10, %c11};
	st.global.v2.f32 [%rd15+96], {%c12, %c13};
	st.global.v2.f32 [%rd17+96], {%c14, %c15};
	ret;
}
`

func randBF16(r *rand.Rand, n int) []uint16 {
	v := make([]uint16, n)
	for i := range v {
		v[i] = f32ToBF16(math.Float32bits(float32(r.NormFloat64())))
	}
	return v
}

type matmulCase struct {
	M, N, K int
	A, B    []uint16
	dev     *Device
	pa, pb  uint64
	pc      uint64
}

func newMatmul(t testing.TB, M, N, K int) *matmulCase {
	r := rand.New(rand.NewPCG(1, 2))
	c := &matmulCase{M: M, N: N, K: K, A: randBF16(r, M*K), B: randBF16(r, N*K), dev: NewDevice()}
	c.pa = mustAlloc(t, c.dev, 2*M*K)
	c.pb = mustAlloc(t, c.dev, 2*N*K)
	c.pc = mustAlloc(t, c.dev, 4*M*N)
	if err := c.dev.WriteU16(c.pa, c.A); err != nil {
		t.Fatal(err)
	}
	if err := c.dev.WriteU16(c.pb, c.B); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *matmulCase) run(t testing.TB, m *Module) *Stats {
	st, err := c.dev.Launch(m, "matmul", [3]int{c.N / 32, c.M / 64, 1}, [3]int{128, 1, 1}, 2*6144, c.pa, c.pb, c.pc, uint32(c.K), uint32(c.N))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestMatmulKernel(t *testing.T) {
	m, err := Parse("matmul.ptx", matmulPTX)
	if err != nil {
		t.Fatal(err)
	}
	c := newMatmul(t, 128, 64, 128)
	st := c.run(t, m)
	got, err := c.dev.ReadF32(c.pc, c.M*c.N)
	if err != nil {
		t.Fatal(err)
	}
	// Reference 1, bit for bit: the same chain of mma steps (k in slices of
	// 16, in order) through the mma model.
	// Reference 2: float64, to catch a model that is wrong as a whole.
	maxRel := 0.0
	for i := 0; i < c.M; i++ {
		for j := 0; j < c.N; j++ {
			var acc uint32
			exact := 0.0
			for k0 := 0; k0 < c.K; k0 += 16 {
				acc = refDot(acc, c.A[i*c.K+k0:], c.B[j*c.K+k0:], false)
			}
			for k := 0; k < c.K; k++ {
				exact += float64(math.Float32frombits(bf16ToF32(c.A[i*c.K+k]))) * float64(math.Float32frombits(bf16ToF32(c.B[j*c.K+k])))
			}
			g := got[i*c.N+j]
			if math.Float32bits(g) != acc {
				t.Fatalf("C[%d][%d] = %g, chained mma model %g", i, j, g, math.Float32frombits(acc))
			}
			maxRel = max(maxRel, math.Abs(float64(g)-exact)/math.Sqrt(float64(c.K)))
		}
	}
	if maxRel > 1e-4 {
		t.Errorf("largest error against float64, scaled by sqrt(K): %g", maxRel)
	}
	t.Logf("%dx%dx%d bf16 matmul: bit-exact to the chained mma model; %d warp instructions, %d barriers, %v",
		c.M, c.N, c.K, st.WarpInstructions, st.Barriers, st.Elapsed)
}

// softmaxPTX normalizes rows of 128 floats, one warp per row: each lane holds
// 4 values, the row max and sum come from shfl.sync.bfly butterflies, and
// exp(x - max) = ex2((x - max) * log2(e)).
const softmaxPTX = `
.version 8.0
.target sm_80
.address_size 64

.visible .entry softmax(.param .u64 pin, .param .u64 pout, .param .u32 rows)
{
	.reg .pred %p<2>;
	.reg .b32 %r<16>;
	.reg .f32 %f<32>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [pin];
	ld.param.u64 %rd2, [pout];
	ld.param.u32 %r1, [rows];
	mov.u32 %r2, %tid.x;
	shr.u32 %r3, %r2, 5;             // warp
	and.b32 %r4, %r2, 31;            // lane
	mov.u32 %r5, %ctaid.x;
	mov.u32 %r6, %ntid.x;
	shr.u32 %r6, %r6, 5;             // warps per block
	mad.lo.s32 %r7, %r5, %r6, %r3;   // row
	setp.ge.u32 %p1, %r7, %r1;
	@%p1 bra.uni DONE;               // uniform per warp
	shl.b32 %r8, %r7, 7;
	shl.b32 %r9, %r4, 2;
	add.s32 %r8, %r8, %r9;
	mul.wide.u32 %rd3, %r8, 4;
	add.s64 %rd4, %rd1, %rd3;
	add.s64 %rd5, %rd2, %rd3;
	ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd4];
	max.f32 %f5, %f1, %f2;
	max.f32 %f6, %f3, %f4;
	max.f32 %f7, %f5, %f6;
	shfl.sync.bfly.b32 %f8, %f7, 16, 0x1f, 0xffffffff;
	max.f32 %f7, %f7, %f8;
	shfl.sync.bfly.b32 %f8, %f7, 8, 0x1f, 0xffffffff;
	max.f32 %f7, %f7, %f8;
	shfl.sync.bfly.b32 %f8, %f7, 4, 0x1f, 0xffffffff;
	max.f32 %f7, %f7, %f8;
	shfl.sync.bfly.b32 %f8, %f7, 2, 0x1f, 0xffffffff;
	max.f32 %f7, %f7, %f8;
	shfl.sync.bfly.b32 %f8, %f7, 1, 0x1f, 0xffffffff;
	max.f32 %f7, %f7, %f8;
	sub.rn.f32 %f9, %f1, %f7;
	sub.rn.f32 %f10, %f2, %f7;
	sub.rn.f32 %f11, %f3, %f7;
	sub.rn.f32 %f12, %f4, %f7;
	mul.rn.f32 %f9, %f9, 0f3FB8AA3B;   // log2(e)
	mul.rn.f32 %f10, %f10, 0f3FB8AA3B;
	mul.rn.f32 %f11, %f11, 0f3FB8AA3B;
	mul.rn.f32 %f12, %f12, 0f3FB8AA3B;
	ex2.approx.ftz.f32 %f9, %f9;
	ex2.approx.ftz.f32 %f10, %f10;
	ex2.approx.ftz.f32 %f11, %f11;
	ex2.approx.ftz.f32 %f12, %f12;
	add.rn.f32 %f13, %f9, %f10;
	add.rn.f32 %f14, %f11, %f12;
	add.rn.f32 %f15, %f13, %f14;
	shfl.sync.bfly.b32 %f16, %f15, 16, 0x1f, 0xffffffff;
	add.rn.f32 %f15, %f15, %f16;
	shfl.sync.bfly.b32 %f16, %f15, 8, 0x1f, 0xffffffff;
	add.rn.f32 %f15, %f15, %f16;
	shfl.sync.bfly.b32 %f16, %f15, 4, 0x1f, 0xffffffff;
	add.rn.f32 %f15, %f15, %f16;
	shfl.sync.bfly.b32 %f16, %f15, 2, 0x1f, 0xffffffff;
	add.rn.f32 %f15, %f15, %f16;
	shfl.sync.bfly.b32 %f16, %f15, 1, 0x1f, 0xffffffff;
	add.rn.f32 %f15, %f15, %f16;
	rcp.rn.f32 %f17, %f15;
	mul.rn.f32 %f9, %f9, %f17;
	mul.rn.f32 %f10, %f10, %f17;
	mul.rn.f32 %f11, %f11, %f17;
	mul.rn.f32 %f12, %f12, %f17;
	st.global.v4.f32 [%rd5], {%f9, %f10, %f11, %f12};
DONE:
	ret;
}
`

func TestSoftmaxKernel(t *testing.T) {
	const rows, cols = 10, 128
	r := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 4)
	}
	dev := NewDevice()
	pin := mustAlloc(t, dev, 4*len(x))
	pout := mustAlloc(t, dev, 4*len(x))
	if err := dev.WriteF32(pin, x); err != nil {
		t.Fatal(err)
	}
	// 3 blocks of 4 warps: the last two warps have no row and leave early
	launch(t, dev, softmaxPTX, "softmax", [3]int{3, 1, 1}, [3]int{128, 1, 1}, 0, pin, pout, uint32(rows))
	got, err := dev.ReadF32(pout, len(x))
	if err != nil {
		t.Fatal(err)
	}
	for row := 0; row < rows; row++ {
		v := x[row*cols : row*cols+cols]
		// Go emulation in the kernel's order (lane l holds v[4l:4l+4])
		var part [32]float32
		for l := range part {
			part[l] = max(max(v[4*l], v[4*l+1]), max(v[4*l+2], v[4*l+3]))
		}
		butterfly(&part, func(a, b float32) float32 { return max(a, b) })
		mx := part[0]
		e := make([]float32, cols)
		for i := range e {
			e[i] = ex2Approx(float32((v[i]-mx)*math.Float32frombits(0x3FB8AA3B)), true)
		}
		for l := range part {
			part[l] = (e[4*l] + e[4*l+1]) + (e[4*l+2] + e[4*l+3])
		}
		butterfly(&part, func(a, b float32) float32 { return a + b })
		inv := 1 / part[0]
		// float64 reference
		m64, s64 := math.Inf(-1), 0.0
		for _, f := range v {
			m64 = math.Max(m64, float64(f))
		}
		for _, f := range v {
			s64 += math.Exp(float64(f) - m64)
		}
		for i := range v {
			g := got[row*cols+i]
			if want := e[i] * inv; g != want {
				t.Fatalf("row %d col %d: %g, Go emulation %g", row, i, g, want)
			}
			ref := math.Exp(float64(v[i])-m64) / s64
			if math.Abs(float64(g)-ref) > 1e-6*math.Max(ref, 1e-3) {
				t.Fatalf("row %d col %d: %g, float64 %g", row, i, g, ref)
			}
		}
	}
}

// butterfly reduces 32 lane values the way five shfl.bfly steps do.
func butterfly(p *[32]float32, op func(a, b float32) float32) {
	for s := 16; s >= 1; s /= 2 {
		var q [32]float32
		for l := range p {
			q[l] = op(p[l], p[l^s])
		}
		*p = q
	}
}

func BenchmarkMatmulKernel(b *testing.B) {
	m, err := Parse("matmul.ptx", matmulPTX)
	if err != nil {
		b.Fatal(err)
	}
	c := newMatmul(b, 128, 64, 256)
	var instr, lanes int64
	b.ResetTimer()
	for range b.N {
		st := c.run(b, m)
		instr += st.WarpInstructions
		lanes += st.ThreadInstructions
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(instr)/s, "warp-instr/s")
	b.ReportMetric(float64(lanes)/s, "thread-instr/s")
}

// cpasyncPTX: lane l of warp 0 copies 16 bytes with src-size l%17 into its
// own 16-byte slot; after wait_all and a barrier, warp 1 copies the slots out.
const cpasyncPTX = `
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 pin, .param .u64 pout)
{
	.shared .align 16 .b8 buf[512];
	.reg .pred %p<2>;
	.reg .b32 %r<12>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [pin];
	ld.param.u64 %rd2, [pout];
	mov.u32 %r1, %tid.x;
	and.b32 %r2, %r1, 31;
	shl.b32 %r3, %r2, 4;
	mov.u32 %r4, buf;
	add.s32 %r4, %r4, %r3;               // this lane's slot
	mul.wide.u32 %rd3, %r3, 1;
	setp.lt.u32 %p1, %r1, 32;
	@!%p1 bra.uni READ;
	rem.u32 %r5, %r2, 17;                // src-size
	add.s64 %rd4, %rd1, %rd3;
	cp.async.ca.shared.global [%r4], [%rd4], 16, %r5;
	cp.async.wait_all;
READ:
	bar.sync 0;
	@%p1 bra.uni DONE;
	ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r4];
	add.s64 %rd5, %rd2, %rd3;
	st.global.v4.u32 [%rd5], {%r6, %r7, %r8, %r9};
DONE:
	ret;
}
`

func TestCpAsyncZeroFill(t *testing.T) {
	dev := NewDevice()
	in := make([]byte, 512)
	for i := range in {
		in[i] = byte(i%251 + 1)
	}
	pin := mustAlloc(t, dev, 512)
	pout := mustAlloc(t, dev, 512)
	if err := dev.Write(pin, in); err != nil {
		t.Fatal(err)
	}
	launch(t, dev, cpasyncPTX, "k", [3]int{1, 1, 1}, [3]int{64, 1, 1}, 0, pin, pout)
	out := make([]byte, 512)
	if err := dev.Read(pout, out); err != nil {
		t.Fatal(err)
	}
	for l := 0; l < 32; l++ {
		n := l % 17
		for i := 0; i < 16; i++ {
			want := byte(0)
			if i < n {
				want = in[16*l+i]
			}
			if got := out[16*l+i]; got != want {
				t.Fatalf("lane %d byte %d: got %d, want %d", l, i, got, want)
			}
		}
	}
	// without the barrier, warp 1 reads what warp 0's copies wrote: a race
	src := strings.Replace(cpasyncPTX, "READ:\n\tbar.sync 0;", "READ:", 1)
	m, err := Parse("k.ptx", src)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dev.Launch(m, "k", [3]int{1, 1, 1}, [3]int{64, 1, 1}, 0, pin, pout)
	if err == nil || !strings.Contains(err.Error(), "race: load of shared offset 0x0 written by warp 0") {
		t.Errorf("got %v", err)
	}
}
