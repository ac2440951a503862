package ptx

import (
	"github.com/attngen/attngen/runtime/gpu"
)

// forwardParams is the parameter layout, in order. Document kernels take
// three more device addresses after lse: per key position (absolute,
// [seq_k], shared by every batch element and head) the s32 document id
// (non-decreasing), the first and the last position of its document.
func forwardParams(docs bool) []Param {
	ps := []Param{
		{Name: "q", T: U64, Doc: "queries [batch][heads_q][seq_q][D], elem"},
		{Name: "k", T: U64, Doc: "keys [batch][heads_kv][seq_k][D], elem"},
		{Name: "v", T: U64, Doc: "values [batch][heads_kv][seq_k][D], elem"},
		{Name: "o", T: U64, Doc: "output [batch][heads_q][seq_q][D], elem"},
		{Name: "lse", T: U64, Doc: "log-sum-exp [batch][heads_q][seq_q], f32 (natural log)"},
	}
	if docs {
		ps = append(ps,
			Param{Name: "doc_id", T: U64, Doc: "document id per position [seq_k], s32, non-decreasing"},
			Param{Name: "doc_start", T: U64, Doc: "first position of the position's document [seq_k], s32"},
			Param{Name: "doc_end", T: U64, Doc: "last position of the position's document [seq_k], s32"})
	}
	return append(ps, []Param{
		{Name: "seq_q", T: U32, Doc: "query rows (<= seq_k); row r is position r + seq_k - seq_q"},
		{Name: "seq_k", T: U32, Doc: "keys"},
		{Name: "heads_q", T: U32, Doc: "query heads"},
		{Name: "heads_kv", T: U32, Doc: "key/value heads; query head h reads h / (heads_q/heads_kv)"},
		{Name: "scale_log2", T: F32, Doc: "softmax scale times log2(e)"},
	}...)
}

// backwardParams is the parameter layout of the two kernels, in order.
// Gradients and delta are f32; the inputs are the forward's (elem) and
// its natural-log lse (f32).
func backwardParams(dkv, docs, tree bool) []Param {
	ps := []Param{
		{Name: "q", T: U64, Doc: "queries [batch][heads_q][seq_q][D], elem"},
		{Name: "k", T: U64, Doc: "keys [batch][heads_kv][seq_k][D], elem"},
		{Name: "v", T: U64, Doc: "values [batch][heads_kv][seq_k][D], elem"},
	}
	if !dkv {
		ps = append(ps, Param{Name: "o", T: U64, Doc: "forward output [batch][heads_q][seq_q][D], elem"})
	}
	ps = append(ps,
		Param{Name: "dout", T: U64, Doc: "gradient of the output [batch][heads_q][seq_q][D], elem"},
		Param{Name: "lse", T: U64, Doc: "forward log-sum-exp [batch][heads_q][seq_q], f32 (natural log)"},
		Param{Name: "delta", T: U64, Doc: "rowsum(dout * out) [batch][heads_q][seq_q], f32 (written by the dq kernel, read by the dk/dv kernel)"})
	if tree {
		ps = append(ps, treeForwardParams()[5:9]...)
	} else if docs {
		ps = append(ps,
			Param{Name: "doc_id", T: U64, Doc: "document id per position [seq_k], s32, non-decreasing"},
			Param{Name: "doc_start", T: U64, Doc: "first position of the position's document [seq_k], s32"},
			Param{Name: "doc_end", T: U64, Doc: "last position of the position's document [seq_k], s32"})
	}
	if dkv {
		ps = append(ps,
			Param{Name: "dk", T: U64, Doc: "key gradient [batch][heads_kv][seq_k][D], f32"},
			Param{Name: "dv", T: U64, Doc: "value gradient [batch][heads_kv][seq_k][D], f32"})
	} else {
		ps = append(ps, Param{Name: "dq", T: U64, Doc: "query gradient [batch][heads_q][seq_q][D], f32"})
	}
	return append(ps, []Param{
		{Name: "seq_q", T: U32, Doc: "query rows (<= seq_k); row r is position r + seq_k - seq_q"},
		{Name: "seq_k", T: U32, Doc: "keys"},
		{Name: "heads_q", T: U32, Doc: "query heads"},
		{Name: "heads_kv", T: U32, Doc: "key/value heads; query head h reads h / (heads_q/heads_kv)"},
		{Name: "scale_log2", T: F32, Doc: "softmax scale times log2(e)"},
		{Name: "scale", T: F32, Doc: "softmax scale"},
	}...)
}

// hopperParams is the sm_90a kernel's parameter layout: the sm_80 kernel's
// without q, k and v, which it reads through tensor maps passed by
// address (TensorMaps describes them) after lse and the document (or
// tree) arrays.
func hopperParams(docs, tree bool) []Param {
	var ps []Param
	base := forwardParams(docs)
	if tree {
		base = treeForwardParams()
	}
	for _, p := range base {
		switch p.Name {
		case "q", "k", "v":
			continue
		case "seq_q":
			ps = append(ps,
				Param{Name: "tmap_q", T: U64, Doc: "address of the tensor map of q (TensorMaps) in global memory"},
				Param{Name: "tmap_k", T: U64, Doc: "address of the tensor map of k (TensorMaps)"},
				Param{Name: "tmap_v", T: U64, Doc: "address of the tensor map of v (TensorMaps)"})
		}
		ps = append(ps, p)
	}
	return append(ps, Param{Name: gpu.PersistentParam, T: U32, Doc: "batch elements: the persistent grid's work items are query tiles x heads_q x batch x residue classes"})
}

// treeForwardParams is the parameter layout of a tree kernel (a plan that
// reads a parent array): forwardParams' with, after lse, the four device
// addresses of TreeArrays' arrays in place of the document arrays.
func treeForwardParams() []Param {
	ps := forwardParams(false)
	tree := []Param{
		{Name: "tree_lo", T: U64, Doc: "per position [seq_k], s32: the largest t with keys 0..t all ancestors-or-self"},
		{Name: "tree_off", T: U64, Doc: "per position [seq_k], s32: first word of the position's row in tree_anc (0 in the leading chain)"},
		{Name: "tree_anc", T: U64, Doc: "ancestor rows of the positions past the chain, b32 words: bit c of a row is position chain+c"},
		{Name: "tree_info", T: U64, Doc: "s32[3]: the leading chain's length, the least tree_lo past it, its largest chain ancestor past it"},
	}
	out := append([]Param(nil), ps[:5]...)
	out = append(out, tree...)
	return append(out, ps[5:]...)
}
