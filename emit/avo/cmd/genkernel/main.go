// Command genkernel writes the amd64 assembly of package runtime/cpu into
// the current folder (or -dir): the tile kernels and the FMA peak loops
// (tile_amd64.s, tile_amd64.go), the table of the kernels by head
// dimensions (kernels_dims_amd64.go), the score stage's ABI as a test file
// of the package (score_abi_amd64_test.go) and the read-bandwidth loops
// (readbw_amd64.s, readbw_amd64.go). It is run by go generate in
// runtime/cpu/ (see runtime/cpu/generate.go); the output is byte-for-byte
// deterministic.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/attngen/attngen/emit/avo"
)

func main() {
	// avo's build package registers its own flags on flag.CommandLine.
	fs := flag.NewFlagSet("genkernel", flag.ExitOnError)
	dir := fs.String("dir", ".", "folder to write "+avo.AsmFile+", "+avo.StubsFile+", "+avo.TableFile+", "+avo.ScoreABIFile+", "+avo.ReadBWAsmFile+" and "+avo.ReadBWStubsFile+" into")
	pkg := fs.String("pkg", "cpu", "package clause of the generated files")
	fs.Parse(os.Args[1:]) //nolint:errcheck // ExitOnError
	opts := avo.Options{Pkg: *pkg}
	for _, write := range []func(string, avo.Options) error{avo.WriteFiles, avo.WriteReadBWFiles} {
		if err := write(*dir, opts); err != nil {
			fmt.Fprintln(os.Stderr, "genkernel:", err)
			os.Exit(1)
		}
	}
}
