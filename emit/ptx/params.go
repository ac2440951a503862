package ptx

import (
	"fmt"

	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
)

// The kernels' parameters, each described once. Tensors are rows of D
// (or Dv) contiguous elements at the element strides the kernel takes
// (strideParams; the default, gpu.BHSD, is row-major
// [batch][heads][seq][D]); elem is the target's element type.
var (
	parQ    = Param{Name: "q", T: U64, Doc: "queries [batch][heads_q][seq_q][D], elem"}
	parK    = Param{Name: "k", T: U64, Doc: "keys [batch][heads_kv][seq_k][D], elem"}
	parV    = Param{Name: "v", T: U64, Doc: "values [batch][heads_kv][seq_k][D], elem"}
	parO    = Param{Name: "o", T: U64, Doc: "output [batch][heads_q][seq_q][D], elem"}
	parLSE  = Param{Name: "lse", T: U64, Doc: "log-sum-exp [batch][heads_q][seq_q], f32 (natural log)"}
	parFwdO = Param{Name: "o", T: U64, Doc: "forward output [batch][heads_q][seq_q][D], elem"}
	parDO   = Param{Name: "dout", T: U64, Doc: "gradient of the output [batch][heads_q][seq_q][D], elem"}
	parFLSE = Param{Name: "lse", T: U64, Doc: "forward log-sum-exp [batch][heads_q][seq_q], f32 (natural log)"}
	parDlt  = Param{Name: "delta", T: U64, Doc: "rowsum(dout * out) [batch][heads_q][seq_q], f32 (written by the dq kernel, read by the dk/dv kernel)"}
	parDQ   = Param{Name: "dq", T: U64, Doc: "query gradient [batch][heads_q][seq_q][D], f32"}
	parDK   = Param{Name: "dk", T: U64, Doc: "key gradient [batch][heads_kv][seq_k][D], f32"}
	parDV   = Param{Name: "dv", T: U64, Doc: "value gradient [batch][heads_kv][seq_k][D], f32"}
	parTmQ  = Param{Name: "tmap_q", T: U64, Doc: "address of the tensor map of q (TensorMaps) in global memory"}
	parTmK  = Param{Name: "tmap_k", T: U64, Doc: "address of the tensor map of k (TensorMaps)"}
	parTmV  = Param{Name: "tmap_v", T: U64, Doc: "address of the tensor map of v (TensorMaps)"}
	parScl  = Param{Name: "scale", T: F32, Doc: "softmax scale"}
	parBat  = Param{Name: gpu.PersistentParam, T: U32, Doc: "batch elements: the persistent grid's work items are query tiles x heads_q x batch x residue classes"}

	// the score stage's (score.go)
	parCap    = Param{Name: gpu.SoftCapParam, T: F32, Doc: "soft-cap value c of s <- c tanh(s/c), natural units, finite and > 0"}
	parSlopes = Param{Name: gpu.SlopesParam, T: U64, Doc: "ALiBi slopes [heads_q], f32, natural units"}
	parSinks  = Param{Name: gpu.SinksParam, T: U64, Doc: "learned sink logits [heads_q], f32, natural units (-Inf: none)"}
	parDSink  = Param{Name: gpu.DSinkRowsParam, T: U64, Doc: "sink gradient terms [batch][heads_q][seq_q], f32: -exp(sink - lse) * delta per row; dsink[h] sums head h's rows (gpu.DSink)"}
)

// docParams are a document kernel's arrays: per key position (absolute,
// [seq_k], shared by every batch element and head) the s32 document id
// (non-decreasing), the first and the last position of its document
// (DocArrays).
var docParams = []Param{
	{Name: "doc_id", T: U64, Doc: "document id per position [seq_k], s32, non-decreasing"},
	{Name: "doc_start", T: U64, Doc: "first position of the position's document [seq_k], s32"},
	{Name: "doc_end", T: U64, Doc: "last position of the position's document [seq_k], s32"},
}

// treeParams are a tree kernel's arrays (TreeArrays), in place of the
// document arrays.
var treeParams = []Param{
	{Name: "tree_lo", T: U64, Doc: "per position [seq_k], s32: the largest t with keys 0..t all ancestors-or-self"},
	{Name: "tree_off", T: U64, Doc: "per position [seq_k], s32: first word of the position's row in tree_anc (0 in the leading chain)"},
	{Name: "tree_anc", T: U64, Doc: "ancestor rows of the positions past the chain, b32 words: bit c of a row is position chain+c"},
	{Name: "tree_info", T: U64, Doc: "s32[3]: the leading chain's length, the least tree_lo past it, its largest chain ancestor past it"},
}

// lensParams are the per-row lengths of the kernels that take them
// (geom.lens: every kernel but the residue layout's above stageDim): device addresses, 0 for
// none (gpu.SeqLensQParam).
// Launch.Args passes them from Launch.SeqLensQ and SeqLensK, not from its
// list of addresses.
var lensParams = []Param{
	{Name: gpu.SeqLensQParam, T: U64, Doc: "queries of each batch row [batch], s32, clamped to 0..seq_q (0: none, every row has seq_q)"},
	{Name: gpu.SeqLensKParam, T: U64, Doc: "keys of each batch row [batch], s32, clamped to 0..seq_k (0: none, every row has seq_k)"},
}

// posParams are the per-row positions of the kernels that take them
// (geom.pos): device addresses, 0 for the default alignment
// (gpu.QPosParam). Launch.Args passes them from Launch.QPos and KPos.
var posParams = []Param{
	{Name: gpu.QPosParam, T: U64, Doc: "absolute position of each batch row's first query [batch], s32 (0: k_pos + keys - queries)"},
	{Name: gpu.KPosParam, T: U64, Doc: "absolute position of each batch row's first key [batch], s32 (0: 0)"},
}

// isPosParam reports whether parameter name is one of posParams.
func isPosParam(name string) bool { return name == gpu.QPosParam || name == gpu.KPosParam }

// isLensParam reports whether parameter name is one of lensParams.
func isLensParam(name string) bool { return name == gpu.SeqLensQParam || name == gpu.SeqLensKParam }

// shapeParams are the scalars every kernel takes.
var shapeParams = []Param{
	{Name: "seq_q", T: U32, Doc: "query rows (<= seq_k); row r is position r + seq_k - seq_q"},
	{Name: "seq_k", T: U32, Doc: "keys"},
	{Name: "heads_q", T: U32, Doc: "query heads"},
	{Name: "heads_kv", T: U32, Doc: "key/value heads; query head h reads h / (heads_q/heads_kv)"},
	{Name: "scale_log2", T: F32, Doc: "softmax scale times log2(e)"},
}

// Layout tensors: the tensors whose element strides a kernel takes
// (strideParams). The backward's other tensors take one of theirs: dout
// and the forward's o take o's, dq q's, dk k's and dv v's; lse, delta and
// dsink_rows stay contiguous [batch][heads_q][seq_q].
var (
	stridesFwd = []string{"q", "k", "v", "o"}
	stridesHop = []string{"o"} // q, k and v: the tensor maps' strides
)

// strideAxes are the axes of a tensor's strides, in parameter order.
var strideAxes = [3]string{"batch", "head", "pos"}

// strideName is the parameter of tensor t's element stride along axis
// (strideAxes).
func strideName(t, axis string) string { return gpu.StrideParam(t, axis) }

// strideParams are the element strides (batch, head, pos) of each tensor
// of ts, u32 each: element (b, h, r, d) of tensor t is at element
// b*batch + h*head + r*pos + d of its address (gpu.Layout).
func strideParams(ts []string) []Param {
	var ps []Param
	for _, t := range ts {
		for _, ax := range strideAxes {
			ps = append(ps, Param{Name: strideName(t, ax), T: U32, Doc: fmt.Sprintf("element stride of %s along its %s axis", t, ax)})
		}
	}
	return ps
}

// kernelParams is the one builder of a kernel's parameter list. Every
// kernel's list has the same order:
//
//  1. tensors: the kernel's own device addresses (the sm_80 forward's
//     q, k, v, o, lse; the dq kernel's q, k, v, o, dout, lse, delta; the
//     dk/dv kernel's the same without o; the sm_90a kernel's o, lse);
//  2. the mask's run-time data, from the geometry: the tree arrays
//     (treeParams) of a tree plan or the document arrays (docParams) of a
//     document kernel, then head_params for a plan with head parameters;
//     then the score stage's arrays: alibi_slopes with ALiBi, sinks with
//     learned sinks in the kernels that read them (geom.sinks);
//  3. after: the kernel's own addresses that follow (the backward's
//     gradients, dq (and dsink_rows with learned sinks) or dk and dv; the
//     sm_90a kernel's tensor maps), then, where geom.lens, the
//     per-row lengths seq_lens_q and seq_lens_k (lensParams), then, where
//     geom.pos, the positions q_pos and k_pos (posParams);
//  4. the shape scalars (shapeParams), then the layout: the element
//     strides (batch, head, pos) of each tensor of strides (strideParams:
//     q, k, v, o; the sm_90a kernel's o alone), then soft_cap when the
//     plan takes its soft-cap at call time;
//  5. scalars: the kernel's own (the backward's scale, the persistent
//     kernel's batch).
//
// Parameters of the score stage are there only when its part is active,
// so the kernels of a plan without one keep their list. readParams reads
// them in this order.
func (g *kit) kernelParams(tensors, after, scalars []Param, strides []string) []Param {
	ps := append([]Param(nil), tensors...)
	switch {
	case g.tree:
		ps = append(ps, treeParams...)
	case g.docs:
		ps = append(ps, docParams...)
	}
	if g.hasHeads {
		ps = append(ps, g.headParamsParam())
	}
	sc := g.p.Score
	if sc.Alibi != mask.AlibiOff {
		sl := parSlopes
		if !sc.SlopesAtCall {
			sl.Doc += ": the spec's geometric slopes, mask.AlibiSlopes(heads_q)"
		}
		ps = append(ps, sl)
	}
	if sc.LearnedSinks && g.sinks {
		ps = append(ps, parSinks)
	}
	ps = append(ps, after...)
	if g.lens {
		ps = append(ps, lensParams...)
	}
	if g.pos {
		ps = append(ps, posParams...)
	}
	ps = append(ps, shapeParams...)
	ps = append(ps, strideParams(strides)...)
	if sc.SoftCap && sc.Cap == 0 {
		ps = append(ps, parCap)
	}
	return append(ps, scalars...)
}
