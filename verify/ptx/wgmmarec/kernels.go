package wgmmarec

import (
	"fmt"
	"strings"
)

// Variant is what a wgmma kernel fixes at compile time: the instruction's
// type, N, where A comes from and which operand is MN-major, and the
// imm-scale-a/b immediates. Swizzle, strides, start addresses and scale-d
// are run-time values (descriptors and a predicate).
type Variant struct {
	Type       string // "bf16" or "f16"
	N          int    // 8..256, a multiple of 8
	A          string // ADescK, ADescMN or ARegs
	BMN        bool   // B MN-major (imm-trans-b = 1)
	NegA, NegB bool   // imm-scale-a/b = -1
}

// Where A comes from.
const (
	ADescK  = "desc-K"  // shared memory, K-major
	ADescMN = "desc-MN" // shared memory, MN-major (imm-trans-a = 1)
	ARegs   = "regs"    // four .b32 registers per thread
)

// Name is the kernel's entry name.
func (v Variant) Name() string {
	a := map[string]string{ADescK: "ak", ADescMN: "amn", ARegs: "ar"}[v.A]
	b := "bk"
	if v.BMN {
		b = "bmn"
	}
	sign := func(neg bool) string {
		if neg {
			return "m"
		}
		return "p"
	}
	return fmt.Sprintf("wg_%s_n%d_%s_%s_%s%s", v.Type, v.N, a, b, sign(v.NegA), sign(v.NegB))
}

func (v Variant) check() error {
	if v.Type != "bf16" && v.Type != "f16" || v.N < 8 || v.N > 256 || v.N%8 != 0 ||
		v.A != ADescK && v.A != ADescMN && v.A != ARegs {
		return fmt.Errorf("wgmmarec: bad variant %+v", v)
	}
	return nil
}

// Instruction is the variant's wgmma.mma_async as it appears in the kernel
// (operands abbreviated).
func (v Variant) Instruction() string {
	return fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s", v.N, v.Type, v.Type)
}

const ptxHeader = `.version 8.0
.target sm_90a
.address_size 64
`

// WgmmaModule is one PTX module holding a kernel for each variant (in
// order, duplicates dropped). Every kernel takes
//
//	(u64 img, u32 nimg, u64 c, u64 a, u64 d, u64 info, u64 desc_a, u64 desc_b, u32 scale_d, u32 fill)
//
// runs as one block of 128 threads with fill+1024 bytes of dynamic shared
// memory (nimg and fill multiples of 2048, nimg <= fill), and writes
// info[0] = the image's shared address (u32), info[1..2] and info[3..4] =
// the descriptors it used (u64). Shared memory from the image's end to fill
// bytes past its start gets padWord's pattern, so that a layout misread that
// runs past the image still reads defined, reproducible values.
func WgmmaModule(vs []Variant) (string, error) {
	var b strings.Builder
	b.WriteString(ptxHeader)
	b.WriteString(".extern .shared .align 1024 .b8 smem[];\n")
	seen := map[string]bool{}
	for _, v := range vs {
		if err := v.check(); err != nil {
			return "", err
		}
		if seen[v.Name()] {
			continue
		}
		seen[v.Name()] = true
		wgmmaKernel(&b, v)
	}
	return b.String(), nil
}

func wgmmaKernel(b *strings.Builder, v Variant) {
	n := v.N
	w := func(f string, a ...any) { fmt.Fprintf(b, "\t"+f+"\n", a...) }
	fmt.Fprintf(b, "\n.visible .entry %s(.param .u64 p_img, .param .u32 p_nimg, .param .u64 p_c, .param .u64 p_a, .param .u64 p_d, .param .u64 p_info, .param .u64 p_da, .param .u64 p_db, .param .u32 p_sc, .param .u32 p_fill)\n.reqntid 128, 1, 1\n{\n", v.Name())
	w(".reg .pred %%p<4>;")
	w(".reg .b32 %%r<16>;")
	w(".reg .b64 %%rd<24>;")
	w(".reg .f32 %%d<%d>;", n/2)
	w(".reg .b32 %%a<4>;")
	w("mov.u32 %%r1, %%tid.x;")
	// the image's shared address: smem rounded up to 1024 bytes (the launch
	// gives 1024 bytes of slack), so that the swizzle patterns, which are
	// functions of the absolute address, start at the image
	w("mov.u32 %%r2, smem;")
	w("add.u32 %%r3, %%r2, 1023;")
	w("and.b32 %%r3, %%r3, 0xfffffc00;")
	// copy the image: thread t moves 16-byte units t, t+128, ...
	w("ld.param.u64 %%rd1, [p_img];")
	w("cvta.to.global.u64 %%rd1, %%rd1;")
	w("ld.param.u32 %%r4, [p_nimg];")
	w("shl.b32 %%r5, %%r1, 4;")
	b.WriteString("COPY:\n")
	w("setp.ge.u32 %%p1, %%r5, %%r4;")
	w("@%%p1 bra COPIED;")
	w("cvt.u64.u32 %%rd2, %%r5;")
	w("add.s64 %%rd3, %%rd1, %%rd2;")
	w("ld.global.v4.u32 {%%r6, %%r7, %%r8, %%r9}, [%%rd3];")
	w("add.u32 %%r10, %%r3, %%r5;")
	w("st.shared.v4.u32 [%%r10], {%%r6, %%r7, %%r8, %%r9};")
	w("add.u32 %%r5, %%r5, 2048;")
	w("bra COPY;")
	b.WriteString("COPIED:\n")
	// the padding after the image: padWord(offset) for each word
	w("ld.param.u32 %%r13, [p_fill];")
	w("shl.b32 %%r5, %%r1, 4;")
	w("add.u32 %%r5, %%r5, %%r4;")
	b.WriteString("PAD:\n")
	w("setp.ge.u32 %%p1, %%r5, %%r13;")
	w("@%%p1 bra PADDED;")
	for i := 0; i < 4; i++ {
		w("add.u32 %%r14, %%r5, %d;", 4*i)
		w("mul.lo.u32 %%r14, %%r14, %d;", padMul)
		w("and.b32 %%r14, %%r14, %#x;", padMask)
		w("or.b32 %%r%d, %%r14, %#x;", 6+i, padBits)
	}
	w("add.u32 %%r10, %%r3, %%r5;")
	w("st.shared.v4.u32 [%%r10], {%%r6, %%r7, %%r8, %%r9};")
	w("add.u32 %%r5, %%r5, 2048;")
	w("bra PAD;")
	b.WriteString("PADDED:\n")
	// the generic-proxy stores must be visible to wgmma's async proxy
	w("fence.proxy.async.shared::cta;")
	w("bar.sync 0;")
	// accumulators: thread t's n/2 words at c + t*2n
	w("ld.param.u64 %%rd4, [p_c];")
	w("cvta.to.global.u64 %%rd4, %%rd4;")
	w("mul.wide.u32 %%rd5, %%r1, %d;", 2*n)
	w("add.s64 %%rd6, %%rd4, %%rd5;")
	for i := 0; i < n/2; i += 4 {
		w("ld.global.v4.f32 {%%d%d, %%d%d, %%d%d, %%d%d}, [%%rd6+%d];", i, i+1, i+2, i+3, 4*i)
	}
	// A fragments: thread t's 4 words at a + 16t
	w("ld.param.u64 %%rd7, [p_a];")
	w("cvta.to.global.u64 %%rd7, %%rd7;")
	w("mul.wide.u32 %%rd8, %%r1, 16;")
	w("add.s64 %%rd9, %%rd7, %%rd8;")
	w("ld.global.v4.u32 {%%a0, %%a1, %%a2, %%a3}, [%%rd9];")
	// descriptors: the start field (bits 0-13, address >> 4) gets the
	// image's address added
	w("ld.param.u64 %%rd10, [p_da];")
	w("ld.param.u64 %%rd11, [p_db];")
	w("shr.u32 %%r11, %%r3, 4;")
	w("cvt.u64.u32 %%rd12, %%r11;")
	w("add.s64 %%rd10, %%rd10, %%rd12;")
	w("add.s64 %%rd11, %%rd11, %%rd12;")
	w("ld.param.u32 %%r12, [p_sc];")
	w("setp.ne.b32 %%p2, %%r12, 0;")
	w("wgmma.fence.sync.aligned;")
	var d []string
	for i := 0; i < n/2; i++ {
		d = append(d, fmt.Sprintf("%%d%d", i))
	}
	sa, sb := 1, 1
	if v.NegA {
		sa = -1
	}
	if v.NegB {
		sb = -1
	}
	tb := 0
	if v.BMN {
		tb = 1
	}
	switch v.A {
	case ARegs:
		w("%s {%s}, {%%a0, %%a1, %%a2, %%a3}, %%rd11, %%p2, %d, %d, %d;", v.Instruction(), strings.Join(d, ", "), sa, sb, tb)
	default:
		ta := 0
		if v.A == ADescMN {
			ta = 1
		}
		w("%s {%s}, %%rd10, %%rd11, %%p2, %d, %d, %d, %d;", v.Instruction(), strings.Join(d, ", "), sa, sb, ta, tb)
	}
	w("wgmma.commit_group.sync.aligned;")
	w("wgmma.wait_group.sync.aligned 0;")
	w("ld.param.u64 %%rd13, [p_d];")
	w("cvta.to.global.u64 %%rd13, %%rd13;")
	w("add.s64 %%rd14, %%rd13, %%rd5;")
	for i := 0; i < n/2; i += 4 {
		w("st.global.v4.f32 [%%rd14+%d], {%%d%d, %%d%d, %%d%d, %%d%d};", 4*i, i, i+1, i+2, i+3)
	}
	w("ld.param.u64 %%rd15, [p_info];")
	w("cvta.to.global.u64 %%rd15, %%rd15;")
	w("setp.eq.u32 %%p3, %%r1, 0;")
	w("@%%p3 st.global.u32 [%%rd15], %%r3;")
	w("@%%p3 st.global.u64 [%%rd15+8], %%rd10;")
	w("@%%p3 st.global.u64 [%%rd15+16], %%rd11;")
	w("ret;")
	b.WriteString("}\n")
}

// The padding pattern: word at byte offset o (from the image's start) is
// (o*padMul & padMask) | padBits: two 16-bit values with bits 11-13 set and
// bit 14 clear, finite numbers of moderate size as bf16 and as f16.
const (
	padMul  = 0x9e3779b1
	padMask = 0x07ff07ff
	padBits = 0x38003800
)

// padWord is the padding pattern's word at byte offset o.
func padWord(o uint32) uint32 { return o*padMul&padMask | padBits }

// CopyKernel is the tensor copy kernel's entry name in CopyModule.
const CopyKernel = "tcopy"

// copyWaitLimit bounds the mbarrier wait loop on a GPU, so that a copy that
// never completes ends the kernel (reported in info[1]) instead of hanging
// the device. The interpreter parks a waiting warp until the phase
// completes, so there the loop runs once.
const copyWaitLimit = 1 << 20

// CopyModule is the PTX module of the tensor-copy kernel
//
//	tcopy(u64 tmap, u64 out, u64 info, u32 c0, u32 c1, u32 bytes)
//
// run as one block of 128 threads with bytes+1024 bytes of dynamic shared
// memory (bytes, the box size, a multiple of 2048). The destination, a
// 1024-byte aligned shared address, is first filled with marker words
// (0xdead0000 + word index); then thread 0 initializes an mbarrier, expects
// bytes on it and issues one cp.async.bulk.tensor.2d of the box at (c0,
// c1); every thread waits for the phase, then the destination's bytes are
// copied to out verbatim. info[0] = the destination's shared address, info[1] = 1 when
// the wait saw the phase complete.
func CopyModule() string {
	var b strings.Builder
	// PTX 8.3 for fence.proxy.tensormap
	b.WriteString(strings.Replace(ptxHeader, ".version 8.0", ".version 8.3", 1))
	b.WriteString(".extern .shared .align 1024 .b8 smem[];\n")
	w := func(f string, a ...any) { fmt.Fprintf(&b, "\t"+f+"\n", a...) }
	fmt.Fprintf(&b, "\n.visible .entry %s(.param .u64 p_tmap, .param .u64 p_out, .param .u64 p_info, .param .u32 p_c0, .param .u32 p_c1, .param .u32 p_bytes)\n.reqntid 128, 1, 1\n{\n", CopyKernel)
	w(".shared .align 8 .b64 mbar;")
	w(".reg .pred %%p<8>;")
	w(".reg .b32 %%r<24>;")
	w(".reg .b64 %%rd<12>;")
	w("mov.u32 %%r1, %%tid.x;")
	w("setp.eq.u32 %%p1, %%r1, 0;")
	w("mov.u32 %%r2, mbar;")
	w("@%%p1 mbarrier.init.shared::cta.b64 [%%r2], 1;")
	w("fence.mbarrier_init.release.cluster;")
	w("mov.u32 %%r3, smem;")
	w("add.u32 %%r4, %%r3, 1023;")
	w("and.b32 %%r4, %%r4, 0xfffffc00;")
	w("ld.param.u32 %%r7, [p_bytes];")
	// mark the destination (word i = 0xdead0000 + i), so that bytes the
	// copy does not write show in the output
	w("shl.b32 %%r9, %%r1, 4;")
	b.WriteString("MARK:\n")
	w("setp.ge.u32 %%p4, %%r9, %%r7;")
	w("@%%p4 bra MARKED;")
	w("shr.u32 %%r11, %%r9, 2;")
	w("or.b32 %%r11, %%r11, 0xdead0000;")
	w("add.u32 %%r12, %%r11, 1;")
	w("add.u32 %%r13, %%r11, 2;")
	w("add.u32 %%r14, %%r11, 3;")
	w("add.u32 %%r10, %%r4, %%r9;")
	w("st.shared.v4.u32 [%%r10], {%%r11, %%r12, %%r13, %%r14};")
	w("add.u32 %%r9, %%r9, 2048;")
	w("bra MARK;")
	b.WriteString("MARKED:\n")
	w("fence.proxy.async.shared::cta;")
	w("bar.sync 0;")
	w("ld.param.u64 %%rd1, [p_tmap];")
	// the map came from the host by a copy into global memory: make it
	// visible to the tensor copy
	w("fence.proxy.tensormap::generic.acquire.sys [%%rd1], 128;")
	w("ld.param.u32 %%r5, [p_c0];")
	w("ld.param.u32 %%r6, [p_c1];")
	w("@%%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%%r2], %%r7;")
	w("@%%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%%r4], [%%rd1, {%%r5, %%r6}], [%%r2];")
	w("mov.u32 %%r8, 0;")
	b.WriteString("WAIT:\n")
	w("mbarrier.try_wait.parity.shared::cta.b64 %%p2, [%%r2], 0;")
	w("add.u32 %%r8, %%r8, 1;")
	w("setp.lt.and.u32 %%p3, %%r8, %d, !%%p2;", copyWaitLimit)
	w("@%%p3 bra WAIT;")
	w("ld.param.u64 %%rd2, [p_out];")
	w("cvta.to.global.u64 %%rd2, %%rd2;")
	w("@!%%p2 bra DONE;")
	w("shl.b32 %%r9, %%r1, 4;")
	b.WriteString("COPY:\n")
	w("setp.ge.u32 %%p4, %%r9, %%r7;")
	w("@%%p4 bra DONE;")
	w("add.u32 %%r10, %%r4, %%r9;")
	w("ld.shared.v4.u32 {%%r11, %%r12, %%r13, %%r14}, [%%r10];")
	w("cvt.u64.u32 %%rd3, %%r9;")
	w("add.s64 %%rd4, %%rd2, %%rd3;")
	w("st.global.v4.u32 [%%rd4], {%%r11, %%r12, %%r13, %%r14};")
	w("add.u32 %%r9, %%r9, 2048;")
	w("bra COPY;")
	b.WriteString("DONE:\n")
	w("ld.param.u64 %%rd5, [p_info];")
	w("cvta.to.global.u64 %%rd5, %%rd5;")
	w("selp.u32 %%r15, 1, 0, %%p2;")
	w("@%%p1 st.global.u32 [%%rd5], %%r4;")
	w("@%%p1 st.global.u32 [%%rd5+4], %%r15;")
	w("ret;")
	b.WriteString("}\n")
	return b.String()
}
