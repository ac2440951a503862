package main

import (
	"testing"

	"github.com/attngen/attngen/spec"
)

// TestKeysRead: the keys a bench call counts as read are those some query
// keeps, by brute force over every pair, for decoding and prefill shapes.
func TestKeysRead(t *testing.T) {
	pats := []spec.Pattern{
		{Mask: spec.Window(100), Causal: true},
		{Mask: spec.Union(spec.Global(4), spec.Window(64)), Causal: true},
		{Mask: spec.Dilated(8, 0), Causal: true},
		{Mask: spec.Block(256), Causal: true},
		{Mask: spec.Window(30), Causal: false},
	}
	for _, p := range pats {
		for _, sh := range [][2]int{{1, 1000}, {3, 1000}, {500, 500}, {17, 777}} {
			sq, sk := sh[0], sh[1]
			want := 0
			for j := 0; j < sk; j++ {
				for r := 0; r < sq; r++ {
					if p.At(spec.Row(r, sq, sk), j) {
						want++
						break
					}
				}
			}
			if got := keysRead(p, sq, sk); got != want {
				t.Errorf("%v, %d queries of %d keys: keysRead %d, want %d", p, sq, sk, got, want)
			}
		}
	}
}
