package neon

import (
	"fmt"
	"os"
	"path/filepath"
)

// The files Generate writes into runtime/cpu.
const (
	AsmFile   = "tile_arm64.s"
	StubsFile = "tile_arm64.go"
	generator = "github.com/attngen/attngen/emit/neon/cmd/genneon"
)

// Generate builds every NEON kernel of runtime/cpu into one file.
func Generate(pkg string) *File {
	fl := &File{Pkg: pkg, Constraint: "arm64 && !purego", Generator: generator}
	for _, d := range []int{64, 128} {
		fl.Add(EmitTile(d))
	}
	for _, e := range Elems {
		for _, d := range []int{64, 128} {
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
	for _, d := range []int{64, 128} {
		fl.Add(EmitTileScore(d))
	}
	for _, e := range Elems {
		for _, d := range []int{64, 128} {
			for _, r := range DecodeRows {
				fl.Add(EmitDecodeScore(e, d, r))
			}
		}
	}
	fl.Add(EmitScoreBwd())
	return fl
}

// WriteFiles writes AsmFile and StubsFile into dir.
func WriteFiles(dir, pkg string) error {
	fl := Generate(pkg)
	for name, b := range map[string][]byte{AsmFile: fl.Asm(), StubsFile: fl.Stubs()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("neon: %w", err)
		}
	}
	return nil
}
