// Package gen will own the Plan: tile sizes, the tile schedule (which key
// tiles each query tile visits, full or partial), the partial-tile predicate
// as a small integer IR, layout transforms and launch geometry, and the Go
// API of generated packages. It must never import an emitter. It is empty
// until the kernel issues land.
package gen
