// Package gpu describes the GPU kernels generated packages embed: the PTX
// module, its entry, its parameters and its launch geometry, computed here
// once for every target and every package. It imports only the standard
// library and runtime/mask (the residue layout decides how many query
// tiles a grid holds); it does not talk to a GPU (attngen's runner, in
// package cuda, does). Select picks a package's kernel for a device by its
// compute capability (CanRun), leaving out kernels marked OptIn unless
// asked for; a kernel that reads its inputs through tensor maps (sm_90a)
// describes them (TensorMapLayout), and TensorMapsOf (TensorMapsWith for a
// call at given strides) gives a call's maps as cuTensorMapEncodeTiled
// takes them: rank 4, (column, position, head, batch), or rank 5 with the
// residue class, each axis at the tensor's own byte stride, so BHSD, BSHD
// and packed QKV tensors are read in place.
package gpu

import (
	"fmt"

	"github.com/attngen/attngen/runtime/mask"
)

// Kinds of kernels: the forward, and the two kernels of the backward
// pass, launched in this order (the dq kernel writes the delta the dk/dv
// kernel reads).
const (
	KindForward = ""        // one CTA per query tile, query head, batch x class
	KindBwdDQ   = "bwd-dq"  // the forward's grid: dq and delta
	KindBwdDKV  = "bwd-dkv" // one CTA per key tile, key/value head, batch x class: dk and dv
)

// Kernel is one kernel for NVIDIA GPUs.
type Kernel struct {
	Target string // the GPU architecture it needs at least, e.g. "sm_80"
	Elem   string // element type of q, k, v and out: "bf16" or "f16"
	Kind   string // KindForward, KindBwdDQ or KindBwdDKV
	Name   string // entry point in PTX
	PTX    string // the module, for cuModuleLoadData
	// Params lists the kernel parameters in order: name, PTX type, meaning.
	// The scalar ones are SeqQ, SeqK, HeadsQ, HeadsKV and scale*log2(e), then
	// the element strides of the tensors (StrideParam, Layout), and
	// for the backward's kernels the scale itself. Kernels of masks with
	// head parameters (mask.HeadParams) take one more device address,
	// HeadParamsParam, after the mask's document or tree arrays. Kernels
	// of masks with a score stage (mask.Score) take its values: after
	// those, the device addresses SlopesParam (ALiBi) and SinksParam
	// (learned sinks; the forward and dq kernels), the dq kernel's output
	// DSinkRowsParam after dq, and the scalar SoftCapParam after the shape
	// scalars when the cap is given at call time.
	Params [][3]string

	// HeadDim is the head dimension of q and k, HeadDimV that of v and
	// the output (and dout); they differ for head_dim {qk, v}. They size
	// a call's tensors and its default layout (BHSD).
	HeadDim, HeadDimV int

	TileQ     int // query rows per CTA
	TileK     int // keys per CTA of a KindBwdDKV kernel
	Threads   int // threads per CTA
	DynShared int // dynamic shared memory per CTA, bytes
	Stride    int // residue layout stride (1: identity): grid z = batch*Stride

	// TensorMaps, for a kernel that reads q, k and v through tensor maps
	// (sm_90a), describes each map; the kernel takes each map's address
	// (128 bytes in device memory) in the parameter the map names, in place
	// of the tensor's address. TensorMapsOf gives the maps of a call. Nil
	// for kernels that take q, k and v by address.
	TensorMaps []TensorMapLayout
	// OptIn marks a kernel that no GPU run has verified against the float64
	// reference yet (docs/gpu-results.md records those runs): Select
	// returns it only when asked for by its target, never by default.
	OptIn bool
}

// HeadParamsParam is the parameter by which kernels of masks with head
// parameters take their values: the device address of s32 values,
// head-major [HeadsQ][n] for the mask's n parameters (the values of query
// head h at h*n), shared by every batch element. CheckHeadParams checks
// them before a call: the kernels trust each value to lie in its range.
const HeadParamsParam = "head_params"

// The parameters of the score stage (mask.Score), each taken only by the
// kernels of masks whose stage has the part:
//
//   - SoftCapParam, f32: the soft-cap value of a call (natural units, finite
//     and above 0), when the mask takes it at call time (a cap the spec
//     fixes is written into the kernel);
//   - SlopesParam: the device address of the ALiBi slopes, [HeadsQ]f32 in
//     natural units (the mask's geometric ones, mask.AlibiSlopes, when it
//     does not take them at call time);
//   - SinksParam: the device address of the learned sink logits,
//     [HeadsQ]f32 in natural units (-Inf: no sink at that head);
//   - DSinkRowsParam: the dq kernel's output, [batch][HeadsQ][SeqQ]f32,
//     each query row's term -p_sink*delta of the sink gradient (p_sink =
//     exp(sink[h] - lse), delta = rowsum(dout*out)); the gradient of
//     sink[h] is the sum of head h's rows over the batch, which the
//     caller forms in a fixed order (DSink), so that it is deterministic.
const (
	// SeqLensQParam and SeqLensKParam are the per-batch-row lengths a
	// kernel takes: device addresses of [batch]s32
	// arrays, row b having seq_lens_q[b] queries and seq_lens_k[b] keys
	// (clamped to 0..seq_q and 0..seq_k), or 0 for none (every row has
	// seq_q and seq_k). A row's outputs past its queries are written 0
	// (lse -Inf, dq 0), its dk and dv past its keys 0; keys past a row's
	// length and queries past its queries are never read (but by the
	// sm_90a kernel's tensor copies, whose rows the kernel masks). In a
	// residue layout of stride st a row's class c holds its positions p =
	// c (mod st), at the row's lengths and positions. Residue-layout kernels
	// of head_dim above 128 take neither.
	SeqLensQParam = "seq_lens_q"
	SeqLensKParam = "seq_lens_k"

	// QPosParam and KPosParam are the absolute positions of each batch
	// row's first query and first key that the kernels taking per-row
	// lengths also take: device addresses of
	// [batch]s32 arrays (negative entries read as 0), or 0 for the
	// default alignment (k_pos 0, q_pos = k_pos + keys - queries, the row's
	// lengths). The mask, ALiBi's distances and the document arrays
	// (indexed by absolute position, covering every position a row
	// reaches) are evaluated at those positions; positions plus lengths
	// must stay below 2^31. A call with q_pos may have seq_q > seq_k
	// (GeometryAt).
	QPosParam = "q_pos"
	KPosParam = "k_pos"

	SoftCapParam   = "soft_cap"
	SlopesParam    = "alibi_slopes"
	SinksParam     = "sinks"
	DSinkRowsParam = "dsink_rows"
)

// DSink sums the dq kernel's DSinkRowsParam output rows
// ([batch][headsQ][seqQ]) into the gradient of each query head's sink
// logit, in float64 in a fixed order (batch, then rows), into dsink
// ([headsQ]).
func DSink(dsink, rows []float32, batch, headsQ, seqQ int) error {
	if len(dsink) < headsQ || len(rows) < batch*headsQ*seqQ {
		return fmt.Errorf("gpu: DSink: %d gradients and %d row terms, want %d and %d", len(dsink), len(rows), headsQ, batch*headsQ*seqQ)
	}
	for h := 0; h < headsQ; h++ {
		sum := 0.0
		for b := 0; b < batch; b++ {
			for _, x := range rows[(b*headsQ+h)*seqQ : (b*headsQ+h+1)*seqQ] {
				sum += float64(x)
			}
		}
		dsink[h] = float32(sum)
	}
	return nil
}

// TakesHeadParams reports whether the kernel takes head parameter values
// (HeadParamsParam).
func (k Kernel) TakesHeadParams() bool {
	for _, p := range k.Params {
		if p[0] == HeadParamsParam {
			return true
		}
	}
	return false
}

// CheckHeadParams checks the head parameter values of a call with headsQ
// query heads for a mask whose head parameters are ps: headsQ*len(ps)
// values, head-major, each within its parameter's [Min, Max]; no values
// for a mask without head parameters.
func CheckHeadParams(ps []mask.HeadParam, headsQ int, vals []int32) error {
	if len(vals) != headsQ*len(ps) {
		return fmt.Errorf("gpu: %d head parameter values, want %d (%d per query head, %d heads)", len(vals), headsQ*len(ps), len(ps), headsQ)
	}
	for x, v := range vals {
		hp := ps[x%len(ps)]
		if int(v) < hp.Min || int(v) > hp.Max {
			return fmt.Errorf("gpu: head parameter %s = %d at query head %d is out of its range [%d, %d]", hp.Name, v, x/len(ps), hp.Min, hp.Max)
		}
	}
	return nil
}

// TensorMapLayout is how a kernel reads one tensor through a tensor map:
// the tensor's rows of Cols 16-bit elements, each (batch, head, position)
// row at its own offset (the tensor's element strides, Layout), seen as
// rank 4, (col, position, head, batch), or, for a kernel of residue stride
// st > 1, as rank 5, (col, class, group, head, batch), position group*st +
// class: a box of (BoxCols, BoxRows, 1, 1) holds BoxRows consecutive
// positions of one head, a box of (BoxCols, 1, BoxRows, 1, 1) the
// positions c, c+st, ... of one residue class. The copies use the
// Swizzle-byte swizzle, element strides 1, no interleave, and read zeros
// past a head's positions (and before them).
type TensorMapLayout struct {
	Param   string // the kernel parameter taking the map's address, e.g. "tmap_q"
	Tensor  string // "q", "k" or "v"
	Cols    int    // elements per row: the head dimension
	BoxCols int    // box columns (64: 128 bytes)
	BoxRows int    // box rows: the query tile for q, the key tile for k and v
	Swizzle int    // bytes: 32, 64 or 128 (0: none)
}

// TensorMap is one tensor map of a call, as cuTensorMapEncodeTiled takes
// it: a 16-bit element tensor at Global, its dimensions innermost first
// (rank 4: columns, positions, heads, batch; rank 5 with a residue stride
// st > 1: columns, st, positions/st, heads, batch), the byte strides of
// dimensions 1.. (each independent of the others: a BSHD tensor's head
// stride is below its position stride), the box, the swizzle in bytes.
type TensorMap struct {
	Param    string // the kernel parameter that takes its address
	Tensor   string // "q", "k" or "v"
	Global   uint64 // the tensor's device address
	ElemSize int
	Dims     []uint64 // rank 4 or 5, innermost first
	Strides  []uint64 // bytes, of dimensions 1..rank-1
	Box      []uint32
	Swizzle  int // bytes
}

// MaxTensorMapStride bounds a tensor map's byte strides (cuTensorMapEncodeTiled:
// multiples of 16 below 2^40).
const MaxTensorMapStride = 1 << 40

// TensorMapsOf returns the tensor maps of a call with the given shape on
// tensors at device addresses q, k and v, in the order of k.TensorMaps
// (nil for a kernel that takes none). Residue layouts (Stride above 1)
// need seq_q and seq_k to be multiples of the stride, as Geometry does.
func (k Kernel) TensorMapsOf(batch, headsQ, headsKV, seqQ, seqK int, q, kAddr, v uint64) ([]TensorMap, error) {
	return k.TensorMapsWith(batch, headsQ, headsKV, seqQ, seqK, q, kAddr, v, Layout{})
}

// TensorMapsWith is TensorMapsOf for a call whose q, k and v have the
// element strides of l (a zero Strides: the default, BHSD). Each map
// carries the tensor's batch, head and position strides separately, so
// any layout runs: BHSD, BSHD, a view into a packed QKV buffer, padded
// rows, as long as the tensor map can hold it: the addresses 16-byte
// aligned, each stride of an axis of more than one row a positive multiple
// of 8 elements (16 bytes; with a residue stride st, st times the pos
// stride too) below 2^39 elements (2^40 bytes), and the pos stride at least
// the row's elements. A stride of 0 (a broadcast the sm_80 kernel takes)
// is refused: a tensor map's strides are positive.
func (k Kernel) TensorMapsWith(batch, headsQ, headsKV, seqQ, seqK int, q, kAddr, v uint64, l Layout) ([]TensorMap, error) {
	if len(k.TensorMaps) == 0 {
		return nil, nil
	}
	// the maps do not depend on the rows' positions: a shape with seq_q >
	// seq_k is checked as a call with positions (GeometryAt checks the call)
	if _, _, _, err := k.GeometryAt(batch, headsQ, headsKV, seqQ, seqK, seqQ > seqK); err != nil {
		return nil, err
	}
	st := max(k.Stride, 1)
	var out []TensorMap
	for _, tl := range k.TensorMaps {
		var g uint64
		var x Strides
		heads, seq := headsKV, seqK
		switch tl.Tensor {
		case "q":
			g, x, heads, seq = q, l.Q, headsQ, seqQ
		case "k":
			g, x = kAddr, l.K
		case "v":
			g, x = v, l.V
		default:
			return nil, fmt.Errorf("gpu: kernel %q: tensor map %q of unknown tensor %q", k.Name, tl.Param, tl.Tensor)
		}
		if tl.Cols < 1 || tl.BoxCols < 1 || tl.BoxRows < 1 {
			return nil, fmt.Errorf("gpu: kernel %q: tensor map %q has no columns or box", k.Name, tl.Param)
		}
		if g%16 != 0 {
			return nil, fmt.Errorf("gpu: kernel %q: %s at %#x: a tensor map's address is 16-byte aligned", k.Name, tl.Tensor, g)
		}
		if x == (Strides{}) {
			x = Strides{Batch: heads * seq * tl.Cols, Head: seq * tl.Cols, Pos: tl.Cols}
		}
		if x.Pos < tl.Cols || x.Batch < 0 || x.Head < 0 {
			return nil, fmt.Errorf("gpu: kernel %q: %s strides %+v: none may be negative and the pos stride must be at least the row's %d elements", k.Name, tl.Tensor, x, tl.Cols)
		}
		// each axis's byte stride, checked where the axis has more than
		// one row (a single row's stride is never used: any valid one
		// stands in)
		stride := func(axis string, elems, n int) (uint64, error) {
			b := 2 * uint64(elems)
			if b%16 == 0 && b > 0 && b < MaxTensorMapStride {
				return b, nil
			}
			if n <= 1 {
				return 16, nil
			}
			return 0, fmt.Errorf("gpu: kernel %q reads %s through a tensor map: its %s stride of %d elements (%d bytes) is not a positive multiple of 16 bytes below 2^40 (strides %+v; the sm_80 kernel takes any)", k.Name, tl.Tensor, axis, elems, b, x)
		}
		ps, err := stride("pos", x.Pos, seq)
		if err != nil {
			return nil, err
		}
		hs, err := stride("head", x.Head, heads)
		if err != nil {
			return nil, err
		}
		bs, err := stride("batch", x.Batch, batch)
		if err != nil {
			return nil, err
		}
		c := uint64(tl.Cols)
		m := TensorMap{Param: tl.Param, Tensor: tl.Tensor, Global: g, ElemSize: 2, Swizzle: tl.Swizzle}
		if st == 1 {
			m.Dims = []uint64{c, uint64(seq), uint64(heads), uint64(batch)}
			m.Strides = []uint64{ps, hs, bs}
			m.Box = []uint32{uint32(tl.BoxCols), uint32(tl.BoxRows), 1, 1}
		} else {
			gs, err := stride("pos (times the residue stride)", x.Pos*st, seq/st)
			if err != nil {
				return nil, err
			}
			m.Dims = []uint64{c, uint64(st), uint64(seq / st), uint64(heads), uint64(batch)}
			m.Strides = []uint64{ps, gs, hs, bs}
			m.Box = []uint32{uint32(tl.BoxCols), 1, uint32(tl.BoxRows), 1, 1}
		}
		out = append(out, m)
	}
	return out, nil
}

// MaxSeq bounds seq_k: the kernels hold positions, and sums of positions
// and mask constants, in 32-bit registers.
const MaxSeq = 1 << 29

// maxGridYZ is CUDA's limit on the grid's y and z dimensions, maxGridX
// on its x dimension.
const (
	maxGridYZ = 65535
	maxGridX  = 1<<31 - 1
)

// PersistentParam is the parameter that marks a persistent forward kernel
// (Persistent): its grid no longer spans the batch, so it takes the batch
// size to know its work items.
const PersistentParam = "batch"

// PersistentCTAsPerSM is how many CTAs of a persistent kernel ResidentGrid
// launches per multiprocessor.
const PersistentCTAsPerSM = 1

// Persistent reports whether k is a persistent forward kernel (the sm_90a
// one, which takes parameter PersistentParam): its CTAs loop over the work
// items of a call (query tile x query head x batch x residue class), CTA
// b taking items b, b+G, b+2G, ... of the kernel's order for a grid of G
// CTAs, and it is correct for any grid of at least one CTA. Geometry
// gives it one CTA per work item (grid x only), the most that can have
// work; ResidentGrid cuts that to the CTAs a device runs at once.
func (k Kernel) Persistent() bool {
	if k.Kind != KindForward {
		return false
	}
	for _, p := range k.Params {
		if p[0] == PersistentParam {
			return true
		}
	}
	return false
}

// takes reports whether k has parameter name.
func (k Kernel) takes(name string) bool {
	for _, p := range k.Params {
		if p[0] == name {
			return true
		}
	}
	return false
}

// ResidentGrid is the grid to launch, for a call whose Geometry gave grid,
// on a device with sms multiprocessors: for a persistent kernel
// min(work items, sms*PersistentCTAsPerSM) CTAs (at least one), any other
// kernel's grid unchanged.
func (k Kernel) ResidentGrid(grid [3]int, sms int) [3]int {
	if !k.Persistent() {
		return grid
	}
	return [3]int{max(1, min(grid[0], sms*PersistentCTAsPerSM)), 1, 1}
}

// Geometry returns the launch of a call: grid and block dimensions and the
// dynamic shared memory in bytes (which needs
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES when above 48 KiB). One
// CTA runs one query tile of one head of one residue class of one batch
// (a KindBwdDKV kernel: one key tile of one key/value head); a persistent
// kernel gets one CTA per work item along x (Persistent, ResidentGrid).
// A shape the kernel cannot run is an error: a dimension below 1, HeadsQ
// not a multiple of HeadsKV, SeqQ > SeqK (GeometryAt allows it for a
// call that passes q_pos), SeqK >= MaxSeq, or a grid past
// CUDA's limits (HeadsQ and Batch*Stride at most 65535); a kernel with
// tensor maps and a residue layout also needs seq_q and seq_k to be
// multiples of the stride (every head's rows then start a row group of its
// tensor maps).
func (k Kernel) Geometry(batch, headsQ, headsKV, seqQ, seqK int) (grid, block [3]int, dynShared int, err error) {
	return k.GeometryAt(batch, headsQ, headsKV, seqQ, seqK, false)
}

// GeometryAt is Geometry for a call that passes the rows' positions
// (QPosParam or KPosParam, a non-zero address) when positions is true:
// its queries may then outnumber its keys (seq_q > seq_k: a query chunk
// longer than the key chunk it attends to), which the default alignment
// of key positions from 0 (queries the last seq_q keys) cannot place.
// Positions for a kernel that takes none are an error.
func (k Kernel) GeometryAt(batch, headsQ, headsKV, seqQ, seqK int, positions bool) (grid, block [3]int, dynShared int, err error) {
	st := max(k.Stride, 1)
	switch {
	case positions && !k.takes(QPosParam):
		err = fmt.Errorf("gpu: kernel %q takes no positions (%s)", k.Name, QPosParam)
	case seqQ > seqK && !positions && seqK >= 1:
		err = fmt.Errorf("gpu: seq_q %d exceeds seq_k %d: the default alignment puts queries before position 0; pass their positions (%s, GeometryAt)", seqQ, seqK, QPosParam)
	}
	if err != nil {
		return grid, block, 0, err
	}
	switch {
	case k.Kind != KindForward && k.Kind != KindBwdDQ && k.Kind != KindBwdDKV:
		err = fmt.Errorf("gpu: kernel %q has unknown kind %q", k.Name, k.Kind)
	case k.TileQ < 1 || k.Threads < 1 || k.Kind == KindBwdDKV && k.TileK < 1:
		err = fmt.Errorf("gpu: kernel %q has no tile size or thread count", k.Name)
	case batch < 1 || headsQ < 1 || headsKV < 1 || seqQ < 1 || seqK < 1:
		err = fmt.Errorf("gpu: shape %d %d %d %d %d: every dimension must be at least 1", batch, headsQ, headsKV, seqQ, seqK)
	case headsQ%headsKV != 0:
		err = fmt.Errorf("gpu: heads_q %d is not a multiple of heads_kv %d", headsQ, headsKV)
	case seqK >= MaxSeq || seqQ >= MaxSeq:
		err = fmt.Errorf("gpu: seq_q %d, seq_k %d: the kernel's 32-bit positions need both below %d", seqQ, seqK, MaxSeq)
	case headsQ > maxGridYZ || batch > maxGridYZ/st:
		err = fmt.Errorf("gpu: heads_q %d and batch %d x stride %d: the grid allows at most %d of each", headsQ, batch, st, maxGridYZ)
	case len(k.TensorMaps) > 0 && st > 1 && (seqQ%st != 0 || seqK%st != 0):
		err = fmt.Errorf("gpu: the %s kernel %q runs the residue layout (stride %d) only when seq_q and seq_k are multiples of the stride, got %d and %d", k.Target, k.Name, st, seqQ, seqK)
	}
	if err != nil {
		return grid, block, 0, err
	}
	// a class holds at most ceil(seq_q / st) of the tensors' query rows
	// whatever the rows' positions (mask.MaxQueries at the default
	// alignment)
	rows := (seqQ + st - 1) / st
	if seqQ <= seqK {
		rows = mask.MaxQueries(seqQ, seqK, st)
	}
	if k.Persistent() {
		items := int64((rows+k.TileQ-1)/k.TileQ) * int64(headsQ) * int64(batch) * int64(st)
		if items > maxGridX {
			return grid, block, 0, fmt.Errorf("gpu: kernel %q: %d work items (query tiles x heads_q x batch x stride): the persistent kernel counts them in 31 bits", k.Name, items)
		}
		return [3]int{int(items), 1, 1}, [3]int{k.Threads, 1, 1}, k.DynShared, nil
	}
	if k.Kind == KindBwdDKV {
		keys := (seqK + st - 1) / st // the most keys of a residue class
		return [3]int{(keys + k.TileK - 1) / k.TileK, headsKV, batch * st}, [3]int{k.Threads, 1, 1}, k.DynShared, nil
	}
	return [3]int{(rows + k.TileQ - 1) / k.TileQ, headsQ, batch * st}, [3]int{k.Threads, 1, 1}, k.DynShared, nil
}
