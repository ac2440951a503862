package ptx

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// errKernel wraps a body in a module; line 1 of the result is ".version".
// The body starts on line 10.
func errKernel(body string) string {
	body = strings.TrimPrefix(body, "\n")
	return `.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 p0, .param .u32 n)
{
	.reg .pred %p<4>;
	.reg .b32 %r<16>;
	.reg .f32 %f<8>;
	.reg .b64 %rd<8>;
` + body + `
	ret;
}
`
}

func TestRuntimeErrors(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		block int
		dyn   int
		line  int    // line the error must name
		text  string // instruction text the error must quote
		msg   string // substring of the message
	}{
		{"divergent branch", `
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 5;
	@%p1 bra SKIP;
	mov.u32 %r2, 1;
SKIP:`, 32, 0, 12, "@%p1 bra SKIP", "divergent branch: lanes 0,1,2,3,4 take it"},
		{"out of bounds global", `
	ld.param.u64 %rd1, [p0];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	ld.global.u32 %r2, [%rd3+1024];`, 32, 0, 14, "ld.global.u32 %r2, [%rd3+1024]", "out-of-bounds global access of 4 bytes"},
		{"out of bounds shared", `
	.shared .align 4 .b8 buf[128];
	mov.u32 %r1, %tid.x;
	shl.b32 %r2, %r1, 2;
	mov.u32 %r3, buf;
	add.s32 %r3, %r3, %r2;
	st.shared.u32 [%r3+4], %r1;`, 32, 0, 15, "st.shared.u32 [%r3+4], %r1", "out-of-bounds shared access of 4 bytes at offset 0x80"},
		{"misaligned vector", `
	ld.param.u64 %rd1, [p0];
	ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd1+8];`, 32, 0, 11, "ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd1+8]", "misaligned 16-byte access"},
		{"undefined register", `
	mov.u32 %r1, %tid.x;
	add.s32 %r3, %r1, %r2;`, 32, 0, 11, "add.s32 %r3, %r1, %r2", "read of register %r2 before it was written (lanes 0,1,2"},
		{"undefined in some lanes", `
	mov.u32 %r1, %laneid;
	setp.eq.u32 %p1, %r1, 3;
	@%p1 mov.u32 %r2, 7;
	add.s32 %r3, %r2, 1;`, 32, 0, 13, "add.s32 %r3, %r2, 1", "lanes 0,1,2,4,5"},
		{"undefined predicate", `
	@%p2 mov.u32 %r2, 7;`, 32, 0, 10, "@%p2 mov.u32 %r2, 7", "read of register %p2 before it was written"},
		{"division by zero", `
	mov.u32 %r1, %tid.x;
	div.u32 %r2, 10, %r1;`, 32, 0, 11, "div.u32 %r2, 10, %r1", "division by zero"},
		{"shfl with exited lanes", `
	mov.u32 %r1, %laneid;
	setp.gt.u32 %p1, %r1, 15;
	@%p1 ret;
	shfl.sync.bfly.b32 %r2, %r1, 1, 0x1f, 0xffffffff;`, 32, 0, 13, "shfl.sync.bfly.b32 %r2, %r1, 1, 0x1f, 0xffffffff", "needs all 32 lanes"},
		{"barrier after early exit", `
	mov.u32 %r1, %tid.x;
	setp.gt.u32 %p1, %r1, 31;
	@%p1 ret;
	bar.sync 0;`, 64, 0, 13, "bar.sync 0", "barrier reached while thread(s) of warp 1 have exited"},
		{"race between warps", `
	.shared .align 4 .b8 buf[4];
	mov.u32 %r1, %tid.x;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 st.shared.u32 [buf], %r1;
	ld.shared.u32 %r2, [buf];`, 64, 0, 14, "ld.shared.u32 %r2, [buf]", "race: load of shared offset 0x0 written by warp 0 since the last barrier"},
		{"write after read race", `
	.shared .align 4 .b8 buf[4];
	mov.u32 %r1, %tid.x;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 st.shared.u32 [buf], %r1;
	bar.sync 0;
	ld.shared.u32 %r2, [buf];
	setp.eq.u32 %p2, %r1, 32;
	@%p2 st.shared.u32 [buf], %r1;`, 64, 0, 17, "@%p2 st.shared.u32 [buf], %r1", "race: store to shared offset 0x0 read by warp 0 since the last barrier"},
		{"uninitialized shared", `
	.shared .align 4 .b8 buf[64];
	ld.shared.u32 %r2, [buf+8];`, 32, 0, 11, "ld.shared.u32 %r2, [buf+8]", "which no thread of this block has written"},
		{"cp.async not waited", `
	.shared .align 16 .b8 buf[512];
	ld.param.u64 %rd1, [p0];
	mov.u32 %r1, %tid.x;
	shl.b32 %r2, %r1, 4;
	mov.u32 %r3, buf;
	add.s32 %r3, %r3, %r2;
	cvt.u64.u32 %rd2, %r2;
	add.s64 %rd3, %rd1, %rd2;
	cp.async.cg.shared.global [%r3], [%rd3], 16;
	cp.async.commit_group;
	ld.shared.u32 %r4, [%r3];`, 32, 0, 20, "ld.shared.u32 %r4, [%r3]", "a cp.async has not completed (missing cp.async.wait_group?)"},
		{"dynamic shared bounds", `
	.extern .shared .align 16 .b8 dyn[];
	mov.u32 %r1, %tid.x;
	shl.b32 %r2, %r1, 2;
	mov.u32 %r3, dyn;
	add.s32 %r3, %r3, %r2;
	st.shared.u32 [%r3], %r1;`, 64, 128, 15, "st.shared.u32 [%r3], %r1", "shared memory is 128 bytes"},
		{"endless loop", `
LOOP:
	bra.uni LOOP;`, 32, 0, 11, "bra.uni LOOP", "endless loop?"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := errKernel(c.body)
			m, err := Parse("k.ptx", src)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			dev := NewDevice()
			dev.MaxWarpInstructions = 10000
			p0 := mustAlloc(t, dev, 1024)
			_, err = dev.Launch(m, "k", [3]int{1, 1, 1}, [3]int{c.block, 1, 1}, c.dyn, p0, uint32(32))
			if err == nil {
				t.Fatal("no error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not *Error", err, err)
			}
			if e.Line != c.line || e.Text != c.text || !strings.Contains(e.Msg, c.msg) {
				t.Errorf("got  %v\nwant line %d, text %q, message containing %q\nsource line %d: %s", err, c.line, c.text, c.msg,
					c.line, strings.Split(src, "\n")[c.line-1])
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("k.ptx:%d: ", c.line)) {
				t.Errorf("error text %q does not start with file:line", err.Error())
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []string // each must appear in the error text
	}{
		{"unknown instruction", errKernel("\tfrobnicate.u32 %r1, %r2;"), []string{"k.ptx:10:2: frobnicate.u32 %r1, %r2: unknown or unsupported instruction frobnicate.u32"}},
		{"unknown modifier", errKernel("\tadd.sat.s32 %r1, %r2, %r3;"), []string{"k.ptx:10:2: add.sat.s32 %r1, %r2, %r3: unsupported modifier .sat on add"}},
		{"undeclared register", errKernel("\tmov.u32 %r1, %q9;"), []string{"k.ptx:10:15: mov.u32 %r1, %q9: undeclared register %q9"}},
		{"type mismatch", errKernel("\tadd.f32 %f1, %f2, %r3;"), []string{"add.f32 needs .rn"}},
		{"register class", errKernel("\tadd.rn.f32 %f1, %f2, %rd3;"), []string{"k.ptx:10:23:", "register %rd3 is .b64, not compatible with .f32"}},
		{"integer literal for float", errKernel("\tmul.rn.f32 %f1, %f2, 2;"), []string{"integer literal where .f32 is expected"}},
		{"undefined label", errKernel("\tbra.uni NOWHERE;"), []string{"k.ptx:10:10: bra.uni NOWHERE: undefined label NOWHERE"}},
		{"missing semicolon", errKernel("\tmov.u32 %r1, 1\n\tmov.u32 %r2, 2;"), []string{"k.ptx:11:2: expected ',' or ';', found \"mov.u32\""}},
		{"two errors", errKernel("\tfoo;\n\tbar.sync 16;"), []string{"k.ptx:10:2: foo: unknown", "k.ptx:11:11: bar.sync 16: barrier 16: named barriers are 0 to 15"}},
		{"old target", strings.Replace(errKernel(""), "sm_80", "sm_70", 1), []string{"k.ptx:2:9: target sm_70"}},
		{"extern without dot", strings.Replace(errKernel(""), ".address_size 64", ".address_size 64\nextern .shared .align 16 .b8 dyn[];", 1), []string{"write .extern, not extern"}},
		{"shfl mask", errKernel("\tshfl.sync.bfly.b32 %r1, %r2, 1, 0x1f, 0xffff;"), []string{"only the full member mask"}},
		{"mma shape", errKernel("\tmma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%f0,%f1,%f2,%f3}, {%r0,%r1}, {%r2}, {%f4,%f5,%f6,%f7};"), []string{"missing .m16n8k16"}},
		{"vector width", errKernel("\tld.global.v4.f32 {%f0,%f1}, [%rd1];"), []string{"expected a vector of 4 registers"}},
		{"global address register", errKernel("\tld.global.u32 %r1, [%r2];"), []string{"global addresses need a 64-bit register"}},
		{"unterminated comment", "/* oops\n.version 8.0", []string{"k.ptx:1:1: unterminated /* comment"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("k.ptx", c.src)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestLaunchErrors(t *testing.T) {
	m, err := Parse("k.ptx", errKernel(""))
	if err != nil {
		t.Fatal(err)
	}
	dev := NewDevice()
	p0 := mustAlloc(t, dev, 16)
	for _, c := range []struct {
		name   string
		kernel string
		block  [3]int
		dyn    int
		params []any
		want   string
	}{
		{"no kernel", "nope", [3]int{32, 1, 1}, 0, []any{p0, uint32(1)}, `no kernel "nope"`},
		{"param count", "k", [3]int{32, 1, 1}, 0, []any{p0}, "takes 2 parameters, got 1"},
		{"param type", "k", [3]int{32, 1, 1}, 0, []any{p0, float32(1)}, "cannot pass float32(1)"},
		{"param range", "k", [3]int{32, 1, 1}, 0, []any{p0, -1}, "cannot pass int(-1)"},
		{"block size", "k", [3]int{2048, 1, 1}, 0, []any{p0, 1}, "exceed 1024"},
		{"shared size", "k", [3]int{32, 1, 1}, 300 << 10, []any{p0, 1}, "bytes of shared memory exceed"},
	} {
		_, err := dev.Launch(m, c.kernel, [3]int{1, 1, 1}, c.block, c.dyn, c.params...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}
