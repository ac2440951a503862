package mask

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// randomParents returns a parent array of n positions: a chain of prefix
// positions, then nodes whose parents are drawn among earlier positions
// (often the chain's end, the usual speculative tree), and a few roots.
func randomParents(r *rand.Rand, n, prefix int) []int32 {
	p := make([]int32, n)
	for i := range p {
		switch {
		case i < prefix:
			p[i] = int32(i - 1)
		case r.IntN(8) == 0:
			p[i] = -1
		case r.IntN(3) == 0 && prefix > 0:
			p[i] = int32(prefix - 1)
		default:
			p[i] = int32(r.IntN(i+1) - 1)
		}
	}
	return p
}

// ancestors is the brute-force ancestor-or-self relation of a parent array.
func ancestors(p []int32, i, j int) bool {
	for x := i; x >= 0; x = int(p[x]) {
		if x == j {
			return true
		}
	}
	return false
}

func TestTreeAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var d Docs
	for trial := range 300 {
		n := 1 + r.IntN(200)
		prefix := r.IntN(n + 1)
		p := randomParents(r, n, prefix)
		if err := d.ResetTree(p); err != nil {
			t.Fatal(err)
		}
		if !d.IsTree() || d.Len() != n {
			t.Fatalf("trial %d: IsTree %v, Len %d", trial, d.IsTree(), d.Len())
		}
		if d.TreeChain() < prefix {
			t.Fatalf("trial %d: chain %d below the prefix %d", trial, d.TreeChain(), prefix)
		}
		minLo, maxTop := Inf, -1
		for i := range n {
			lo := -1
			for lo+1 <= i && ancestors(p, i, lo+1) {
				lo++
			}
			if got := d.TreeLo(i); got != lo {
				t.Fatalf("trial %d: TreeLo(%d) = %d, want %d (parents %v)", trial, i, got, lo, p)
			}
			depth := -1
			for j := -3; j < n+3; j++ {
				want := j >= 0 && j < n && ancestors(p, i, j)
				if want {
					depth++
				}
				if got := d.TreeAnc(i, j); got != want {
					t.Fatalf("trial %d: TreeAnc(%d, %d) = %v, want %v (parents %v)", trial, i, j, got, want, p)
				}
				if want && i >= d.TreeChain() && j < d.TreeChain() {
					maxTop = max(maxTop, j)
				}
			}
			if i >= d.TreeChain() {
				minLo = min(minLo, lo)
			}
			if got := d.TreeDepth(i); got != depth {
				t.Fatalf("trial %d: TreeDepth(%d) = %d, want %d", trial, i, got, depth)
			}
			for k0 := -70; k0 < n+5; k0 += 1 + r.IntN(9) {
				var want uint64
				for c := range 64 {
					if k := k0 + c; k >= 0 && k < n && ancestors(p, i, k) {
						want |= 1 << uint(c)
					}
				}
				if got := d.TreeWord(i, k0); got != want {
					t.Fatalf("trial %d: TreeWord(%d, %d) = %064b, want %064b (parents %v)", trial, i, k0, got, want, p)
				}
			}
		}
		if d.TreeMinLo() != minLo || d.TreeMaxTop() != maxTop || d.TreeInfo(0) != d.TreeChain() || d.TreeInfo(1) != minLo || d.TreeInfo(2) != maxTop {
			t.Fatalf("trial %d: min lo %d max top %d, want %d %d", trial, d.TreeMinLo(), d.TreeMaxTop(), minLo, maxTop)
		}
		// a document reset in between keeps the buffers and drops the tree
		if trial%50 == 0 {
			if err := d.Reset([]int32{0, 0, 1}); err != nil || d.IsTree() {
				t.Fatalf("Reset: %v, IsTree %v", err, d.IsTree())
			}
		}
	}
}

func TestTreeErrors(t *testing.T) {
	for _, c := range []struct {
		p    []int32
		want string
	}{
		{[]int32{-1, 1}, "parent[1] = 1"},
		{[]int32{-1, 0, 5}, "parent[2] = 5"},
		{[]int32{-2}, "parent[0] = -2"},
		{[]int32{0}, "parent[0] = 0"},
	} {
		_, err := NewTree(c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewTree(%v): %v, want an error naming %q", c.p, err, c.want)
		}
	}
	big := make([]int32, MaxTreeNodes+2)
	for i := range big {
		big[i] = -1
	}
	if _, err := NewTree(big); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a tree over MaxTreeNodes: %v", err)
	}
}

func TestTreeResetAllocatesNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := randomParents(r, 300, 100)
	var d Docs
	if err := d.ResetTree(p); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(10, func() { _ = d.ResetTree(p) }); n != 0 {
		t.Errorf("ResetTree allocates %v times after warm-up", n)
	}
}
