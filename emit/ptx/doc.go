// Package ptx will own lowering a gen.Plan to PTX text: header, register
// declarations, one op-to-text table and legalization. It decides no tiling.
// It is empty until the GPU kernel issue lands.
package ptx
