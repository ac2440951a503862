package ptx

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/attngen/attngen/gen"
)

// Tile sizes and block shape of the forward kernel: one CTA per (query
// tile, head, batch), four warps, each owning 16 query rows.
const (
	TileQ   = 64
	TileK   = 64
	Warps   = 4
	Threads = 32 * Warps
)

// Target is one PTX target of the forward kernel, as a value: the SM
// version the module is written for (compute capability times ten: 80,
// 90) and the element type of q, k, v and the output ("bf16" or "f16").
// It satisfies gen.Target, so a plan is compiled for it directly; the SM
// version only changes the module header (and which ops the op table may
// use), never the plan.
type Target struct {
	SM   int
	Elem string
	// Accel selects the architecture-specific target sm_<SM>a and, with it,
	// the kernel written for it: on sm_90a the Hopper forward kernel
	// (hopper.go: wgmma, tensor copies, mbarriers) instead of the sm_80
	// one. Only SM 90 has it.
	Accel bool
}

// SM90a is the Hopper target: sm_90a, bf16, the wgmma kernel.
var SM90a = Target{SM: 90, Elem: "bf16", Accel: true}

// SM80 is the default target: sm_80 (Ampere and later), bf16.
var SM80 = Target{SM: 80, Elem: "bf16"}

// DefaultTargets are both element types on sm_80, whose PTX every GPU of
// compute capability 8.0 or later loads (the tests build every kernel for
// them); attngen generate's default -sm 80,90a adds the sm_90a forward.
var DefaultTargets = []Target{SM80, {SM: 80, Elem: "f16"}}

var _ gen.Target = Target{}

// headDims are the head dimensions the kernels are written for, square
// (q, k, v and the output rows of one size); splitDims the pairs (qk, v)
// of different key and value sizes.
var headDims = []int{32, 64, 96, 128, 192, 256}

var splitDims = [][2]int{{192, 128}}

// dimTiles is the tiling of the kernels at one head dimension (tilesOf).
type dimTiles struct {
	fwdK    int  // the sm_80 forward's key tile (64 query rows, 4 warps)
	holdQ   bool // the sm_80 forward holds Q's fragments in registers (else it reads them per tile)
	minCTAs int  // the sm_80 forward's .minnctapersm (0: none)
	dqK     int  // the dq kernel's key tile (64 query rows, 4 warps)
	dqHoldQ bool // the dq kernel holds Q's fragments in registers
	dkvQ    int  // the dk/dv kernel's query rows per step (before the predicate's limits)
	dkvCols int  // warps per 16 keys of the dk/dv kernel, each owning D/dkvCols columns of dk and dv
	hopK    int  // the sm_90a forward's key tile (128 query rows)
}

// tiles is the table of the kernels' tiles per head dimension (qk; the
// split pair {192, 128} takes 192's, with fewer value columns). The
// limits are registers (255 a thread) and shared memory (164 KiB a CTA on
// sm_80, 227 KiB on sm_90a); ptxas 11.8 and 12.4 report no spills for
// the examples at 64 and 128 (TestPtxas, TestPtxas12, TestBackwardPtxas)
// and for dimMasks at the other sizes (TestPtxasHeadDims), whose numbers
// the choices below come from.
//
//   - sm_80 forward: a thread holds D/2 f32 accumulators, tk/2 score
//     registers (tk keys a tile) and, when it holds Q, D/4 more. Up to 128
//     it holds Q and takes 64-key tiles. At 192 and 256 Q is read from
//     shared memory per tile, as FlashAttention 2 does, and the key tile
//     is 32: with 64 keys the D = 192 kernels took 255 registers and
//     spilled 4-16 bytes (document, gemma2, neighborhood), and at D = 256
//     a 64-key tile would also take 165 KiB of shared memory (Q and two
//     K/V buffers, rows of 2D+16 bytes). .minnctapersm: 3 at D = 32 and
//     64 (below four CTAs' 128 registers, which ptxas 12.4 capped the
//     kernels at and spilled, see fwd80.go), 2 at 96 (ptxas chose three
//     CTAs' 168 and spilled 8-32 bytes), 1 at 192 and 256 (168 again,
//     gemma2 spilled 8-16 bytes), 2 at 128 (without it ptxas 12.4 chose
//     three CTAs' 168 for gemma2 with strides and spilled 36-52 bytes;
//     two CTAs allow 255).
//   - dq: D/2 accumulators and two score tiles (S and dS) of tk/2: the
//     key tile follows the forward's (32 at 192 and 256; halved again for
//     predicates longer than bigPred, and for a soft-cap at 256: gemma2
//     spilled 4 bytes at 255 registers with ptxas 12.4); Q held up to 64.
//   - dk/dv: a warp owns 16 keys and 2D/dkvCols accumulators (dk and dv):
//     at D = 192 and 256 that is too many for one warp (192, 256), so eight
//     warps split the columns in two, each pair computing the same scores
//     (FlashAttention 2's 8-warp backward at these sizes); the query rows
//     per step shrink as the accumulators grow (64 up to D = 64, 32 at 96,
//     16 from 128).
//   - sm_90a forward: two consumer warpgroups hold D/2 accumulators and two
//     tk/2 score tiles (this tile's and the next's, in flight): at 192
//     64-key tiles spilled 32-96 bytes with 240 registers, so the key tile
//     is 32, and at 256 16 (three 64-key stages would not fit shared
//     memory either); hopRegs and hopProducer give the register split.
var tiles = map[int]dimTiles{
	32:  {fwdK: 64, holdQ: true, minCTAs: 3, dqK: 64, dqHoldQ: true, dkvQ: 64, dkvCols: 1, hopK: 64},
	64:  {fwdK: 64, holdQ: true, minCTAs: 3, dqK: 64, dqHoldQ: true, dkvQ: 64, dkvCols: 1, hopK: 64},
	96:  {fwdK: 64, holdQ: true, minCTAs: 2, dqK: 64, dkvQ: 32, dkvCols: 1, hopK: 64},
	128: {fwdK: 64, holdQ: true, minCTAs: 2, dqK: 64, dkvQ: 16, dkvCols: 1, hopK: 64},
	192: {fwdK: 32, minCTAs: 1, dqK: 32, dkvQ: 16, dkvCols: 2, hopK: 32},
	256: {fwdK: 32, minCTAs: 1, dqK: 32, dkvQ: 16, dkvCols: 2, hopK: 16},
}

// tilesOf is the tiling at head dimension d (qk), the zero value for an
// unsupported one.
func tilesOf(d int) dimTiles { return tiles[d] }

// Name is the target's planner name, e.g. "ptx-sm80-bf16" or
// "ptx-sm90a-bf16".
func (t Target) Name() string {
	return fmt.Sprintf("ptx-%s-%s", strings.ReplaceAll(t.Arch(), "_", ""), t.Elem)
}

// String is Name.
func (t Target) String() string { return t.Name() }

// Arch is the PTX target directive's name, e.g. "sm_80" or "sm_90a".
func (t Target) Arch() string {
	if t.Accel {
		return fmt.Sprintf("sm_%da", t.SM)
	}
	return fmt.Sprintf("sm_%d", t.SM)
}

// TileSizes is the forward kernel's tile at head dimension headDim (qk):
// 64 queries by tilesOf(headDim).fwdK keys on sm_80, 128 queries (two
// consumer warpgroups of 64 rows) by hopTileK(headDim) keys on sm_90a.
func (t Target) TileSizes(headDim int) (q, k int) {
	if t.Accel {
		return hopTileQ, hopTileK(headDim)
	}
	if k := tilesOf(headDim).fwdK; k > 0 {
		return TileQ, k
	}
	return TileQ, TileK
}

// HeadDims lists the square head dimensions the kernels support.
func (t Target) HeadDims() []int { return slices.Clone(headDims) }

// HeadDimText lists the head dimensions the kernels support, square and
// split ({qk, v}), for messages.
func (t Target) HeadDimText() string {
	s := joinInts(headDims)
	for _, p := range splitDims {
		s += fmt.Sprintf(", {qk: %d, v: %d}", p[0], p[1])
	}
	return s
}

// Supports reports why the target cannot run kernels whose q and k rows
// have qk elements and v and output rows v (nil when it can): an unknown
// SM version or element type, or an unsupported pair. v = 0 means qk.
func (t Target) Supports(qk, v int) error {
	if err := t.Check(); err != nil {
		return err
	}
	if v == 0 {
		v = qk
	}
	if v == qk && slices.Contains(headDims, qk) || slices.Contains(splitDims, [2]int{qk, v}) {
		return nil
	}
	what := fmt.Sprint(qk)
	if v != qk {
		what = fmt.Sprintf("{qk: %d, v: %d}", qk, v)
	}
	return fmt.Errorf("ptx: head_dim %s: the kernels support %s", what, t.HeadDimText())
}

// Check reports whether the target can be rendered: a PTX ISA version is
// known for its SM version, every op of the op table is available on it,
// and its element type is bf16 or f16.
func (t Target) Check() error {
	if _, err := t.ElemType(); err != nil {
		return err
	}
	if _, err := isaVersionOf(t.SM, t.Accel); err != nil {
		return err
	}
	var need []string
	for op := OpLdParam; op < numOps; op++ {
		if hopperOps[op] != t.Accel {
			continue // an op of the other kernel
		}
		if sp, ok := op.spec(); ok && !sp.availableOn(t.SM, t.Accel) {
			need = append(need, fmt.Sprintf("%s (%s)", opName.Replace(sp.text), sp.need()))
		}
	}
	if len(need) > 0 {
		return fmt.Errorf("ptx: target %s: the forward kernel's op table needs %s", t.Arch(), strings.Join(need, ", "))
	}
	return nil
}

// opName writes an op table mnemonic without its type placeholders.
var opName = strings.NewReplacer(".{T}", "", ".{T2}", "", ".{C}", "", ".{S}", "", "{N}", "N")

// ElemType is the target's element type as a PTX type (BF16 or F16).
func (t Target) ElemType() (Type, error) {
	switch t.Elem {
	case "bf16":
		return BF16, nil
	case "f16":
		return F16, nil
	}
	return NoType, fmt.Errorf("ptx: element type %q: want bf16 or f16", t.Elem)
}

// isaVersions is the PTX ISA version written in the header of a module
// for each SM version it may target. ISA 7.8 is the oldest that has
// everything the kernel uses and that names sm_89 and sm_90; CUDA 11.8 and
// later accept it (ptxas 11.8 assembles every example kernel for sm_80 and
// sm_90 without spills). Later SM versions need a later ISA and are not
// served yet.
var isaVersions = map[int]string{75: "7.8", 80: "7.8", 86: "7.8", 87: "7.8", 89: "7.8", 90: "7.8"}

// accelISA is the PTX ISA version of the architecture-specific targets
// (sm_<SM>a): ISA 8.0 introduced sm_90a with wgmma and setmaxnreg, ISA 8.3
// fence.proxy.tensormap, which the sm_90a kernel issues before reading
// the tensor maps the host copied to global memory (CUDA 12.3 and later).
var accelISA = map[int]string{90: "8.3"}

// isaVersionOf is the ISA version of sm_<sm>, or of sm_<sm>a when accel.
func isaVersionOf(sm int, accel bool) (string, error) {
	if !accel {
		return isaVersion(sm)
	}
	v, ok := accelISA[sm]
	if !ok {
		return "", fmt.Errorf("ptx: target sm_%da: no architecture-specific target is known for sm_%d (known: sm_90a)", sm, sm)
	}
	return v, nil
}

func isaVersion(sm int) (string, error) {
	v, ok := isaVersions[sm]
	if !ok {
		var known []int
		for s := range isaVersions {
			known = append(known, s)
		}
		sort.Ints(known)
		return "", fmt.Errorf("ptx: target sm_%d: no PTX ISA version is known for it (known: sm_%s)", sm, strings.ReplaceAll(joinInts(known), ", ", ", sm_"))
	}
	return v, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for k, x := range xs {
		s[k] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
