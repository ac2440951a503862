// Command genkernel writes the amd64 tile kernels of package runtime/cpu:
// tile_amd64.s and tile_amd64.go, into the current folder (or -dir). It is
// run by go generate in runtime/cpu/ (see runtime/cpu/generate.go); the output is
// byte-for-byte deterministic.
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
	dir := fs.String("dir", ".", "folder to write "+avo.AsmFile+" and "+avo.StubsFile+" into")
	pkg := fs.String("pkg", "cpu", "package clause of the generated files")
	fs.Parse(os.Args[1:]) //nolint:errcheck // ExitOnError
	if err := avo.WriteFiles(*dir, avo.Options{Pkg: *pkg}); err != nil {
		fmt.Fprintln(os.Stderr, "genkernel:", err)
		os.Exit(1)
	}
}
