package ptx

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// aluPTX gives every lane three 64-bit inputs (%rd1..%rd3, their low halves
// in %r1..%r3 and, as f32, %f1..%f3) and stores %rd0 after BODY runs.
// %r7 holds the lane id.
const aluPTX = `
.version 8.0
.target sm_80
.address_size 64
.visible .entry alu(.param .u64 pin, .param .u64 pout, .param .s32 ps)
{
	.shared .align 8 .b8 sbuf[256];
	.reg .pred %p<4>;
	.reg .b16 %h<4>;
	.reg .b32 %r<8>;
	.reg .s32 %s<4>;
	.reg .b64 %rd<12>;
	.reg .f32 %f<4>;
	ld.param.u64 %rd8, [pin];
	ld.param.u64 %rd9, [pout];
	mov.u32 %r7, %laneid;
	mul.wide.u32 %rd10, %r7, 24;
	add.s64 %rd10, %rd8, %rd10;
	ld.global.u64 %rd1, [%rd10];
	ld.global.u64 %rd2, [%rd10+8];
	ld.global.u64 %rd3, [%rd10+16];
	cvt.u32.u64 %r1, %rd1;
	cvt.u32.u64 %r2, %rd2;
	cvt.u32.u64 %r3, %rd3;
	mov.b32 %f1, %r1;
	mov.b32 %f2, %r2;
	mov.b32 %f3, %r3;
BODY
	mul.wide.u32 %rd11, %r7, 8;
	add.s64 %rd11, %rd9, %rd11;
	st.global.u64 [%rd11], %rd0;
	ret;
}
`

const (
	r32 = "\n\tcvt.u64.u32 %rd0, %r0;"
	f32 = "\n\tmov.b32 %r0, %f0;\n\tcvt.u64.u32 %rd0, %r0;"
	p1  = "\n\tselp.u32 %r0, 1, 0, %p1;" + r32
)

func fb(f float32) uint64 { return uint64(math.Float32bits(f)) }

func TestALU(t *testing.T) {
	m641 := fb(641)
	cases := []struct {
		name    string
		body    string
		a, b, c uint64
		want    uint64
		perLane func(l int) uint64 // overrides want
	}{
		{"add.s32 wraps", "add.s32 %r0, %r1, %r2;" + r32, 0x7fffffff, 1, 0, 0x80000000, nil},
		{"sub.u32", "sub.u32 %r0, %r1, %r2;" + r32, 3, 5, 0, 0xfffffffe, nil},
		{"add.s64", "add.s64 %rd0, %rd1, %rd2;", 1 << 40, 1 << 40, 0, 1 << 41, nil},
		{"mul.lo.s32", "mul.lo.s32 %r0, %r1, %r2;" + r32, 0x10000, 0x10001, 0, 0x10000, nil},
		{"mul.hi.u32", "mul.hi.u32 %r0, %r1, %r2;" + r32, 0xffffffff, 0xffffffff, 0, 0xfffffffe, nil},
		{"mul.hi.s32", "mul.hi.s32 %r0, %r1, %r2;" + r32, 0xffffffff, 1, 0, 0xffffffff, nil},
		{"mul.hi.s64", "mul.hi.s64 %rd0, %rd1, %rd2;", math.MaxUint64, 5, 0, math.MaxUint64, nil},
		{"mul.hi.u64", "mul.hi.u64 %rd0, %rd1, %rd2;", 1 << 63, 4, 0, 2, nil},
		{"mul.wide.s32", "mul.wide.s32 %rd0, %r1, %r2;", 0xfffffffe, 3, 0, 0xfffffffffffffffa, nil},
		{"mul.wide.u32", "mul.wide.u32 %rd0, %r1, %r2;", 0xffffffff, 2, 0, 0x1fffffffe, nil},
		{"mad.lo.s32", "mad.lo.s32 %r0, %r1, %r2, %r3;" + r32, 3, 4, 5, 17, nil},
		{"mad.lo.s32 imm", "mad.lo.s32 %r0, %r1, 4, -5;" + r32, 3, 0, 0, 7, nil},
		{"mad.wide.u32", "mad.wide.u32 %rd0, %r1, %r2, %rd3;", 0xffffffff, 0xffffffff, 1, 0xfffffffe00000002, nil},
		{"mad.wide.s32", "mad.wide.s32 %rd0, %r1, %r2, %rd3;", 0xffffffff, 2, 10, 8, nil},
		{"div.s32", "div.s32 %r0, %r1, %r2;" + r32, 0xfffffff9, 2, 0, 0xfffffffd, nil},
		{"rem.s32", "rem.s32 %r0, %r1, %r2;" + r32, 0xfffffff9, 2, 0, 0xffffffff, nil},
		{"div.s32 min/-1", "div.s32 %r0, %r1, %r2;" + r32, 0x80000000, 0xffffffff, 0, 0x80000000, nil},
		{"div.u32", "div.u32 %r0, %r1, %r2;" + r32, 7, 2, 0, 3, nil},
		{"rem.u64", "rem.u64 %rd0, %rd1, %rd2;", 1<<40 + 5, 1 << 20, 0, 5, nil},
		{"min.s32", "min.s32 %r0, %r1, %r2;" + r32, 0xffffffff, 1, 0, 0xffffffff, nil},
		{"min.u32", "min.u32 %r0, %r1, %r2;" + r32, 0xffffffff, 1, 0, 1, nil},
		{"max.s32", "max.s32 %r0, %r1, %r2;" + r32, 0xffffffff, 1, 0, 1, nil},
		{"max.u64", "max.u64 %rd0, %rd1, %rd2;", 1 << 63, 1, 0, 1 << 63, nil},
		{"shl.b32", "shl.b32 %r0, %r1, %r2;" + r32, 1, 31, 0, 0x80000000, nil},
		{"shl.b32 clamps", "shl.b32 %r0, %r1, %r2;" + r32, 1, 33, 0, 0, nil},
		{"shr.u32", "shr.u32 %r0, %r1, 31;" + r32, 0x80000000, 0, 0, 1, nil},
		{"shr.s32", "shr.s32 %r0, %r1, 31;" + r32, 0x80000000, 0, 0, 0xffffffff, nil},
		{"shr.s32 clamps", "shr.s32 %r0, %r1, %r2;" + r32, 0x80000000, 40, 0, 0xffffffff, nil},
		{"shl.b64", "shl.b64 %rd0, %rd1, %r2;", 1, 40, 0, 1 << 40, nil},
		{"shr.b64", "shr.b64 %rd0, %rd1, %r2;", 1 << 63, 63, 0, 1, nil},
		{"and.b32", "and.b32 %r0, %r1, %r2;" + r32, 0xf0f0, 0xff00, 0, 0xf000, nil},
		{"or.b32", "or.b32 %r0, %r1, 0x0f;" + r32, 0xf0, 0, 0, 0xff, nil},
		{"xor.b64", "xor.b64 %rd0, %rd1, %rd2;", 0xff00ff00ff, 0xffffffffff, 0, 0x00ff00ff00, nil},
		{"not.b32", "not.b32 %r0, %r1;" + r32, 0x0f0f0f0f, 0, 0, 0xf0f0f0f0, nil},
		{"neg.s32", "neg.s32 %r0, %r1;" + r32, 5, 0, 0, 0xfffffffb, nil},
		{"abs.s32", "abs.s32 %r0, %r1;" + r32, 0xfffffffb, 0, 0, 5, nil},
		{"setp.lt.s32", "setp.lt.s32 %p1, %r1, %r2;" + p1, 0xffffffff, 1, 0, 1, nil},
		{"setp.lt.u32", "setp.lt.u32 %p1, %r1, %r2;" + p1, 0xffffffff, 1, 0, 0, nil},
		{"setp.hi.u32", "setp.hi.u32 %p1, %r1, %r2;" + p1, 0xffffffff, 1, 0, 1, nil},
		{"setp.ge.s64", "setp.ge.s64 %p1, %rd1, %rd2;" + p1, 5, 5, 0, 1, nil},
		{"setp.ne.b32", "setp.ne.b32 %p1, %r1, %r2;" + p1, 5, 5, 0, 0, nil},
		{"setp.and", "setp.gt.s32 %p2, %r3, 0;\n\tsetp.lt.s32.and %p1, %r1, %r2, %p2;" + p1, 1, 2, 0, 0, nil},
		{"setp.or !p", "setp.gt.s32 %p2, %r3, 0;\n\tsetp.lt.s32.or %p1, %r1, %r2, !%p2;" + p1, 3, 2, 0, 1, nil},
		{"setp pair", "setp.gt.s32 %p2|%p1, %r1, %r2;" + p1, 3, 2, 0, 0, nil},
		{"setp.lt.f32 nan", "setp.lt.f32 %p1, %f1, %f2;" + p1, canonNaN, fb(1), 0, 0, nil},
		{"setp.ltu.f32 nan", "setp.ltu.f32 %p1, %f1, %f2;" + p1, canonNaN, fb(1), 0, 1, nil},
		{"setp.ne.f32 nan", "setp.ne.f32 %p1, %f1, %f2;" + p1, canonNaN, fb(1), 0, 0, nil},
		{"setp.neu.f32 nan", "setp.neu.f32 %p1, %f1, %f2;" + p1, canonNaN, fb(1), 0, 1, nil},
		{"setp.nan.f32", "setp.nan.f32 %p1, %f1, %f2;" + p1, fb(1), canonNaN, 0, 1, nil},
		{"setp.eq.f32 zeros", "setp.eq.f32 %p1, %f1, %f2;" + p1, fb(0), 0x80000000, 0, 1, nil},
		{"setp.gt.ftz.f32", "setp.gt.ftz.f32 %p1, %f1, %f2;" + p1, 1, 0, 0, 0, nil},
		{"pred logic", "setp.eq.s32 %p1, %r1, 1;\n\tsetp.eq.s32 %p2, %r2, 1;\n\txor.pred %p3, %p1, %p2;\n\tnot.pred %p3, %p3;\n\tor.pred %p1, %p3, %p1;\n\tand.pred %p1, %p1, %p2;" + p1, 1, 1, 0, 1, nil},
		{"mov.pred", "setp.eq.s32 %p2, %r1, 1;\n\tmov.pred %p1, %p2;" + p1, 1, 0, 0, 1, nil},
		{"selp.f32", "setp.eq.s32 %p1, %r3, 1;\n\tselp.f32 %f0, %f1, %f2, %p1;" + f32, fb(1), fb(2), 0, fb(2), nil},
		{"mov pack", "cvt.u16.u32 %h1, %r1;\n\tcvt.u16.u32 %h2, %r2;\n\tmov.b32 %r0, {%h1, %h2};" + r32, 0x1234, 0xabcd, 0, 0xabcd1234, nil},
		{"mov unpack", "mov.b32 {%h1, %h2}, %r1;\n\tcvt.u32.u16 %r0, %h2;" + r32, 0xabcd1234, 0, 0, 0xabcd, nil},
		{"mov.b64 pack", "mov.b64 %rd0, {%r1, %r2};", 0x11111111, 0x22222222, 0, 0x2222222211111111, nil},
		{"mov.f32 literal", "mov.f32 %f0, 0f3FC00000;" + f32, 0, 0, 0, fb(1.5), nil},
		{"mov.f32 decimal", "mov.f32 %f0, -2.5;" + f32, 0, 0, 0, fb(-2.5), nil},
		{"mov.u64 hex", "mov.u64 %rd0, 0xFFFFFFFFFFFFFFFF;", 0, 0, 0, math.MaxUint64, nil},
		{"mov.u32 shared symbol", "mov.u32 %r0, sbuf;" + r32, 0, 0, 0, 0, nil},
		{"mov.u32 special", "mov.u32 %r0, %ntid.x;" + r32, 0, 0, 0, 32, nil},
		{"ld.param.s32 widened", "ld.param.s32 %rd0, [ps];", 0, 0, 0, 0xfffffffffffffff9, nil},
		{"cvt.s64.s32", "cvt.s64.s32 %rd0, %r1;", 0xfffffffe, 0, 0, 0xfffffffffffffffe, nil},
		{"cvt.u64.u32", "cvt.u64.u32 %rd0, %r1;", 0xfffffffe, 0, 0, 0xfffffffe, nil},
		{"cvt.s32.s16", "cvt.u16.u32 %h1, %r1;\n\tcvt.s32.s16 %r0, %h1;" + r32, 0x8001, 0, 0, 0xffff8001, nil},
		{"cvt.s32.s8 from 32-bit register", "cvt.s32.s8 %r0, %r1;" + r32, 0x1ff, 0, 0, 0xffffffff, nil},
		{"cvt.u32.u64", "cvt.u32.u64 %r0, %rd1;" + r32, 0x123456789, 0, 0, 0x23456789, nil},
		{"cvt.rn.f32.s32 tie", "cvt.rn.f32.s32 %f0, %r1;" + f32, 16777217, 0, 0, fb(16777216), nil},
		{"cvt.rz.f32.u32", "cvt.rz.f32.u32 %f0, %r1;" + f32, 0xffffffff, 0, 0, 0x4f7fffff, nil},
		{"cvt.rp.f32.u32", "cvt.rp.f32.u32 %f0, %r1;" + f32, 0xffffffff, 0, 0, 0x4f800000, nil},
		{"cvt.rm.f32.s32", "cvt.rm.f32.s32 %f0, %r1;" + f32, uint64(uint32(0xfeffffff)), 0, 0, 0xcb800001, nil},
		{"cvt.rn.f32.u64", "cvt.rn.f32.u64 %f0, %rd1;" + f32, math.MaxUint64, 0, 0, 0x5f800000, nil},
		{"cvt.rzi.s32.f32", "cvt.rzi.s32.f32 %r0, %f1;" + r32, fb(-2.7), 0, 0, 0xfffffffe, nil},
		{"cvt.rni.s32.f32 even", "cvt.rni.s32.f32 %r0, %f1;" + r32, fb(2.5), 0, 0, 2, nil},
		{"cvt.rni.s32.f32 odd", "cvt.rni.s32.f32 %r0, %f1;" + r32, fb(3.5), 0, 0, 4, nil},
		{"cvt.rmi.s32.f32", "cvt.rmi.s32.f32 %r0, %f1;" + r32, fb(-2.5), 0, 0, 0xfffffffd, nil},
		{"cvt.rpi.s32.f32", "cvt.rpi.s32.f32 %r0, %f1;" + r32, fb(2.1), 0, 0, 3, nil},
		{"cvt.rzi.s32.f32 nan", "cvt.rzi.s32.f32 %r0, %f1;" + r32, canonNaN, 0, 0, 0, nil},
		{"cvt.rzi.s32.f32 saturates", "cvt.rzi.s32.f32 %r0, %f1;" + r32, fb(1e10), 0, 0, 0x7fffffff, nil},
		{"cvt.rzi.u32.f32 negative", "cvt.rzi.u32.f32 %r0, %f1;" + r32, fb(-5), 0, 0, 0, nil},
		{"cvt.rzi.s64.f32", "cvt.rzi.s64.f32 %rd0, %f1;", fb(-1e12), 0, 0, 0xffffff172b5b0000, nil},
		{"cvt.rn.bf16.f32", "cvt.rn.bf16.f32 %h1, %f1;\n\tcvt.u32.u16 %r0, %h1;" + r32, fb(1.00390625), 0, 0, 0x3f80, nil},
		{"cvt.f32.bf16", "cvt.u16.u32 %h1, %r1;\n\tcvt.f32.bf16 %f0, %h1;" + f32, 0xc040, 0, 0, fb(-3), nil},
		{"cvt.rn.f16.f32", "cvt.rn.f16.f32 %h1, %f1;\n\tcvt.u32.u16 %r0, %h1;" + r32, fb(1), 0, 0, 0x3c00, nil},
		{"cvt.f32.f16 subnormal", "cvt.u16.u32 %h1, %r1;\n\tcvt.f32.f16 %f0, %h1;" + f32, 0x0001, 0, 0, fb(float32(math.Ldexp(1, -24))), nil},
		{"cvt.rn.bf16x2.f32", "cvt.rn.bf16x2.f32 %r0, %f1, %f2;" + r32, fb(1), fb(-2), 0, 0x3f80c000, nil},
		{"add.rn.f32 tie", "add.rn.f32 %f0, %f1, %f2;" + f32, fb(1), fb(float32(math.Ldexp(1, -24))), 0, fb(1), nil},
		{"sub.rn.f32", "sub.rn.f32 %f0, %f1, %f2;" + f32, fb(1), fb(3), 0, fb(-2), nil},
		{"mul.rn.f32", "mul.rn.f32 %f0, %f1, 0f40000000;" + f32, fb(3), 0, 0, fb(6), nil},
		{"mul.rn.ftz.f32", "mul.rn.ftz.f32 %f0, %f1, %f2;" + f32, fb(float32(math.Ldexp(1, -100))), fb(float32(math.Ldexp(1, -30))), 0, 0, nil},
		{"mul.rn.f32 subnormal", "mul.rn.f32 %f0, %f1, %f2;" + f32, fb(float32(math.Ldexp(1, -100))), fb(float32(math.Ldexp(1, -30))), 0, fb(float32(math.Ldexp(1, -130))), nil},
		{"div.rn.f32", "div.rn.f32 %f0, %f1, %f2;" + f32, fb(1), fb(3), 0, 0x3eaaaaab, nil},
		{"add.rn.f32 nan canonical", "add.rn.f32 %f0, %f1, %f2;" + f32, 0x7fc00001, fb(1), 0, canonNaN, nil},
		// 641*6700417 = 2^32+1: the exact sum is just above a float32
		// midpoint, and float64 rounding would land on the midpoint
		{"fma.rn.f32 no double rounding", "fma.rn.f32 %f0, %f1, %f2, %f3;" + f32, m641, fb(6700417), fb(float32(math.Ldexp(1, 56))), 0x5b800001, nil},
		{"min.f32 nan", "min.f32 %f0, %f1, %f2;" + f32, canonNaN, fb(1), 0, fb(1), nil},
		{"min.f32 zeros", "min.f32 %f0, %f1, %f2;" + f32, 0, 0x80000000, 0, 0x80000000, nil},
		{"max.f32 zeros", "max.f32 %f0, %f1, %f2;" + f32, 0x80000000, 0, 0, 0, nil},
		{"max.f32 both nan", "max.f32 %f0, %f1, %f2;" + f32, 0x7fc00001, 0x7fc00002, 0, canonNaN, nil},
		{"neg.f32", "neg.f32 %f0, %f1;" + f32, fb(2), 0, 0, fb(-2), nil},
		{"abs.f32", "abs.f32 %f0, %f1;" + f32, fb(-2), 0, 0, fb(2), nil},
		{"ex2 -inf", "ex2.approx.ftz.f32 %f0, %f1;" + f32, fb(float32(math.Inf(-1))), 0, 0, 0, nil},
		{"ex2 exact power", "ex2.approx.f32 %f0, %f1;" + f32, fb(-3), 0, 0, fb(0.125), nil},
		{"lg2 power of two", "lg2.approx.ftz.f32 %f0, %f1;" + f32, fb(8), 0, 0, fb(3), nil},
		{"lg2 zero", "lg2.approx.f32 %f0, %f1;" + f32, 0x80000000, 0, 0, fb(float32(math.Inf(-1))), nil},
		{"lg2 negative", "lg2.approx.f32 %f0, %f1;" + f32, fb(-1), 0, 0, canonNaN, nil},
		{"lg2 ftz subnormal", "lg2.approx.ftz.f32 %f0, %f1;" + f32, 1, 0, 0, fb(float32(math.Inf(-1))), nil},
		{"lg2 subnormal", "lg2.approx.f32 %f0, %f1;" + f32, 1, 0, 0, fb(-149), nil},
		{"rcp.approx.ftz subnormal", "rcp.approx.ftz.f32 %f0, %f1;" + f32, 1, 0, 0, 0x7f800000, nil},
		{"rcp.rn.f32 subnormal", "rcp.rn.f32 %f0, %f1;" + f32, fb(float32(math.Ldexp(1, 127))), 0, 0, fb(float32(math.Ldexp(1, -127))), nil},
		{"shfl.up", "shfl.sync.up.b32 %r0, %r7, 1, 0, 0xffffffff;" + r32, 0, 0, 0, 0,
			func(l int) uint64 { return uint64(max(l-1, 0)) }},
		{"shfl.down", "shfl.sync.down.b32 %r0, %r7, 2, 0x1f, 0xffffffff;" + r32, 0, 0, 0, 0,
			func(l int) uint64 {
				if l+2 <= 31 {
					return uint64(l + 2)
				}
				return uint64(l)
			}},
		{"shfl.idx", "shfl.sync.idx.b32 %r0, %r7, 5, 0x1f, 0xffffffff;" + r32, 0, 0, 0, 5, nil},
		{"shfl.idx segments", "shfl.sync.idx.b32 %r0, %r7, 1, 0x181f, 0xffffffff;" + r32, 0, 0, 0, 0,
			func(l int) uint64 { return uint64(l&^7 | 1) }},
		{"shfl.bfly segments", "shfl.sync.bfly.b32 %r0, %r7, 4, 0x181f, 0xffffffff;" + r32, 0, 0, 0, 0,
			func(l int) uint64 { return uint64(l ^ 4) }},
		{"shfl.down pred", "shfl.sync.down.b32 %r0|%p1, %r7, 16, 0x1f, 0xffffffff;" + p1, 0, 0, 0, 0,
			func(l int) uint64 { return uint64(b2i(l < 16)) }},
		{"st/ld shared b8 sign", "mov.u32 %r4, sbuf;\n\tmul.lo.s32 %r5, %r7, 8;\n\tadd.s32 %r4, %r4, %r5;\n\tst.shared.b8 [%r4+3], %r1;\n\tld.shared.s8 %r0, [%r4+3];" + r32, 0x80, 0, 0, 0xffffff80, nil},
		{"st/ld shared v2 b16", "mov.u32 %r4, sbuf;\n\tmul.lo.s32 %r5, %r7, 8;\n\tadd.s32 %r4, %r4, %r5;\n\tcvt.u16.u32 %h1, %r1;\n\tcvt.u16.u32 %h2, %r2;\n\tst.shared.v2.b16 [%r4+4], {%h1, %h2};\n\tld.shared.u32 %r0, [%r4+4];" + r32, 0x1111, 0x2222, 0, 0x22221111, nil},
		{"generic shared", "mov.u64 %rd4, sbuf;\n\tcvta.shared.u64 %rd5, %rd4;\n\tmul.wide.u32 %rd6, %r7, 8;\n\tadd.s64 %rd5, %rd5, %rd6;\n\tst.u64 [%rd5], %rd1;\n\tcvta.to.shared.u64 %rd6, %rd5;\n\tcvt.u32.u64 %r4, %rd6;\n\tld.shared.u64 %rd0, [%r4];", 0x123456789abcdef, 0, 0, 0x123456789abcdef, nil},
		{"generic global", "ld.u64 %rd0, [%rd10+8];", 0, 77, 0, 77, nil},
	}
	dev := NewDevice()
	pin := mustAlloc(t, dev, 32*24)
	pout := mustAlloc(t, dev, 32*8)
	for _, c := range cases {
		src := strings.Replace(aluPTX, "BODY", "\t"+c.body, 1)
		m, err := Parse(c.name+".ptx", src)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		in := make([]byte, 32*24)
		for l := 0; l < 32; l++ {
			binary.LittleEndian.PutUint64(in[l*24:], c.a)
			binary.LittleEndian.PutUint64(in[l*24+8:], c.b)
			binary.LittleEndian.PutUint64(in[l*24+16:], c.c)
		}
		if err := dev.Write(pin, in); err != nil {
			t.Fatal(err)
		}
		if _, err := dev.Launch(m, "alu", [3]int{1, 1, 1}, [3]int{32, 1, 1}, 0, pin, pout, int32(-7)); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		out := make([]byte, 32*8)
		if err := dev.Read(pout, out); err != nil {
			t.Fatal(err)
		}
		for l := 0; l < 32; l++ {
			want := c.want
			if c.perLane != nil {
				want = c.perLane(l)
			}
			if got := binary.LittleEndian.Uint64(out[l*8:]); got != want {
				t.Errorf("%s: lane %d: got %#x, want %#x", c.name, l, got, want)
				break
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
