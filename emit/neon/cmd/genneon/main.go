// Command genneon writes the arm64 NEON assembly of package runtime/cpu
// into the current folder (or -dir): tile_arm64.s, tile_arm64.go and kernels_dims_arm64.go. It is
// run by go generate in runtime/cpu/ (see runtime/cpu/generate.go); the
// output is byte-for-byte deterministic.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/attngen/attngen/emit/neon"
)

func main() {
	dir := flag.String("dir", ".", "folder to write "+neon.AsmFile+" and "+neon.StubsFile+" into")
	pkg := flag.String("pkg", "cpu", "package clause of the generated files")
	flag.Parse()
	if err := neon.WriteFiles(*dir, *pkg); err != nil {
		fmt.Fprintln(os.Stderr, "genneon:", err)
		os.Exit(1)
	}
}
