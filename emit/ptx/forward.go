package ptx

import (
	"fmt"
	"math"
	"strings"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/runtime/mask"
)

// Config chooses the target and variants of the forward kernel.
type Config struct {
	// Target is the SM version and element type; the zero value is SM80.
	Target Target
	// SoftLg2 computes log2(l) for the log-sum-exp with integer exponent
	// extraction and an odd atanh series (error below 1e-7) instead of
	// lg2.approx.ftz.f32, for interpreters without lg2.
	SoftLg2 bool

	// scoreMutant generates a mutant of the score stage (score.go; tests
	// only, through export_test.go)
	scoreMutant int
}

// Forward is a generated forward kernel.
type Forward struct {
	Name    string // kernel entry name
	Target  Target
	HeadDim int // of q and k
	// HeadDimV is the head dimension of v and the output (HeadDim unless
	// the plan's head_dim is {qk, v})
	HeadDimV int
	Elem     Type // the target's element type
	// Stride is the residue layout's stride (1 for the identity layout):
	// CTAs with blockIdx.z = batch*Stride + c run residue class c, whose
	// positions c, c+Stride, ... form one segment of the plan's layout
	// (mask.Segments).
	Stride int
	Params []Param
	PTX    string // the module text
	// TileQ is the query rows per CTA and Threads the threads per CTA (64
	// and 128 on sm_80; 128 and 256, two consumer warpgroups, on sm_90a).
	TileQ, Threads int
	// DynShared is the dynamic shared memory the kernel needs, in bytes.
	DynShared int
	// HeadParams are the plan's head parameters, whose values per query
	// head the kernel takes in head_params (gpu.CheckHeadParams checks a
	// call's); nil when it takes none.
	HeadParams []mask.HeadParam
	// Score is the plan's score stage: the kernel takes a soft-cap the
	// spec does not fix in soft_cap (Launch.SoftCap), ALiBi slopes in
	// alibi_slopes (the call's, or mask.AlibiSlopes(heads_q)) and learned
	// sink logits in sinks (gpu.SoftCapParam, SlopesParam, SinksParam).
	Score mask.Score
}

// Launch is the geometry and parameter list of one call. DynShared is
// 5*64*(2D+16) bytes (43520 for D = 64, 87040 for D = 128): above 48 KiB
// the driver needs cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES).
type Launch struct {
	Grid, Block [3]int
	DynShared   int
	Params      []Param // order and types, as in the kernel
	// Scalars are the values of the non-pointer parameters, in order
	// (Batch only for a kernel that takes it: the persistent sm_90a one).
	SeqQ, SeqK, HeadsQ, HeadsKV uint32
	ScaleLog2                   float32
	Batch                       uint32
	// SoftCap is the soft-cap value (natural units) of a kernel that takes
	// it at call time (parameter soft_cap); the caller sets it.
	SoftCap float32
	// Layout is the call's element strides (gpu.Layout; a zero Strides is
	// the default, gpu.BHSD). Args passes those the kernel takes (the
	// stride_* parameters), checked (gpu.CheckLayout); the sm_90a kernel's
	// q, k and v strides go into its tensor maps (TensorMapsWith) instead.
	Layout gpu.Layout
	// SeqLensQ and SeqLensK are the device addresses of the call's
	// per-batch-row lengths ([batch]s32; gpu.SeqLensQParam), 0 for none.
	// Args passes them to a kernel that takes them and refuses non-zero
	// ones for a kernel that does not (head_dim above 128).
	SeqLensQ, SeqLensK uint64
	// QPos and KPos are the device addresses of the call's per-batch-row
	// positions ([batch]s32; gpu.QPosParam), 0 for the default alignment.
	// Args passes them to a kernel that takes them and refuses non-zero
	// ones for a kernel that does not (residue layouts above head_dim 128).
	QPos, KPos uint64
	// HeadDim and HeadDimV are the kernel's head dimensions and Stride its
	// residue stride (Geometry sets them), which resolve and check Layout.
	HeadDim, HeadDimV, Stride int
	// Persistent: the kernel loops over its work items (gpu.Kernel.Persistent);
	// Grid is one CTA per item, and any grid of at least one CTA along x is
	// correct: a runner launches Kernel().ResidentGrid(Grid, SMs).
	Persistent bool
}

// Kernel describes the kernel as generated packages embed it.
func (k *Forward) Kernel() gpu.Kernel {
	g := gpu.Kernel{Target: k.Target.Arch(), Elem: k.Target.Elem, Name: k.Name, PTX: k.PTX,
		HeadDim: k.HeadDim, HeadDimV: orDim(k.HeadDimV, k.HeadDim),
		TileQ: k.TileQ, Threads: k.Threads, DynShared: k.DynShared, Stride: max(k.Stride, 1),
		TensorMaps: k.tensorMapLayouts(), OptIn: k.Target.Accel && !SM90aVerified}
	for _, p := range k.Params {
		g.Params = append(g.Params, [3]string{p.Name, p.T.String(), p.Doc})
	}
	return g
}

// Geometry is the launch of a call with the given shape (the kernel's
// gpu.Kernel geometry, after checking the shape); scale 0 means
// 1/sqrt(D), and a scale must be positive (the kernel takes the row max
// before scaling). seq_q > seq_k (a query chunk longer than its key
// chunk) needs a kernel that takes positions, and the call must then
// give them (Launch.QPos, or KPos with the default alignment of each row,
// q_pos = k_pos + keys - queries, at or past 0; Args refuses a launch
// with neither).
func (k *Forward) Geometry(batch, headsQ, headsKV, seqQ, seqK int, scale float64) (Launch, error) {
	if err := k.strideFits(seqQ, seqK); err != nil {
		return Launch{}, err
	}
	if err := wideFits(k.Params, seqQ, seqK); err != nil {
		return Launch{}, err
	}
	grid, block, dyn, err := k.Kernel().GeometryAt(batch, headsQ, headsKV, seqQ, seqK, seqQ > seqK)
	if err != nil {
		return Launch{}, fmt.Errorf("ptx: %w", err)
	}
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(k.HeadDim))
	}
	if sl := float32(scale * math.Log2E); !(scale > 0) || math.IsInf(float64(sl), 0) {
		return Launch{}, fmt.Errorf("ptx: softmax scale %v: the kernel needs a positive scale whose product with log2(e) is a finite float32", scale)
	}
	return Launch{
		Grid: grid, Block: block, DynShared: dyn, Params: k.Params,
		SeqQ: uint32(seqQ), SeqK: uint32(seqK), HeadsQ: uint32(headsQ), HeadsKV: uint32(headsKV),
		ScaleLog2: float32(scale * math.Log2E), Batch: uint32(batch), Persistent: k.Kernel().Persistent(),
		HeadDim: k.HeadDim, HeadDimV: orDim(k.HeadDimV, k.HeadDim), Stride: max(k.Stride, 1),
	}, nil
}

// GenerateForward emits the forward kernel of a plan for cfg.Target. It
// renders the plan's programs (the key hull, the tile class, the
// partial-tile predicate and, for residue layouts, gen.ResidueProg) and
// reads nothing else of the mask; a plan whose tiles, head dimension,
// layout or programs the target cannot render is an error.
func GenerateForward(p *gen.Plan, cfg Config) (*Forward, error) {
	t := cfg.Target
	if t == (Target{}) {
		t = SM80
	}
	gm, err := planGeom(p, t)
	if err != nil {
		return nil, err
	}
	if t.Accel {
		return generateHopper(p, cfg, t, gm)
	}
	return generateSM80(p, cfg, t, gm)
}

// Args lists the kernel arguments in parameter order: the device
// addresses (q, k, v, o, lse, for document kernels doc_id, doc_start,
// doc_end, for kernels of plans with head parameters head_params), then
// the scalars (uint32 and float32) by name: seq_q, seq_k, heads_q,
// heads_kv, scale_log2, the strides of l.Layout and, for the persistent
// kernel, batch. The per-row lengths (seq_lens_q, seq_lens_k) are not
// among ptrs: they come from l.SeqLensQ and l.SeqLensK, nor are the
// positions (q_pos, k_pos: l.QPos and l.KPos).
func (l Launch) Args(ptrs ...uint64) ([]any, error) {
	want, lens, pos := 0, false, false
	for _, p := range l.Params {
		switch {
		case isLensParam(p.Name):
			lens = true
		case isPosParam(p.Name):
			pos = true
		case p.T == U64:
			want++
		}
	}
	if len(ptrs) != want {
		return nil, fmt.Errorf("ptx: the kernel takes %d device addresses, got %d", want, len(ptrs))
	}
	if !lens && (l.SeqLensQ != 0 || l.SeqLensK != 0) {
		return nil, fmt.Errorf("ptx: the kernel (residue stride %d, head_dim %d) takes no per-row lengths (residue layouts above head_dim %d do not): run each batch row as its own call", l.Stride, l.HeadDim, stageDim)
	}
	if l.SeqQ > l.SeqK && l.QPos == 0 && l.KPos == 0 {
		return nil, fmt.Errorf("ptx: seq_q %d exceeds seq_k %d: the default alignment (queries the last seq_q keys) puts queries before position 0; give the rows' positions (Launch.QPos, or KPos far enough from 0)", l.SeqQ, l.SeqK)
	}
	if !pos && (l.QPos != 0 || l.KPos != 0) {
		return nil, fmt.Errorf("ptx: the kernel (residue stride %d, head_dim %d) takes no positions (residue layouts above head_dim %d do not): run the call at the default alignment", l.Stride, l.HeadDim, stageDim)
	}
	var args []any
	for _, p := range l.Params {
		switch {
		case p.Name == gpu.QPosParam:
			args = append(args, l.QPos)
		case p.Name == gpu.KPosParam:
			args = append(args, l.KPos)
		case p.Name == gpu.SeqLensQParam:
			args = append(args, l.SeqLensQ)
		case p.Name == gpu.SeqLensKParam:
			args = append(args, l.SeqLensK)
		case p.T == U64:
			args = append(args, ptrs[0])
			ptrs = ptrs[1:]
		}
	}
	var strides map[string]uint32
	for _, p := range l.Params {
		if strings.HasPrefix(p.Name, "stride_") {
			ly := l.Layout.Resolve(int(l.HeadsQ), int(l.HeadsKV), int(l.SeqQ), int(l.SeqK), l.HeadDim, l.HeadDimV)
			if err := gpu.CheckLayout(ly, l.Stride, l.HeadDim, l.HeadDimV); err != nil {
				return nil, fmt.Errorf("ptx: %w", err)
			}
			strides = ly.StrideArgs()
			break
		}
	}
	for _, p := range l.Params {
		var a any
		if x, ok := strides[p.Name]; ok {
			args = append(args, x)
			continue
		}
		switch p.Name {
		case "seq_q":
			a = l.SeqQ
		case "seq_k":
			a = l.SeqK
		case "heads_q":
			a = l.HeadsQ
		case "heads_kv":
			a = l.HeadsKV
		case "scale_log2":
			a = l.ScaleLog2
		case gpu.PersistentParam:
			a = l.Batch
		case gpu.SoftCapParam:
			if c := l.SoftCap; !(c > 0 && c <= math.MaxFloat32/2) {
				return nil, fmt.Errorf("ptx: the kernel takes its soft-cap at call time (Launch.SoftCap): %v is not a finite value above 0", c)
			}
			a = l.SoftCap
		case "scale":
			continue // the backward's last parameter: BackwardLaunch.Args appends it
		default:
			if p.T != U64 {
				return nil, fmt.Errorf("BUG: ptx: Launch.Args has no value for parameter %s", p.Name)
			}
			continue
		}
		args = append(args, a)
	}
	return args, nil
}

// DocArrays returns the doc_start and doc_end arrays of document ids
// (non-decreasing, one per key position) for a document kernel.
func DocArrays(ids []int32) (start, end []int32, err error) {
	start, end = make([]int32, len(ids)), make([]int32, len(ids))
	for i := range ids {
		switch {
		case i > 0 && ids[i] < ids[i-1]:
			return nil, nil, fmt.Errorf("ptx: document ids decrease at position %d", i)
		case i > 0 && ids[i] == ids[i-1]:
			start[i] = start[i-1]
		default:
			start[i] = int32(i)
		}
	}
	for i := len(ids) - 1; i >= 0; i-- {
		if i+1 < len(ids) && ids[i+1] == ids[i] {
			end[i] = end[i+1]
		} else {
			end[i] = int32(i)
		}
	}
	return start, end, nil
}

// wideFits refuses seq_q > seq_k for a kernel that takes no positions
// (params without q_pos): only positions place such queries.
func wideFits(params []Param, seqQ, seqK int) error {
	if seqQ <= seqK {
		return nil
	}
	for _, p := range params {
		if isPosParam(p.Name) {
			return nil
		}
	}
	return fmt.Errorf("ptx: seq_q %d exceeds seq_k %d, and the kernel takes no positions (q_pos) that could place its queries (residue layouts above head_dim %d take none)", seqQ, seqK, stageDim)
}

// orDim is d, or def when d is 0.
func orDim(d, def int) int {
	if d == 0 {
		return def
	}
	return d
}
