package avo

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/printer"
)

// Options configures the generated kernel files.
type Options struct {
	// Pkg is the package clause of the generated files ("cpu" when empty).
	Pkg string
	// Command is the command that regenerates the files, written into their
	// "Code generated" headers (DefaultCommand when empty).
	Command string
}

// DefaultCommand regenerates runtime/cpu/tile_amd64.{s,go}; runtime/cpu/generate.go
// runs it.
const DefaultCommand = "go run github.com/attngen/attngen/emit/avo/cmd/genkernel"

// Output file names, relative to the package folder.
const (
	AsmFile   = "tile_amd64.s"
	StubsFile = "tile_amd64.go"
)

// Constraint is the build constraint of both generated files (avo takes the
// old +build syntax; the files say //go:build amd64 && !purego); other builds
// use the pure-Go tile.
const Constraint = "amd64,!purego"

// Build returns a build context holding the whole kernel file: the constant
// table, the tile kernel for every ISA and head dimension, the decode
// kernels of every ISA, the FMA peak loops, then for every ISA the key-tile
// transpose, the 16-bit widening and narrowing loops and the driver's row
// helpers (the prefetch loop among them), and the backward's kernels (EmitBackward).
func Build() *build.Context {
	ctx := build.NewContext()
	ctx.ConstraintExpr(Constraint)
	c := EmitConsts(ctx)
	for _, isa := range ISAs {
		for _, d := range KernelDims {
			EmitTile(ctx, c, isa, d)
		}
	}
	for _, isa := range ISAs {
		for _, e := range Elems {
			for _, d := range KernelDims {
				for _, r := range DecodeRows {
					EmitDecode(ctx, c, isa, e, d, r)
				}
			}
		}
	}
	for _, isa := range ISAs {
		EmitPeak(ctx, c, isa)
	}
	for _, isa := range ISAs {
		EmitTranspose(ctx, isa)
		EmitWiden(ctx, isa)
		EmitRowHelpers(ctx, c, isa)
		EmitLSE(ctx, c, isa)
		EmitNarrow(ctx, c, isa)
		EmitPrefetch(ctx, isa)
	}
	EmitBackward(ctx, c)
	EmitScoreKernels(ctx, c)
	return ctx
}

// Generate compiles ctx (register allocation) and prints the assembly and
// the Go declarations. It fails if an AVX2 function uses a register that
// needs AVX-512 (avo never spills and silently takes Y16-Y31 when more than
// 16 vectors are live).
func Generate(ctx *build.Context, opts Options) (asm, stubs []byte, err error) {
	f, err := compile(ctx)
	if err != nil {
		return nil, nil, err
	}
	return printKernel(f, opts)
}

// compile runs avo's passes (register allocation above all: most of the
// time a generation takes) on the functions of ctx.
func compile(ctx *build.Context) (*ir.File, error) {
	f, err := ctx.Result()
	if err != nil {
		return nil, err
	}
	if err := pass.Compile.Execute(f); err != nil {
		return nil, err
	}
	return f, nil
}

// printKernel prints a compiled file (which it leaves as it is) as Generate
// does.
func printKernel(f *ir.File, opts Options) (asm, stubs []byte, err error) {
	if opts.Pkg == "" {
		opts.Pkg = "cpu"
	}
	if opts.Command == "" {
		opts.Command = DefaultCommand
	}
	cfg := printer.Config{Argv: strings.Fields(opts.Command), Pkg: opts.Pkg}
	if asm, err = printer.NewGoAsm(cfg).Print(f); err != nil {
		return nil, nil, err
	}
	if stubs, err = printer.NewStubs(cfg).Print(f); err != nil {
		return nil, nil, err
	}
	if err := CheckAVX2Registers(asm); err != nil {
		return nil, nil, err
	}
	return asm, stubs, nil
}

// Kernel builds and generates the kernel file.
func Kernel(opts Options) (asm, stubs []byte, err error) {
	return Generate(Build(), opts)
}

// WriteFiles generates the kernel file into dir as AsmFile and StubsFile,
// with ScoreABIFile and TableFile beside them.
func WriteFiles(dir string, opts Options) error {
	asm, stubs, err := Kernel(opts)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, AsmFile), asm, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ScoreABIFile), ScoreABI(opts), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, TableFile), Table(opts), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, StubsFile), stubs, 0o644)
}

// TableFile is the file of runtime/cpu listing each ISA's kernels by head
// dimensions (Table).
const TableFile = "kernels_dims_amd64.go"

// DimsVar is the Go name of the table of an ISA's kernels by head
// dimensions in TableFile: avx512Dims, avx2Dims.
func DimsVar(isa ISA) string { return strings.ToLower(isa.String()) + "Dims" }

// Table returns TableFile: for each ISA a []dimKernels (runtime/cpu's
// type) with one entry per KernelDims, in that order, naming its tile
// kernels and its decode kernels by element type and rows (DecodeRows),
// plain and with the score stage, so that a new size is one entry of
// KernelDims.
func Table(opts Options) []byte {
	var b bytes.Buffer
	if opts.Pkg == "" {
		opts.Pkg = "cpu"
	}
	fmt.Fprintf(&b, "// Code generated by emit/avo (genkernel); DO NOT EDIT.\n\n//go:build amd64 && !purego\n\npackage %s\n", opts.Pkg)
	decodes := func(kind string, name func(ISA, Elem, Dims, int) string, isa ISA, d Dims) {
		fmt.Fprintf(&b, "%s: [3][4]%sKernel{\n", kind, kind)
		for _, e := range Elems {
			fmt.Fprintf(&b, "%s: {", e)
			for i, r := range DecodeRows {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(name(isa, e, d, r))
			}
			b.WriteString("},\n")
		}
		b.WriteString("},\n")
	}
	for _, isa := range ISAs {
		fmt.Fprintf(&b, "\n// %s are the %s kernels by head dimensions.\nvar %s = []dimKernels{\n", DimsVar(isa), isa, DimsVar(isa))
		for _, d := range KernelDims {
			fmt.Fprintf(&b, "{\ndims: dims{%d, %d}, tile: %s, tileScore: %s,\n", d.QK, d.V, TileName(isa, d), TileScoreName(isa, d))
			decodes("decode", DecodeName, isa, d)
			decodes("decodeScore", DecodeScoreName, isa, d)
			b.WriteString("},\n")
		}
		b.WriteString("}\n")
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		panic("BUG: the kernel table does not format: " + err.Error())
	}
	return src
}

// ScoreABIFile is the test file of runtime/cpu that records the score
// stage's ABI as the kernels use it (ScoreABI).
const ScoreABIFile = "score_abi_amd64_test.go"

// ScoreABI returns ScoreABIFile: the scoreTile offsets, the flag bits and
// the tanh constants the kernels were written for, as constants of the
// package's tests, which compare them with the package's own. (A test of
// runtime/cpu that imported emit/avo would make every module using
// runtime/cpu require avo.)
func ScoreABI(opts Options) []byte {
	var b bytes.Buffer
	if opts.Pkg == "" {
		opts.Pkg = "cpu"
	}
	fmt.Fprintf(&b, "// Code generated by emit/avo (genkernel); DO NOT EDIT.\n\npackage %s\n\n", opts.Pkg)
	b.WriteString("// The score stage's ABI as emit/avo's kernels use it (TestScoreABI).\nconst (\n")
	for _, c := range []struct {
		name string
		v    int
	}{{"CapOff", ScoreCapOff}, {"InvCapOff", ScoreInvCapOff}, {"FlagsOff", ScoreFlagsOff}, {"SlopeOff", ScoreSlopeOff},
		{"RowsOff", ScoreRowsOff}, {"ColsOff", ScoreColsOff}, {"Size", ScoreSize}, {"Cap", ScoreCap}, {"Alibi", ScoreAlibi}, {"Abs", ScoreAbs}} {
		fmt.Fprintf(&b, "\tavoScore%s = %d\n", c.name, c.v)
	}
	b.WriteString(")\n\n// avoTanh are TanhSmall, TanhM2L2E and TanhPoly.\nvar (\n")
	fmt.Fprintf(&b, "\tavoTanhSmall = %s\n\tavoTanhM2L2E = %s\n\tavoTanhPoly  = [8]float64{", strconv.FormatFloat(TanhSmall, 'g', -1, 64), strconv.FormatFloat(TanhM2L2E, 'g', -1, 64))
	for k, c := range TanhPoly {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatFloat(c, 'g', -1, 64))
	}
	b.WriteString("}\n)\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		panic("BUG: the score ABI file does not format: " + err.Error())
	}
	return src
}

// evexOnly matches registers that only an EVEX encoding can name.
var evexOnly = regexp.MustCompile(`\b(?:[XY](?:1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`)

// CheckAVX2Registers reports any AVX2 function in asm (a tile kernel named
// AVX2 or the 256-bit peak loop) that names a register only an EVEX encoding
// can name: X16-X31, Y16-Y31, any zmm or any opmask.
func CheckAVX2Registers(asm []byte) error {
	for _, fn := range bytes.Split(asm, []byte("\nTEXT ")) {
		name, _, _ := bytes.Cut(fn, []byte("("))
		if !bytes.Contains(name, []byte("AVX2")) && !bytes.HasSuffix(name, []byte(PeakName(AVX2))) {
			continue
		}
		for _, line := range bytes.Split(fn, []byte("\n")) {
			if bytes.HasPrefix(bytes.TrimSpace(line), []byte("//")) {
				continue
			}
			if r := evexOnly.Find(line); r != nil {
				return fmt.Errorf("AVX2 function %s uses %s: %s", name, r, bytes.TrimSpace(line))
			}
		}
	}
	return nil
}
