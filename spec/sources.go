package spec

import "embed"

// AlgebraSources holds the files of this package that evaluate masks
// (no parsing): generated packages carry a copy so that they classify tiles
// and evaluate masks with exactly the code tested here.
//
//go:embed errors.go mask.go pattern.go classify.go span.go rows.go tiles.go
var AlgebraSources embed.FS
