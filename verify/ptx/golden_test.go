package ptx

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The goldens in testdata/h200 were recorded on an NVIDIA H200 by
// testdata/record.cu (see testdata/README.md). Each test below replays every
// recorded case through the interpreter with a PTX program that does what
// record.cu's kernel does: load the inputs from global memory, execute the
// instruction, store the outputs.

func loadGolden(t testing.TB, name string, v any) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "h200", name+".gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(z).Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// launch parses src, runs kernel and fails the test on any error.
func launch(t testing.TB, dev *Device, src, kernel string, grid, block [3]int, dyn int, params ...any) *Stats {
	t.Helper()
	m, err := Parse(kernel+".ptx", src)
	if err != nil {
		t.Fatalf("parse:\n%v", err)
	}
	st, err := dev.Launch(m, kernel, grid, block, dyn, params...)
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	return st
}

func mustAlloc(t testing.TB, dev *Device, n int) uint64 {
	t.Helper()
	a, err := dev.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func putU32(t testing.TB, dev *Device, v []uint32) uint64 {
	t.Helper()
	a := mustAlloc(t, dev, 4*len(v))
	if err := dev.WriteU32(a, v); err != nil {
		t.Fatal(err)
	}
	return a
}

func getU32(t testing.TB, dev *Device, a uint64, n int) []uint32 {
	t.Helper()
	v, err := dev.ReadU32(a, n)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const mmaPTX = `
.version 8.0
.target sm_80
.address_size 64

// record.cu k_mma: lane = tid.x, case = ctaid.x
.visible .entry k_mma(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)
{
	.reg .b32 %r<16>;
	.reg .f32 %f<8>;
	.reg .b64 %rd<12>;
	ld.param.u64 %rd1, [pa];
	ld.param.u64 %rd2, [pb];
	ld.param.u64 %rd3, [pc];
	ld.param.u64 %rd4, [pd];
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	cvta.to.global.u64 %rd3, %rd3;
	cvta.to.global.u64 %rd4, %rd4;
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %ctaid.x;
	mad.lo.s32 %r3, %r2, 32, %r1;        // c*32 + lane
	mul.wide.u32 %rd5, %r3, 16;          // 4 words per lane
	mul.wide.u32 %rd6, %r3, 8;           // 2 words per lane
	add.s64 %rd7, %rd1, %rd5;
	add.s64 %rd8, %rd2, %rd6;
	add.s64 %rd9, %rd3, %rd5;
	add.s64 %rd10, %rd4, %rd5;
	ld.global.v4.b32 {%r4, %r5, %r6, %r7}, [%rd7];
	ld.global.v2.b32 {%r8, %r9}, [%rd8];
	ld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd9];
	mma.sync.aligned.m16n8k16.row.col.f32.TYPE.TYPE.f32 {%f4, %f5, %f6, %f7}, {%r4, %r5, %r6, %r7}, {%r8, %r9}, {%f0, %f1, %f2, %f3};
	st.global.v4.f32 [%rd10], {%f4, %f5, %f6, %f7};
	ret;
}
`

func TestGoldenMMA(t *testing.T) {
	for _, typ := range []string{"bf16", "f16"} {
		t.Run(typ, func(t *testing.T) {
			var g struct {
				Instruction string
				Cases       []struct{ A, B, C, D []uint32 }
			}
			loadGolden(t, "mma_"+typ+".json", &g)
			if len(g.Cases) != 256 {
				t.Fatalf("%d cases", len(g.Cases))
			}
			var A, B, C, D []uint32
			for _, c := range g.Cases {
				A, B, C, D = append(A, c.A...), append(B, c.B...), append(C, c.C...), append(D, c.D...)
			}
			dev := NewDevice()
			pa, pb, pc := putU32(t, dev, A), putU32(t, dev, B), putU32(t, dev, C)
			pd := mustAlloc(t, dev, 4*len(D))
			src := strings.ReplaceAll(mmaPTX, "TYPE", typ)
			launch(t, dev, src, "k_mma", [3]int{256, 1, 1}, [3]int{32, 1, 1}, 0, pa, pb, pc, pd)
			got := getU32(t, dev, pd, len(D))
			bad := 0
			for i := range D {
				if got[i] != D[i] {
					if bad < 10 {
						t.Errorf("case %d lane %d d[%d]: got %08x, H200 %08x", i/128, i%128/4, i%4, got[i], D[i])
					}
					bad++
				}
			}
			if bad > 0 {
				t.Fatalf("%s: %d of %d outputs differ from the H200", g.Instruction, bad, len(D))
			}
			t.Logf("%s: %d cases x 128 outputs bit-exact", g.Instruction, len(g.Cases))
		})
	}
}

const ldmatrixPTX = `
.version 8.0
.target sm_80
.address_size 64

// record.cu k_ldmatrix: shared memory holds u16 values equal to their index
.visible .entry k_ldm(.param .u64 poffs, .param .u64 pout)
{
	.shared .align 16 .b8 sm[4096];
	.reg .pred %p<2>;
	.reg .b16 %h<2>;
	.reg .b32 %r<16>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [poffs];
	ld.param.u64 %rd2, [pout];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, sm;
	mov.u32 %r4, %r1;                    // i = lane
FILL:
	cvt.u16.u32 %h1, %r4;
	shl.b32 %r5, %r4, 1;
	add.s32 %r5, %r5, %r3;
	st.shared.u16 [%r5], %h1;
	add.s32 %r4, %r4, 32;
	setp.lt.u32 %p1, %r4, 2048;
	@%p1 bra FILL;
	bar.warp.sync 0xffffffff;
	mad.lo.s32 %r6, %r2, 32, %r1;
	mul.wide.u32 %rd3, %r6, 4;
	add.s64 %rd4, %rd1, %rd3;
	ld.global.u32 %r7, [%rd4];
	add.s32 %r8, %r3, %r7;               // shared address
	mov.b32 %r10, 0;
	mov.b32 %r11, 0;
	mov.b32 %r12, 0;
	mov.b32 %r13, 0;
	ldmatrix.sync.aligned.m8n8.SHAPE.shared.b16 DSTS, [%r8];
	mul.wide.u32 %rd5, %r6, 16;
	add.s64 %rd6, %rd2, %rd5;
	st.global.v4.u32 [%rd6], {%r10, %r11, %r12, %r13};
	ret;
}
`

func TestGoldenLdmatrix(t *testing.T) {
	var g struct {
		Variants map[string][]struct{ Offsets, Out []uint32 }
	}
	loadGolden(t, "ldmatrix.json", &g)
	if len(g.Variants) != 6 {
		t.Fatalf("%d variants", len(g.Variants))
	}
	for _, v := range []string{"x1", "x2", "x4", "x1.trans", "x2.trans", "x4.trans"} {
		cases := g.Variants[v]
		dsts := map[byte]string{'1': "{%r10}", '2': "{%r10, %r11}", '4': "{%r10, %r11, %r12, %r13}"}[v[1]]
		src := strings.NewReplacer("SHAPE", v, "DSTS", dsts).Replace(ldmatrixPTX)
		var offs, want []uint32
		for _, c := range cases {
			offs, want = append(offs, c.Offsets...), append(want, c.Out...)
		}
		dev := NewDevice()
		po := putU32(t, dev, offs)
		pout := mustAlloc(t, dev, 4*len(want))
		launch(t, dev, src, "k_ldm", [3]int{len(cases), 1, 1}, [3]int{32, 1, 1}, 0, po, pout)
		got := getU32(t, dev, pout, len(want))
		bad := 0
		for i := range want {
			if got[i] != want[i] {
				if bad < 5 {
					t.Errorf("%s case %d lane %d r%d: got %08x, H200 %08x", v, i/128, i%128/4, i%4, got[i], want[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("ldmatrix %s: %d of %d registers differ", v, bad, len(want))
		} else {
			t.Logf("ldmatrix.%s: %d cases bit-exact", v, len(cases))
		}
	}
}

const unaryPTX = `
.version 8.0
.target sm_80
.address_size 64

// record.cu k_unary / k_cvt: i = ctaid.x*ntid.x + tid.x
.visible .entry k_unary(.param .u64 pin, .param .u64 pout, .param .u32 n)
{
	.reg .pred %p<2>;
	.reg .b32 %r<8>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [pin];
	ld.param.u64 %rd2, [pout];
	ld.param.u32 %r1, [n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ge.s32 %p1, %r5, %r1;
	@%p1 ret;
	mul.wide.s32 %rd3, %r5, 4;
	add.s64 %rd4, %rd1, %rd3;
	add.s64 %rd5, %rd2, %rd3;
	ld.global.f32 %f1, [%rd4];
	OP %f2, %f1;
	st.global.f32 [%rd5], %f2;
	ret;
}
`

const cvtPTX = `
.version 8.0
.target sm_80
.address_size 64

.visible .entry k_cvt(.param .u64 pa, .param .u64 pb, .param .u64 pout, .param .u32 n)
{
	.reg .pred %p<2>;
	.reg .b32 %r<8>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<10>;
	ld.param.u64 %rd1, [pa];
	ld.param.u64 %rd2, [pb];
	ld.param.u64 %rd3, [pout];
	ld.param.u32 %r1, [n];
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %ntid.x;
	mov.u32 %r4, %tid.x;
	mad.lo.s32 %r5, %r2, %r3, %r4;
	setp.ge.s32 %p1, %r5, %r1;
	@%p1 ret;
	mul.wide.s32 %rd4, %r5, 4;
	add.s64 %rd5, %rd1, %rd4;
	add.s64 %rd6, %rd2, %rd4;
	add.s64 %rd7, %rd3, %rd4;
	ld.global.f32 %f1, [%rd5];
	ld.global.f32 %f2, [%rd6];
	CVT %r6, %f1, %f2;
	st.global.u32 [%rd7], %r6;
	ret;
}
`

// ulps is the distance between two f32 bit patterns in units in the last
// place (adjacent floats are 1 apart; +0 and -0 are 0 apart).
func ulps(a, b uint32) int64 {
	ord := func(u uint32) int64 {
		if u&0x80000000 != 0 {
			return -int64(u & 0x7fffffff)
		}
		return int64(u)
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}

func isNaN32(u uint32) bool { return u&0x7fffffff > 0x7f800000 }

// replayUnary runs op over in and compares with the H200's outputs. It
// returns the histogram of ulp distances and fails on NaN mismatches and on
// distances above maxULP.
func replayUnary(t *testing.T, op string, in, want []uint32, maxULP int64) map[int64]int {
	t.Helper()
	dev := NewDevice()
	pin := putU32(t, dev, in)
	pout := mustAlloc(t, dev, 4*len(in))
	n := len(in)
	launch(t, dev, strings.Replace(unaryPTX, "OP", op, 1), "k_unary", [3]int{(n + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, pin, pout, uint32(n))
	got := getU32(t, dev, pout, n)
	hist := map[int64]int{}
	bad := 0
	for i := range in {
		var d int64
		switch {
		case isNaN32(want[i]) || isNaN32(got[i]):
			if got[i] != want[i] {
				d = math.MaxInt32
			}
		default:
			d = ulps(got[i], want[i])
		}
		hist[d]++
		if d > maxULP {
			if bad < 10 {
				t.Errorf("%s(%08x = %g): got %08x, H200 %08x (%d ulp)", op, in[i], math.Float32frombits(in[i]), got[i], want[i], d)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d results beyond %d ulp", op, bad, n, maxULP)
	}
	return hist
}

func histString(h map[int64]int) string {
	var keys []int64
	for k := range h {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d ulp: %d", k, h[k]))
	}
	return strings.Join(parts, ", ")
}

// The measured distributions are pinned, so that a change to the models
// shows up here.
func TestGoldenEx2(t *testing.T) {
	var g struct {
		In   []uint32
		Ex2  []uint32 `json:"ex2.approx.f32"`
		Ex2F []uint32 `json:"ex2.approx.ftz.f32"`
	}
	loadGolden(t, "ex2.json", &g)
	h := replayUnary(t, "ex2.approx.f32", g.In, g.Ex2, 2)
	t.Logf("ex2.approx.f32 vs H200 over %d inputs: %s", len(g.In), histString(h))
	if h[0] != 24682 || h[1] != 7990 || h[2] != 96 {
		t.Errorf("ex2.approx.f32 distribution changed: %s", histString(h))
	}
	h = replayUnary(t, "ex2.approx.ftz.f32", g.In, g.Ex2F, 2)
	t.Logf("ex2.approx.ftz.f32 vs H200 over %d inputs: %s", len(g.In), histString(h))
}

func TestGoldenRcp(t *testing.T) {
	var g struct {
		In []uint32
		Ap []uint32 `json:"rcp.approx.ftz.f32"`
		RN []uint32 `json:"rcp.rn.f32"`
	}
	loadGolden(t, "rcp.json", &g)
	h := replayUnary(t, "rcp.approx.ftz.f32", g.In, g.Ap, 1)
	t.Logf("rcp.approx.ftz.f32 vs H200 over %d inputs: %s", len(g.In), histString(h))
	h = replayUnary(t, "rcp.rn.f32", g.In, g.RN, 0)
	t.Logf("rcp.rn.f32 vs H200 over %d inputs: %s", len(g.In), histString(h))
}

func TestGoldenCvt(t *testing.T) {
	var g struct {
		A, B []uint32
		BF   []uint32 `json:"cvt.rn.bf16x2.f32"`
		HF   []uint32 `json:"cvt.rn.f16x2.f32"`
	}
	loadGolden(t, "cvt.json", &g)
	for _, c := range []struct {
		op   string
		want []uint32
	}{{"cvt.rn.bf16x2.f32", g.BF}, {"cvt.rn.f16x2.f32", g.HF}} {
		dev := NewDevice()
		pa, pb := putU32(t, dev, g.A), putU32(t, dev, g.B)
		n := len(g.A)
		pout := mustAlloc(t, dev, 4*n)
		launch(t, dev, strings.Replace(cvtPTX, "CVT", c.op, 1), "k_cvt", [3]int{(n + 255) / 256, 1, 1}, [3]int{256, 1, 1}, 0, pa, pb, pout, uint32(n))
		got := getU32(t, dev, pout, n)
		bad := 0
		for i := range got {
			if got[i] != c.want[i] {
				if bad < 10 {
					t.Errorf("%s(%08x, %08x): got %08x, H200 %08x", c.op, g.A[i], g.B[i], got[i], c.want[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d differ", c.op, bad, n)
		} else {
			t.Logf("%s: %d cases bit-exact", c.op, n)
		}
	}
}
