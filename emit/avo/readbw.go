package avo

import (
	"fmt"
	"math/bits"
	"os"
	"path/filepath"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	op "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The read-bandwidth loops live in files of their own beside the tile
// kernels (they share no constant and no code with them), written by the
// same command.
const (
	ReadBWAsmFile   = "readbw_amd64.s"
	ReadBWStubsFile = "readbw_amd64.go"
)

// ReadSumAccs is the number of independent vector accumulators of the
// read-bandwidth loop: eight loads in flight per iteration, enough that the
// add latency never limits a stream from memory (or from L2).
const ReadSumAccs = 8

// ReadSumBlock is the number of float32 one iteration of an ISA's read loop
// consumes: ReadSumAccs full vectors.
func ReadSumBlock(isa ISA) int { return ReadSumAccs * isa.lanes() }

// ReadSumName is the Go name of the read-bandwidth loop of an ISA:
// readSumAVX512 or readSumAVX2.
func ReadSumName(isa ISA) string { return "readSum" + isa.String() }

// EmitReadSum adds func(p *float32, n int) float32, which sums the first
// n - n%ReadSumBlock(isa) float32 at p (none when n < ReadSumBlock) with
// ReadSumAccs independent VADDPS chains reading full vectors, and returns
// the sum (in no particular order of addition). It exists to be timed: the
// memory read bandwidth that decoding benchmarks compare against.
//
// The accumulators start as the first block's vectors, so that no register
// is read before it is written (see the package doc on avo's liveness of
// zeroing idioms) and the function needs no constant.
func EmitReadSum(ctx *build.Context, isa ISA) {
	name := ReadSumName(isa)
	block := ReadSumBlock(isa)
	width := 4 * isa.lanes() // bytes per vector
	ctx.Function(name)
	ctx.Attributes(attr.NOSPLIT)
	ctx.Pragma("noescape")
	ctx.SignatureExpr("func(p *float32, n int) float32")
	ctx.Doc(
		fmt.Sprintf("%s sums the first n - n%%%d float32 at p with %d independent", name, block, ReadSumAccs),
		fmt.Sprintf("VADDPS chains on %d-bit vectors (0 when n < %d); it streams memory to", 32*isa.lanes(), block),
		"measure the read bandwidth.",
	)
	p := ctx.Load(ctx.Param("p"), ctx.GP64())
	n := ctx.Load(ctx.Param("n"), ctx.GP64())
	ret, err := ctx.ReturnIndex(0).Resolve()
	if err != nil {
		panic("BUG: " + err.Error())
	}
	// n becomes the number of whole blocks (none when n <= 0).
	ctx.TESTQ(n, n)
	ctx.JLE(op.LabelRef("empty"))
	ctx.SHRQ(op.U8(bits.TrailingZeros(uint(block))), n)
	ctx.JZ(op.LabelRef("empty"))
	acc := make([]reg.VecVirtual, ReadSumAccs)
	for i := range acc {
		acc[i] = isa.vec(ctx)
		ctx.VMOVUPS(op.Mem{Base: p, Disp: i * width}, acc[i])
	}
	ctx.ADDQ(op.U32(block*4), p)
	ctx.DECQ(n)
	ctx.JZ(op.LabelRef("reduce"))
	ctx.Label("loop")
	for i, a := range acc {
		ctx.VADDPS(op.Mem{Base: p, Disp: i * width}, a, a)
	}
	ctx.ADDQ(op.U32(block*4), p)
	ctx.DECQ(n)
	ctx.JNZ(op.LabelRef("loop"))

	ctx.Label("reduce")
	// Pairwise sum of the accumulators, then halve the vector down to one
	// lane, each step into a fresh register.
	for len(acc) > 1 {
		var next []reg.VecVirtual
		for i := 0; i < len(acc); i += 2 {
			s := isa.vec(ctx)
			ctx.VADDPS(acc[i+1], acc[i], s)
			next = append(next, s)
		}
		acc = next
	}
	y := acc[0] // a ymm on AVX2
	if isa == AVX512 {
		hi, sum := ctx.YMM(), ctx.YMM()
		ctx.VEXTRACTF64X4(op.U8(1), acc[0], hi)
		ctx.VADDPS(hi, acc[0].AsY(), sum)
		y = sum
	}
	hi4, x4 := ctx.XMM(), ctx.XMM()
	ctx.VEXTRACTF128(op.U8(1), y, hi4)
	ctx.VADDPS(hi4, y.AsX(), x4)
	hi2, x2 := ctx.XMM(), ctx.XMM()
	ctx.VMOVHLPS(x4, x4, hi2)
	ctx.VADDPS(hi2, x4, x2)
	hi1, x1 := ctx.XMM(), ctx.XMM()
	ctx.VMOVSHDUP(x2, hi1)
	ctx.VADDSS(hi1, x2, x1)
	ctx.VMOVSS(x1, ret.Addr)
	ctx.VZEROUPPER()
	ctx.RET()

	ctx.Label("empty")
	ctx.MOVL(op.U32(0), ret.Addr)
	ctx.RET()
}

// BuildReadBW returns a build context holding the read-bandwidth loops of
// every ISA.
func BuildReadBW() *build.Context {
	ctx := build.NewContext()
	ctx.ConstraintExpr(Constraint)
	for _, isa := range ISAs {
		EmitReadSum(ctx, isa)
	}
	return ctx
}

// ReadBWKernel builds and generates the read-bandwidth file.
func ReadBWKernel(opts Options) (asm, stubs []byte, err error) {
	return Generate(BuildReadBW(), opts)
}

// WriteReadBWFiles generates the read-bandwidth file into dir as
// ReadBWAsmFile and ReadBWStubsFile.
func WriteReadBWFiles(dir string, opts Options) error {
	asm, stubs, err := ReadBWKernel(opts)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ReadBWAsmFile), asm, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ReadBWStubsFile), stubs, 0o644)
}
