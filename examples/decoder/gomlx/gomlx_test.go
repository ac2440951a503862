package main

import "testing"

// TestGoMLXMatchesLoops checks that the GoMLX attention of the benchmark
// computes the model the Go loops compute (examples/decoder's test holds
// the loops and attngen to a float64 model).
func TestGoMLXMatchesLoops(t *testing.T) {
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(g); err != nil {
		t.Fatal(err)
	}
}
