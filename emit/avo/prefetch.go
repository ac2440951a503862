package avo

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
)

// PrefetchName is the prefetch routine the runtime's decoding path calls.
const PrefetchName = "prefetchL2"

// EmitPrefetch adds func(p *float32, n int): PREFETCHT1 of every 64-byte
// line of the n floats at p, four lines an iteration (n rounded up to a
// whole line). The decoding path calls it on the next key tile's rows so
// that reading them from memory overlaps the work on this one.
func EmitPrefetch(ctx *build.Context) {
	ctx.Function(PrefetchName)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(p *float32, n int)")
	ctx.Doc(
		PrefetchName+" prefetches into L2 (PREFETCHT1) every 64-byte line of the n",
		"floats at p. Prefetches do not fault, so the rounding up to whole lines is",
		"harmless.",
	)
	p := ctx.Load(ctx.Param("p"), ctx.GP64())
	n := ctx.Load(ctx.Param("n"), ctx.GP64())
	ctx.ADDQ(op.U8(63), n) // floats to 4-line groups: ceil(n / 64)
	ctx.SHRQ(op.U8(6), n)
	ctx.TESTQ(n, n)
	ctx.JZ(op.LabelRef("done"))
	ctx.Label("loop")
	for i := 0; i < 4; i++ {
		ctx.PREFETCHT1(op.Mem{Base: p, Disp: 64 * i})
	}
	ctx.ADDQ(op.U32(256), p)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("loop"))
	ctx.Label("done")
	ctx.RET()
}
