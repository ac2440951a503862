package verify

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// TestKeptPairsDecode: with fewer queries than keys, the queries are the
// last sq positions (query r at absolute position sk-sq+r), and KeptPairs
// counts exactly the pairs a brute-force walk over those positions keeps,
// and the closed forms of causal and causal window attention.
func TestKeptPairsDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 34))
	for iter := 0; iter < 400; iter++ {
		p := spectest.Pattern(r, 40, 3)
		sk := 1 + r.IntN(300)
		sq := 1 + r.IntN(min(sk, 17))
		var want int64
		for q := 0; q < sq; q++ {
			pos := sk - sq + q
			for j := 0; j < sk; j++ {
				if p.At(pos, j) {
					want++
				}
			}
		}
		if got := KeptPairs(p, sq, sk); got != want {
			t.Fatalf("%v sq %d sk %d: KeptPairs %d, brute force %d", p, sq, sk, got, want)
		}
	}
	causal := spec.Pattern{Mask: spec.Full(), Causal: true}
	for _, c := range []struct{ sq, sk, w int }{{1, 1, 4}, {1, 256, 64}, {3, 256, 64}, {16, 4096, 1024}, {1, 131072, 1024}, {7, 50, 100}, {50, 50, 8}} {
		// Query q keeps keys 0..sk-sq+q: sk-sq+q+1 of them.
		full := int64(c.sq)*int64(c.sk-c.sq) + int64(c.sq)*int64(c.sq+1)/2
		if got := KeptPairs(causal, c.sq, c.sk); got != full {
			t.Errorf("causal sq %d sk %d: %d, want %d", c.sq, c.sk, got, full)
		}
		var win int64
		for q := 0; q < c.sq; q++ {
			win += int64(min(c.w, c.sk-c.sq+q+1))
		}
		if got := KeptPairs(spec.Pattern{Mask: spec.Window(c.w), Causal: true}, c.sq, c.sk); got != win {
			t.Errorf("window %d sq %d sk %d: %d, want %d", c.w, c.sq, c.sk, got, win)
		}
	}
}
