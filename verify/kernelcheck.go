package verify

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// Run is a kernel under test: masked attention of q, k, v into out and lse
// (natural log), with document ids when the mask has document.
type Run func(out, lse, q, k, v []float32, docs []int32, s Shape) error

// Tolerance: a kernel's maximum error against the float64 reference may be
// at most ErrFactor times that of NaiveFP32 on the same inputs, with a floor
// of ErrFloor (a few float32 ulps at the outputs' scale of about 1) so that
// a lucky, nearly exact naive result does not demand the impossible.
const (
	ErrFactor = 8
	ErrFloor  = 1e-6
)

// Shapes returns the awkward shapes kernels are checked on for a head
// dimension: length 1, lengths that are not a multiple of any tile, fewer
// queries than keys, grouped-query heads, several batches, decoding.
func Shapes(d int) []Shape {
	return []Shape{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 1, HeadDim: d},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 77, SeqK: 77, HeadDim: d},
		{Batch: 2, HeadsQ: 2, HeadsKV: 2, SeqQ: 50, SeqK: 130, HeadDim: d},
		{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 200, SeqK: 200, HeadDim: d, Scale: 0.3},
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqK: 301, HeadDim: d},
		{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 129, SeqK: 321, HeadDim: d},
		// decoding: few queries against many keys, grouped heads sharing
		// one pass over the keys, keys split across parts
		{Batch: 2, HeadsQ: 6, HeadsKV: 2, SeqQ: 3, SeqK: 700, HeadDim: d},
		{Batch: 1, HeadsQ: 8, HeadsKV: 1, SeqQ: 1, SeqK: 2000, HeadDim: d},
		{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 16, SeqK: 1500, HeadDim: d, Scale: 0.2},
		// 16 and 12 rows a key/value head: decode kernels in groups of 8
		{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: 4, SeqK: 1100, HeadDim: d},
		{Batch: 1, HeadsQ: 4, HeadsKV: 1, SeqQ: 3, SeqK: 900, HeadDim: d},
	}
}

// NumericReport is what CheckNumeric measured on one shape.
type NumericReport struct {
	Shape               Shape
	KernelErr, NaiveErr float64 // max |out - reference|
	KernelLSE, NaiveLSE float64 // max |lse - reference| over kept rows
	MaskedRows          int     // rows with no kept key (checked exactly)
	Rows                int     // rows judged when sampled (0: every row)
}

func (r NumericReport) String() string {
	return fmt.Sprintf("%s: out err %.2e (yardstick %.2e), lse err %.2e (yardstick %.2e), %d fully masked rows",
		r.Shape.dims(),
		r.KernelErr, r.NaiveErr, r.KernelLSE, r.NaiveLSE, r.MaskedRows) + r.sampled()
}

// dims renders the shape's sizes as the reports print them: "B2 Hq4
// Hkv2 Sq37 Sk130 D128", with "D192/128" when v's head dimension differs.
func (s Shape) dims() string {
	d := fmt.Sprint(s.HeadDim)
	if s.DV() != s.HeadDim {
		d += fmt.Sprintf("/%d", s.DV())
	}
	return fmt.Sprintf("B%d Hq%d Hkv%d Sq%d Sk%d D%s", s.Batch, s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK, d)
}

func (r NumericReport) sampled() string {
	if r.Rows == 0 {
		return ""
	}
	return fmt.Sprintf(" (of %d sampled rows)", r.Rows)
}

// RandomDocs returns non-decreasing document ids for n positions: runs of
// random length, some of length 1.
func RandomDocs(r *rand.Rand, n int) []int32 {
	ids := make([]int32, n)
	for k := 1; k < n; k++ {
		ids[k] = ids[k-1]
		if r.IntN(20) == 0 {
			ids[k]++
		}
	}
	return ids
}

// RandomTree returns a parent array for n positions (spectest.Parents: a
// committed prefix of random length as a chain, then tree nodes, a few
// roots).
func RandomTree(r *rand.Rand, n int) []int32 { return spectest.Parents(r, n) }

// RandomData returns random run-time data for a mask: document ids for a
// document mask, a parent array for a tree mask, nil for other masks.
func RandomData(p spec.Pattern, r *rand.Rand, n int) []int32 {
	switch {
	case p.Mask.HasTree():
		return RandomTree(r, n)
	case p.Mask.HasDocument():
		return RandomDocs(r, n)
	}
	return nil
}

// DataOf indexes a mask's run-time data (ids as RandomData returns them):
// document ids or a parent array; nil for masks without data.
func DataOf(p spec.Pattern, ids []int32) (*spec.Docs, error) {
	switch {
	case p.Mask.HasTree():
		return spec.NewTree(ids)
	case p.Mask.HasDocument():
		return spec.NewDocs(ids)
	}
	return nil, nil
}

func randomSlice(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for k := range x {
		x[k] = float32(r.NormFloat64() * scale)
	}
	return x
}

// randomInputs draws q, k and v (standard normal) for a shape and, when
// the mask has documents, random document ids; when the mask has head
// parameters and s none, it draws their values into s (WithHeadParams).
func randomInputs(p spec.Pattern, s *Shape, r *rand.Rand) (q, k, v []float32, ids []int32, docs *spec.Docs) {
	*s = WithHeadParams(p, *s, r)
	*s = WithScore(p, *s, r)
	nq, nkv, _ := s.Sizes()
	nv, _ := s.SizesV()
	q, k, v = randomSlice(r, nq, 1), randomSlice(r, nkv, 1), randomSlice(r, nv, 1)
	if p.Mask.HasData() {
		ids = RandomData(p, r, s.dataLen()) // SeqK, or the last position a row reaches
		docs, _ = DataOf(p, ids)
	}
	return q, k, v, ids, docs
}

func poison(x []float32) {
	for k := range x {
		x[k] = float32(math.NaN())
	}
}

// NumericOptions sets what a kernel is judged against: inputs are rounded
// by Round (nil: float32 as drawn), the yardstick Naive runs on the same
// inputs, and the kernel's error may be at most Factor times the
// yardstick's, or Floor.
type NumericOptions struct {
	Round func([]float32)
	Naive func(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, out, lse []float32) error
	// NaiveRows is Naive on the listed lse rows only (the others left as
	// they are), for checks of sampled rows (CheckOutput); nil: Naive runs
	// on every row. The package's options set it; an option whose Naive is
	// replaced must replace or clear it too.
	NaiveRows func(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, rows []int, out, lse []float32) error
	Factor    float64
	Floor     float64
}

// FP32 judges float32 kernels against NaiveFP32.
var FP32 = NumericOptions{Naive: NaiveFP32, NaiveRows: naiveRowsFP32, Factor: ErrFactor, Floor: ErrFloor}

// BF16Inputs and F16Inputs judge float32 kernels fed 16-bit inputs (the CPU
// runtime's Forward16): the same float32 yardstick on inputs rounded to
// the format first.
var (
	BF16Inputs = NumericOptions{Round: RoundBF16, Naive: NaiveFP32, NaiveRows: naiveRowsFP32, Factor: ErrFactor, Floor: ErrFloor}
	F16Inputs  = NumericOptions{Round: RoundF16, Naive: NaiveFP32, NaiveRows: naiveRowsFP32, Factor: ErrFactor, Floor: ErrFloor}
)

// BF16Kernel judges kernels with bfloat16 inputs and outputs against
// NaiveBF16: at most twice its error, with a floor of 2e-3 (about the
// rounding step of bf16 at the outputs' scale of 1, 2^-9 = 1.95e-3).
var BF16Kernel = NumericOptions{Round: RoundBF16, Naive: NaiveBF16, NaiveRows: naiveRowsBF16, Factor: 2, Floor: 2e-3}

// CheckNumeric runs the kernel on fresh random inputs of one shape, outputs
// poisoned with NaN first, and compares it with the float64 reference and
// with NaiveFP32. Rows with no kept key must be exactly 0 with lse -Inf.
func CheckNumeric(p spec.Pattern, run Run, s Shape, r *rand.Rand) (NumericReport, error) {
	return CheckNumericWith(p, run, s, r, FP32)
}

// CheckNumericWith is CheckNumeric with a chosen yardstick.
func CheckNumericWith(p spec.Pattern, run Run, s Shape, r *rand.Rand, opt NumericOptions) (NumericReport, error) {
	return CheckNumericSampled(p, run, s, r, opt, 0)
}

// CheckNumericSampled is CheckNumericWith judging n query rows (SampleRows;
// each for a few heads) instead of every row, for shapes too long for the
// float64 reference on every row; n <= 0 judges every row.
func CheckNumericSampled(p spec.Pattern, run Run, s Shape, r *rand.Rand, opt NumericOptions, n int) (NumericReport, error) {
	s = WithHeadParams(p, s, r)
	s = WithScore(p, s, r)
	nq, nkv, nl := s.Sizes()
	nv, no := s.SizesV()
	q, k, v := randomSlice(r, nq, 1), randomSlice(r, nkv, 1), randomSlice(r, nv, 1)
	if opt.Round != nil {
		opt.Round(q)
		opt.Round(k)
		opt.Round(v)
	}
	var ids []int32
	var docs *spec.Docs
	if p.Mask.HasData() {
		ids = RandomData(p, r, s.dataLen()) // with positions, every position a row reaches
		docs, _ = DataOf(p, ids)
	}
	var rows []int
	if n > 0 {
		rows = SampleRows(p, docs, s, n, r)
	}
	out, lse := make([]float32, no), make([]float32, nl)
	poison(out)
	poison(lse)
	if err := run(out, lse, q, k, v, ids, s); err != nil {
		return NumericReport{Shape: s}, err
	}
	return CheckOutput(p, ids, q, k, v, s, out, lse, opt, rows)
}

// CheckOutput judges a kernel's output and lse on inputs q, k, v (as the
// kernel read them: rounded to its element type) and document ids (nil
// without documents) against the float64 reference, on the listed lse rows
// (nil: every row): each row's error may be at most opt.Factor times the
// yardstick's (opt.Naive on the same inputs) or opt.Floor, and rows that
// keep no key must be exactly 0 with lse -Inf.
func CheckOutput(p spec.Pattern, ids []int32, q, k, v []float32, s Shape, out, lse []float32, opt NumericOptions, rows []int) (NumericReport, error) {
	rep := NumericReport{Shape: s, Rows: len(rows)}
	_, nq := s.SizesV()
	_, _, nl := s.Sizes()
	if len(out) < nq || len(lse) < nl {
		return rep, fmt.Errorf("%v: out or lse shorter than the shape", s)
	}
	var docs *spec.Docs
	if p.Mask.HasData() {
		d, err := DataOf(p, ids)
		if err != nil {
			return rep, err
		}
		docs = d
	}
	ref, refLSE, err := ReferenceRows(p, docs, q, k, v, s, rows)
	if err != nil {
		return rep, err
	}
	naive, naiveLSE := make([]float32, nq), make([]float32, nl)
	if rows != nil && opt.NaiveRows != nil {
		err = opt.NaiveRows(p, docs, q, k, v, s, rows, naive, naiveLSE)
	} else {
		err = opt.Naive(p, docs, q, k, v, s, naive, naiveLSE)
	}
	if err != nil {
		return rep, err
	}
	D := s.DV()
	check := func(row int) error {
		if math.IsInf(refLSE[row], -1) {
			rep.MaskedRows++
			if !math.IsInf(float64(lse[row]), -1) {
				return fmt.Errorf("%v: row %d keeps no key but lse = %v, want -Inf", s, row, lse[row])
			}
			for d := 0; d < D; d++ {
				if out[row*D+d] != 0 {
					return fmt.Errorf("%v: row %d keeps no key but out[%d] = %v, want 0", s, row, d, out[row*D+d])
				}
			}
			return nil
		}
		if e := math.Abs(float64(lse[row]) - refLSE[row]); !(e <= math.MaxFloat64) {
			return fmt.Errorf("%v: row %d: lse = %v, reference %v", s, row, lse[row], refLSE[row])
		} else {
			rep.KernelLSE = max(rep.KernelLSE, e)
		}
		rep.NaiveLSE = max(rep.NaiveLSE, math.Abs(float64(naiveLSE[row])-refLSE[row]))
		for d := 0; d < D; d++ {
			x := row*D + d
			e := math.Abs(float64(out[x]) - ref[x])
			if !(e <= math.MaxFloat64) {
				return fmt.Errorf("%v: out[row %d, dim %d] = %v (not written or not finite), reference %v", s, row, d, out[x], ref[x])
			}
			rep.KernelErr = max(rep.KernelErr, e)
			rep.NaiveErr = max(rep.NaiveErr, math.Abs(float64(naive[x])-ref[x]))
		}
		return nil
	}
	if rows == nil {
		for row := 0; row < nl; row++ {
			if err := check(row); err != nil {
				return rep, err
			}
		}
	} else {
		for _, row := range rows {
			if err := check(row); err != nil {
				return rep, err
			}
		}
	}
	if rep.KernelErr > opt.Factor*max(rep.NaiveErr, opt.Floor) || rep.KernelLSE > opt.Factor*max(rep.NaiveLSE, opt.Floor) {
		return rep, fmt.Errorf("%v: error too large: %v", s, rep)
	}
	return rep, nil
}

// CheckDependencies checks, for one small shape, that output row i changes
// exactly when a key/value row j the mask keeps for i changes: it perturbs
// each key/value row in turn and compares outputs bit for bit. A kept
// pair whose reference weight is at most VisibleWeight (a score stage can
// make far pairs that light: a steep ALiBi slope, a heavy sink) may leave
// the row unchanged in float32; a masked pair must never change it.
func CheckDependencies(p spec.Pattern, run Run, s Shape, r *rand.Rand) error {
	if s.Batch != 1 || s.HeadsQ != 1 || s.HeadsKV != 1 {
		return errors.New("CheckDependencies wants one batch and one head")
	}
	_, nkv, nl := s.Sizes()
	nv, nq := s.SizesV()
	D, DV := s.HeadDim, s.DV()
	q, k, v, ids, docs := randomInputs(p, &s, r)
	p = mustHeads(p, s).at(0)
	base, lse := make([]float32, nq), make([]float32, nl)
	if err := run(base, lse, q, k, v, ids, s); err != nil {
		return err
	}
	out := make([]float32, nq)
	k2, v2 := make([]float32, nkv), make([]float32, nv)
	w := pairWeights(p, docs, q, k, s)
	for j := 0; j < s.SeqK; j++ {
		copy(k2, k)
		copy(v2, v)
		for d := 0; d < D; d++ {
			k2[j*D+d] += float32(r.NormFloat64())
		}
		for d := 0; d < DV; d++ {
			v2[j*DV+d] += float32(r.NormFloat64())
		}
		poison(out)
		if err := run(out, lse, q, k2, v2, ids, s); err != nil {
			return err
		}
		for row := 0; row < s.SeqQ; row++ {
			changed := false
			for d := 0; d < DV; d++ {
				if out[row*DV+d] != base[row*DV+d] {
					changed = true
				}
			}
			keeps := p.AtDocs(spec.Row(row, s.SeqQ, s.SeqK), j, docs)
			if changed != keeps && (changed || w[row][j] > VisibleWeight) {
				return fmt.Errorf("%v: changing key/value %d changed output row %d: %v, but the mask keeps the pair: %v", s, j, row, changed, keeps)
			}
		}
	}
	return nil
}

// VisibleWeight is the reference weight (softmax probability) above which
// the dependency checks require a kept pair to show in float32 outputs:
// a change of order 1 in its key, value or dout moves an output of order
// 1 by some 2^4 rounding steps or more. Without a score stage random
// inputs never give a kept pair so little weight.
const VisibleWeight = 0x1p-20

// pairWeights returns the float64 reference weights of every pair of a
// one-head shape: w[row][j], 0 where the row masks j or has no weight.
func pairWeights(p spec.Pattern, docs *spec.Docs, q, k []float32, s Shape) [][]float64 {
	q64, k64 := wide(q), wide(k)
	x := newRowSoft(s)
	w := make([][]float64, s.SeqQ)
	for r := range w {
		w[r] = make([]float64, s.SeqK)
		if rowProbs(p, docs, q64, k64, s, 0, r, x) {
			for _, j := range x.kept {
				w[r][j] = x.prob[j]
			}
		}
	}
	return w
}

// The regime CheckStack runs its stack in. With inputs of order 1 the
// check cannot see far dependencies: q = k = v makes each row's score with
// itself about |x|^2/sqrt(d), so a row gives every other key a weight near
// e^-7, and after three hops an input's effect on an output at the edge of
// its dependency set is about 1e-8 of that output, below float32's step
// (2^-24): the kernels round it away and a correct stack reads as "does not
// depend". CheckStack therefore draws the unperturbed inputs at the tiny
// scale stackBase, perturbs a source by a vector with elements in [-1, 1],
// and runs the layers with the score scale 1/(stackScaleDiv·d), so that
// every score is at most about 1/stackScaleDiv in magnitude (the first
// layer's input is at most about 1 per element, every later one is a tanh)
// and attention is within a few percent of uniform. A kept key then
// carries at least about 1/K of the change of its row (K keys kept), and
// after L hops the change at an output is about 1/(K_1···K_L): far above
// the rounding step of outputs of order stackBase as long as that product,
// doubled per layer for the mixing and the deviation from uniform weights,
// stays below stackMaxGain.
const (
	stackBase     = 0x1p-30
	stackScaleDiv = 8
	stackMaxGain  = 0x1p40
	stackMaxWork  = 0x1p40 // multiply-adds CheckStack agrees to do
)

// CheckStack runs a stack of len(layers) attention layers (one head, q = k
// = v = the layer input, then a positionwise tanh mixing with a residual)
// and checks by perturbing each input position that output t depends on
// input s exactly when s is in the reachability model's R_L(t). Outputs are
// compared bit for bit: a layer that drops a kept pair or attends to a
// masked key shows as a dependency missing or extra wherever it changes
// R_L. Unperturbed inputs are tiny and scores are scaled down (see
// stackBase) so that the effect of an input through L hops stays well above
// float32 rounding; a stack too wide and deep for that (the product over
// layers of twice the most keys a row keeps exceeds 2^40) is an error, not
// a verdict. A layer whose mask reads run-time data carries it in its
// Pattern.Data (n positions), which the model uses and the run is given.
func CheckStack(layers []spec.Pattern, runs []Run, n, d int, r *rand.Rand) error {
	if len(layers) != len(runs) {
		return errors.New("CheckStack: one run per layer")
	}
	if len(layers) == 0 {
		return errors.New("CheckStack: no layers")
	}
	if r == nil {
		return errors.New("CheckStack: nil random source")
	}
	for l, run := range runs {
		if run == nil {
			return fmt.Errorf("CheckStack: layer %d has no run", l+1)
		}
	}
	if n < 1 || d < 1 {
		return fmt.Errorf("CheckStack: sequence length %d and head dimension %d must be at least 1", n, d)
	}
	// One forward per source: L layers of attention (n²·d) and mixing
	// (n·d²). The product is formed in float64, which cannot overflow here;
	// within the bound n·d and d·d fit an int.
	if work := float64(n) * float64(n) * float64(len(layers)) * float64(d) * (float64(n) + float64(d)); work > stackMaxWork {
		return fmt.Errorf("CheckStack: %d layers over %d positions of dimension %d need about %.3g multiply-adds, more than the limit 2^40; use a shorter sequence", len(layers), n, d, work)
	}
	nd, dd := n*d, d*d
	gain := 1.0
	data := make([][]int32, len(layers))
	for l, p := range layers {
		if p.Mask == nil {
			return fmt.Errorf("CheckStack: layer %d has no mask", l+1)
		}
		if p.Mask.HasData() {
			if p.Data == nil || p.Data.Len() != n {
				return fmt.Errorf("CheckStack: layer %d reads run-time data (documents or a tree): set its Pattern.Data, %d positions", l+1, n)
			}
			data[l] = p.Data.IDs()
			if p.Data.IsTree() {
				data[l] = p.Data.Parents()
			}
		}
		most := 0
		for t := 0; t < n; t++ {
			kept := 0
			for j := 0; j < n; j++ {
				if p.At(t, j) {
					kept++
				}
			}
			most = max(most, kept)
		}
		gain *= 2 * float64(max(most, 1))
	}
	if gain > stackMaxGain {
		return fmt.Errorf("CheckStack: %d layers over %d positions: an input's effect can fall below float32 resolution (product of 2×keys per row %.3g > 2^40); use a shorter sequence or fewer layers", len(layers), n, gain)
	}
	reach, err := NewReach(layers, n)
	if err != nil {
		return err
	}
	reach.AdvanceTo(len(layers))
	mix := randomSlice(r, dd, 1/math.Sqrt(float64(d)))
	s := Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: n, SeqK: n, HeadDim: d, Scale: 1 / (stackScaleDiv * float64(d))}
	forward := func(x []float32) ([]float32, error) {
		cur := append([]float32(nil), x...)
		y, lse, next := make([]float32, nd), make([]float32, n), make([]float32, nd)
		for l, run := range runs {
			poison(y)
			if err := run(y, lse, cur, cur, cur, data[l], s); err != nil {
				return nil, fmt.Errorf("layer %d: %w", l+1, err)
			}
			for t := 0; t < n; t++ {
				for a := 0; a < d; a++ {
					acc := float64(cur[t*d+a])
					for b := 0; b < d; b++ {
						acc += float64(mix[a*d+b]) * float64(y[t*d+b])
					}
					if math.IsNaN(acc) || math.IsInf(acc, 0) {
						return nil, fmt.Errorf("layer %d: output row %d is not finite (not written?)", l+1, t)
					}
					next[t*d+a] = float32(math.Tanh(acc))
				}
			}
			cur, next = next, cur
		}
		return cur, nil
	}
	x := randomSlice(r, nd, stackBase)
	base, err := forward(x)
	if err != nil {
		return err
	}
	for src := 0; src < n; src++ {
		x2 := append([]float32(nil), x...)
		for a := 0; a < d; a++ {
			x2[src*d+a] += float32(2*r.Float64() - 1)
		}
		out, err := forward(x2)
		if err != nil {
			return err
		}
		for t := 0; t < n; t++ {
			changed := false
			for a := 0; a < d; a++ {
				if out[t*d+a] != base[t*d+a] {
					changed = true
				}
			}
			if want := reach.Reachable(len(layers), t, src); changed != want {
				return fmt.Errorf("%d-layer stack, n %d: changing input %d changed output %d: %v, but %d in R_%d(%d): %v", len(layers), n, src, t, changed, src, len(layers), t, want)
			}
		}
	}
	return nil
}
