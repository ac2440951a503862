// Package avo will own lowering a gen.Plan to AVX-512 and AVX2 Go assembly
// through avo. It decides no tiling. It is empty until the CPU kernel issue
// lands.
package avo
