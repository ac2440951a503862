package gen

import (
	"math/rand/v2"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// atMax returns docs (or none) as the run-time data of a plan's programs
// with every head parameter at its Max, what the unbound pattern
// evaluates, so that checks of a plan against its pattern run on plans
// with head parameters; docs itself for a plan without them.
func atMax(p *Plan, docs *mask.Docs) *mask.Docs {
	hps := p.HeadParams()
	if len(hps) == 0 {
		return docs
	}
	vals := make([]int32, len(hps))
	for k, hp := range hps {
		vals[k] = int32(hp.Max)
	}
	d := &mask.Docs{}
	d.SetHead(docs, vals)
	return d
}

// TestCPUHeadParams runs every supported variant, forward and backward, on
// random patterns whose window sides and global token counts are head
// parameters (paramPattern), with random values per query head (the
// first head at every min, the last at every max), on shapes whose kv
// heads have several query heads, against the float64 reference bound per
// head.
func TestCPUHeadParams(t *testing.T) {
	r := rand.New(rand.NewPCG(131, 132))
	var pats []spec.Pattern
	for k := 0; k < 10; k++ {
		p := paramPattern(r, 150)
		if k%3 == 0 {
			p.Mask = spec.Intersect(spec.Document(), p.Mask)
		}
		pats = append(pats, p)
	}
	shapes := []verify.Shape{
		{Batch: 1, HeadsQ: 4, HeadsKV: 1, SeqQ: 97, SeqK: 161},
		{Batch: 2, HeadsQ: 6, HeadsKV: 2, SeqQ: 130, SeqK: 130},
		{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: 3, SeqK: 400},
	}
	for vi, v := range variants() {
		for pi, p := range pats {
			d := []int{64, 128}[(vi+pi)%2]
			fwd, bwd := cpuRun(t, p, v, d), cpuBackward(t, p, v, d)
			for _, s := range shapes {
				s.HeadDim = d
				if _, err := verify.CheckNumeric(p, fwd, s, r); err != nil {
					t.Fatalf("%s %v %v: %v", v, p, p.Params, err)
				}
				if _, err := verify.CheckGrad(p, fwd, bwd, s, r); err != nil {
					t.Fatalf("%s %v %v backward: %v", v, p, p.Params, err)
				}
			}
		}
	}
}
