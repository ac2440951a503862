package avo

import (
	"math"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
)

// exp2Coeffs are c1..c6 of p(f) = 1 + c1 f + ... + c6 f^6, a minimax fit of
// 2^f on [-0.5, 0.5] for relative error with the constant term pinned to 1
// (so that 2^0 is exactly 1 and an unchanged running maximum gives alpha = 1
// exactly). Fit error 2.0e-9; evaluated by Horner with FMA in float32 the
// relative error stays below 8e-8 (1.3 ulp) over the interval.
var exp2Coeffs = [6]uint32{
	0x3f317218, // 0.6931472
	0x3e75fdee, // 0.24022648
	0x3d635774, // 0.055503324
	0x3c1d96a6, // 0.009618437
	0x3aaf9f2d, // 0.0013398879
	0x3920fde8, // 0.00015353377
}

// Constant table slots. Each slot is 32 bytes: one value repeated in all
// eight lanes of a ymm register, so AVX2 code reads whole vectors and AVX-512
// code reads the first lane with an embedded broadcast.
const (
	kNegInf = iota      // -Inf
	kOne                // 1.0
	kZero               // +0.0
	kFlush              // -125: exp2 of anything below is flushed to exactly +0
	kC1                 // exp2 coefficients c1..c6 in slots kC1..kC1+5
	kPat0   = kC1 + 6   // int32 lanes 1<<i: bits 0-7 of a mask dword
	kExpMax = kPat0 + 4 // 128: the AVX2 backward's exp2 clamps its argument to at most this
	// The AVX2 row helpers' constants (AVX-512 broadcasts them from general
	// registers instead).
	kInf       = kExpMax + 1    // +Inf: also the exponent bits of a float32
	kAbs       = kInf + 1       // 0x7fffffff: all bits but the sign
	kBF16Bias  = kAbs + 1       // 0x7fff: bfloat16 rounding bias
	kIntOne    = kBF16Bias + 1  // int32 1
	kBF16Quiet = kIntOne + 1    // 0x40: the quiet bit of a bfloat16 NaN
	kLn2       = kBF16Quiet + 1 // ln 2
	kLog2C     = kLn2 + 1       // the log2 series' coefficients in slots kLog2C..kLog2C+5
	kMant      = kLog2C + 6     // 0x007fffff: the mantissa bits
	kMinNormal = kMant + 1      // 2^-126, the smallest normal float32
	kTwo64     = kMinNormal + 1 // 2^64: scales a subnormal into the normals
	kBias127   = kTwo64 + 1     // 127: the exponent bias
	kBias191   = kBias127 + 1   // 127 + 64: the bias of a subnormal scaled by 2^64
	// The score stage's constants (score.go), appended so that the slots
	// above keep their offsets.
	kTanhSmall = kBias191 + 1           // TanhSmall: below it tanh is its Taylor polynomial
	kTanhM2L2E = kTanhSmall + 1         // TanhM2L2E = -2 log2(e)
	kTanhT     = kTanhM2L2E + 1         // TanhPoly[0..7] (x^3 .. x^17) in slots kTanhT..kTanhT+7
	kLaneDiv   = kTanhT + len(TanhPoly) // int32 lane/r for r = 2, 4, 8: two slots (16 lanes) each
	kSlots     = kLaneDiv + 2*len(laneDivs)
)

const slotBytes = 32

// ConstTable is the read-only data every kernel shares; EmitConsts adds it
// to a file once, before the kernels that use it.
type ConstTable struct {
	base op.Mem
}

// slot returns the memory operand of a constant slot, plus off bytes.
func (c ConstTable) slot(k int) op.Mem { return c.base.Offset(k * slotBytes) }

// coeff returns the slot of exp2 coefficient c_i, i in 1..6.
func (c ConstTable) coeff(i int) op.Mem { return c.slot(kC1 + i - 1) }

// EmitConsts adds the constant table to the file.
func EmitConsts(ctx *build.Context) ConstTable {
	base := ctx.StaticGlobal("attnconst")
	ctx.DataAttributes(attr.RODATA | attr.NOPTR)
	put := func(k int, lane int, v uint32) {
		ctx.AddDatum(k*slotBytes+4*lane, op.U32(v))
	}
	for k := 0; k < kSlots; k++ {
		for lane := 0; lane < 8; lane++ {
			put(k, lane, slotValue(k, lane))
		}
	}
	return ConstTable{base: base}
}

// slotValue is the bit pattern of one lane of a constant slot.
func slotValue(k, lane int) uint32 {
	switch {
	case k == kNegInf:
		return math.Float32bits(float32(math.Inf(-1)))
	case k == kOne:
		return math.Float32bits(1)
	case k == kZero:
		return 0
	case k == kFlush:
		return math.Float32bits(-125)
	case k == kExpMax:
		return math.Float32bits(128)
	case k == kInf:
		return 0x7f800000
	case k == kAbs:
		return 0x7fffffff
	case k == kBF16Bias:
		return 0x7fff
	case k == kIntOne:
		return 1
	case k == kBF16Quiet:
		return 0x40
	case k == kLn2:
		return math.Float32bits(float32(math.Ln2))
	case k >= kLog2C && k < kLog2C+len(log2Series):
		return math.Float32bits(float32(2 / math.Ln2 * log2Series[k-kLog2C]))
	case k == kMant:
		return 0x007fffff
	case k == kMinNormal:
		return math.Float32bits(0x1p-126)
	case k == kTwo64:
		return math.Float32bits(0x1p64)
	case k == kBias127:
		return math.Float32bits(127)
	case k == kBias191:
		return math.Float32bits(191)
	case k == kTanhSmall:
		return math.Float32bits(TanhSmall)
	case k == kTanhM2L2E:
		return math.Float32bits(float32(TanhM2L2E))
	case k >= kTanhT && k < kTanhT+len(TanhPoly):
		return math.Float32bits(float32(TanhPoly[k-kTanhT]))
	case k >= kLaneDiv && k < kLaneDiv+2*len(laneDivs):
		// Lane 8h+lane of the pair of slots for r holds (8h+lane)/r.
		i := k - kLaneDiv
		return uint32((8*(i%2) + lane) / laneDivs[i/2])
	case k >= kC1 && k < kC1+len(exp2Coeffs):
		return exp2Coeffs[k-kC1]
	case k >= kPat0 && k < kPat0+4:
		// Pattern j tests bits 8j..8j+7 of a 32-bit mask word: lane i
		// of the ymm chunk covering those columns holds 1<<(8j+i).
		return 1 << (8*(k-kPat0) + lane)
	}
	panic("BUG: unknown constant slot")
}
