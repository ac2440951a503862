package cpu

// The AVX-512 and AVX2 tile kernels and the FMA peak loops (tile_amd64.s,
// tile_amd64.go) and their table by head dimensions (kernels_dims_amd64.go)
// are written by the avo emitter in emit/avo; the arm64 NEON kernels
// (tile_arm64.s, tile_arm64.go) by emit/neon.
//go:generate go run github.com/attngen/attngen/emit/avo/cmd/genkernel -pkg $GOPACKAGE
//go:generate go run github.com/attngen/attngen/emit/neon/cmd/genneon -pkg $GOPACKAGE
