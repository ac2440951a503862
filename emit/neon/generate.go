package neon

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
)

// The files Generate and Table write into runtime/cpu.
const (
	AsmFile   = "tile_arm64.s"
	StubsFile = "tile_arm64.go"
	TableFile = "kernels_dims_arm64.go"
	generator = "github.com/attngen/attngen/emit/neon/cmd/genneon"
	buildTag  = "arm64 && !purego"
)

// Generate builds every NEON kernel of runtime/cpu into one file: the
// tile and decode kernels (plain and with the score stage) of every entry
// of KernelDims, and the others once.
func Generate(pkg string) *File {
	fl := &File{Pkg: pkg, Constraint: buildTag, Generator: generator}
	for _, d := range KernelDims {
		fl.Add(EmitTile(d))
	}
	for _, e := range Elems {
		for _, d := range KernelDims {
			for _, r := range DecodeRows {
				fl.Add(EmitDecode(e, d, r))
			}
		}
	}
	fl.Add(EmitGemm())
	fl.Add(EmitBwdProb())
	fl.Add(EmitScaleRow())
	fl.Add(EmitWiden(BF16))
	fl.Add(EmitWiden(F16))
	fl.Add(EmitNonFinite())
	fl.Add(EmitTranspose())
	fl.Add(EmitLSE())
	fl.Add(EmitNarrow(BF16))
	fl.Add(EmitNarrow(F16))
	fl.Add(EmitPeak())
	fl.Add(EmitReadSum())
	// The score stage's kernels, after the others (which they leave as
	// they were).
	fl.Add(EmitTanh())
	for _, d := range KernelDims {
		fl.Add(EmitTileScore(d))
	}
	for _, e := range Elems {
		for _, d := range KernelDims {
			for _, r := range DecodeRows {
				fl.Add(EmitDecodeScore(e, d, r))
			}
		}
	}
	fl.Add(EmitScoreBwd())
	return fl
}

// Table returns the Go file of runtime/cpu's neonDims: one dimKernels
// entry for each of KernelDims, naming the kernels Generate writes for it.
func Table(pkg string) []byte {
	var b bytes.Buffer
	fl := &File{Constraint: buildTag, Generator: generator}
	b.WriteString(fl.header())
	fmt.Fprintf(&b, "package %s\n\n", pkg)
	b.WriteString("// neonDims are the NEON kernels by head dimensions (emit/neon.KernelDims).\n")
	b.WriteString("var neonDims = []dimKernels{\n")
	for _, d := range KernelDims {
		dims := fmt.Sprintf("dims{%d, %d}", d.QK, d.V)
		if d.QK == d.V {
			dims = fmt.Sprintf("square(%d)", d.QK)
		}
		fmt.Fprintf(&b, "{\ndims: %s, tile: %s, tileScore: %s,\n", dims, TileName(d), TileScoreName(d))
		for _, kind := range []struct {
			field, typ string
			name       func(Elem, Dims, int) string
		}{{"decode", "decodeKernel", DecodeName}, {"decodeScore", "decodeScoreKernel", DecodeScoreName}} {
			fmt.Fprintf(&b, "%s: [3][4]%s{\n", kind.field, kind.typ)
			for _, e := range Elems {
				fmt.Fprintf(&b, "%s: {", e)
				for i, r := range DecodeRows {
					if i > 0 {
						b.WriteString(", ")
					}
					b.WriteString(kind.name(e, d, r))
				}
				b.WriteString("},\n")
			}
			b.WriteString("},\n")
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		panic("BUG: neon: the table does not parse: " + err.Error())
	}
	return src
}

// WriteFiles writes AsmFile, StubsFile and TableFile into dir.
func WriteFiles(dir, pkg string) error {
	fl := Generate(pkg)
	for name, b := range map[string][]byte{AsmFile: fl.Asm(), StubsFile: fl.Stubs(), TableFile: Table(pkg)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("neon: %w", err)
		}
	}
	return nil
}
