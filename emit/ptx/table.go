package ptx

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Op is a PTX instruction of the emitter's subset.
type Op uint8

const (
	OpInvalid Op = iota
	OpLabel      // pseudo: Dst[0] is the label
	OpComment    // pseudo: a comment line
	OpLdParam
	OpMov
	OpAdd
	OpSub
	OpMulLo
	OpMulWide
	OpMadLo
	OpMadWide
	OpDiv
	OpRem
	OpMin
	OpMax
	OpAnd
	OpOr
	OpXor
	OpNot
	OpShl
	OpShr
	OpSetp
	OpSelp
	OpCvtWide   // integer widening cvt.T.T2
	OpCvtNarrow // integer narrowing cvt.T.T2 (keeps the low bits)
	OpCvtF32I   // cvt.rn.f32.T
	OpCvtPack   // cvt.rn.{bf16x2,f16x2}.f32 d, hi, lo
	OpCvtaGlob  // cvta.to.global.u64
	OpLd
	OpSt
	OpCpAsync
	OpCpCommit
	OpCpWait
	OpBar
	OpShflBfly
	OpMma
	OpLdmatrix
	OpLdmatrixT
	OpAddF
	OpSubF
	OpMulF
	OpFma
	OpMaxF
	OpDivF
	OpEx2
	OpLg2
	OpBra
	OpRet
	OpBitcast // mov.b32 between .b32 and .f32 registers
	OpCvtU16  // cvt.u16.u32: the low half of a b32 into a b16 register
	OpCvtF16  // cvt.f32.f16: an IEEE half in a b16 register to f32 (exact)
	OpRcp     // rcp.approx.ftz.f32 (the score stage's tanh refines it with a Newton step)
	OpLdVol   // ld.volatile.shared.T: a staged word (Staged), loaded at each use

	// sm_90 and sm_90a ops of the Hopper forward kernel (hopper.go); the
	// sm_80 kernel uses none of them (hopperOps).
	OpWgFence       // wgmma.fence
	OpWgCommit      // wgmma.commit_group
	OpWgWait        // wgmma.wait_group N
	OpWgmmaSS       // wgmma.mma_async, A and B from descriptors; N is twice the accumulator count
	OpWgmmaRS       // wgmma.mma_async, A from 4 registers, B from a descriptor
	OpMbarInit      // mbarrier.init [bar], count
	OpMbarArriveTx  // mbarrier.arrive.expect_tx state, [bar], bytes
	OpMbarTryWait   // mbarrier.try_wait.parity p, [bar], parity
	OpBulkTensor4   // cp.async.bulk.tensor.4d [dst], [tmap, {c0, c1, c2, c3}], [bar]
	OpBulkTensor5   // cp.async.bulk.tensor.5d [dst], [tmap, {c0, .., c4}], [bar]
	OpFenceProxy    // fence.proxy.async.shared::cta
	OpFenceMbarInit // fence.mbarrier_init.release.cluster
	OpFenceTmap     // fence.proxy.tensormap::generic.acquire.sys [tmap], 128
	OpBarN          // bar.sync a, b: named barrier a of b threads
	OpBarArrive     // bar.arrive a, b
	OpSetmaxnregInc // setmaxnreg.inc.sync.aligned.u32 N
	OpSetmaxnregDec // setmaxnreg.dec.sync.aligned.u32 N
	numOps
)

// opSpec is one row of the op-to-text table.
//
// sig lists the operands, destinations first, one letter each:
//
//	T register (or, as a source, immediate) of the instruction type T
//	W register of twice T's width; Y of the second type T2
//	P predicate (a source may be negated); B b32 register; H b16 register
//	F f32 register or immediate; U u32 register or immediate; I immediate
//	A address (64-bit register, or 32-bit for .shared); S shared address; V vector of registers; L label; X any 32-bit register
//	D b64 register; M tensor-map operand [tmap, {c0, c1, ...}] (TensorCoord), as many coordinates as the op's rank (bulkRank)
type opSpec struct {
	text   string // mnemonic; {T}, {T2}, {C} and {S} are replaced
	types  []Type // allowed T (nil: none)
	types2 []Type // allowed T2 (nil: none)
	sig    string
	nd     int // how many of sig are destinations
	minSM  int // the oldest SM version that has the instruction (0: any)
	// accel: the instruction is architecture-specific: only the target
	// sm_<minSM>a has it (wgmma and setmaxnreg: sm_90a).
	accel bool
}

// bulkRank is the rank of a bulk tensor copy op: its coordinates.
func bulkRank(op Op) int {
	if op == OpBulkTensor5 {
		return 5
	}
	return 4
}

// hopperOps are the ops only the sm_90a forward kernel (hopper.go) uses.
var hopperOps = map[Op]bool{
	OpWgFence: true, OpWgCommit: true, OpWgWait: true, OpWgmmaSS: true, OpWgmmaRS: true,
	OpMbarInit: true, OpMbarArriveTx: true, OpMbarTryWait: true, OpBulkTensor4: true, OpBulkTensor5: true,
	OpFenceProxy: true, OpFenceMbarInit: true, OpFenceTmap: true,
	OpBarN: true, OpBarArrive: true, OpSetmaxnregInc: true, OpSetmaxnregDec: true,
}

// availableOn reports whether target sm_<sm> (sm_<sm>a when accel) has the
// op.
func (sp opSpec) availableOn(sm int, accel bool) bool {
	if sp.accel {
		return accel && sm == sp.minSM
	}
	return sp.minSM <= sm
}

// need names the target an op needs, e.g. "sm_80" or "sm_90a".
func (sp opSpec) need() string {
	if sp.accel {
		return fmt.Sprintf("sm_%da", sp.minSM)
	}
	return fmt.Sprintf("sm_%d", sp.minSM)
}

var (
	ints32 = []Type{S32, U32}
	ints   = []Type{S32, U32, S64, U64}
)

// opTable is the one place an instruction becomes text.
var opTable = [numOps]opSpec{
	OpLdParam:   {text: "ld.param.{T}", types: []Type{U32, S32, U64, F32}, sig: "TA", nd: 1},
	OpMov:       {text: "mov.{T}", types: []Type{U32, S32, B32, U64, S64, B64, F32, Pred}, sig: "TT", nd: 1},
	OpAdd:       {text: "add.{T}", types: ints, sig: "TTT", nd: 1},
	OpSub:       {text: "sub.{T}", types: ints, sig: "TTT", nd: 1},
	OpMulLo:     {text: "mul.lo.{T}", types: ints, sig: "TTT", nd: 1},
	OpMulWide:   {text: "mul.wide.{T}", types: ints32, sig: "WTT", nd: 1},
	OpMadLo:     {text: "mad.lo.{T}", types: ints, sig: "TTTT", nd: 1},
	OpMadWide:   {text: "mad.wide.{T}", types: ints32, sig: "WTTW", nd: 1},
	OpDiv:       {text: "div.{T}", types: ints, sig: "TTT", nd: 1},
	OpRem:       {text: "rem.{T}", types: ints, sig: "TTT", nd: 1},
	OpMin:       {text: "min.{T}", types: ints, sig: "TTT", nd: 1},
	OpMax:       {text: "max.{T}", types: ints, sig: "TTT", nd: 1},
	OpAnd:       {text: "and.{T}", types: []Type{Pred, B32, B64}, sig: "TTT", nd: 1},
	OpOr:        {text: "or.{T}", types: []Type{Pred, B32, B64}, sig: "TTT", nd: 1},
	OpXor:       {text: "xor.{T}", types: []Type{Pred, B32}, sig: "TTT", nd: 1},
	OpNot:       {text: "not.{T}", types: []Type{Pred, B32}, sig: "TT", nd: 1},
	OpShl:       {text: "shl.{T}", types: []Type{B32, B64}, sig: "TTU", nd: 1},
	OpShr:       {text: "shr.{T}", types: []Type{U32, S32, B32, U64, S64}, sig: "TTU", nd: 1},
	OpSetp:      {text: "setp.{C}.{T}", types: []Type{S32, U32, S64, F32}, sig: "PTT", nd: 1},
	OpSelp:      {text: "selp.{T}", types: []Type{S32, U32, B32, S64, F32}, sig: "TTTP", nd: 1},
	OpCvtWide:   {text: "cvt.{T}.{T2}", types: []Type{U64, S64}, types2: ints32, sig: "TY", nd: 1},
	OpCvtNarrow: {text: "cvt.{T}.{T2}", types: ints32, types2: []Type{U64, S64}, sig: "TY", nd: 1},
	OpCvtF32I:   {text: "cvt.rn.f32.{T}", types: ints32, sig: "FT", nd: 1},
	OpCvtPack:   {text: "cvt.rn.{T}.f32", types: []Type{BF16x2, F16x2}, sig: "TFF", nd: 1, minSM: 80},
	OpCvtaGlob:  {text: "cvta.to.global.u64", sig: "DD", nd: 1},
	OpLd:        {text: "ld.{S}.{T}", types: []Type{U32, S32, B32, F32, U64, B64}, sig: "TA", nd: 1},
	OpLdVol:     {text: "ld.volatile.shared.{T}", types: []Type{U32, S32, B32}, sig: "TS", nd: 1},
	OpSt:        {text: "st.{S}.{T}", types: []Type{U32, S32, B32, F32, U64, B64}, sig: "AT", nd: 1},
	OpCpAsync:   {text: "cp.async.cg.shared.global", sig: "SAIU", nd: 1, minSM: 80},
	OpCpCommit:  {text: "cp.async.commit_group", minSM: 80},
	OpCpWait:    {text: "cp.async.wait_group", sig: "I", minSM: 80},
	OpBar:       {text: "bar.sync", sig: "I"},
	OpShflBfly:  {text: "shfl.sync.bfly.b32", sig: "XXIII", nd: 1},
	OpMma:       {text: "mma.sync.aligned.m16n8k16.row.col.f32.{T}.{T}.f32", types: []Type{BF16, F16}, sig: "VVVV", nd: 1, minSM: 80},
	OpLdmatrix:  {text: "ldmatrix.sync.aligned.m8n8.x4.shared.b16", sig: "VS", nd: 1, minSM: 75},
	OpLdmatrixT: {text: "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", sig: "VS", nd: 1, minSM: 75},
	OpAddF:      {text: "add.rn.f32", sig: "FFF", nd: 1},
	OpSubF:      {text: "sub.rn.f32", sig: "FFF", nd: 1},
	OpMulF:      {text: "mul.rn.f32", sig: "FFF", nd: 1},
	OpFma:       {text: "fma.rn.f32", sig: "FFFF", nd: 1},
	OpMaxF:      {text: "max.f32", sig: "FFF", nd: 1},
	OpDivF:      {text: "div.rn.f32", sig: "FFF", nd: 1},
	OpEx2:       {text: "ex2.approx.ftz.f32", sig: "FF", nd: 1},
	OpLg2:       {text: "lg2.approx.ftz.f32", sig: "FF", nd: 1},
	OpBra:       {text: "bra", sig: "L"},
	OpRet:       {text: "ret"},
	OpBitcast:   {text: "mov.b32", sig: "XX", nd: 1},
	OpCvtU16:    {text: "cvt.u16.u32", sig: "HB", nd: 1},
	OpCvtF16:    {text: "cvt.f32.f16", sig: "FH", nd: 1},
	OpRcp:       {text: "rcp.approx.ftz.f32", sig: "FF", nd: 1},

	OpWgFence:       {text: "wgmma.fence.sync.aligned", minSM: 90, accel: true},
	OpWgCommit:      {text: "wgmma.commit_group.sync.aligned", minSM: 90, accel: true},
	OpWgWait:        {text: "wgmma.wait_group.sync.aligned", sig: "I", minSM: 90, accel: true},
	OpWgmmaSS:       {text: "wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{T}.{T}", types: []Type{BF16, F16}, sig: "VDDIIIII", nd: 1, minSM: 90, accel: true},
	OpWgmmaRS:       {text: "wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{T}.{T}", types: []Type{BF16, F16}, sig: "VVDIIII", nd: 1, minSM: 90, accel: true},
	OpMbarInit:      {text: "mbarrier.init.shared::cta.b64", sig: "SU", nd: 1, minSM: 90},
	OpMbarArriveTx:  {text: "mbarrier.arrive.expect_tx.shared::cta.b64", sig: "DSU", nd: 1, minSM: 90},
	OpMbarTryWait:   {text: "mbarrier.try_wait.parity.shared::cta.b64", sig: "PSU", nd: 1, minSM: 90},
	OpBulkTensor4:   {text: "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes", sig: "SMS", nd: 1, minSM: 90},
	OpBulkTensor5:   {text: "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes", sig: "SMS", nd: 1, minSM: 90},
	OpFenceProxy:    {text: "fence.proxy.async.shared::cta", minSM: 90},
	OpFenceMbarInit: {text: "fence.mbarrier_init.release.cluster", minSM: 90},
	OpFenceTmap:     {text: "fence.proxy.tensormap::generic.acquire.sys", sig: "AI", minSM: 90},
	OpBarN:          {text: "bar.sync", sig: "UU"},
	OpBarArrive:     {text: "bar.arrive", sig: "UU"},
	OpSetmaxnregInc: {text: "setmaxnreg.inc.sync.aligned.u32", sig: "I", minSM: 90, accel: true},
	OpSetmaxnregDec: {text: "setmaxnreg.dec.sync.aligned.u32", sig: "I", minSM: 90, accel: true},
}

var cmpOK = map[string]bool{"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true}

func (o Op) spec() (opSpec, bool) {
	if o <= OpComment || o >= numOps || opTable[o].text == "" {
		return opSpec{}, false
	}
	return opTable[o], true
}

func twice(t Type) Type {
	switch t {
	case U32:
		return U64
	case S32:
		return S64
	}
	return NoType
}

// fits reports whether operand o can stand for letter c of a signature.
func fits(c byte, o Operand, in *Inst) error {
	reg := func(t Type) error {
		if o.Kind != KReg {
			return fmt.Errorf("operand %s: want a %s register", o, t)
		}
		if o.Reg.T != regClass(t) {
			return fmt.Errorf("operand %s: register class %s cannot hold %s", o, o.Reg.T, t)
		}
		if o.Reg.ID < 0 {
			return fmt.Errorf("operand %s: bad register number", o)
		}
		return nil
	}
	regOrImm := func(t Type) error {
		switch o.Kind {
		case KImm:
			if t == F32 || t == Pred {
				return fmt.Errorf("operand %s: integer immediate where %s is wanted", o, t)
			}
			if t.Size() == 4 && (o.Imm < math.MinInt32 || o.Imm > math.MaxUint32) {
				return fmt.Errorf("operand %s: immediate does not fit %s", o, t)
			}
			return nil
		case KFImm:
			if t != F32 {
				return fmt.Errorf("operand %s: float immediate where %s is wanted", o, t)
			}
			return nil
		case KSpecial, KSym:
			if t != U32 && t != B32 && t != S32 {
				return fmt.Errorf("operand %s: %s is 32-bit", o, o.Name)
			}
			return nil
		}
		return reg(t)
	}
	switch c {
	case 'T':
		if in.T == Pred {
			if o.Kind != KReg || o.Reg.T != Pred {
				return fmt.Errorf("operand %s: want a predicate", o)
			}
			return nil
		}
		return regOrImm(in.T)
	case 'W':
		return regOrImm(twice(in.T))
	case 'Y':
		return reg(in.T2)
	case 'P':
		if o.Kind != KReg || o.Reg.T != Pred {
			return fmt.Errorf("operand %s: want a predicate", o)
		}
		return nil
	case 'B':
		return regOrImm(B32)
	case 'X':
		if o.Kind == KReg && o.Reg.T == F32 {
			return nil
		}
		return regOrImm(B32)
	case 'D':
		return reg(B64)
	case 'H':
		return reg(B16)
	case 'F':
		return regOrImm(F32)
	case 'U':
		return regOrImm(U32)
	case 'I':
		if o.Kind != KImm {
			return fmt.Errorf("operand %s: want an immediate", o)
		}
		return nil
	case 'A':
		if o.Kind != KAddr {
			return fmt.Errorf("operand %s: want an address", o)
		}
		if o.Name == "" && o.Reg.T != B64 && !(o.Reg.T == B32 && in.Space == "shared") {
			return fmt.Errorf("operand %s: address register must be 64-bit", o)
		}
		return nil
	case 'S':
		if o.Kind != KAddr || o.Name == "" && o.Reg.T != B32 && o.Reg.T != B64 {
			return fmt.Errorf("operand %s: want a shared address", o)
		}
		return nil
	case 'V':
		if o.Kind != KVec || len(o.Vec) == 0 {
			return fmt.Errorf("operand %s: want a vector", o)
		}
		for _, r := range o.Vec {
			if r.T != B32 && r.T != F32 {
				return fmt.Errorf("operand %s: vector of %s", o, r.T)
			}
		}
		return nil
	case 'M':
		if n := bulkRank(in.Op); o.Kind != KTensor || o.Reg.T != B64 || len(o.Vec) != n {
			return fmt.Errorf("operand %s: want [tensor map, {c0, ...}] with %d coordinates", o, n)
		}
		for _, r := range o.Vec {
			if r.T != B32 {
				return fmt.Errorf("operand %s: tensor coordinates must be 32-bit registers", o)
			}
		}
		return nil
	case 'L':
		if o.Kind != KLabel || o.Name == "" {
			return fmt.Errorf("operand %s: want a label", o)
		}
		return nil
	}
	return fmt.Errorf("BUG: signature letter %q", c)
}

// Legalize checks every instruction of f against the op table and the
// function as a whole (labels defined once, branch targets defined,
// registers of declared classes). It never panics; it returns every
// problem found.
func Legalize(f *Func) error {
	var errs []string
	bad := func(k int, in *Inst, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s: instruction %d (op %d): %s", f.Name, k, in.Op, fmt.Sprintf(format, args...)))
	}
	labels := map[string]bool{}
	for k := range f.Body {
		in := &f.Body[k]
		if in.Op == OpLabel {
			if len(in.Dst) != 1 || in.Dst[0].Kind != KLabel {
				bad(k, in, "label pseudo-op without a label")
				continue
			}
			if labels[in.Dst[0].Name] {
				bad(k, in, "label %s defined twice", in.Dst[0].Name)
			}
			labels[in.Dst[0].Name] = true
		}
	}
	for k := range f.Body {
		in := &f.Body[k]
		if in.Op == OpLabel || in.Op == OpComment {
			continue
		}
		sp, ok := in.Op.spec()
		if !ok {
			bad(k, in, "op %d has no entry in the op table: cannot render it", in.Op)
			continue
		}
		if sp.types == nil && in.T != NoType || sp.types != nil && !slices.Contains(sp.types, in.T) {
			bad(k, in, "%s does not take type %q", sp.text, in.T)
			continue
		}
		if sp.types2 == nil && in.T2 != NoType || sp.types2 != nil && !slices.Contains(sp.types2, in.T2) {
			bad(k, in, "%s does not take second type %q", sp.text, in.T2)
			continue
		}
		if strings.Contains(sp.text, "{C}") && !cmpOK[in.Cmp] {
			bad(k, in, "%s: bad comparison %q", sp.text, in.Cmp)
		}
		if strings.Contains(sp.text, "{S}") && in.Space != "global" && in.Space != "shared" {
			bad(k, in, "%s: bad state space %q", sp.text, in.Space)
		}
		if len(in.Dst) != sp.nd || len(in.Dst)+len(in.Src) != len(sp.sig) {
			bad(k, in, "%s takes %d destination(s) and %d source(s), got %d and %d", sp.text, sp.nd, len(sp.sig)-sp.nd, len(in.Dst), len(in.Src))
			continue
		}
		ops := append(append([]Operand{}, in.Dst...), in.Src...)
		for x, o := range ops {
			if x < sp.nd && o.Kind != KReg && o.Kind != KVec && o.Kind != KAddr {
				bad(k, in, "destination %s is not a register", o)
				continue
			}
			if err := fits(sp.sig[x], o, in); err != nil {
				bad(k, in, "%s: %v", sp.text, err)
			}
			if o.Kind == KLabel && !labels[o.Name] {
				bad(k, in, "branch to undefined label %s", o.Name)
			}
		}
		if in.Guard != nil && in.Guard.T != Pred {
			bad(k, in, "guard %s is not a predicate", in.Guard)
		}
		if in.Op == OpWgmmaSS || in.Op == OpWgmmaRS {
			if n := len(in.Dst[0].Vec); n%4 != 0 || n < 4 || n > 128 {
				bad(k, in, "wgmma with %d accumulators: want a multiple of 4 in 4..128 (N = 8..256)", n)
			}
			for _, r := range in.Dst[0].Vec {
				if r.T != F32 {
					bad(k, in, "wgmma accumulator %s is not f32", r)
				}
			}
			if in.Op == OpWgmmaRS && len(in.Src[0].Vec) != 4 {
				bad(k, in, "wgmma A from registers takes 4, got %d", len(in.Src[0].Vec))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ptx legalize: %s", strings.Join(errs, "\n\t"))
	}
	return nil
}

// render writes one instruction; the op must have passed Legalize.
func render(b *strings.Builder, in *Inst) error {
	switch in.Op {
	case OpLabel:
		fmt.Fprintf(b, "%s:\n", in.Dst[0].Name)
		return nil
	case OpComment:
		fmt.Fprintf(b, "\t// %s\n", in.Comment)
		return nil
	}
	sp, ok := in.Op.spec()
	if !ok {
		return fmt.Errorf("ptx: op %d has no entry in the op table", in.Op)
	}
	text := sp.text
	if strings.IndexByte(text, '{') >= 0 {
		// placeholders in place (a Replacer per instruction was most of
		// the time Text took)
		for _, r := range [][2]string{{"{T}", in.T.String()}, {"{T2}", in.T2.String()}, {"{C}", in.Cmp}, {"{S}", in.Space}} {
			text = strings.ReplaceAll(text, r[0], r[1])
		}
		if strings.Contains(text, "{N}") {
			text = strings.ReplaceAll(text, "{N}", fmt.Sprint(2*len(in.Dst[0].Vec)))
		}
	}
	b.WriteByte('\t')
	if in.Guard != nil {
		if in.GuardNeg {
			fmt.Fprintf(b, "@!%s ", in.Guard)
		} else {
			fmt.Fprintf(b, "@%s ", in.Guard)
		}
	}
	b.WriteString(text)
	for x, o := range append(append([]Operand{}, in.Dst...), in.Src...) {
		if x == 0 {
			b.WriteByte(' ')
		} else {
			b.WriteString(", ")
		}
		b.WriteString(o.String())
	}
	b.WriteByte(';')
	if in.Comment != "" {
		fmt.Fprintf(b, " // %s", in.Comment)
	}
	b.WriteByte('\n')
	return nil
}

// Module is a PTX module of one or more kernels sharing a header, for
// one SM version.
type Module struct {
	Comments []string // written at the top as // lines
	SM       int      // the .target: sm_<SM>; it must have a PTX ISA version (isaVersions)
	// Accel targets sm_<SM>a, the architecture-specific features (wgmma,
	// setmaxnreg on sm_90a), with the ISA version that has them.
	Accel bool
	Funcs []*Func
}

// AddressSize is the module's .address_size.
const AddressSize = 64

// Text legalizes every kernel and renders the module: the one place that
// writes headers and declarations. The header is .version (the ISA version
// of the SM), .target sm_<SM> and .address_size 64; an SM without a known
// ISA version, or an instruction the SM lacks, is an error.
func (m *Module) Text() (string, error) {
	isa, err := isaVersionOf(m.SM, m.Accel)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range m.Comments {
		fmt.Fprintf(&b, "// %s\n", c)
	}
	arch := fmt.Sprintf("sm_%d", m.SM)
	if m.Accel {
		arch += "a"
	}
	fmt.Fprintf(&b, ".version %s\n.target %s\n.address_size %d\n", isa, arch, AddressSize)
	align := map[string]int{}
	var dyn []string
	for _, f := range m.Funcs {
		if f.DynShared == "" {
			continue
		}
		if _, ok := align[f.DynShared]; !ok {
			dyn = append(dyn, f.DynShared)
		}
		align[f.DynShared] = max(align[f.DynShared], f.SharedAlign, 16)
	}
	for _, name := range dyn {
		fmt.Fprintf(&b, "\n.extern .shared .align %d .b8 %s[];\n", align[name], name)
	}
	for _, f := range m.Funcs {
		if err := Legalize(f); err != nil {
			return "", err
		}
		for k := range f.Body {
			if sp, ok := f.Body[k].Op.spec(); ok && !sp.availableOn(m.SM, m.Accel) {
				return "", fmt.Errorf("ptx: %s: instruction %d: %s needs %s, the module targets %s", f.Name, k, sp.text, sp.need(), arch)
			}
		}
		fmt.Fprintf(&b, "\n.visible .entry %s(\n", f.Name)
		for k, p := range f.Params {
			sep := ","
			if k == len(f.Params)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "\t.param .%s %s%s\n", p.T, p.Name, sep)
		}
		b.WriteString(")\n")
		if f.ReqNTID > 0 {
			fmt.Fprintf(&b, ".reqntid %d, 1, 1\n", f.ReqNTID)
			if f.MinCTAs > 0 {
				fmt.Fprintf(&b, ".minnctapersm %d\n", f.MinCTAs)
			}
		}
		b.WriteString("{\n")
		// Declarations from the registers the body uses.
		used := map[Type]int{}
		note := func(r Reg) { used[r.T] = max(used[r.T], r.ID+1) }
		for _, in := range f.Body {
			if in.Guard != nil {
				note(*in.Guard)
			}
			for _, o := range append(append([]Operand{}, in.Dst...), in.Src...) {
				switch {
				case o.Kind == KReg, o.Kind == KAddr && o.Name == "":
					note(o.Reg)
				case o.Kind == KVec:
					for _, r := range o.Vec {
						note(r)
					}
				case o.Kind == KTensor:
					note(o.Reg)
					for _, r := range o.Vec {
						note(r)
					}
				}
			}
		}
		for _, t := range []Type{Pred, B16, B32, B64, F32} {
			if n := used[t]; n > 0 {
				fmt.Fprintf(&b, "\t.reg .%s %s<%d>;\n", t, regPrefix[t], n)
			}
		}
		b.WriteByte('\n')
		for k := range f.Body {
			if err := render(&b, &f.Body[k]); err != nil {
				return "", err
			}
		}
		b.WriteString("}\n")
	}
	return b.String(), nil
}
