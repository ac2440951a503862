package ptx

import (
	"strconv"
	"strings"
)

// Decoding of the sm_90 instructions: wgmma, mbarrier, the bulk tensor copy,
// setmaxnreg and the proxy fences. Their semantics are in wgmma.go and
// mbarrier.go.

// wgInfo is what a wgmma.mma_async carries beyond its operands.
type wgInfo struct {
	n          int  // N of m64nNk16
	aRegs      bool // A from registers (else a descriptor)
	f16        bool // .f16 inputs (else .bf16)
	negA, negB bool // imm-scale-a / imm-scale-b of -1
	tA, tB     bool // imm-trans-a / imm-trans-b of 1 (MN-major)
	scaleImm   int8 // scale-d as an immediate 0 or 1; -1: a predicate operand (the last source)
}

// needTarget fails unless the module targets at least sm_NN (with the "a"
// suffix when arch is true).
func (d *decoder) needTarget(what string, nn int, arch bool) {
	t := d.p.mod.Target
	v, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(t, "sm_"), "a"))
	ok := err == nil && v >= nn
	if arch {
		ok = ok && t == "sm_"+strconv.Itoa(nn)+"a"
	}
	if !ok {
		want := "sm_" + strconv.Itoa(nn)
		if arch {
			want += "a"
		}
		d.fail(d.st.tok, "%s needs .target %s (the module targets %s)", what, want, t)
	}
}

// immOf decodes an integer literal operand.
func (d *decoder) immOf(o rawOp, what string) int64 {
	if o.kind != rInt {
		d.fail(o.tok, "%s must be an integer literal", what)
	}
	return int64(o.ival)
}

func (d *decoder) wgmma(in *inst, m *modset) {
	st := d.st
	ops := st.ops
	d.needTarget("wgmma", 90, true)
	switch {
	case m.has("fence"):
		for _, w := range []string{"sync", "aligned"} {
			if !m.has(w) {
				d.fail(st.tok, "expected wgmma.fence.sync.aligned (missing .%s)", w)
			}
		}
		d.nops(0)
		in.op = opWgFence
		return
	case m.has("commit_group"):
		for _, w := range []string{"sync", "aligned"} {
			if !m.has(w) {
				d.fail(st.tok, "expected wgmma.commit_group.sync.aligned (missing .%s)", w)
			}
		}
		d.nops(0)
		in.op = opWgCommit
		return
	case m.has("wait_group"):
		for _, w := range []string{"sync", "aligned"} {
			if !m.has(w) {
				d.fail(st.tok, "expected wgmma.wait_group.sync.aligned N (missing .%s)", w)
			}
		}
		d.nops(1)
		n := d.immOf(ops[0], "wgmma.wait_group's N")
		if n < 0 || n > 64 {
			d.fail(ops[0].tok, "wgmma.wait_group needs a small non-negative constant")
		}
		in.op, in.imm = opWgWait, n
		return
	}
	for _, w := range []string{"mma_async", "sync", "aligned"} {
		if !m.has(w) {
			d.fail(st.tok, "only wgmma.mma_async.sync.aligned, wgmma.fence, wgmma.commit_group and wgmma.wait_group are supported (missing .%s)", w)
		}
	}
	info := &wgInfo{}
	shape := ""
	for i, x := range m.list {
		if !m.used[i] && strings.HasPrefix(x, "m64n") && strings.HasSuffix(x, "k16") {
			m.used[i] = true
			shape = x
		}
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(shape, "m64n"), "k16"))
	if shape == "" || err != nil || n < 8 || n > 256 || n%8 != 0 {
		d.fail(st.tok, "wgmma.mma_async needs a shape .m64nNk16 with N a multiple of 8 in 8..256")
	}
	info.n = n
	ts := m.types()
	if len(ts) != 3 || ts[0] != tF32 || ts[1] != ts[2] || ts[1] != tBF16 && ts[1] != tF16 {
		d.fail(st.tok, "only wgmma.mma_async .f32.bf16.bf16 and .f32.f16.f16 are supported")
	}
	info.f16 = ts[1] == tF16
	if info.f16 {
		in.flags |= flF16
	}
	in.op, in.typ, in.typ2, in.wg = opWgmma, tF32, ts[1], info
	// d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b
	// d, {a0..a3}, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b
	if len(ops) < 2 {
		d.fail(st.tok, "wgmma.mma_async takes 8 operands (7 with A in registers), found %d", len(ops))
	}
	info.aRegs = ops[1].kind == rVec
	if info.aRegs {
		d.nops(7)
	} else {
		d.nops(8)
	}
	for _, r := range d.vec(ops[0], n/2) {
		in.dst = append(in.dst, d.dreg(r, tF32))
	}
	if info.aRegs {
		for _, r := range d.vec(ops[1], 4) {
			in.src = append(in.src, d.dreg(r, tB32))
		}
	} else {
		in.src = append(in.src, d.descReg(ops[1], "a-desc"))
	}
	in.src = append(in.src, d.descReg(ops[2], "b-desc"))
	sd := ops[3]
	switch sd.kind {
	case rInt:
		if sd.ival > 1 {
			d.fail(sd.tok, "scale-d must be a predicate or 0 or 1")
		}
		info.scaleImm = int8(sd.ival)
	default:
		info.scaleImm = -1
		in.src = append(in.src, d.pred(sd, true))
	}
	pm1 := func(o rawOp, what string) bool {
		v := d.immOf(o, what)
		if v != 1 && v != -1 {
			d.fail(o.tok, "%s must be 1 or -1", what)
		}
		return v == -1
	}
	info.negA = pm1(ops[4], "imm-scale-a")
	info.negB = pm1(ops[5], "imm-scale-b")
	b01 := func(o rawOp, what string) bool {
		v := d.immOf(o, what)
		if v != 0 && v != 1 {
			d.fail(o.tok, "%s must be 0 or 1", what)
		}
		return v == 1
	}
	if info.aRegs {
		info.tB = b01(ops[6], "imm-trans-b")
	} else {
		info.tA = b01(ops[6], "imm-trans-a")
		info.tB = b01(ops[7], "imm-trans-b")
	}
}

// descReg decodes a 64-bit matrix-descriptor register.
func (d *decoder) descReg(o rawOp, what string) operand {
	if o.kind != rReg {
		d.fail(o.tok, "%s must be a 64-bit register", what)
	}
	return d.src(o, tB64)
}

// mbarAddr decodes the [addr] of an mbarrier operation (a shared address).
func (d *decoder) mbarSpace(m *modset, what string) {
	switch {
	case m.has("shared"):
		m.has("cta")
	case m.has("shared::cta"):
	default:
		d.fail(d.st.tok, "%s: only .shared::cta (or .shared) mbarrier objects are supported", what)
	}
	if !m.has("b64") {
		d.fail(d.st.tok, "%s needs .b64", what)
	}
}

func (d *decoder) mbarrier(in *inst, m *modset) {
	st := d.st
	ops := st.ops
	d.needTarget("mbarrier", 90, false)
	// memory-order qualifiers are accepted and ignored: the interpreter is
	// sequentially consistent
	m.oneOf("release", "acquire", "relaxed")
	m.oneOf("cta")
	switch {
	case m.has("init"):
		d.mbarSpace(m, "mbarrier.init")
		d.nops(2)
		in.op = opMbarInit
		in.dst = []operand{d.addr(ops[0], spShared)}
		in.src = []operand{d.src(ops[1], tU32)}
	case m.has("inval"):
		d.mbarSpace(m, "mbarrier.inval")
		d.nops(1)
		in.op = opMbarInval
		in.dst = []operand{d.addr(ops[0], spShared)}
	case m.has("arrive"):
		in.op = opMbarArrive
		if m.has("expect_tx") {
			in.flags |= flExpectTx
		}
		if m.has("noComplete") {
			d.fail(st.tok, "mbarrier.arrive.noComplete is not supported")
		}
		d.mbarSpace(m, "mbarrier.arrive")
		if in.flags&flExpectTx != 0 {
			d.nops(3)
		} else {
			d.nops(2, 3)
		}
		if ops[0].kind == rIdent && ops[0].name == "_" {
			in.dst = []operand{{kind: oImm}} // sink
		} else {
			in.dst = []operand{d.dreg(ops[0], tB64)}
		}
		in.src = []operand{d.addr(ops[1], spShared)}
		if len(ops) == 3 {
			in.src = append(in.src, d.src(ops[2], tU32))
		}
	case m.has("expect_tx"):
		d.mbarSpace(m, "mbarrier.expect_tx")
		d.nops(2)
		in.op = opMbarExpectTx
		in.dst = []operand{d.addr(ops[0], spShared)}
		in.src = []operand{d.src(ops[1], tU32)}
	case m.has("try_wait"), m.has("test_wait"):
		in.op = opMbarWait
		if strings.Contains(st.opcode, "try_wait") {
			in.sub = 1
		}
		if m.has("parity") {
			in.flags |= flParity
		}
		d.mbarSpace(m, "mbarrier wait")
		if in.sub == 1 {
			d.nops(3, 4) // an optional suspendTimeHint
		} else {
			d.nops(3)
		}
		in.dst = []operand{d.pred(ops[0], false)}
		in.src = []operand{d.addr(ops[1], spShared)}
		if in.flags&flParity != 0 {
			in.src = append(in.src, d.src(ops[2], tB32))
		} else {
			in.src = append(in.src, d.src(ops[2], tB64))
		}
		if len(ops) == 4 {
			in.src = append(in.src, d.src(ops[3], tU32))
		}
	default:
		d.fail(st.tok, "unsupported mbarrier operation %s", st.opcode)
	}
}

// bulkTensor decodes
// cp.async.bulk.tensor.{1d,..,5d}.shared::cluster.global[.tile].mbarrier::complete_tx::bytes [dst], [tmap, {c0, ..}], [mbar];
func (d *decoder) bulkTensor(in *inst, m *modset) {
	st := d.st
	ops := st.ops
	d.needTarget("cp.async.bulk.tensor", 90, false)
	for _, w := range []string{"async", "bulk", "tensor", "global", "mbarrier::complete_tx::bytes"} {
		if !m.has(w) {
			d.fail(st.tok, "expected cp.async.bulk.tensor.{1d,..,5d}.shared::cluster.global.mbarrier::complete_tx::bytes (missing .%s)", w)
		}
	}
	if m.oneOf("shared::cluster", "shared::cta") == "" {
		d.fail(st.tok, "cp.async.bulk.tensor: the destination must be .shared::cluster (or .shared::cta)")
	}
	m.has("tile")
	switch m.oneOf("1d", "2d", "3d", "4d", "5d") {
	case "1d":
		in.vec = 1
	case "2d":
		in.vec = 2
	case "3d":
		in.vec = 3
	case "4d":
		in.vec = 4
	case "5d":
		in.vec = 5
	default:
		d.fail(st.tok, "cp.async.bulk.tensor: the dimension (.1d to .5d) is missing")
	}
	d.nops(3)
	in.op = opBulkTensor
	in.dst = []operand{d.addr(ops[0], spShared)}
	t := ops[1]
	if t.kind != rAddr || !strings.HasPrefix(t.name, "%") || t.off != 0 || len(t.sub) != int(in.vec) {
		d.fail(t.tok, "expected [tensorMap, {c0, ...}] with a 64-bit register holding the tensor map's address and %d coordinates", in.vec)
	}
	in.src = []operand{d.src(rawOp{kind: rReg, tok: t.tok, name: t.name}, tB64)}
	for _, c := range t.sub {
		if c.kind != rReg {
			d.fail(c.tok, "tensor coordinates must be .s32 registers")
		}
		in.src = append(in.src, d.src(c, tS32))
	}
	in.src = append(in.src, d.addr(ops[2], spShared))
}

func (d *decoder) setmaxnreg(in *inst, m *modset) {
	st := d.st
	d.needTarget("setmaxnreg", 90, true)
	if m.oneOf("inc", "dec") == "" {
		d.fail(st.tok, "setmaxnreg needs .inc or .dec")
	}
	for _, w := range []string{"sync", "aligned", "u32"} {
		if !m.has(w) {
			d.fail(st.tok, "expected setmaxnreg.{inc,dec}.sync.aligned.u32 N (missing .%s)", w)
		}
	}
	d.nops(1)
	n := d.immOf(st.ops[0], "setmaxnreg's register count")
	if n < 24 || n > 256 || n%8 != 0 {
		d.fail(st.ops[0].tok, "setmaxnreg's register count must be a multiple of 8 in 24..256, is %d", n)
	}
	in.op, in.imm = opSetmaxnreg, n
}

func (d *decoder) fence(in *inst, m *modset) {
	st := d.st
	in.op = opNop
	if m.has("proxy") && m.has("tensormap::generic") {
		// fence.proxy.tensormap::generic.acquire.SCOPE [addr], 128: makes a
		// tensor map written through the generic proxy (a host copy, a
		// kernel's stores) visible to the tensor copies that read it; the
		// interpreter's tensor maps are always visible
		d.needTarget("fence.proxy.tensormap", 90, false)
		if !m.has("acquire") || m.oneOf("cta", "cluster", "gpu", "sys") == "" {
			d.fail(st.tok, "expected fence.proxy.tensormap::generic.acquire.{cta,cluster,gpu,sys} [addr], 128")
		}
		d.nops(2)
		in.src = []operand{d.addr(st.ops[0], spGeneric)}
		if n := d.immOf(st.ops[1], "the tensor map's size"); n != 128 {
			d.fail(st.ops[1].tok, "fence.proxy.tensormap's size operand must be 128, is %d", n)
		}
		return
	}
	m.used = make([]bool, len(m.list)) // undo the probe above
	d.nops(0)
	switch {
	case m.has("proxy"):
		if !m.has("async") {
			d.fail(st.tok, "only fence.proxy.async and fence.proxy.tensormap::generic.acquire are supported")
		}
		d.needTarget("fence.proxy.async", 90, false)
		m.oneOf("shared::cta", "shared::cluster", "global")
	case m.has("mbarrier_init"):
		d.needTarget("fence.mbarrier_init", 90, false)
		if !m.has("release") || !m.has("cluster") {
			d.fail(st.tok, "expected fence.mbarrier_init.release.cluster")
		}
	default:
		d.fail(st.tok, "only fence.proxy.async and fence.mbarrier_init.release.cluster are supported")
	}
}
