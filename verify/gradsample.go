package verify

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/attngen/attngen/spec"
)

// GradRows names the gradient rows a sampled gradient check judges: Query
// rows of dq as lse indices ([batch][heads_q][seq_q]), Key rows of dk
// and dv as key indices ([batch][heads_kv][seq_k]) and, with learned
// sinks, the query heads whose dsink is judged (Sink; each needs the
// softmax of every row of the head, in every batch).
type GradRows struct {
	Query, Key, Sink []int
}

// SampleGradRows picks the rows CheckGradSampled judges on a shape too
// long for ReferenceGrad: the query rows SampleRows picks for n, and at
// most n keys of one random key/value head of one random batch element
// (the first and last keys, the first and last of the keys no query keeps
// and of the keys some query keeps, then random ones), sorted. The keys'
// rows need the softmax of every query row of their group that keeps them,
// so they stay within one head. With learned sinks it also picks dsink of
// the query heads of that key/value head. n <= 0 picks every row, every
// key and every head.
func SampleGradRows(p spec.Pattern, docs *spec.Docs, s Shape, n int, r *rand.Rand) GradRows {
	g := GradRows{Query: SampleRows(p, docs, s, n, r)}
	if n <= 0 {
		_, nkv, _ := s.Sizes()
		for x := 0; x < nkv/s.HeadDim; x++ {
			g.Key = append(g.Key, x)
		}
		if s.Score.hasSinks() {
			for h := 0; h < s.HeadsQ; h++ {
				g.Sink = append(g.Sink, h)
			}
		}
		return g
	}
	n = min(n, s.SeqK)
	kvh := r.IntN(s.HeadsKV)
	b := r.IntN(s.Batch)
	base := (b*s.HeadsKV + kvh) * s.SeqK
	group := s.HeadsQ / s.HeadsKV
	if s.Score.hasSinks() {
		for h := kvh * group; h < (kvh+1)*group; h++ {
			g.Sink = append(g.Sink, h)
		}
	}
	kept := make([]bool, s.SeqK)
	for row := 0; row < s.SeqQ; row++ {
		x := (b*s.HeadsQ+kvh*group)*s.SeqQ + row // the group's first query head
		for j := range kept {
			if qi, kj, in := s.pairAt(x, j); !kept[j] && in && p.AtDocs(qi, kj, docs) {
				kept[j] = true
			}
		}
	}
	pick := map[int]bool{}
	add := func(j int) {
		if len(pick) < n {
			pick[j] = true
		}
	}
	add(0)
	add(s.SeqK - 1)
	for _, want := range []bool{false, true} {
		first, last := -1, -1
		for j, x := range kept {
			if x == want {
				if first < 0 {
					first = j
				}
				last = j
			}
		}
		if first >= 0 {
			add(first)
			add(last)
		}
	}
	for len(pick) < n {
		add(r.IntN(s.SeqK))
	}
	for j := range pick {
		g.Key = append(g.Key, base+j)
	}
	slices.Sort(g.Key)
	return g
}

// rowStats is one query row's softmax: in float64 (m64 and the sum give
// P = exp(s - m64) / sum64 for a staged score s, delta64 = dout . out),
// and as the straightforward backward of NaiveGradRounded computes it in
// float32; psink64 and psink32 are the sink's weights (0 without one).
type rowStats struct {
	ok               bool // the row keeps a key with weight
	m64, sum64       float64
	delta64, psink64 float64
	cmax64, b64      float64 // GradMagnitude's max_j c_ij (and |sink|) and b_i
	m32, sum32       float32
	delta32, psink32 float32
	ok32             bool
	scale64          float64
	scale32          float32
	qr, dor          []float32
	kvRow, stride    int    // the key/value head's first row (k and v rows j at kvRow+j)
	h, i             int    // query head, position
	kpos, nk         int    // the batch row's first key position and its keys
	sc               *Score // the shape's stage
}

// gradRow computes the softmax statistics of lse row x (= bh*SeqQ + r)
// in float64 and as NaiveGradRounded does, with round applied to the
// output before delta.
func gradRow(p spec.Pattern, docs *spec.Docs, q, k, v, dout []float32, s Shape, x int, round func(float32) float32) rowStats {
	D, DV := s.HeadDim, s.DV()
	group := s.HeadsQ / s.HeadsKV
	bh, r := x/s.SeqQ, x%s.SeqQ
	nq, nk, qpos, kpos := s.Row(bh / s.HeadsQ)
	st := rowStats{scale64: s.EffScale(), scale32: float32(s.EffScale()), qr: q[x*D:][:D], dor: dout[x*DV:][:DV],
		kvRow: (bh/s.HeadsQ*s.HeadsKV + bh%s.HeadsQ/group) * s.SeqK, h: bh % s.HeadsQ, i: qpos + r, kpos: kpos, nk: nk, sc: s.Score}
	if r >= nq {
		return st // past the batch row's queries: no key, output 0
	}
	var kept, idx []int
	var s64, c64, a64 []float64
	var s32 []float32
	for j := 0; j < nk; j++ {
		if !p.AtDocs(st.i, kpos+j, docs) {
			continue
		}
		d64, d32, c, a := st.scores(k, v, j)
		idx = append(idx, len(kept))
		kept, s64, s32 = append(kept, j), append(s64, d64), append(s32, d32)
		c64, a64 = append(c64, c), append(a64, a)
		st.cmax64 = max(st.cmax64, c)
	}
	if len(kept) == 0 {
		return st
	}
	// float64, as ReferenceGrad
	sink := s.Score.sink(st.h)
	if ms, sum, _, ok := softmax(s64, idx, sink); ok {
		st.ok, st.m64, st.sum64 = true, ms, sum
		st.psink64 = math.Exp(sink-ms) / sum
		if st.psink64 > 0 {
			st.cmax64 = max(st.cmax64, math.Abs(sink))
		}
		o64 := make([]float64, DV)
		for n, j := range kept {
			e := math.Exp(s64[n]-ms) / sum
			for d, y := range st.vRow(v, j) {
				o64[d] += e * float64(y)
			}
		}
		for d := range o64 {
			st.delta64 += float64(st.dor[d]) * o64[d]
		}
		for n := range kept {
			st.b64 += math.Exp(s64[n]-ms) / sum * (1 + c64[n] + st.cmax64) * a64[n]
		}
	}
	// float32, as NaiveGradRounded
	sink32 := float32(sink)
	m32, sum32, _, ok32 := softmax32(s32, idx, sink32)
	if !ok32 {
		return st
	}
	o32 := make([]float32, DV)
	for n, j := range kept {
		pj := float32(math.Exp(float64(s32[n]-m32))) / sum32
		for d, y := range st.vRow(v, j) {
			o32[d] += pj * y
		}
	}
	for d := range o32 {
		st.delta32 += st.dor[d] * round(o32[d])
	}
	st.ok32, st.m32, st.sum32 = true, m32, sum32
	st.psink32 = float32(math.Exp(float64(sink32-m32))) / sum32
	return st
}

// dots returns the scaled score x of the row with key j in float64 and as
// NaiveGradRounded computes it (before the stage).
func (st *rowStats) dots(k []float32, j int) (float64, float32) {
	var d64 float64
	var d32 float32
	for d, y := range st.kRow(k, j) {
		d64 += float64(st.qr[d]) * float64(y)
		d32 += st.qr[d] * y
	}
	return d64 * st.scale64, d32 * st.scale32
}

// scores returns the staged score of the row with key j in float64 and
// as NaiveGradRounded computes it, and GradMagnitude's c_ij and a_ij.
func (st *rowStats) scores(k, v []float32, j int) (s64 float64, s32 float32, c, a float64) {
	x64, x32 := st.dots(k, j)
	s64, dx := st.sc.apply(x64, st.h, st.i, st.kpos+j)
	s32, _ = stage32(st.sc, x32, st.h, st.i, st.kpos+j)
	raw, a := st.mags(k, v, j)
	g, _ := st.sc.stageMag(x64, raw, st.h, st.i, st.kpos+j)
	return s64, s32, dx*raw + g, a
}

// mags returns scale |q_i|·|k_j| and GradMagnitude's a_ij = |dout_i|·|v_j|
// for key j of the row.
func (st *rowStats) mags(k, v []float32, j int) (c, a float64) {
	kj, vj := st.kRow(k, j), st.vRow(v, j)
	for d, x := range st.qr {
		c += math.Abs(float64(x)) * math.Abs(float64(kj[d]))
	}
	for d, x := range st.dor {
		a += math.Abs(float64(x)) * math.Abs(float64(vj[d]))
	}
	return c * st.scale64, a
}

// kRow and vRow return key j's row of k (the query's width) and of v
// (dout's width).
func (st *rowStats) kRow(k []float32, j int) []float32 {
	return k[(st.kvRow+j)*len(st.qr):][:len(st.qr)]
}

func (st *rowStats) vRow(v []float32, j int) []float32 {
	return v[(st.kvRow+j)*len(st.dor):][:len(st.dor)]
}

// pair returns, for key j of the row, P and dS in float64, the rounded
// P and dS * scale of NaiveGradRounded (0 where the row has no weight),
// and GradMagnitude's weights of the pair: m_ij (of dS, for dq and dk)
// and P_ij e_ij (for dv). dS includes the stage's derivative.
func (st *rowStats) pair(k, v []float32, j int, round func(float32) float32) (p64, ds64 float64, p32, ds32 float32, mds, mp float64) {
	x64, x32 := st.dots(k, j)
	vj := st.vRow(v, j)
	if st.ok {
		s64, dx := st.sc.apply(x64, st.h, st.i, st.kpos+j)
		p64 = math.Exp(s64-st.m64) / st.sum64
		dp := 0.0
		for d, y := range vj {
			dp += float64(st.dor[d]) * float64(y)
		}
		ds64 = p64 * (dp - st.delta64) * dx
		raw, a := st.mags(k, v, j)
		g, f := st.sc.stageMag(x64, raw, st.h, st.i, st.kpos+j)
		e := 1 + dx*raw + g + st.cmax64
		mds = dx*p64*(a+st.b64+e*math.Abs(dp-st.delta64)) + math.Abs(p64*(dp-st.delta64))*f
		mp = p64 * e
	}
	if st.ok32 {
		s32, dx32 := stage32(st.sc, x32, st.h, st.i, st.kpos+j)
		pj := float32(math.Exp(float64(s32-st.m32))) / st.sum32
		var dp float32
		for d, y := range vj {
			dp += st.dor[d] * y
		}
		ds32 = round(pj*(dp-st.delta32)*dx32) * st.scale32
		p32 = round(pj)
	}
	return p64, ds64, p32, ds32, mds, mp
}

// CheckGradSampled judges gradients a backward wrote (dq, dk, dv, and
// dsink with learned sinks: HeadsQ values, judged for the heads of
// rows.Sink) for
// inputs q, k, v and dout (as the backward read them: rounded to its
// element type) and document ids (nil without documents) on the rows of
// rows only, for shapes too long for ReferenceGrad: each sampled element
// against the float64 reference, with opt's yardstick computed for the
// same elements as NaiveGradRounded computes them (bit for bit). The
// error of each entry may be at most opt.Factor times the yardstick's
// largest error on that gradient, or opt.Factor times its rounding floor
// (opt.Floor times its GradMagnitude, computed for the same elements);
// rows of dq whose query keeps no key and rows of dk and dv of
// keys no query keeps must be exactly 0, as must dsink of a head without
// a sink or whose rows keep no key. The softmax of every query row that
// keeps a sampled key, and of every row of a head in rows.Sink, is
// computed, on every CPU.
func CheckGradSampled(p spec.Pattern, ids []int32, q, k, v, dout []float32, s Shape, dq, dk, dv, dsink []float32, opt GradOptions, rows GradRows) (GradReport, error) {
	rep := GradReport{Shape: s}
	if err := s.Validate(); err != nil {
		return rep, err
	}
	if !(opt.Factor > 0) || !(opt.Floor >= 0) {
		return rep, fmt.Errorf("CheckGradSampled: factor %v and floor %v: want a positive factor and a floor of 0 or more", opt.Factor, opt.Floor)
	}
	nq, nkv, nl := s.Sizes()
	nv, no := s.SizesV()
	if len(q) < nq || len(k) < nkv || len(v) < nv || len(dout) < no || len(dq) < nq || len(dk) < nkv || len(dv) < nv {
		return rep, fmt.Errorf("%v: inputs or gradients shorter than the shape", s)
	}
	var docs *spec.Docs
	if p.Mask.HasDocument() {
		d, err := spec.NewDocs(ids)
		if err != nil {
			return rep, err
		}
		docs = d
	}
	hs, err := headsOf(p, s)
	if err != nil {
		return rep, err
	}
	for _, x := range rows.Query {
		if x < 0 || x >= nl {
			return rep, fmt.Errorf("%v: query row %d outside 0..%d", s, x, nl-1)
		}
	}
	for _, x := range rows.Key {
		if x < 0 || x >= nkv/s.HeadDim {
			return rep, fmt.Errorf("%v: key row %d outside 0..%d", s, x, nkv/s.HeadDim-1)
		}
	}
	switch {
	case s.Score.hasSinks() && len(dsink) < s.HeadsQ:
		return rep, fmt.Errorf("%v: the shape has learned sinks, and dsink has %d values, want HeadsQ = %d", s, len(dsink), s.HeadsQ)
	case !s.Score.hasSinks() && len(rows.Sink) > 0:
		return rep, fmt.Errorf("%v: dsink rows %v, but the shape has no learned sinks", s, rows.Sink)
	}
	for _, h := range rows.Sink {
		if h < 0 || h >= s.HeadsQ {
			return rep, fmt.Errorf("%v: dsink head %d outside 0..%d", s, h, s.HeadsQ-1)
		}
	}
	round := opt.RoundGrad
	if round == nil {
		round = func(x float32) float32 { return x }
	}
	D, DV := s.HeadDim, s.DV()
	group := s.HeadsQ / s.HeadsKV
	// keeps: lse row x keeps key index j of its batch row (at the row's
	// lengths and positions)
	keeps := func(x, j int) bool {
		i, kj, in := s.pairAt(x, j)
		return in && hs.row(s, x).AtDocs(i, kj, docs)
	}
	// the rows whose softmax is needed: the sampled query rows and every
	// row of the sampled keys' groups that keeps a sampled key
	need := map[int]bool{}
	for _, x := range rows.Query {
		need[x] = true
	}
	for _, h := range rows.Sink {
		for b := 0; b < s.Batch; b++ {
			for r := 0; r < s.SeqQ; r++ {
				need[(b*s.HeadsQ+h)*s.SeqQ+r] = true
			}
		}
	}
	for _, kr := range rows.Key {
		b, g, j := kr/s.SeqK/s.HeadsKV, kr/s.SeqK%s.HeadsKV, kr%s.SeqK
		for h := g * group; h < (g+1)*group; h++ {
			for r := 0; r < s.SeqQ; r++ {
				if x := (b*s.HeadsQ+h)*s.SeqQ + r; keeps(x, j) {
					need[x] = true
				}
			}
		}
	}
	list := make([]int, 0, len(need))
	for x := range need {
		list = append(list, x)
	}
	slices.Sort(list)
	stats := make(map[int]*rowStats, len(list))
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := range work {
				st := gradRow(hs.row(s, x), docs, q, k, v, dout, s, x, round)
				mu.Lock()
				stats[x] = &st
				mu.Unlock()
			}
		}()
	}
	for _, x := range list {
		work <- x
	}
	close(work)
	wg.Wait()

	var worst [4]entryErr
	judge := func(x int, got []float32, ref []float64, yard []float32, mag []float64, row int) error {
		for d := range got {
			e := math.Abs(float64(got[d]) - ref[d])
			if !(e <= math.MaxFloat64) {
				return fmt.Errorf("%v: %s[row %d, dim %d] = %v (not written or not finite), reference %v", s, gradNames[x], row, d, got[d], ref[d])
			}
			rep.KernelErr[x] = max(rep.KernelErr[x], e)
			rep.NaiveErr[x] = max(rep.NaiveErr[x], math.Abs(float64(yard[d])-ref[d]))
			rep.RefMax[x] = max(rep.RefMax[x], math.Abs(ref[d]))
			worst[x].add(e, opt.Floor*mag[d], opt.Factor, row, d, got[d], ref[d])
		}
		return nil
	}
	zero := func(x int, got []float32, row int) error {
		for d := range got {
			if got[d] != 0 {
				return fmt.Errorf("%v: %s[row %d, dim %d] = %v, want exactly 0 (no pair of that row is kept)", s, gradNames[x], row, d, got[d])
			}
		}
		return nil
	}
	ref, yard, mag := make([]float64, D), make([]float32, D), make([]float64, D)
	for _, x := range rows.Query {
		st := stats[x]
		clear(ref)
		clear(yard)
		clear(mag)
		kept := false
		for j := 0; j < s.SeqK; j++ {
			if !keeps(x, j) {
				continue
			}
			kept = true
			_, ds64, _, ds32, mds, _ := st.pair(k, v, j, round)
			for d, y := range st.kRow(k, j) {
				ref[d] += ds64 * float64(y) * st.scale64
				yard[d] += ds32 * y
				mag[d] += mds * math.Abs(float64(y)) * st.scale64
			}
		}
		if !kept {
			rep.MaskedRows++
			if err := zero(0, dq[x*D:][:D], x); err != nil {
				return rep, err
			}
			continue
		}
		if err := judge(0, dq[x*D:][:D], ref, yard, mag, x); err != nil {
			return rep, err
		}
	}
	ref2, yard2, mag2 := make([]float64, DV), make([]float32, DV), make([]float64, DV)
	for _, kr := range rows.Key {
		b, g, j := kr/s.SeqK/s.HeadsKV, kr/s.SeqK%s.HeadsKV, kr%s.SeqK
		clear(ref)
		clear(yard)
		clear(mag)
		clear(ref2)
		clear(yard2)
		clear(mag2)
		kept := false
		for h := g * group; h < (g+1)*group; h++ {
			for r := 0; r < s.SeqQ; r++ {
				x := (b*s.HeadsQ+h)*s.SeqQ + r
				if !keeps(x, j) {
					continue
				}
				kept = true
				st := stats[x]
				p64, ds64, p32, ds32, mds, mp := st.pair(k, v, j, round)
				for d := 0; d < D; d++ {
					ref[d] += ds64 * float64(st.qr[d]) * st.scale64 // dk
					yard[d] += ds32 * st.qr[d]
					mag[d] += mds * math.Abs(float64(st.qr[d])) * st.scale64
				}
				for d := 0; d < DV; d++ {
					ref2[d] += p64 * float64(st.dor[d]) // dv
					yard2[d] += p32 * st.dor[d]
					mag2[d] += mp * math.Abs(float64(st.dor[d]))
				}
			}
		}
		if !kept {
			rep.DeadKeys++
			if err := zero(1, dk[kr*D:][:D], kr); err != nil {
				return rep, err
			}
			if err := zero(2, dv[kr*DV:][:DV], kr); err != nil {
				return rep, err
			}
			continue
		}
		if err := judge(1, dk[kr*D:][:D], ref, yard, mag, kr); err != nil {
			return rep, err
		}
		if err := judge(2, dv[kr*DV:][:DV], ref2, yard2, mag2, kr); err != nil {
			return rep, err
		}
	}
	for _, h := range rows.Sink {
		var ref, mag float64
		var yard float32
		live := false
		for b := 0; b < s.Batch; b++ {
			for r := 0; r < s.SeqQ; r++ {
				st := stats[(b*s.HeadsQ+h)*s.SeqQ+r]
				live = live || st.ok
				if st.ok {
					ref -= st.psink64 * st.delta64
					mag += st.psink64 * ((1+math.Abs(s.Score.sink(h))+st.cmax64)*math.Abs(st.delta64) + st.b64)
				}
				if st.ok32 {
					yard -= st.psink32 * st.delta32
				}
			}
		}
		if !live || math.IsInf(s.Score.sink(h), -1) {
			if dsink[h] != 0 {
				return rep, fmt.Errorf("%v: dsink[row %d, dim 0] = %v, want exactly 0 (%s)", s, h, dsink[h], zeroWhy(3))
			}
			continue
		}
		if err := judge(3, dsink[h:h+1], []float64{ref}, []float32{yard}, []float64{mag}, h); err != nil {
			return rep, err
		}
	}
	if err := judgeGrads(s, &rep, worst, opt, " on sampled rows"); err != nil {
		return rep, err
	}
	return rep, nil
}

// CheckGradSampledRun runs the forward fwd and then the backward bwd on
// fresh random inputs of one shape, rounded by opt.Round (every output
// poisoned with NaN first), and judges the gradients with
// CheckGradSampled on the rows SampleGradRows picks for n.
func CheckGradSampledRun(p spec.Pattern, fwd Run, bwd RunBackward, s Shape, r *rand.Rand, opt GradOptions, n int) (GradReport, error) {
	if err := s.Validate(); err != nil {
		return GradReport{Shape: s}, err
	}
	nq, nkv, nl := s.Sizes()
	nv, no := s.SizesV()
	q, k, v, ids, docs := randomInputs(p, &s, r)
	dout := randomSlice(r, no, 1)
	if opt.Round != nil {
		for _, x := range [][]float32{q, k, v, dout} {
			opt.Round(x)
		}
	}
	s.poisonPast(q, k, v, dout)
	out, lse := make([]float32, no), make([]float32, nl)
	poison(out)
	poison(lse)
	if err := fwd(out, lse, q, k, v, ids, s); err != nil {
		return GradReport{Shape: s}, fmt.Errorf("forward: %w", err)
	}
	dq, dk, dv := make([]float32, nq), make([]float32, nkv), make([]float32, nv)
	poison(dq)
	poison(dk)
	poison(dv)
	dsink := newDSink(s)
	if err := bwd(dq, dk, dv, dout, q, k, v, out, lse, ids, s, dsink); err != nil {
		return GradReport{Shape: s}, err
	}
	return CheckGradSampled(p, ids, q, k, v, dout, s, dq, dk, dv, dsink, opt, SampleGradRows(p, docs, s, n, r))
}
