package verify

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/attngen/attngen/spec"
)

// sentinel fills outputs before the runs of the non-finite checks: a
// finite value no kernel writes, so that a row left unwritten cannot pass
// for a NaN or for a clean result.
const sentinel = float32(-1234.5)

// CheckNonFinite runs the kernel on inputs holding NaN and infinities and
// checks two rules against a clean run and the float64 reference:
//
//   - a masked pair never reads its key or value: every output row that
//     keeps none of the poisoned keys (and whose own query is clean) is
//     bit-identical to the clean run, however the poisoned positions are
//     filled;
//   - kept pairs follow IEEE arithmetic as Reference defines it: in a row
//     that depends on a poisoned input, every output and the lse are of the
//     reference's kind (finite, NaN, +Inf or -Inf).
//
// Each trial poisons either every key a random query row masks (k and v,
// all head dimensions, with NaN, +Inf and -Inf mixed) or a few random
// entries of q, k and v.
func CheckNonFinite(p spec.Pattern, run Run, s Shape, r *rand.Rand, trials int) error {
	if err := s.Validate(); err != nil {
		return err
	}
	nq, nkv, nl := s.Sizes()
	nv, no := s.SizesV()
	D, DV := s.HeadDim, s.DV()
	q, k, v, ids, docs := randomInputs(p, &s, r)
	hs := mustHeads(p, s)
	clean, cleanLSE := make([]float32, no), make([]float32, nl)
	fill(clean, cleanLSE)
	if err := run(clean, cleanLSE, q, k, v, ids, s); err != nil {
		return err
	}
	group := s.HeadsQ / s.HeadsKV
	keeps := func(row, j int) bool { // row: [batch, head, seq_q] index
		return hs.row(s, row).AtDocs(spec.Row(row%s.SeqQ, s.SeqQ, s.SeqK), j, docs)
	}
	// kvOf is the (batch, kv head) of a query row's keys.
	kvOf := func(row int) int {
		bh := row / s.SeqQ
		return bh/s.HeadsQ*s.HeadsKV + bh%s.HeadsQ/group
	}
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	special := func() float32 { return specials[r.IntN(len(specials))] }
	out, lse := make([]float32, no), make([]float32, nl)
	for t := 0; t < trials; t++ {
		pq, pk, pv := clone(q), clone(k), clone(v)
		badQ := map[int]bool{}      // query rows holding a special value
		badKey := map[[2]int]bool{} // (batch*HeadsKV + kv head, key) holding one
		what := ""
		if t%2 == 0 {
			row := r.IntN(nl)
			kv := kvOf(row)
			n := 0
			for j := 0; j < s.SeqK; j++ {
				if keeps(row, j) {
					continue
				}
				n++
				badKey[[2]int{kv, j}] = true
				for d := 0; d < D; d++ {
					pk[(kv*s.SeqK+j)*D+d] = special()
				}
				for d := 0; d < DV; d++ {
					pv[(kv*s.SeqK+j)*DV+d] = special()
				}
			}
			what = fmt.Sprintf("the %d keys query row %d masks poisoned", n, row)
		} else {
			for n := 1 + r.IntN(3); n > 0; n-- {
				switch r.IntN(3) {
				case 0:
					x := r.IntN(nq)
					pq[x] = special()
					badQ[x/D] = true
				case 1:
					x := r.IntN(nkv)
					pk[x] = special()
					badKey[[2]int{x / D / s.SeqK, x / D % s.SeqK}] = true
				default:
					x := r.IntN(nv)
					pv[x] = special()
					badKey[[2]int{x / DV / s.SeqK, x / DV % s.SeqK}] = true
				}
			}
			what = "special values in q, k and v"
		}
		ref, refLSE, err := Reference(p, docs, pq, pk, pv, s)
		if err != nil {
			return err
		}
		fill(out, lse)
		if err := run(out, lse, pq, pk, pv, ids, s); err != nil {
			return err
		}
		for row := 0; row < nl; row++ {
			kv := kvOf(row)
			dep := badQ[row]
			for j := 0; j < s.SeqK && !dep; j++ {
				dep = badKey[[2]int{kv, j}] && keeps(row, j)
			}
			o, c := out[row*DV:][:DV], clean[row*DV:][:DV]
			if !dep {
				for d := range o {
					if math.Float32bits(o[d]) != math.Float32bits(c[d]) {
						return fmt.Errorf("%v, %s: row %d depends on none of them, but out[%d] = %v, clean run %v", s, what, row, d, o[d], c[d])
					}
				}
				if math.Float32bits(lse[row]) != math.Float32bits(cleanLSE[row]) {
					return fmt.Errorf("%v, %s: row %d depends on none of them, but lse = %v, clean run %v", s, what, row, lse[row], cleanLSE[row])
				}
				continue
			}
			under := weightUnderflows(hs.row(s, row), docs, pq, pk, pv, s, row)
			for d := range o {
				if k := kind(float64(o[d])); k != kind(ref[row*DV+d]) && !(under && k <= 1) {
					return fmt.Errorf("%v, %s: row %d: out[%d] = %v, reference %v", s, what, row, d, o[d], ref[row*DV+d])
				}
			}
			if kind(float64(lse[row])) != kind(refLSE[row]) {
				return fmt.Errorf("%v, %s: row %d: lse = %v, reference %v", s, what, row, lse[row], refLSE[row])
			}
		}
	}
	return nil
}

// roughTol is how far roughlyAttention lets a clean run be from the
// float64 reference, relative to 1 + |reference|: far more than any
// element type's rounding (bf16's step is 2^-8), far less than what an
// output never written or computed from other data is off by.
const roughTol = 0.05

// roughlyAttention checks that a clean run's out and lse are attention of
// q, k and v within roughTol (rows that keep no key exactly 0 with lse
// -Inf), so that a kernel that writes nothing, or leaves the same stale
// memory on every run, cannot pass a check that compares it with itself.
func roughlyAttention(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, out, lse []float32) error {
	ref, refLSE, err := Reference(p, docs, q, k, v, s)
	if err != nil {
		return err
	}
	D := s.DV()
	for row, want := range refLSE {
		if math.IsInf(want, -1) {
			if !math.IsInf(float64(lse[row]), -1) {
				return fmt.Errorf("%v: clean run: row %d keeps no key but lse = %v, want -Inf", s, row, lse[row])
			}
			for d := 0; d < D; d++ {
				if out[row*D+d] != 0 {
					return fmt.Errorf("%v: clean run: row %d keeps no key but out[%d] = %v, want 0", s, row, d, out[row*D+d])
				}
			}
			continue
		}
		if got := float64(lse[row]); !(math.Abs(got-want) <= roughTol*(1+math.Abs(want))) {
			return fmt.Errorf("%v: clean run: lse[%d] = %v, reference %v: not the attention of the inputs", s, row, got, want)
		}
		for d := 0; d < D; d++ {
			x := row*D + d
			if got := float64(out[x]); !(math.Abs(got-ref[x]) <= roughTol*(1+math.Abs(ref[x]))) {
				return fmt.Errorf("%v: clean run: out[row %d, dim %d] = %v, reference %v: not the attention of the inputs", s, row, d, got, ref[x])
			}
		}
	}
	return nil
}

// kind classifies a value: 0 finite, 1 NaN, 2 +Inf, 3 -Inf.
func kind(x float64) int {
	switch {
	case math.IsNaN(x):
		return 1
	case math.IsInf(x, 1):
		return 2
	case math.IsInf(x, -1):
		return 3
	}
	return 0
}

func fill(out, lse []float32) {
	for i := range out {
		out[i] = sentinel
	}
	for i := range lse {
		lse[i] = sentinel
	}
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }

// CheckBatchDocs runs a document mask with one row of document ids per
// batch (Batch*SeqK ids; for a tree mask, one parent array per batch) and
// checks each batch against the reference with its own data; a kernel
// that reads the first row for every batch fails.
func CheckBatchDocs(p spec.Pattern, run Run, s Shape, r *rand.Rand) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Batch < 2 {
		return fmt.Errorf("CheckBatchDocs: %v: needs at least 2 batches", s)
	}
	s = WithHeadParams(p, s, r)
	s = WithScore(p, s, r)
	nq, nkv, nl := s.Sizes()
	q, k, v := randomSlice(r, nq, 1), randomSlice(r, nkv, 1), randomSlice(r, nkv, 1)
	ids := make([]int32, 0, s.Batch*s.SeqK)
	for b := 0; b < s.Batch; b++ {
		ids = append(ids, RandomData(p, r, s.SeqK)...)
	}
	out, lse := make([]float32, nq), make([]float32, nl)
	poison(out)
	poison(lse)
	if err := run(out, lse, q, k, v, ids, s); err != nil {
		return err
	}
	one := s
	one.Batch = 1
	bq, bkv, bl := one.Sizes()
	for b := 0; b < s.Batch; b++ {
		docs, err := DataOf(p, ids[b*s.SeqK:(b+1)*s.SeqK])
		if err != nil {
			return err
		}
		ref, refLSE, err := Reference(p, docs, q[b*bq:][:bq], k[b*bkv:][:bkv], v[b*bkv:][:bkv], one)
		if err != nil {
			return err
		}
		for x, want := range ref {
			if got := out[b*bq+x]; !(math.Abs(float64(got)-want) <= 1e-4) {
				return fmt.Errorf("%v, one row of ids per batch: batch %d: out[%d] = %v, reference %v", s, b, x, got, want)
			}
		}
		for x, want := range refLSE {
			got := float64(lse[b*bl+x])
			if !(math.Abs(got-want) <= 1e-4 || math.IsInf(want, -1) && math.IsInf(got, -1)) {
				return fmt.Errorf("%v, one row of ids per batch: batch %d: lse[%d] = %v, reference %v", s, b, x, got, want)
			}
		}
	}
	return nil
}

// CheckMaskedData checks the masked-data rule of a forward kernel: a
// masked pair never reads its key, value or query, so NaN and infinities
// there change nothing. It runs the kernel on clean inputs (which must
// give attention within a loose 5% of the float64 reference, so that a
// kernel that writes nothing cannot pass) and then on poisoned copies, and
// requires outputs and lse bit-identical to the clean run wherever the
// poison is masked:
//
//   - rows trials, each on a random query row: every key and value that
//     row masks (all head dimensions, NaN, +Inf and -Inf mixed) and the q
//     of every row that keeps no key are poisoned; every output row that
//     keeps none of the poisoned keys, the chosen row among them, must be
//     unchanged;
//   - then one trial poisons everything no pair reads: the keys and values
//     no query row of their group keeps and the q of every row that keeps
//     no key; every output must be unchanged.
//
// A kernel that multiplies a masked pair's weight, 0, by its value (or
// adds its score to a -Inf) instead of skipping it gets NaN there.
// Unlike CheckNonFinite it judges nothing else, so it holds for kernels of
// any element type whose inputs are rounded: the poisoned values are
// exactly representable in every format.
func CheckMaskedData(p spec.Pattern, run Run, s Shape, r *rand.Rand, rows int) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if rows < 0 {
		return fmt.Errorf("CheckMaskedData: %d rows, want 0 or more", rows)
	}
	_, nkv, nl := s.Sizes()
	_, no := s.SizesV()
	D, DV := s.HeadDim, s.DV()
	q, k, v, ids, docs := randomInputs(p, &s, r)
	hs := mustHeads(p, s)
	clean, cleanLSE := make([]float32, no), make([]float32, nl)
	fill(clean, cleanLSE)
	if err := run(clean, cleanLSE, q, k, v, ids, s); err != nil {
		return err
	}
	if err := roughlyAttention(p, docs, q, k, v, s, clean, cleanLSE); err != nil {
		return err
	}
	group := s.HeadsQ / s.HeadsKV
	kvOf := func(row int) int { bh := row / s.SeqQ; return bh/s.HeadsQ*s.HeadsKV + bh%s.HeadsQ/group }
	keeps := func(row, j int) bool {
		return hs.row(s, row).AtDocs(spec.Row(row%s.SeqQ, s.SeqQ, s.SeqK), j, docs)
	}
	// keptBy[kv*SeqK + j]: some query row of the group keeps key j;
	// rowKeeps[row]: the row keeps some key
	keptBy, rowKeeps := make([]bool, nkv/D), make([]bool, nl)
	for row := 0; row < nl; row++ {
		kv := kvOf(row)
		for j := 0; j < s.SeqK; j++ {
			if keeps(row, j) {
				keptBy[kv*s.SeqK+j] = true
				rowKeeps[row] = true
			}
		}
	}
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	special := func() float32 { return specials[r.IntN(len(specials))] }
	out, lse := make([]float32, no), make([]float32, nl)
	for t := 0; t <= rows; t++ {
		pq, pk, pv := clone(q), clone(k), clone(v)
		bad := make([]bool, nkv/D) // poisoned key rows, kv*SeqK + j
		what := ""
		if t < rows {
			row := r.IntN(nl)
			kv := kvOf(row)
			n := 0
			for j := 0; j < s.SeqK; j++ {
				if !keeps(row, j) {
					bad[kv*s.SeqK+j] = true
					n++
				}
			}
			what = fmt.Sprintf("the %d keys and values query row %d masks", n, row)
		} else {
			n := 0
			for x, kept := range keptBy {
				if !kept {
					bad[x] = true
					n++
				}
			}
			what = fmt.Sprintf("the %d keys and values no row keeps", n)
		}
		for x, b := range bad {
			if b {
				for d := 0; d < D; d++ {
					pk[x*D+d] = special()
				}
				for d := 0; d < DV; d++ {
					pv[x*DV+d] = special()
				}
			}
		}
		dead := 0
		for row, ok := range rowKeeps {
			if !ok {
				dead++
				for d := 0; d < D; d++ {
					pq[row*D+d] = special()
				}
			}
		}
		if dead > 0 {
			what += fmt.Sprintf(" and the q of the %d rows that keep no key", dead)
		}
		fill(out, lse)
		if err := run(out, lse, pq, pk, pv, ids, s); err != nil {
			return err
		}
		for row := 0; row < nl; row++ {
			kv := kvOf(row)
			reads := false
			for j := 0; j < s.SeqK && !reads; j++ {
				reads = bad[kv*s.SeqK+j] && keeps(row, j)
			}
			if reads {
				continue
			}
			o, c := out[row*DV:][:DV], clean[row*DV:][:DV]
			for d := range o {
				if math.Float32bits(o[d]) != math.Float32bits(c[d]) {
					return fmt.Errorf("%v, NaN and infinities at %s: row %d reads none of them, but out[%d] = %v, clean run %v", s, what, row, d, o[d], c[d])
				}
			}
			if math.Float32bits(lse[row]) != math.Float32bits(cleanLSE[row]) {
				return fmt.Errorf("%v, NaN and infinities at %s: row %d reads none of them, but lse = %v, clean run %v", s, what, row, lse[row], cleanLSE[row])
			}
		}
	}
	return nil
}

// weightUnderflows reports whether row row ([batch, head, seq_q] index)
// keeps a key whose value row holds a NaN or an infinity with a softmax
// weight exp(s_j - m) below 2^-125 (m the row's largest kept score or
// sink; a kept score of -Inf has weight exactly 0). The kernels compute in
// float32, whose normal range ends at 2^-126, and a weight that is 0 to
// them makes its value's term 0 times an infinity or NaN: NaN where a
// kernel multiplies, nothing where it selects (a PTX kernel under the
// interpreter was seen to), while the float64 reference keeps a tiny weight (a tiny
// weight times an infinity is an infinity) or multiplies an exact 0 (NaN).
// The contract leaves that term's kind open (docs/language.md, section
// 1), so in such a row the non-finite checks accept a finite or NaN output
// for the reference's NaN or infinity. The score stage's soft-cap makes
// the tiny weights reachable with finite scores: it maps infinite scores
// to +-cap, so kept weights span e^(-2 cap).
func weightUnderflows(p spec.Pattern, docs *spec.Docs, q, k, v []float32, s Shape, row int) bool {
	D, DV, scale := s.HeadDim, s.DV(), s.EffScale()
	group := s.HeadsQ / s.HeadsKV
	bh, r := row/s.SeqQ, row%s.SeqQ
	b, h := bh/s.HeadsQ, bh%s.HeadsQ
	kvRow := (b*s.HeadsKV + h/group) * s.SeqK
	kvBase := kvRow * D
	qr := q[row*D : row*D+D]
	i := spec.Row(r, s.SeqQ, s.SeqK)
	m := s.Score.sink(h)
	var bad []float64 // scores of kept keys with a non-finite value
	for j := 0; j < s.SeqK; j++ {
		if !p.AtDocs(i, j, docs) {
			continue
		}
		dot := 0.0
		for d, x := range k[kvBase+j*D : kvBase+j*D+D] {
			dot += float64(qr[d]) * float64(x)
		}
		sc, _ := s.Score.apply(dot*scale, h, i, j)
		m = math.Max(m, sc)
		if !allFinite32(v[(kvRow+j)*DV:][:DV]) {
			bad = append(bad, sc)
		}
	}
	for _, sc := range bad {
		if sc-m < -125*math.Ln2 {
			return true
		}
	}
	return false
}

func allFinite32(x []float32) bool {
	for _, e := range x {
		if e-e != 0 {
			return false
		}
	}
	return true
}
