// Command genmask writes runtime/mask/residue.go from the plan's residue
// program (gen.ResidueProg); go generate runs it in runtime/mask.
package main

import (
	"fmt"
	"os"

	"github.com/attngen/attngen/gen"
)

func main() {
	src, err := gen.ResidueGo("go run ../../gen/cmd/genmask")
	if err == nil {
		err = os.WriteFile("residue.go", src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genmask:", err)
		os.Exit(1)
	}
}
