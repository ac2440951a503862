package ptx

import (
	"fmt"
	"math/rand/v2"
	"testing"

	ptxi "github.com/attngen/attngen/verify/ptx"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// treeParents is a random parent array of n positions (spectest.Parents).
func treeParents(n int, seed uint64) []int32 {
	return spectest.Parents(rand.New(rand.NewPCG(seed, 77)), n)
}

// treeArrays copies TreeArrays of a parent array to the interpreter's
// memory and returns their addresses in kernel parameter order.
func treeArrays(t *testing.T, dev *ptxi.Device, alloc func(int) uint64, parent []int32) []uint64 {
	t.Helper()
	lo, off, anc, info, err := TreeArrays(parent)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []uint64
	for _, a := range [][]int32{lo, off, nil, info[:]} {
		var u []uint32
		if a == nil {
			u = anc
		} else {
			u = make([]uint32, len(a))
			for i, x := range a {
				u[i] = uint32(x)
			}
		}
		addr := alloc(4 * len(u))
		if err := dev.WriteU32(addr, u); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, addr)
	}
	return addrs
}

// TestTreeArrays: the arrays a tree kernel reads hold, bit by bit, the
// ancestors of every position past the chain, and a bad parent array is
// an error.
func TestTreeArrays(t *testing.T) {
	for seed := range uint64(30) {
		n := 1 + int(seed*13%170)
		par := treeParents(n, seed)
		lo, off, anc, info, err := TreeArrays(par)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := spec.NewTree(par)
		chain := int(info[0])
		if chain != d.TreeChain() {
			t.Fatalf("chain %d, want %d", chain, d.TreeChain())
		}
		for i := range n {
			if int(lo[i]) != d.TreeLo(i) {
				t.Fatalf("lo[%d] = %d, want %d", i, lo[i], d.TreeLo(i))
			}
			for j := chain; j <= i; j++ {
				c := j - chain
				got := anc[int(off[i])+c/32]>>uint(c%32)&1 != 0
				if got != d.TreeAnc(i, j) {
					t.Fatalf("parents %v: bit of (%d, %d) = %v", par, i, j, got)
				}
			}
		}
	}
	if _, _, _, _, err := TreeArrays([]int32{-1, 2, 0}); err == nil {
		t.Error("a parent after its child: no error")
	}
}

// TestInterpTree runs tree kernels under the interpreter against the
// float64 reference on random parent arrays: a lone tree, a tree with a
// bidirectional prefix, intersected with a window, and under not, at
// lengths that are not multiples of the tiles, prefill and decoding.
func TestInterpTree(t *testing.T) {
	masks := []spec.Pattern{
		{Mask: spec.Tree(), Causal: true},
		{Mask: spec.Union(spec.Tree(), spec.KeySet(0, 70, 1, 0)), Causal: false},
		{Mask: spec.Intersect(spec.Tree(), spec.Window(90)), Causal: true},
		{Mask: spec.Not(spec.Tree()), Causal: true},
	}
	shapes := []shape{{1, 2, 1, 150, 200}, {2, 1, 1, 1, 200}, {1, 1, 1, 133, 133}}
	if testing.Short() {
		shapes = shapes[:2]
	}
	for k, pat := range masks {
		p := compile(t, fmt.Sprintf("tree%d", k), pat.Mask, pat.Causal, 64)
		if !p.UsesTree() {
			t.Fatalf("%v: the plan reads no parent array", pat)
		}
		for x, sh := range shapes {
			par := treeParents(sh.sk, uint64(10*k+x))
			t.Run(fmt.Sprintf("%d/%v", k, sh), func(t *testing.T) {
				t.Logf("%v", pat)
				if n := runForwardDocs(t, p, Config{SoftLg2: true}, sh, nil, true, par); n != 0 {
					t.Errorf("%d mismatches", n)
				}
			})
		}
	}
}

// TestTreeKernelParams: a tree kernel takes the four tree arrays after lse
// and no document array; other kernels take none of them.
func TestTreeKernelParams(t *testing.T) {
	names := func(p *gen.Plan) []string {
		k, err := GenerateForward(p, Config{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range k.Params {
			out = append(out, x.Name)
		}
		return out
	}
	got := fmt.Sprint(names(compile(t, "tree", spec.Tree(), true, 64)))
	if want := "[q k v o lse tree_lo tree_off tree_anc tree_info seq_lens_q seq_lens_k q_pos k_pos seq_q seq_k heads_q heads_kv scale_log2 stride_q_batch stride_q_head stride_q_pos stride_k_batch stride_k_head stride_k_pos stride_v_batch stride_v_head stride_v_pos stride_o_batch stride_o_head stride_o_pos]"; got != want {
		t.Errorf("tree kernel params %s, want %s", got, want)
	}
	if got := fmt.Sprint(names(compile(t, "full", spec.Full(), true, 64))); got != "[q k v o lse seq_lens_q seq_lens_k q_pos k_pos seq_q seq_k heads_q heads_kv scale_log2 stride_q_batch stride_q_head stride_q_pos stride_k_batch stride_k_head stride_k_pos stride_v_batch stride_v_head stride_v_pos stride_o_batch stride_o_head stride_o_pos]" {
		t.Errorf("causal kernel params %s", got)
	}
}
