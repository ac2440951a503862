package avo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mmcloughlin/avo/build"
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
// helpers, and the backward's kernels (EmitBackward).
func Build() *build.Context {
	ctx := build.NewContext()
	ctx.ConstraintExpr(Constraint)
	c := EmitConsts(ctx)
	for _, isa := range ISAs {
		for _, d := range HeadDims {
			EmitTile(ctx, c, isa, d)
		}
	}
	for _, isa := range ISAs {
		for _, e := range Elems {
			for _, d := range HeadDims {
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
	if opts.Pkg == "" {
		opts.Pkg = "cpu"
	}
	if opts.Command == "" {
		opts.Command = DefaultCommand
	}
	f, err := ctx.Result()
	if err != nil {
		return nil, nil, err
	}
	if err := pass.Compile.Execute(f); err != nil {
		return nil, nil, err
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

// WriteFiles generates the kernel file into dir as AsmFile and StubsFile.
func WriteFiles(dir string, opts Options) error {
	asm, stubs, err := Kernel(opts)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, AsmFile), asm, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, StubsFile), stubs, 0o644)
}

// evexOnly matches registers that only an EVEX encoding can name.
var evexOnly = regexp.MustCompile(`\b(?:[XY](?:1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`)

// CheckAVX2Registers reports any AVX2 function in asm (a tile kernel named
// AVX2 or the 256-bit peak loop) that names a register only an EVEX encoding
// can name: X16-X31, Y16-Y31, any zmm or any opmask.
func CheckAVX2Registers(asm []byte) error {
	for _, fn := range bytes.Split(asm, []byte("\nTEXT ")) {
		name, _, _ := bytes.Cut(fn, []byte("("))
		if !bytes.Contains(name, []byte("AVX2")) && !bytes.HasSuffix(name, []byte("256")) {
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
