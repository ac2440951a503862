package avo

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// PeakChains is the number of independent FMA chains in the peak loop:
// enough to cover the FMA latency (4 cycles) times two FMA ports.
const PeakChains = 12

// PeakFlops is the number of float32 flops one iteration of the peak loop
// of an ISA performs.
func PeakFlops(isa ISA) int { return PeakChains * 2 * isa.lanes() }

// EmitPeak adds func(n int) running n iterations of PeakChains independent
// VFMADD231PS chains on the ISA's full-width registers: the measured FP32
// FMA peak that benchmarks compare the kernels against.
func EmitPeak(ctx *build.Context, c ConstTable, isa ISA) {
	name := PeakName(isa)
	ctx.Function(name)
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(n int)")
	ctx.Doc(
		fmt.Sprintf("%s runs n iterations of %d independent VFMADD231PS chains on", name, PeakChains),
		fmt.Sprintf("%d-bit registers (%d flops per iteration) to measure the FP32 FMA peak.", 32*isa.lanes(), PeakFlops(isa)),
	)
	n := ctx.Load(ctx.Param("n"), ctx.GP64())
	a, b := isa.vec(ctx), isa.vec(ctx)
	zero(ctx, c, isa, a)
	zero(ctx, c, isa, b)
	acc := make([]reg.VecVirtual, PeakChains)
	for i := range acc {
		acc[i] = isa.vec(ctx)
		zero(ctx, c, isa, acc[i])
	}
	ctx.TESTQ(n, n)
	ctx.JLE(op.LabelRef("done"))
	ctx.Label("loop")
	for _, x := range acc {
		ctx.VFMADD231PS(a, b, x)
	}
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("loop"))
	ctx.Label("done")
	ctx.VZEROUPPER()
	ctx.RET()
}
