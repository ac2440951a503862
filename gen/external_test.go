package gen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// external is a mask published outside attngen, re-implemented here from
// its published meaning (not from its code), next to the attngen spec
// that docs/language.md maps it to. keep takes FlexAttention's q_idx and
// kv_idx with equal lengths; for SeqQ < SeqK the test passes
// q_idx + SeqK - SeqQ, the offset language.md documents.
type external struct {
	name   string // where it comes from, with its parameters
	causal bool   // the spec's causal flag
	mask   string // the spec's mask, flow YAML
	keep   func(q, kv int) bool
	// sizes, when set, are the only (SeqQ, SeqK) the definition is for
	sizes [][2]int
	// docs, when set, are the document ids of a packed sequence (keep
	// reads them itself); the calls then have SeqK = len(docs)
	docs []int32
	// tree, when set, is the parent array of a tree mask (keep reads its
	// own description of the tree); the calls then have SeqK = len(tree),
	// and SeqQ the whole sequence or the positions past sizes' SeqK -
	// SeqQ when sizes is set
	tree []int32
}

// seq is lo, lo+step, ... below hi.
func seq(lo, hi, step int) []int {
	var out []int
	for x := lo; x < hi; x += step {
		out = append(out, x)
	}
	return out
}

// floorDiv is Python's // on ints (PyTorch's on integer tensors floors too).
func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func externals() []external {
	var out []external
	add := func(name string, causal bool, m string, keep func(q, kv int) bool) {
		out = append(out, external{name: name, causal: causal, mask: m, keep: keep})
	}
	// attention-gym masks/causal.py: causal_mask.
	add("attention-gym causal_mask", true, "{full: {}}", func(q, kv int) bool { return q >= kv })
	for _, w := range []int{1, 5, 64} {
		// attention-gym masks/sliding_window.py: causal and q - kv <= W.
		add(fmt.Sprintf("attention-gym generate_sliding_window(%d)", w), true, fmt.Sprintf("{window: {size: %d}}", w+1),
			func(q, kv int) bool { return q >= kv && q-kv <= w })
		// Hugging Face masking_utils sliding_window_causal_mask_function:
		// causal and kv > q - W.
		add(fmt.Sprintf("HF sliding_window_causal_mask_function(%d)", w), true, fmt.Sprintf("{window: {size: %d}}", w),
			func(q, kv int) bool { return kv <= q && kv > q-w })
		// Hugging Face sliding_window_bidirectional_mask_function: |q - kv| <= W.
		add(fmt.Sprintf("HF sliding_window_bidirectional_mask_function(%d)", w), false, fmt.Sprintf("{window: {left: %d, right: %d}}", w, w),
			func(q, kv int) bool { return q-kv <= w && kv-q <= w })
	}
	for _, p := range []int{1, 7, 64, 100} {
		// attention-gym masks/prefix_lm.py: kv < P, or causal.
		add(fmt.Sprintf("attention-gym generate_prefix_lm_mask(%d)", p), false, fmt.Sprintf("{prefix_lm: {prefix: %d}}", p),
			func(q, kv int) bool { return kv < p || q >= kv })
		// FlexAttention one-sided predicates, the building blocks of
		// hybrids: the first P rows see every key; keys from P on.
		add(fmt.Sprintf("mask_mod q_idx < %d", p), false, fmt.Sprintf("{queries: {below: %d}}", p),
			func(q, kv int) bool { return q < p })
		add(fmt.Sprintf("mask_mod (kv_idx >= %d) & causal", p), true, fmt.Sprintf("{keys: {from: %d}}", p),
			func(q, kv int) bool { return kv >= p && q >= kv })
		// "first P rows bidirectional over the first P keys, causal
		// elsewhere" written with the one-sided primitives.
		add(fmt.Sprintf("mask_mod ((q_idx < %d) & (kv_idx < %d)) | causal", p, p), false,
			fmt.Sprintf("{union: [{intersect: [{queries: {below: %d}}, {keys: {below: %d}}]}, {window: {size: 2147483647}}]}", p, p),
			func(q, kv int) bool { return q < p && kv < p || q >= kv })
	}
	for _, c := range []int{1, 4, 33, 64} {
		// Hugging Face masking_utils chunked_causal_mask_function without
		// left padding (Llama 4's chunked attention): same chunk of
		// attention_chunk_size positions, and causal.
		add(fmt.Sprintf("HF chunked_causal_mask_function(%d)", c), true, fmt.Sprintf("{chunked: {size: %d}}", c),
			func(q, kv int) bool { return floorDiv(kv, c) == floorDiv(q, c) && kv <= q })
		// the same under causal: false: chunked brings its own causality
		add(fmt.Sprintf("HF chunked_causal_mask_function(%d), spec not causal", c), false, fmt.Sprintf("{chunked: {size: %d}}", c),
			func(q, kv int) bool { return floorDiv(kv, c) == floorDiv(q, c) && kv <= q })
	}
	for _, s := range []int{2, 3} {
		for ph := 0; ph < s; ph++ {
			// FlexAttention: keys at positions congruent to ph mod s.
			add(fmt.Sprintf("mask_mod (kv_idx %% %d == %d) & causal", s, ph), true, fmt.Sprintf("{keys: {stride: %d, phase: %d}}", s, ph),
				func(q, kv int) bool { return kv%s == ph && q >= kv })
		}
	}
	for _, c := range []int{1, 4, 33} {
		for _, pad := range []int{1, 3, 32, 100} {
			// Hugging Face chunked_causal_mask_function(chunk_size, left_padding):
			// (kv - pad) // c == (q - pad) // c, and causal
			add(fmt.Sprintf("HF chunked_causal_mask_function(%d, left_padding=%d)", c, pad), true, fmt.Sprintf("{chunked: {size: %d, offset: %d}}", c, pad),
				func(q, kv int) bool { return floorDiv(kv-pad, c) == floorDiv(q-pad, c) && kv <= q })
			// blocks after a prefix, both ways
			add(fmt.Sprintf("mask_mod (q_idx - %d) // %d == (kv_idx - %d) // %d", pad, c, pad, c), false, fmt.Sprintf("{block: {size: %d, offset: %d}}", c, pad),
				func(q, kv int) bool { return floorDiv(kv-pad, c) == floorDiv(q-pad, c) })
		}
	}
	for _, st := range []int{2, 5, 64} {
		for _, ph := range []int{0, 1, st - 1} {
			// dilation with an absolute phase: keys at positions ph mod st
			// (keys at even positions: st 2, ph 0)
			add(fmt.Sprintf("mask_mod causal & (kv_idx %% %d == %d)", st, ph), true, fmt.Sprintf("{dilated: {stride: %d, phase: %d}}", st, ph),
				func(q, kv int) bool { return q >= kv && kv%st == ph })
			// with a window: the phase-aligned keys of the last 40
			add(fmt.Sprintf("mask_mod causal & (q_idx - kv_idx < 40) & (kv_idx %% %d == %d)", st, ph), true,
				fmt.Sprintf("{intersect: [{window: {size: 40}}, {dilated: {stride: %d, phase: %d}}]}", st, ph),
				func(q, kv int) bool { return q >= kv && q-kv < 40 && kv%st == ph })
		}
	}
	in := func(x int, set []int) bool {
		for _, p := range set {
			if p == x {
				return true
			}
		}
		return false
	}
	for _, g := range []struct {
		spec string // global parameters
		set  []int  // the positions, listed
	}{
		{"positions: [0]", []int{0}},
		{"positions: [0, 7, 150]", []int{0, 7, 150}},
		{"positions: [3], ranges: [{from: 64, below: 96}]", append([]int{3}, seq(64, 96, 1)...)},
		{"stride: 50, phase: 49", seq(49, 400, 50)},
		{"tokens: 2, positions: [100]", []int{0, 1, 100}},
	} {
		for _, w := range []int{2, 8} {
			// Hugging Face LongformerSelfAttention: attention_window w
			// (w/2 keys each side), and global attention both ways for
			// the positions of global_attention_mask
			add(fmt.Sprintf("HF Longformer attention_window=%d, global %v", w, g.set), false, fmt.Sprintf("{longformer: {window: %d, %s}}", w, g.spec),
				func(q, kv int) bool { return q-kv <= w/2 && kv-q <= w/2 || in(q, g.set) || in(kv, g.set) })
		}
		// FlexAttention: global positions every later query sees, next
		// to a causal window of 16 (causal & (isin(kv, G) | q - kv < 16))
		add(fmt.Sprintf("mask_mod causal & (kv in %v | q_idx - kv_idx < 16)", g.set), true,
			fmt.Sprintf("{union: [{global: {%s}}, {window: {size: 16}}]}", g.spec),
			func(q, kv int) bool { return q >= kv && (in(kv, g.set) || q-kv < 16) })
		// global rows and columns, causal
		add(fmt.Sprintf("mask_mod causal & (q in %v | kv in %v)", g.set, g.set), true, fmt.Sprintf("{global: {%s, rows: true}}", g.spec),
			func(q, kv int) bool { return q >= kv && (in(q, g.set) || in(kv, g.set)) })
	}
	for _, g := range []struct {
		radius int
		set    []int
		spec   string
	}{{3, []int{0, 8}, "positions: [0, 8]"}, {16, []int{5, 100, 101, 102}, "positions: [5], ranges: [{from: 100, below: 103}]"}} {
		// attention-gym generate_global_sliding_window(window_size, is_global):
		// abs(q - kv) <= window_size, or q or kv global
		add(fmt.Sprintf("attention-gym generate_global_sliding_window(%d, %v)", g.radius, g.set), false,
			fmt.Sprintf("{union: [{window: {left: %d, right: %d}}, {global: {%s, rows: true}}]}", g.radius, g.radius, g.spec),
			func(q, kv int) bool { return q-kv <= g.radius && kv-q <= g.radius || in(q, g.set) || in(kv, g.set) })
	}
	for _, v := range []struct{ prompt, perFrame, width, round int }{{2, 14, 2, 4}, {10, 20, 1, 8}} {
		for _, sink := range []bool{false, true} {
			// attention-gym SVG generate_spatial_head_mask_mod: keys of the
			// prompt (and of the first frame with attn_sink), rows of the
			// prompt, and abs(q - kv) < mask_width
			cols := v.prompt
			if sink {
				cols += v.perFrame
			}
			mw := v.width * v.perFrame / v.round * v.round
			add(fmt.Sprintf("attention-gym SVG spatial head %+v sink %v", v, sink), false,
				fmt.Sprintf("{union: [{keys: {below: %d}}, {queries: {below: %d}}, {window: {left: %d, right: %d}}]}", cols, v.prompt, mw-1, mw-1),
				func(q, kv int) bool { return kv < cols || q < v.prompt || q-kv < mw && kv-q < mw })
		}
	}
	for _, j := range []struct{ prefix, block, blocks int }{{5, 4, 3}, {37, 16, 8}, {0, 8, 4}} {
		// attention-gym JetSpec generate_jetspec_training_mask_mod: Q_LEN =
		// blocks*block queries against KV_LEN = prefix + Q_LEN keys; a
		// query sees the prefix and, in its own block (keys laid out after
		// the prefix), the keys up to its offset. FlexAttention's q_idx
		// starts at 0; attngen's query positions are q_idx + prefix.
		sq := j.blocks * j.block
		m := fmt.Sprintf("{union: [{keys: {below: %d}}, {chunked: {size: %d, offset: %d}}]}", j.prefix, j.block, j.prefix)
		if j.prefix == 0 {
			m = fmt.Sprintf("{chunked: {size: %d}}", j.block)
		}
		out = append(out, external{
			name:   fmt.Sprintf("attention-gym JetSpec training mask %+v", j),
			causal: true,
			mask:   m,
			keep: func(q, kv int) bool {
				qi := q - j.prefix // FlexAttention's q_idx
				if kv < j.prefix {
					return true
				}
				kb := kv - j.prefix
				return floorDiv(qi, j.block) == floorDiv(kb, j.block) && kb%j.block <= qi%j.block
			},
			sizes: [][2]int{{sq, sq + j.prefix}},
		})
	}
	for _, bd := range []struct{ n, block int }{{12, 4}, {30, 4}, {40, 8}, {9, 1}} {
		// attention-gym generate_block_diffusion_mask(block_size, seq_len)
		// (BD3-LM's block_diff_mask): 2n tokens, the noised copy x_t at
		// 0..n-1 and the clean x_0 at n..2n-1, blocks of block_size
		// counted from the start of each half. A noised query sees its own
		// noised block (M_BD) and the clean blocks before its block
		// (M_OBC); a clean query its own clean block and the clean blocks
		// before it (M_BD, M_BC). The spec writes M_OBC as one window per
		// query phase r = q mod b: the clean keys up to q + n-1-r are the
		// clean blocks before q's.
		n, b := bd.n, bd.block
		blk := func(x int) int {
			if x >= n {
				return (x - n) / b
			}
			return x / b
		}
		terms := []string{
			fmt.Sprintf("{intersect: [{queries: {below: %d}}, {keys: {below: %d}}, {block: {size: %d}}]}", n, n, b),
			fmt.Sprintf("{intersect: [{queries: {from: %d}}, {keys: {from: %d}}, {union: [{block: {size: %d, offset: %d}}, {window: {left: %d, right: 0}}]}]}", n, n, b, n%b, 2*n),
		}
		for r := 0; r < b; r++ {
			terms = append(terms, fmt.Sprintf("{intersect: [{queries: {below: %d, stride: %d, phase: %d}}, {keys: {from: %d}}, {window: {left: 0, right: %d}}]}", n, b, r, n, n-1-r))
		}
		out = append(out, external{
			name:   fmt.Sprintf("attention-gym generate_block_diffusion_mask(%d, %d)", b, n),
			causal: false,
			mask:   "{union: [" + strings.Join(terms, ", ") + "]}",
			keep: func(q, kv int) bool {
				xq, xkv := q >= n, kv >= n
				bq, bkv := blk(q), blk(kv)
				return bq == bkv && xq == xkv || bq > bkv && xkv && !xq || bq >= bkv && xkv && xq
			},
			sizes: [][2]int{{2 * n, 2 * n}, {n, 2 * n}, {1, 2 * n}},
		})
	}
	for _, n := range []int{4, 50} {
		// attention-gym batchify_mask_mod(causal_mask, n) and
		// batchify_mask_mod(noop_mask, n): the same group of n, and the
		// inner mask on positions within the group
		add(fmt.Sprintf("attention-gym batchify_mask_mod(causal_mask, %d)", n), true, fmt.Sprintf("{block: {size: %d}}", n),
			func(q, kv int) bool { return q/n == kv/n && q%n >= kv%n })
		add(fmt.Sprintf("attention-gym batchify_mask_mod(noop_mask, %d)", n), false, fmt.Sprintf("{block: {size: %d}}", n),
			func(q, kv int) bool { return q/n == kv/n })
	}
	for _, pad := range []int{1, 9, 100} {
		// Hugging Face causal_mask_function & padding_mask_function with a
		// left-padded attention_mask ([0]*pad + [1]*...): one padding
		add(fmt.Sprintf("HF causal & padding_mask_function, left padding %d", pad), true, fmt.Sprintf("{keys: {from: %d}}", pad),
			func(q, kv int) bool { return kv <= q && kv >= pad })
	}
	out = append(out, nattenExternals()...)
	out = append(out, bigbirdExternals()...)
	out = append(out, treeExternals()...)
	out = append(out, bucketExternals()...)
	// Hugging Face bidirectional_mask_function: every pair.
	add("HF bidirectional_mask_function", false, "{full: {}}", func(q, kv int) bool { return true })
	// Packed sequences, with document ids: runs of 1 to 60 positions.
	ids := make([]int32, 200)
	for k, doc, left := 0, int32(0), 7; k < len(ids); k++ {
		if left == 0 {
			doc++
			left = 1 + (int(doc)*37)%60
		}
		ids[k] = doc
		left--
	}
	start := func(x int) int {
		for x > 0 && ids[x-1] == ids[x] {
			x--
		}
		return x
	}
	docCase := func(name string, causal bool, m string, keep func(q, kv int) bool) {
		out = append(out, external{name: name, causal: causal, mask: m, keep: keep, docs: ids})
	}
	// Hugging Face packed_sequence_mask_function and causal, attention-gym
	// generate_doc_mask_mod(causal_mask, offsets)
	docCase("HF packed_sequence_mask_function & causal", true, "{document: {}}",
		func(q, kv int) bool { return ids[q] == ids[kv] && kv <= q })
	// attention-gym generate_doc_mask_mod(inner, offsets): the inner mask on
	// positions logical to the document (q - offsets[doc[q]])
	for _, w := range []int{1, 5} {
		docCase(fmt.Sprintf("attention-gym generate_doc_mask_mod(sliding_window(%d))", w), true, fmt.Sprintf("{intersect: [{document: {}}, {window: {size: %d}}]}", w+1),
			func(q, kv int) bool { return ids[q] == ids[kv] && kv <= q && q-kv <= w })
	}
	for _, p := range []int{1, 4} {
		docCase(fmt.Sprintf("attention-gym generate_doc_mask_mod(generate_prefix_lm_mask(%d))", p), false,
			fmt.Sprintf("{intersect: [{document: {}}, {prefix_lm: {prefix: %d}}]}", p),
			func(q, kv int) bool { return ids[q] == ids[kv] && (kv-start(kv) < p || q >= kv) })
	}
	for _, b := range []int{4, 16} {
		// BigBird ITC without its random blocks (Zaheer et al. 2020, HF
		// BigBirdBlockSparseAttention's sliding and global parts): query
		// block n sees key blocks n-1, n, n+1, and the first block is
		// global both ways. Adjacent blocks are the blocks of size 2b
		// aligned at 0 or at b.
		add(fmt.Sprintf("BigBird ITC block %d, 1 global block, no random", b), false,
			fmt.Sprintf("{union: [{block: {size: %d}}, {block: {size: %d, offset: %d}}, {global: {tokens: %d, rows: true}}]}", 2*b, 2*b, b, b),
			func(q, kv int) bool {
				d := floorDiv(q, b) - floorDiv(kv, b)
				return d >= -1 && d <= 1 || q < b || kv < b
			})
	}
	for _, w := range []int{1, 3, 64, 65} {
		// FlexAttention: every earlier key except the W most recent
		// (issue 11's "everything except the last 64 keys" is W = 65:
		// q_idx - kv_idx > 64).
		add(fmt.Sprintf("mask_mod causal & (q_idx - kv_idx >= %d)", w), true, fmt.Sprintf("{not: {window: {size: %d}}}", w),
			func(q, kv int) bool { return q >= kv && q-kv >= w })
		// bidirectional: everything outside the band |q - kv| <= W
		add(fmt.Sprintf("mask_mod abs(q_idx - kv_idx) > %d", w), false, fmt.Sprintf("{not: {window: {left: %d, right: %d}}}", w, w),
			func(q, kv int) bool { return q-kv > w || kv-q > w })
	}
	for _, c := range []int{4, 16} {
		// and_masks(sliding_window(W), ~same_block): a window minus the
		// query's own block (A & ~B)
		add(fmt.Sprintf("mask_mod causal & (q_idx - kv_idx < 40) & ~(q_idx // %d == kv_idx // %d)", c, c), true,
			fmt.Sprintf("{intersect: [{window: {size: 40}}, {not: {block: {size: %d}}}]}", c),
			func(q, kv int) bool { return q >= kv && q-kv < 40 && floorDiv(q, c) != floorDiv(kv, c) })
		// or_masks(prefix, ~chunk): keys below c, or outside the query's chunk
		add(fmt.Sprintf("mask_mod (kv_idx < %d) | (q_idx // %d != kv_idx // %d)", c, c, c), false,
			fmt.Sprintf("{union: [{keys: {below: %d}}, {not: {block: {size: %d}}}]}", c, c),
			func(q, kv int) bool { return kv < c || floorDiv(q, c) != floorDiv(kv, c) })
	}
	return out
}

// nattenAxis is NATTEN's window along one axis of extent length, as its
// kernels compute it (NeighborhoodMask in natten_commons.cuh): the first
// neighbour and the end (exclusive) of the neighbours start, start+d, ...
// of index. Not causal: centred, shifted inwards at the edges, with the
// dilated groups' lengths accounted for; causal: the kernel's positions up
// to index.
func nattenAxis(index, length, kernel, d int, causal bool) (start, end int) {
	half := kernel / 2
	if causal {
		return max(index/d-kernel+1, 0)*d + index%d, min(length, index+d)
	}
	switch {
	case d <= 1:
		start = max(index-half, 0)
		if index+half >= length {
			start += length - index - half - 1
		}
	case index-half*d < 0:
		start = index % d
	case index+half*d >= length:
		full := length / d * d // positions in whole dilation groups
		rest := length - full
		if index%d < rest {
			start = length - rest + index%d - 2*half*d
		} else {
			start = full + index%d - kernel*d
		}
	default:
		start = index - half*d
	}
	return start, min(length, start+kernel*d)
}

// nattenExternals are NATTEN's 2-D neighbourhood attention on flattened
// grids (token = row*W + col; tokens past the grid attend to nothing and
// are not attended), and attention-gym's generate_natten.
func nattenExternals() []external {
	var out []external
	in := func(index, length, kernel, d int, causal bool, x int) bool {
		s, e := nattenAxis(index, length, kernel, d, causal)
		return x >= s && x < e && (x-s)%d == 0
	}
	for _, g := range []struct {
		h, w, kh, kw, dh, dw int
		ch, cw               bool
	}{
		{6, 6, 3, 3, 1, 1, false, false},
		{8, 12, 5, 3, 1, 2, false, false},
		{9, 7, 3, 3, 3, 2, false, false},
		{11, 10, 3, 3, 3, 3, false, false},
		{10, 6, 5, 3, 1, 1, true, false},
		{7, 9, 3, 5, 2, 1, false, true},
		{5, 8, 3, 4, 1, 2, true, true},
		{1, 40, 1, 9, 1, 4, false, false},
		{40, 1, 7, 1, 5, 1, false, false},
	} {
		n := g.h * g.w
		causal := g.ch && g.cw
		m := fmt.Sprintf("{neighborhood: {grid: [%d, %d], kernel: [%d, %d], dilation: [%d, %d], causal: [%v, %v]}}", g.h, g.w, g.kh, g.kw, g.dh, g.dw, g.ch, g.cw)
		out = append(out, external{
			name:   fmt.Sprintf("NATTEN na2d %+v", g),
			causal: causal,
			mask:   m,
			keep: func(q, kv int) bool {
				if q >= n || kv >= n {
					return false
				}
				return in(q/g.w, g.h, g.kh, g.dh, g.ch, kv/g.w) && in(q%g.w, g.w, g.kw, g.dw, g.cw, kv%g.w)
			},
			sizes: [][2]int{{n, n}, {1, n}, {n/3 + 1, n}, {n + 7, n + 7}},
		})
	}
	for _, g := range []struct{ canvas, kw, kh int }{{6, 3, 3}, {8, 5, 3}, {13, 7, 7}} {
		// attention-gym masks/natten.py generate_natten(canvas_w,
		// canvas_h, kernel_w, kernel_h): the kernel centre is the query's
		// cell clamped to half a kernel from the edges; its x is the row
		// (idx // canvas_w) and is clamped with canvas_w and kernel_w, so
		// for square canvases it is NATTEN with kernel [kernel_w, kernel_h]
		c := g.canvas
		clamp := func(v, lo, hi int) int { return min(max(v, lo), hi) }
		abs := func(v int) int { return max(v, -v) }
		out = append(out, external{
			name:   fmt.Sprintf("attention-gym generate_natten(%d, %d, %d, %d)", c, c, g.kw, g.kh),
			causal: false,
			mask:   fmt.Sprintf("{neighborhood: {grid: [%d, %d], kernel: [%d, %d]}}", c, c, g.kw, g.kh),
			keep: func(q, kv int) bool {
				if q >= c*c || kv >= c*c { // FlexAttention is called with c*c tokens
					return false
				}
				qx, qy, kx, ky := q/c, q%c, kv/c, kv%c
				cx := clamp(qx, g.kw/2, c-1-g.kw/2)
				cy := clamp(qy, g.kh/2, c-1-g.kh/2)
				return abs(cx-kx) <= g.kw/2 && abs(cy-ky) <= g.kh/2
			},
			sizes: [][2]int{{c * c, c * c}, {3, c * c}},
		})
	}
	return out
}

// bigbirdExternals are BigBird's ITC block-sparse attention (Zaheer et al.
// 2020; Hugging Face BigBirdBlockSparseAttention): blocks of b positions,
// a query block sees the key blocks within window/2 of it, the first and
// last g blocks are global both ways, and every other query block sees r
// random key blocks among the non-global blocks outside its window, drawn
// by the rule language.md documents (re-implemented here).
func bigbirdExternals() []external {
	var out []external
	mix := func(z uint64) uint64 {
		z ^= z >> 30
		z *= 0xBF58476D1CE4E5B9
		z ^= z >> 27
		z *= 0x94D049BB133111EB
		return z ^ z>>31
	}
	for _, c := range []struct {
		b, nb, window, g, r int
		seed                uint64
	}{
		{4, 12, 3, 1, 2, 7},
		{3, 20, 3, 2, 3, 1},
		{8, 10, 5, 1, 1, 123456},
		{2, 16, 1, 0, 4, 99},
		{5, 9, 3, 1, 9, 3}, // more random blocks than candidates: all of them
		{4, 8, 3, 1, 0, 0}, // no random blocks
		{6, 4, 3, 2, 2, 5}, // every block global
		{16, 13, 3, 1, 3, 42},
	} {
		n, h := c.b*c.nb, c.window/2
		random := map[[2]int]bool{} // (query block, key block)
		for q := c.g; q < c.nb-c.g; q++ {
			var cand []int
			for k := c.g; k < c.nb-c.g; k++ {
				if k-q > h || q-k > h {
					cand = append(cand, k)
				}
			}
			for k := 0; k < c.r && k < len(cand); k++ {
				x := mix(c.seed*0x9E3779B97F4A7C15 + uint64(q)<<32 + uint64(k))
				at := k + int(x%uint64(len(cand)-k))
				cand[k], cand[at] = cand[at], cand[k]
				random[[2]int{q, cand[k]}] = true
			}
		}
		global := func(blk int) bool { return blk < c.g || blk >= c.nb-c.g }
		spec := fmt.Sprintf("{bigbird: {block: %d, blocks: %d, window: %d, global: %d, random: %d, seed: %d}}", c.b, c.nb, c.window, c.g, c.r, c.seed)
		out = append(out, external{
			name:   fmt.Sprintf("BigBird ITC %+v", c),
			causal: false,
			mask:   spec,
			keep: func(q, kv int) bool {
				if q >= n || kv >= n {
					return false
				}
				qb, kb := q/c.b, kv/c.b
				return global(qb) || global(kb) || qb-kb <= h && kb-qb <= h || random[[2]int{qb, kb}]
			},
			sizes: [][2]int{{n, n}, {1, n}, {n/2 + 1, n}, {n + 5, n + 5}},
		})
	}
	return out
}

// TestExternalMasks: for every external mask, attngen's meaning (At), its
// dense rows (Keys, which the float64 reference and the counters use),
// the plan's keep words (what the CPU kernels apply) and the plan's tile
// classes agree with the external definition on every pair, at equal
// lengths and when decoding; and the CPU kernel's output equals a float64
// attention computed with the external definition.
func TestExternalMasks(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	var progs []spec.Prog
	for _, e := range externals() {
		s, err := spec.Parse("ext.yaml", []byte(fmt.Sprintf("name: ext\ncausal: %v\nhead_dim: 64\nmask: %s\n", e.causal, e.mask)))
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		pat := s.Pattern()
		plan, err := Compile(s, CPUTarget, nil)
		if err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		m := plan.Mask()
		sizes := [][2]int{{1, 1}, {7, 7}, {130, 130}, {200, 200}, {1, 150}, {50, 170}}
		var docs *mask.Docs
		switch {
		case e.tree != nil:
			sizes = [][2]int{{len(e.tree), len(e.tree)}}
			if e.sizes != nil {
				sizes = e.sizes
			}
			if docs, err = mask.NewTree(e.tree); err != nil {
				t.Fatal(err)
			}
		case e.docs != nil:
			sizes = [][2]int{{len(e.docs), len(e.docs)}, {60, len(e.docs)}}
			if docs, err = mask.NewDocs(e.docs); err != nil {
				t.Fatal(err)
			}
		case e.sizes != nil:
			sizes = e.sizes
		}
		for _, sz := range sizes {
			sq, sk := sz[0], sz[1]
			for row := 0; row < sq; row++ {
				i := spec.Row(row, sq, sk)
				dense := make([]bool, sk)
				if docs == nil || e.tree != nil {
					// Keys, on the parent array for a tree (Pattern.Data)
					withData := pat
					withData.Data = docs
					progs = withData.Keys(progs[:0], i, sk)
					for _, g := range progs {
						for j := g.Lo; j <= g.Hi; j += g.Step {
							dense[j] = true
						}
					}
				} else {
					// Keys sees one document; AtDocs is the dense row
					for j := range dense {
						dense[j] = pat.AtDocs(i, j, docs)
					}
				}
				for k0 := 0; k0 < sk; k0 += 64 {
					w := m.Word(i, k0, sk, docs)
					for j := k0; j < min(k0+64, sk); j++ {
						want, at := e.keep(i, j), pat.AtDocs(i, j, docs)
						if at != want || dense[j] != want || (w>>uint(j-k0)&1 != 0) != want {
							t.Fatalf("%s (%s, causal %v): sq %d sk %d pair (%d, %d): external %v, At %v, Keys %v, keep word %v",
								e.name, e.mask, e.causal, sq, sk, i, j, want, at, dense[j], w>>uint(j-k0)&1 != 0)
						}
					}
				}
			}
			// tile classes (query and key tiles of 16 positions) are sound
			// against the external mask
			for q0 := sk - sq; q0 < sk; q0 += 16 {
				q1 := min(q0+15, sk-1)
				for k0 := 0; k0 < sk; k0 += 16 {
					k1 := min(k0+15, sk-1)
					kept, total := countKept(q0, q1, k0, k1, func(i, j int) bool { return e.keep(i, j) })
					switch c := m.Class(q0, q1, k0, k1, docs); {
					case c == spec.Empty && kept > 0, c == spec.FullT && kept < total:
						t.Fatalf("%s: tile [%d,%d]x[%d,%d] is %v, %d of %d kept", e.name, q0, q1, k0, k1, c, kept, total)
					}
				}
			}
			checkExternalKernel(t, e, m, sq, sk, r)
		}
	}
}

// checkExternalKernel runs the CPU kernels (every supported variant) and
// compares their output and log-sum-exp with float64 attention under the
// external mask.
func checkExternalKernel(t *testing.T, e external, m mask.Mask, sq, sk int, r *rand.Rand) {
	t.Helper()
	const d = 64
	q, k, v := make([]float32, sq*d), make([]float32, sk*d), make([]float32, sk*d)
	for _, x := range [][]float32{q, k, v} {
		for n := range x {
			x[n] = float32(r.Float64()*2 - 1)
		}
	}
	scale := 1 / math.Sqrt(d)
	wantOut, wantLSE := make([]float64, sq*d), make([]float64, sq)
	for row := 0; row < sq; row++ {
		i := spec.Row(row, sq, sk)
		mx := math.Inf(-1)
		sc := make([]float64, sk)
		for j := 0; j < sk; j++ {
			if !e.keep(i, j) {
				continue
			}
			for c := 0; c < d; c++ {
				sc[j] += float64(q[row*d+c]) * float64(k[j*d+c])
			}
			sc[j] *= scale
			mx = math.Max(mx, sc[j])
		}
		if math.IsInf(mx, -1) {
			wantLSE[row] = mx
			continue
		}
		sum := 0.0
		for j := 0; j < sk; j++ {
			if e.keep(i, j) {
				p := math.Exp(sc[j] - mx)
				sum += p
				for c := 0; c < d; c++ {
					wantOut[row*d+c] += p * float64(v[j*d+c])
				}
			}
		}
		for c := 0; c < d; c++ {
			wantOut[row*d+c] /= sum
		}
		wantLSE[row] = mx + math.Log(sum)
	}
	for _, variant := range variants() {
		out, lse := make([]float32, sq*d), make([]float32, sq)
		data := e.docs
		if e.tree != nil {
			data = e.tree
		}
		err := cpu.Forward(m, variant, out, lse, q, k, v, data, cpu.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: sq, SeqK: sk, HeadDim: d})
		if err != nil {
			t.Fatalf("%s: %s: %v", e.name, variant, err)
		}
		for n := range out {
			if math.Abs(float64(out[n])-wantOut[n]) > 1e-4 {
				t.Fatalf("%s: %s sq %d sk %d: out[%d] = %v, external %v", e.name, variant, sq, sk, n, out[n], wantOut[n])
			}
		}
		for n := range lse {
			if want := wantLSE[n]; math.IsInf(want, -1) != math.IsInf(float64(lse[n]), -1) || !math.IsInf(want, -1) && math.Abs(float64(lse[n])-want) > 1e-4 {
				t.Fatalf("%s: %s sq %d sk %d: lse[%d] = %v, external %v", e.name, variant, sq, sk, n, lse[n], want)
			}
		}
	}
}

// treeExternals are tree masks of speculative decoding and shared-prefix
// packing, each re-implemented from its published meaning on its own
// description of the tree, next to the parent array attngen takes.
func treeExternals() []external {
	var out []external
	// Tree attention of speculative-decoding verification (Medusa, EAGLE,
	// SpecInfer's token-tree verification): the committed prefix of P
	// tokens is ordinary causal attention; each of the T draft tokens after
	// it sees the whole prefix, itself and its ancestors in the draft tree.
	// The tree is given as each draft token's parent among the draft
	// tokens, -1 for a root (a child of the last committed token), the
	// parents coming first. attngen's parent array: the prefix is a chain,
	// a root's parent is position P-1, and draft token t's parent is
	// P + rel[t].
	for _, c := range []struct {
		name string
		p    int
		rel  []int
	}{
		{"a chain of 5 drafted tokens", 37, []int{-1, 0, 1, 2, 3}},
		{"a star of 6 candidates", 64, []int{-1, -1, -1, -1, -1, -1}},
		{"a top-2 tree of depth 3", 100, []int{-1, -1, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}},
		{"26 nodes, random parents", 81, randomRel(26, 5)},
		{"70 nodes past a prefix of 3, random parents", 3, randomRel(70, 6)},
	} {
		p, rel := c.p, c.rel
		n := p + len(rel)
		parent := make([]int32, n)
		for j := range parent {
			switch {
			case j < p:
				parent[j] = int32(j - 1)
			case rel[j-p] < 0:
				parent[j] = int32(p - 1)
			default:
				parent[j] = int32(p + rel[j-p])
			}
		}
		// drafted is the relation of the draft tree itself: a is b or an
		// ancestor of b (draft indices)
		drafted := func(b, a int) bool {
			for x := b; x >= 0; x = rel[x] {
				if x == a {
					return true
				}
			}
			return false
		}
		out = append(out, external{
			name:   "speculative-decoding tree attention, " + c.name,
			causal: true,
			mask:   "{tree: {}}",
			keep: func(q, kv int) bool {
				switch {
				case q < p:
					return kv <= q
				case kv < p:
					return true
				}
				return kv < n && drafted(q-p, kv-p)
			},
			tree: parent,
			// the whole sequence, and the verification call: the T draft
			// tokens as queries against the cache
			sizes: [][2]int{{n, n}, {len(rel), n}, {1, n}},
		})
	}
	// attention-gym generate_jetspec_tree_causal_mask_mod(prefix_length,
	// build_tree_ancestor_matrix(parent_indices)): Q_LEN = the tree's
	// nodes, KV_LEN = prefix + nodes; node q sees every prefix key and the
	// nodes on its path from the root (itself included). parent_indices
	// lists each node's parent, parents first, the root's entry (node 0)
	// ignored. attngen: the prefix a chain, the root's parent the last
	// prefix position (-1 without a prefix), node t's parent P +
	// parent_indices[t]; FlexAttention's q_idx is attngen's position minus
	// the prefix (bottom-right alignment).
	for _, c := range []struct {
		p   int
		par []int
	}{
		{0, []int{-1, 0, 1, 1, 3, 3, 0}}, // the paper's Figure 3
		{5, []int{-1, 0, 1, 1, 3, 3, 0}},
		{17, singleRoot(randomRel(40, 7))},
	} {
		p, par := c.p, c.par
		nodes := len(par)
		// anc[i][j]: node j is on node i's root-to-self path, built as
		// build_tree_ancestor_matrix does, row by row from the parent's
		anc := make([][]bool, nodes)
		for i := range anc {
			anc[i] = make([]bool, nodes)
			if i > 0 {
				copy(anc[i], anc[par[i]])
			}
			anc[i][i] = true
		}
		parent := make([]int32, p+nodes)
		for j := range parent {
			switch {
			case j <= p:
				parent[j] = int32(j - 1)
			default:
				parent[j] = int32(p + par[j-p])
			}
		}
		out = append(out, external{
			name:   fmt.Sprintf("attention-gym JetSpec tree causal mask, prefix %d, %d nodes", p, nodes),
			causal: true,
			mask:   "{tree: {}}",
			keep: func(q, kv int) bool {
				qi := q - p // FlexAttention's q_idx
				return kv < p || kv < p+nodes && anc[qi][kv-p]
			},
			tree:  parent,
			sizes: [][2]int{{nodes, p + nodes}},
		})
	}
	// attention-gym generate_shared_prefix_mask_mod(offsets,
	// prefix_document_id): packed documents, each continuation naming the
	// prefix document it extends (a prefix document names itself); prefix
	// tokens are causal within their document, continuation tokens see
	// their whole prefix document and their own document causally.
	// attngen: a forest whose prefix documents start with a root (-1) and
	// whose continuations hang off the last token of their prefix.
	lengths := []int{30, 7, 12, 1, 25, 40, 9, 20, 3}
	prefixOf := []int{0, 0, 0, 0, 4, 5, 5, 4, 5}
	offsets := []int{0}
	for _, l := range lengths {
		offsets = append(offsets, offsets[len(offsets)-1]+l)
	}
	n := offsets[len(offsets)-1]
	docOf := make([]int, n)
	for d := range lengths {
		for x := offsets[d]; x < offsets[d+1]; x++ {
			docOf[x] = d
		}
	}
	parent := make([]int32, n)
	for x := range parent {
		d := docOf[x]
		switch {
		case x > offsets[d]:
			parent[x] = int32(x - 1)
		case prefixOf[d] == d:
			parent[x] = -1
		default:
			parent[x] = int32(offsets[prefixOf[d]+1] - 1)
		}
	}
	out = append(out, external{
		name:   "attention-gym generate_shared_prefix_mask_mod",
		causal: true,
		mask:   "{tree: {}}",
		keep: func(q, kv int) bool {
			d, pd := docOf[q], prefixOf[docOf[q]]
			own := kv >= offsets[d] && kv <= q
			prefix := d != pd && kv >= offsets[pd] && kv < offsets[pd+1]
			return own || prefix
		},
		tree:  parent,
		sizes: [][2]int{{n, n}, {40, n}},
	})
	return out
}

// singleRoot turns a draft forest into one tree: every root but node 0
// hangs off node 0.
func singleRoot(rel []int) []int {
	out := slices.Clone(rel)
	for x := 1; x < len(out); x++ {
		if out[x] < 0 {
			out[x] = 0
		}
	}
	out[0] = -1
	return out
}

// randomRel is a random draft tree of n nodes: each node's parent is an
// earlier node or -1 (a root), from a fixed seed.
func randomRel(n int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 99))
	rel := make([]int, n)
	for t := range rel {
		rel[t] = r.IntN(t+1) - 1
	}
	return rel
}

// bucketExternals are LSH (Reformer) and routing attention after the
// sort by bucket: tokens are sorted by bucket id, stably (equal ids keep
// their order), and a query attends to the keys of its own bucket, with
// causality on the original positions when causal. In the sorted order
// the bucket ids are non-decreasing and, within a bucket, the original
// order is the sorted order, so this is document with the sorted bucket
// ids, causal or not. (Reformer's chunking of the sorted sequence into
// windows that cross bucket boundaries, and its rule that a token attends
// to itself only when nothing else is left, are not part of this.)
func bucketExternals() []external {
	r := rand.New(rand.NewPCG(17, 18))
	n, buckets := 210, 9
	bucket := make([]int32, n) // of the original positions
	for x := range bucket {
		bucket[x] = int32(r.IntN(buckets))
	}
	orig := make([]int, n) // sorted position -> original position
	for x := range orig {
		orig[x] = x
	}
	slices.SortStableFunc(orig, func(a, b int) int { return int(bucket[a]) - int(bucket[b]) })
	ids := make([]int32, n)
	for x, o := range orig {
		ids[x] = bucket[o]
	}
	var out []external
	for _, causal := range []bool{true, false} {
		out = append(out, external{
			name:   fmt.Sprintf("LSH / routing attention after a stable sort by bucket, causal %v", causal),
			causal: causal,
			mask:   "{document: {}}",
			keep: func(q, kv int) bool {
				oq, ok := orig[q], orig[kv]
				return bucket[oq] == bucket[ok] && (!causal || ok <= oq)
			},
			docs: ids,
		})
	}
	return out
}

// TestExternalPaddingPerBatch: Hugging Face's padding mask
// (padding_mask_function, ANDed with causal_mask_function or alone for
// bidirectional attention, and with chunked_causal_mask_function(chunk,
// left_padding)), with each batch row's own left or right padding, is a
// document mask (intersected with block for the chunks) whose ids make the padding of each row its
// own document. On every query row that is not padding the two agree pair
// by pair, and the CPU kernels' outputs equal float64 attention under
// Hugging Face's mask. Padding rows differ: under the documents they keep
// their padding keys, where Hugging Face keeps none (left padding) or the
// real keys before them (right padding); their outputs are not used.
func TestExternalPaddingPerBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	const n, d, batch = 150, 64, 4
	pads := []struct {
		n    int
		left bool
	}{{0, true}, {37, true}, {1, false}, {90, false}}
	real := func(b, x int) bool {
		if pads[b].left {
			return x >= pads[b].n
		}
		return x < n-pads[b].n
	}
	ids := make([]int32, batch*n)
	for b := range batch {
		for x := range n {
			// the real tokens are document 1, the padding document 0 (left)
			// or 2 (right): non-decreasing either way
			switch {
			case real(b, x):
				ids[b*n+x] = 1
			case !pads[b].left:
				ids[b*n+x] = 2
			}
		}
	}
	// first real position of each row: chunks start there
	first := func(b int) int {
		if pads[b].left {
			return pads[b].n
		}
		return 0
	}
	for _, c := range []struct {
		causal bool
		chunk  int // 0: none
	}{{true, 0}, {false, 0}, {true, 16}, {true, 7}} {
		causal := c.causal
		m0 := spec.Document()
		if c.chunk > 0 {
			// HF chunked_causal_mask_function(chunk, left_padding): chunks
			// of the real tokens, counted from each row's first one
			m0 = spec.Intersect(spec.Document(), spec.Block(c.chunk))
		}
		s := &spec.Spec{Name: "pad", Mask: m0, Causal: causal, HeadDim: d}
		plan, err := Compile(s, CPUTarget, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := plan.Mask()
		hf := func(b, q, kv int) bool {
			if c.chunk > 0 && floorDiv(q-first(b), c.chunk) != floorDiv(kv-first(b), c.chunk) {
				return false
			}
			return real(b, kv) && (!causal || kv <= q)
		}
		for b := range batch {
			docs, err := mask.NewDocs(ids[b*n : (b+1)*n])
			if err != nil {
				t.Fatal(err)
			}
			pat := spec.Pattern{Mask: s.Mask, Causal: causal, Data: docs}
			for q := range n {
				if !real(b, q) {
					continue
				}
				for kv := range n {
					if pat.At(q, kv) != hf(b, q, kv) || (m.Word(q, kv/64*64, n, docs)>>uint(kv%64)&1 != 0) != hf(b, q, kv) {
						t.Fatalf("causal %v batch %d pair (%d, %d): documents %v, Hugging Face %v", causal, b, q, kv, pat.At(q, kv), hf(b, q, kv))
					}
				}
			}
		}
		sh := cpu.Shape{Batch: batch, HeadsQ: 1, HeadsKV: 1, SeqQ: n, SeqK: n, HeadDim: d}
		q, k, v := make([]float32, batch*n*d), make([]float32, batch*n*d), make([]float32, batch*n*d)
		for _, x := range [][]float32{q, k, v} {
			for i := range x {
				x[i] = float32(r.Float64()*2 - 1)
			}
		}
		for _, variant := range variants() {
			out, lse := make([]float32, batch*n*d), make([]float32, batch*n)
			if err := cpu.Forward(m, variant, out, lse, q, k, v, ids, sh); err != nil {
				t.Fatal(err)
			}
			for b := range batch {
				for row := range n {
					if !real(b, row) {
						continue
					}
					base := (b*n + row) * d
					want := attend64(q[base:base+d], k[b*n*d:(b+1)*n*d], v[b*n*d:(b+1)*n*d], d, func(kv int) bool { return hf(b, row, kv) })
					for c := range d {
						if math.Abs(float64(out[base+c])-want[c]) > 1e-4 {
							t.Fatalf("%s causal %v batch %d row %d: out[%d] = %v, Hugging Face's mask %v", variant, causal, b, row, c, out[base+c], want[c])
						}
					}
				}
			}
		}
	}
}

// attend64 is one query row of float64 attention over the keys keep keeps.
func attend64(q, k, v []float32, d int, keep func(kv int) bool) []float64 {
	n := len(k) / d
	sc := make([]float64, n)
	mx := math.Inf(-1)
	for j := range n {
		if !keep(j) {
			continue
		}
		for c := range d {
			sc[j] += float64(q[c]) * float64(k[j*d+c])
		}
		sc[j] /= math.Sqrt(float64(d))
		mx = math.Max(mx, sc[j])
	}
	out := make([]float64, d)
	sum := 0.0
	for j := range n {
		if keep(j) {
			p := math.Exp(sc[j] - mx)
			sum += p
			for c := range d {
				out[c] += p * float64(v[j*d+c])
			}
		}
	}
	for c := range out {
		out[c] /= sum
	}
	return out
}
