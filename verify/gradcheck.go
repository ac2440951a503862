package verify

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/attngen/attngen/spec"
)

// RunBackward is a backward kernel under test: the gradients dq, dk and dv
// of masked attention from dout, the inputs q, k, v, and the output and
// the natural-log lse of the forward, with document ids when the mask has
// document; with learned sinks (s.Score.Sinks) dsink receives the HeadsQ
// gradients of the sink logits (dsink is nil without sinks).
type RunBackward func(dq, dk, dv, dout, q, k, v, out, lse []float32, docs []int32, s Shape, dsink []float32) error

// GradReport is what CheckGrad measured on one shape: for dq, dk, dv and
// dsink (0 without sinks) in turn, the kernel's and the yardstick's
// largest error against ReferenceGrad, and the largest reference
// magnitude.
type GradReport struct {
	Shape                Shape
	KernelErr, NaiveErr  [4]float64
	RefMax               [4]float64
	MaskedRows, DeadKeys int // rows that keep no key, key rows no query keeps (checked exactly 0)
}

var gradNames = [4]string{"dq", "dk", "dv", "dsink"}

func (r GradReport) String() string {
	s := r.Shape.dims() + ":"
	for x, n := range gradNames {
		if x == 3 && !r.Shape.Score.hasSinks() {
			break
		}
		s += fmt.Sprintf(" %s err %.2e (yardstick %.2e, max %.2e)", n, r.KernelErr[x], r.NaiveErr[x], r.RefMax[x])
	}
	return s + fmt.Sprintf(", %d fully masked rows, %d keys kept by no row", r.MaskedRows, r.DeadKeys)
}

// newDSink returns the dsink buffer a check hands a backward: HeadsQ
// NaNs with sinks (an entry the backward does not write stays NaN), nil
// without.
func newDSink(s Shape) []float32 {
	if !s.Score.hasSinks() {
		return nil
	}
	d := make([]float32, s.HeadsQ)
	poison(d)
	return d
}

// deadSinks returns, for each query head, whether its dsink must be
// exactly 0: the head has no sink (logit -Inf) or none of its rows (in any
// batch) keeps a key. rowKeeps is structure's.
func deadSinks(s Shape, rowKeeps []bool) []bool {
	dead := make([]bool, s.HeadsQ)
	for h := range dead {
		dead[h] = math.IsInf(s.Score.sink(h), -1)
		if dead[h] {
			continue
		}
		dead[h] = true
		for b := 0; b < s.Batch && dead[h]; b++ {
			for r := 0; r < s.SeqQ; r++ {
				if rowKeeps[(b*s.HeadsQ+h)*s.SeqQ+r] {
					dead[h] = false
					break
				}
			}
		}
	}
	return dead
}

// structure returns, for a shape, which query rows ([batch, head, seq_q])
// keep some key and which key rows ([batch, kv head, seq_k]) some query
// row keeps: where the gradients must be exactly 0 and where they need
// not be.
func structure(p spec.Pattern, docs *spec.Docs, s Shape) (rowKeeps, keyKept []bool) {
	_, nkv, nl := s.Sizes()
	rowKeeps, keyKept = make([]bool, nl), make([]bool, nkv/s.HeadDim)
	group := s.HeadsQ / s.HeadsKV
	hs := mustHeads(p, s)
	for bh := 0; bh < s.Batch*s.HeadsQ; bh++ {
		kv := bh/s.HeadsQ*s.HeadsKV + bh%s.HeadsQ/group
		p := hs.at(bh % s.HeadsQ)
		nq, nk, qpos, kpos := s.Row(bh / s.HeadsQ)
		for r := 0; r < nq; r++ {
			i := qpos + r
			for j := 0; j < nk; j++ {
				if p.AtDocs(i, kpos+j, docs) {
					rowKeeps[bh*s.SeqQ+r] = true
					keyKept[kv*s.SeqK+j] = true
				}
			}
		}
	}
	return rowKeeps, keyKept
}

// GradOptions sets what CheckGradWith judges a backward against: the
// inputs q, k, v and dout are rounded by Round (nil: float32 as drawn),
// the yardstick is NaiveGradRounded on the same inputs with RoundGrad
// (nil: NaiveGradFP32), and the error of each entry of a gradient may be
// at most Factor times the yardstick's largest error on that gradient, or
// Factor times its rounding floor: Floor times the entry's GradMagnitude.
//
// The floor is what keeps a correct kernel from failing where the true
// gradient cancels to exactly 0 (a row that keeps a single key: dS = P
// (dP - delta) = 0, so dq and dk are 0): a straightforward yardstick that
// computes dP and delta in the same order cancels exactly too, and any
// other summation order leaves noise of a few rounding units of the terms
// that cancelled. The floor scales with those terms, so scaling the inputs
// scales it, and it stays far below a real error: with GradFP32 an entry
// may err by 32 rounding units of its magnitude, which on random inputs
// is about 1e-4 of the largest entries (their magnitudes are some 7 to 100
// times their values), so a gradient off by 1e-3 fails whatever the
// yardstick's luck.
//
// OutUnit, for a backward that reads the forward's output in a 16-bit
// format (the PTX kernels: delta = rowsum(dout * out) from bf16 out), is
// that format's unit roundoff u: out's rounding then reaches dsink[h] =
// -sum p_sink delta through delta, an error of standard deviation about
// u/sqrt(3) * sqrt(sum over the head's rows of p_sink^2 sum_d (dout_d
// out_d)^2) for independent roundings, which the yardstick's own rounding
// of out may happen to undershoot by far. dsink[h]'s floor adds u/2 times
// that root (the float64 reference's out and p_sink), so that Factor
// times it is about 7 standard deviations; on 600 random heads the bf16
// error stayed below 1.9 u times the root (TestCheckGradBF16DSink).
type GradOptions struct {
	Round     func([]float32)
	RoundGrad func(float32) float32
	Factor    float64
	Floor     float64
	OutUnit   float64
}

// GradFloor is the rounding floor of the gradient checks, in units of an
// entry's GradMagnitude: 4 float32 rounding units (2^-22). Correct float32
// backwards (every CPU variant, on random masks and the awkward shapes)
// stay below about 2.2 units of their entries' magnitudes, as does the
// yardstick, so with ErrFactor an entry needs 15 times that to fail on
// the floor alone.
const GradFloor = 0x1p-22

// GradFP32 judges float32 backwards against NaiveGradFP32.
var GradFP32 = GradOptions{Factor: ErrFactor, Floor: GradFloor}

// GradBF16 and GradF16 judge backwards that read 16-bit inputs and feed
// 16-bit tensor cores (the PTX backward kernels): inputs rounded to the
// format, and a yardstick that rounds the output, P and dS to it as such
// a backward does (NaiveGradRounded), with the factor and floor of
// GradFP32 (the float32 floor: where a gradient cancels to 0 the values
// rounded to 16 bits are the noise of float32 arithmetic, and elsewhere
// the yardstick's own 16-bit rounding sets the bound).
var (
	GradBF16 = GradOptions{Round: RoundBF16, RoundGrad: roundBF16, Factor: ErrFactor, Floor: GradFloor, OutUnit: 0x1p-8}
	GradF16  = GradOptions{Round: RoundF16, RoundGrad: roundF16Normal, Factor: ErrFactor, Floor: GradFloor, OutUnit: 0x1p-11}
)

// roundBF16 is x rounded to the nearest bfloat16.
func roundBF16(x float32) float32 { return FromBF16(BF16(x)) }

// roundF16Normal is x rounded to the nearest float16 inside f16's normal
// range and x itself outside it, where a 16-bit backward keeps such
// values in float32 (rounding them to subnormals or infinity would only
// make the yardstick worse, and the check looser).
func roundF16Normal(x float32) float32 {
	if a := math.Abs(float64(x)); a < 1.0/(1<<14) || a > 65504 {
		return x
	}
	return FromF16(F16(x))
}

// CheckGrad runs the forward fwd and then the backward bwd on fresh random
// inputs of one shape (every output poisoned with NaN first) and compares
// dq, dk, dv and dsink with ReferenceGrad and with NaiveGradFP32 on the same
// inputs: CheckGradWith with GradFP32.
func CheckGrad(p spec.Pattern, fwd Run, bwd RunBackward, s Shape, r *rand.Rand) (GradReport, error) {
	return CheckGradWith(p, fwd, bwd, s, r, GradFP32)
}

// CheckGradWith runs the forward fwd and then the backward bwd on fresh
// random inputs of one shape, rounded by opt.Round (every output poisoned
// with NaN first), and compares dq, dk, dv and, with learned sinks, dsink
// with ReferenceGrad and with the yardstick of opt on the same inputs:
// each entry's error may be at most opt.Factor times the yardstick's
// largest error, or opt.Factor times its rounding floor (GradOptions).
// The rows of dq whose query keeps no key, the rows of dk and dv of keys
// no query keeps, and dsink of a head without a sink (logit -Inf) or
// whose rows keep no key, must be exactly 0. The shape may have a head
// size of v of its own (HeadDimV: v, out, dout and dv have rows of it),
// per-row lengths and positions (the backward gets them in s); q, k, v
// and dout past a row's lengths are NaN, which no reference reads, and
// the gradient rows there must be exactly 0 too.
func CheckGradWith(p spec.Pattern, fwd Run, bwd RunBackward, s Shape, r *rand.Rand, opt GradOptions) (GradReport, error) {
	if !(opt.Factor > 0) || !(opt.Floor >= 0) {
		return GradReport{Shape: s}, fmt.Errorf("CheckGradWith: factor %v and floor %v: want a positive factor and a floor of 0 or more", opt.Factor, opt.Floor)
	}
	rep := GradReport{Shape: s}
	nq, nkv, nl := s.Sizes()
	nv, no := s.SizesV()
	D, DV := s.HeadDim, s.DV()
	q, k, v, ids, docs := randomInputs(p, &s, r)
	rep.Shape = s
	dout := randomSlice(r, no, 1)
	if opt.Round != nil {
		for _, x := range [][]float32{q, k, v, dout} {
			opt.Round(x)
		}
	}
	if err := checkInputs(s, len(q), len(k), len(v), docs); err != nil {
		return rep, err
	}
	if err := checkHeads(p, s); err != nil {
		return rep, err
	}
	s.poisonPast(q, k, v, dout) // no reference reads there; no kernel may
	ref, mag := referenceGrad(p, docs, q, k, v, dout, s)
	naive, err := NaiveGradRounded(p, docs, q, k, v, dout, s, opt.RoundGrad)
	if err != nil {
		return rep, err
	}
	out, lse := make([]float32, no), make([]float32, nl)
	poison(out)
	poison(lse)
	if err := fwd(out, lse, q, k, v, ids, s); err != nil {
		return rep, fmt.Errorf("forward: %w", err)
	}
	dq, dk, dv := make([]float32, nq), make([]float32, nkv), make([]float32, nv)
	poison(dq)
	poison(dk)
	poison(dv)
	dsink := newDSink(s)
	if err := bwd(dq, dk, dv, dout, q, k, v, out, lse, ids, s, dsink); err != nil {
		return rep, err
	}
	rowKeeps, keyKept := structure(p, docs, s)
	got := [4][]float32{dq, dk, dv, dsink}
	want := [4][]float64{ref.Q, ref.K, ref.V, ref.DSink}
	yard := [4][]float32{naive.Q, naive.K, naive.V, naive.DSink}
	live := [4][]bool{rowKeeps, keyKept, keyKept, nil}
	mags := [4][]float64{mag.Q, mag.K, mag.V, mag.DSink}
	width := [4]int{D, D, DV, 1}
	var sinkOut []float64 // OutUnit's floor of dsink, per head
	if dsink != nil {
		live[3] = deadSinks(s, rowKeeps)
		for h, dead := range live[3] {
			live[3][h] = !dead
		}
		if opt.OutUnit > 0 {
			if sinkOut, err = sinkOutFloor(p, docs, q, k, v, dout, s); err != nil {
				return rep, err
			}
		}
	}
	var worst [4]entryErr
	for x := range got {
		D := width[x]
		for row, ok := range live[x] {
			if !ok {
				if x < 2 {
					if x == 0 {
						rep.MaskedRows++
					} else {
						rep.DeadKeys++
					}
				}
				for d := 0; d < D; d++ {
					if e := got[x][row*D+d]; e != 0 {
						return rep, fmt.Errorf("%v: %s[row %d, dim %d] = %v, want exactly 0 (%s)", s, gradNames[x], row, d, e, zeroWhy(x))
					}
				}
				continue
			}
			for d := 0; d < D; d++ {
				i := row*D + d
				e := math.Abs(float64(got[x][i]) - want[x][i])
				if !(e <= math.MaxFloat64) {
					return rep, fmt.Errorf("%v: %s[row %d, dim %d] = %v (not written or not finite), reference %v", s, gradNames[x], row, d, got[x][i], want[x][i])
				}
				rep.KernelErr[x] = max(rep.KernelErr[x], e)
				rep.NaiveErr[x] = max(rep.NaiveErr[x], math.Abs(float64(yard[x][i])-want[x][i]))
				rep.RefMax[x] = max(rep.RefMax[x], math.Abs(want[x][i]))
				f := opt.Floor * mags[x][i]
				if x == 3 && sinkOut != nil {
					f += opt.OutUnit * sinkOut[i]
				}
				worst[x].add(e, f, opt.Factor, row, d, got[x][i], want[x][i])
			}
		}
	}
	if err := judgeGrads(s, &rep, worst, opt, ""); err != nil {
		return rep, err
	}
	return rep, nil
}

// sinkOutFloor returns, per query head, half the root of the sum over its
// rows of p_sink^2 * sum_d (dout_d out_d)^2 (GradOptions.OutUnit's
// floor), from the float64 reference's out and lse; rows past a batch
// row's queries, and rows whose p_sink is 0, add nothing.
func sinkOutFloor(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape) ([]float64, error) {
	out, lse, err := Reference(p, docs, q, k, v, s)
	if err != nil {
		return nil, err
	}
	DV := s.DV()
	f := make([]float64, s.HeadsQ)
	for row := range lse {
		bh, r := row/s.SeqQ, row%s.SeqQ
		h := bh % s.HeadsQ
		if nq, _, _, _ := s.Row(bh / s.HeadsQ); r >= nq {
			continue
		}
		ps := math.Exp(s.Score.sink(h) - lse[row])
		if !(ps > 0 && ps <= 1) {
			continue
		}
		t := 0.0
		for d, o := range out[row*DV:][:DV] {
			x := float64(dout[row*DV+d]) * o
			t += x * x
		}
		f[h] += ps * ps * t
	}
	for h := range f {
		f[h] = math.Sqrt(f[h]) / 2
	}
	return f, nil
}

// dataLen is the number of positions run-time data must cover: SeqK, or
// with positions the last one a batch row reaches.
func (s Shape) dataLen() int {
	n := s.SeqK
	for b := 0; b < s.Batch; b++ {
		nq, nk, qp, kp := s.Row(b)
		n = max(n, qp+nq, kp+nk)
	}
	return n
}

// poisonPast writes NaN to the rows of q and dout past each batch row's
// queries and the rows of k and v past its keys (nothing when the shape
// has no per-row lengths).
func (s Shape) poisonPast(q, k, v, dout []float32) {
	D, DV := s.HeadDim, s.DV()
	for b := 0; b < s.Batch; b++ {
		nq, nk, _, _ := s.Row(b)
		for h := 0; h < s.HeadsQ; h++ {
			row := (b*s.HeadsQ + h) * s.SeqQ
			poison(q[(row+nq)*D : (row+s.SeqQ)*D])
			poison(dout[(row+nq)*DV : (row+s.SeqQ)*DV])
		}
		for h := 0; h < s.HeadsKV; h++ {
			row := (b*s.HeadsKV + h) * s.SeqK
			poison(k[(row+nk)*D : (row+s.SeqK)*D])
			poison(v[(row+nk)*DV : (row+s.SeqK)*DV])
		}
	}
}

// entryErr tracks, for one gradient, the largest error of an entry that
// exceeds opt.Factor times its rounding floor (opt.Floor times the
// entry's GradMagnitude), and where it is.
type entryErr struct {
	err, floor float64
	row, dim   int
	got        float32
	want       float64
}

// add records entry (row, dim) with error e and rounding floor f when e
// exceeds factor times the floor and every error recorded so far.
func (w *entryErr) add(e, f, factor float64, row, dim int, got float32, want float64) {
	if e > factor*f && e > w.err {
		*w = entryErr{err: e, floor: f, row: row, dim: dim, got: got, want: want}
	}
}

// zeroWhy says why entries of gradient x must be exactly 0.
func zeroWhy(x int) string {
	if x == 3 {
		return "the head has no sink, or none of its rows keeps a key"
	}
	return "no pair of that row is kept"
}

// judgeGrads applies the rule of GradOptions to what CheckGradWith or
// CheckGradSampled measured: a gradient fails when some entry's error
// exceeds both opt.Factor times its rounding floor and opt.Factor times
// the yardstick's largest error on that gradient.
func judgeGrads(s Shape, rep *GradReport, worst [4]entryErr, opt GradOptions, where string) error {
	for x, w := range worst {
		if lim := opt.Factor * rep.NaiveErr[x]; w.err > lim {
			return fmt.Errorf("%v: %s error too large%s: %s[row %d, dim %d] = %v, reference %v: error %.3g above %v x the yardstick's %.3g and %v x the entry's rounding floor %.3g; %v",
				s, gradNames[x], where, gradNames[x], w.row, w.dim, w.got, w.want, w.err, opt.Factor, rep.NaiveErr[x], opt.Factor, w.floor, *rep)
		}
	}
	return nil
}

// CheckGradDependencies checks, for one small shape of one batch and one
// head, that perturbing row i of dout changes dv exactly at the keys row i
// keeps (those whose reference weight is at most VisibleWeight may stay
// as they are), dk only there, and dq only in row i; outputs are compared
// bit for bit. With a learned sink, dsink must not change when row i keeps no
// key (its term p_sink * delta is 0: its output is) and must change when
// the reference's change of its term, p_sink (delta' - delta), is more
// than 2^-16 of dsink. With per-row lengths or positions (s.SeqLensQ,
// QPos, ...) the mask is evaluated at the row's positions, and a dout row
// past the row's queries, like a key past its keys, changes nothing.
func CheckGradDependencies(p spec.Pattern, fwd Run, bwd RunBackward, s Shape, r *rand.Rand) error {
	if s.Batch != 1 || s.HeadsQ != 1 || s.HeadsKV != 1 {
		return errors.New("CheckGradDependencies wants one batch and one head")
	}
	nq, nkv, nl := s.Sizes()
	nv, no := s.SizesV()
	D, DV := s.HeadDim, s.DV()
	q, k, v, ids, docs := randomInputs(p, &s, r)
	p = mustHeads(p, s).at(0)
	dout := randomSlice(r, no, 1)
	out, lse := make([]float32, no), make([]float32, nl)
	if err := fwd(out, lse, q, k, v, ids, s); err != nil {
		return err
	}
	base := [3][]float32{make([]float32, nq), make([]float32, nkv), make([]float32, nv)}
	baseSink := newDSink(s)
	if err := bwd(base[0], base[1], base[2], dout, q, k, v, out, lse, ids, s, baseSink); err != nil {
		return err
	}
	got := [3][]float32{make([]float32, nq), make([]float32, nkv), make([]float32, nv)}
	gotSink := newDSink(s)
	w := pairWeights(p, docs, q, k, s)
	changed := func(x []float32, y []float32, row, w int) bool {
		for d := 0; d < w; d++ {
			if x[row*w+d] != y[row*w+d] {
				return true
			}
		}
		return false
	}
	same := func(x float32) float32 { return x }
	for i := 0; i < s.SeqQ; i++ {
		d2 := clone(dout)
		for d := 0; d < DV; d++ {
			d2[i*DV+d] += float32(1000 * r.NormFloat64())
		}
		for _, g := range got {
			poison(g)
		}
		poison(gotSink)
		if err := bwd(got[0], got[1], got[2], d2, q, k, v, out, lse, ids, s, gotSink); err != nil {
			return err
		}
		for r2 := 0; r2 < s.SeqQ; r2++ {
			if r2 != i && changed(got[0], base[0], r2, D) {
				return fmt.Errorf("%v: changing dout row %d changed dq row %d", s, i, r2)
			}
		}
		for j := 0; j < s.SeqK; j++ {
			qi, kj, in := s.pairAt(i, j)
			keeps := in && p.AtDocs(qi, kj, docs)
			if c := changed(got[2], base[2], j, DV); c != keeps && (c || w[i][j] > VisibleWeight) {
				return fmt.Errorf("%v: changing dout row %d changed dv row %d: %v, but the mask keeps the pair: %v", s, i, j, c, keeps)
			}
			if c := changed(got[1], base[1], j, D); c && !keeps {
				return fmt.Errorf("%v: changing dout row %d changed dk row %d, which the row masks", s, i, j)
			}
		}
		if baseSink == nil {
			continue
		}
		before, after := gradRow(p, docs, q, k, v, dout, s, i, same), gradRow(p, docs, q, k, v, d2, s, i, same)
		c := math.Float32bits(gotSink[0]) != math.Float32bits(baseSink[0])
		if !before.ok || before.psink64 == 0 {
			if c {
				return fmt.Errorf("%v: changing dout row %d, which keeps no key or has no sink weight, changed dsink from %v to %v", s, i, baseSink[0], gotSink[0])
			}
			continue
		}
		want := -before.psink64 * (after.delta64 - before.delta64)
		if !c && math.Abs(want) > 0x1p-16*max(math.Abs(float64(baseSink[0])), math.Abs(float64(gotSink[0]))) {
			return fmt.Errorf("%v: changing dout row %d left dsink at %v; the reference's term changed by %v", s, i, baseSink[0], want)
		}
	}
	return nil
}

// CheckGradNonFinite checks that a masked pair is never read, with NaN,
// +Inf and -Inf (mixed) in two ways in each trial. First it poisons the
// keys and values a random query row masks: every dq row whose query keeps
// none of the poisoned keys, and every dk and dv row of a clean key that
// only such queries keep, must be bit-identical to the clean run. Then it
// poisons q and dout (or one of them) of a random query row and of a
// random row that keeps no key (lse -Inf, or the sink logit with a sink;
// when the shape has one): every dk and dv row of a key neither row
// keeps, and every other row of dq, must be bit-identical to the clean
// run (a backward that multiplies a masked pair's P or dS, 0, by the
// row's q or dout gets 0 * NaN = NaN there). With learned sinks, dsink of
// a head none of whose rows is dirty (keeps a poisoned key; is a poisoned
// row that keeps a key) must be bit-identical too: a row that keeps no
// key has output 0 and adds nothing to dsink, whatever its dout. With
// per-row lengths or positions a pair is kept only within the batch row's
// lengths, at its positions: the keys past a row's length are among those
// poisoned, and the rows past its queries among those that keep no key.
func CheckGradNonFinite(p spec.Pattern, fwd Run, bwd RunBackward, s Shape, r *rand.Rand, trials int) error {
	if err := s.Validate(); err != nil {
		return err
	}
	nq, nkv, nl := s.Sizes()
	nv, no := s.SizesV()
	D, DV := s.HeadDim, s.DV()
	group := s.HeadsQ / s.HeadsKV
	q, k, v, ids, docs := randomInputs(p, &s, r)
	hs := mustHeads(p, s)
	dout := randomSlice(r, no, 1)
	run := func(q, k, v, dout []float32) ([4][]float32, error) {
		out, lse := make([]float32, no), make([]float32, nl)
		g := [4][]float32{make([]float32, nq), make([]float32, nkv), make([]float32, nv), newDSink(s)}
		fill(out, lse)
		if err := fwd(out, lse, q, k, v, ids, s); err != nil {
			return g, err
		}
		for _, x := range g {
			poison(x)
		}
		return g, bwd(g[0], g[1], g[2], dout, q, k, v, out, lse, ids, s, g[3])
	}
	clean, err := run(q, k, v, dout)
	if err != nil {
		return err
	}
	kvOf := func(bh int) int { return bh/s.HeadsQ*s.HeadsKV + bh%s.HeadsQ/group }
	// keeps: lse row x ([batch, heads_q, seq_q] index) keeps key j
	keeps := func(x, j int) bool {
		i, kj, in := s.pairAt(x, j)
		return in && hs.row(s, x).AtDocs(i, kj, docs)
	}
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	rowKeeps, _ := structure(p, docs, s)
	var dead []int
	for x, ok := range rowKeeps {
		if !ok {
			dead = append(dead, x)
		}
	}
	// sinkSame reports dsink of every head whose rows are all clean
	// bit-identical to the clean run's.
	sinkSame := func(got [4][]float32, dirty func(x int) bool) (int, bool) {
		for h := range got[3] {
			quiet := true
			for x := 0; x < nl && quiet; x++ {
				quiet = x/s.SeqQ%s.HeadsQ != h || !dirty(x)
			}
			if quiet && math.Float32bits(got[3][h]) != math.Float32bits(clean[3][h]) {
				return h, false
			}
		}
		return 0, true
	}
	same := func(got [4][]float32, x int, n int) bool {
		w := D
		if x == 2 {
			w = DV
		}
		for d := 0; d < w; d++ {
			if math.Float32bits(got[x][n*w+d]) != math.Float32bits(clean[x][n*w+d]) {
				return false
			}
		}
		return true
	}
	for t := 0; t < trials; t++ {
		pk, pv := clone(k), clone(v)
		row := r.IntN(nl)
		kv := kvOf(row / s.SeqQ)
		bad := make([]bool, nkv/D)
		for j := 0; j < s.SeqK; j++ {
			if keeps(row, j) {
				continue
			}
			bad[kv*s.SeqK+j] = true
			for d := 0; d < D; d++ {
				pk[(kv*s.SeqK+j)*D+d] = specials[r.IntN(3)]
			}
			for d := 0; d < DV; d++ {
				pv[(kv*s.SeqK+j)*DV+d] = specials[r.IntN(3)]
			}
		}
		got, err := run(q, pk, pv, dout)
		if err != nil {
			return err
		}
		// dirty query rows: those keeping a poisoned key
		dirty := make([]bool, nl)
		for x := 0; x < nl; x++ {
			for j := 0; j < s.SeqK; j++ {
				if bad[kvOf(x/s.SeqQ)*s.SeqK+j] && keeps(x, j) {
					dirty[x] = true
					break
				}
			}
		}
		// dirty key rows: poisoned, or kept by a dirty query row
		dirtyKey := slices.Clone(bad)
		for x := 0; x < nl; x++ {
			if !dirty[x] {
				continue
			}
			for j := 0; j < s.SeqK; j++ {
				if keeps(x, j) {
					dirtyKey[kvOf(x/s.SeqQ)*s.SeqK+j] = true
				}
			}
		}
		for x := 0; x < nl; x++ {
			if !dirty[x] && !same(got, 0, x) {
				return fmt.Errorf("%v: the keys query row %d masks poisoned: dq row %d, which keeps none of them, changed", s, row, x)
			}
		}
		for n := range dirtyKey {
			if !dirtyKey[n] && (!same(got, 1, n) || !same(got, 2, n)) {
				return fmt.Errorf("%v: the keys query row %d masks poisoned: dk/dv of clean key row %d, kept by clean rows only, changed", s, row, n)
			}
		}
		if h, ok := sinkSame(got, func(x int) bool { return dirty[x] }); !ok {
			return fmt.Errorf("%v: the keys query row %d masks poisoned: dsink[%d] = %v, clean run %v, changed though no row of the head keeps a poisoned key", s, row, h, got[3][h], clean[3][h])
		}

		// q and dout of a random row and of a row that keeps no key
		rows := []int{r.IntN(nl)}
		if len(dead) > 0 {
			rows = append(rows, dead[r.IntN(len(dead))])
		}
		pq, po := clone(q), clone(dout)
		poisoned := make([]bool, nl)
		keyDirty := make([]bool, nkv/D)
		for _, x := range rows {
			poisoned[x] = true
			to := [][]float32{pq, po} // both half the time, q only or dout only a quarter each
			ws := []int{D, DV}
			if m := r.IntN(4); m < 2 {
				to, ws = to[m:m+1], ws[m:m+1]
			}
			for t, a := range to {
				w := ws[t]
				for d := 0; d < w; d++ {
					if d == 0 || r.IntN(2) == 0 {
						a[x*w+d] = specials[r.IntN(3)]
					}
				}
			}
			for j := 0; j < s.SeqK; j++ {
				if keeps(x, j) {
					keyDirty[kvOf(x/s.SeqQ)*s.SeqK+j] = true
				}
			}
		}
		got, err = run(pq, k, v, po)
		if err != nil {
			return err
		}
		for x := 0; x < nl; x++ {
			if !poisoned[x] && !same(got, 0, x) {
				return fmt.Errorf("%v: q and dout of query rows %v poisoned: dq row %d changed", s, rows, x)
			}
		}
		for n := range keyDirty {
			if !keyDirty[n] && (!same(got, 1, n) || !same(got, 2, n)) {
				return fmt.Errorf("%v: q and dout of query rows %v poisoned: dk/dv of key row %d, which they mask, changed", s, rows, n)
			}
		}
		if h, ok := sinkSame(got, func(x int) bool { return poisoned[x] && rowKeeps[x] }); !ok {
			return fmt.Errorf("%v: q and dout of query rows %v poisoned: dsink[%d] = %v, clean run %v, changed though none of the head's poisoned rows keeps a key", s, rows, h, got[3][h], clean[3][h])
		}
	}
	return nil
}
