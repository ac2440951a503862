package cpu

// The AVX-512 and AVX2 tile kernels and the FMA peak loops (tile_amd64.s,
// tile_amd64.go) are written by the avo emitter in emit/avo.
//go:generate go run github.com/attngen/attngen/emit/avo/cmd/genkernel -pkg $GOPACKAGE
