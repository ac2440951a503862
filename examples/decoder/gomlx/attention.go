package main

import (
	"fmt"
	"math"

	"github.com/attngen/attngen/examples/decoder/engine"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's own style
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// bucket is the multiple the key axis is rounded up to.
const bucket = 128

// GoMLX is an engine.Attention computed by a GoMLX graph on the simplego
// backend: one compiled graph per configuration and layer type, reused
// for every call of the same shapes.
type GoMLX struct {
	backend backends.Backend
	execs   map[execKey]*Exec
}

type execKey struct {
	config string
	window int
}

// New returns the attention on a new simplego backend.
func New() (*GoMLX, error) {
	b, err := simplego.New("")
	if err != nil {
		return nil, err
	}
	return &GoMLX{backend: b, execs: map[execKey]*Exec{}}, nil
}

func (*GoMLX) Name() string { return "gomlx" }

// graphFn is the attention of c: q [B, T, HeadsQ, D], k and v [B, S,
// HeadsKV, D], keep [B, T, S] (the mask, false on padding), sinks
// [HeadsQ] (ignored without Config.Sinks); the output is [B, T, HeadsQ, D].
func graphFn(c *engine.Config) func(q, k, v, keep, sinks *Node) *Node {
	scale, softCap := c.Scale(), c.SoftCap
	hkv, grp, d := c.HeadsKV, c.HeadsQ/c.HeadsKV, c.HeadDim
	return func(q, k, v, keep, sinks *Node) *Node {
		B, T, S := q.Shape().Dimensions[0], q.Shape().Dimensions[1], k.Shape().Dimensions[1]
		q = Reshape(q, B, T, hkv, grp, d)
		logits := Einsum("bthgd,bshd->bhgts", q, k) // [B, HeadsKV, group, T, S]
		logits = MulScalar(logits, scale)
		if softCap > 0 {
			logits = MulScalar(Tanh(DivScalar(logits, softCap)), softCap)
		}
		mask := BroadcastToDims(Reshape(keep, B, 1, 1, T, S), B, hkv, grp, T, S)
		if c.Sinks {
			// The sink is one more logit in each row's softmax, with no value.
			sk := BroadcastToDims(Reshape(sinks, 1, hkv, grp, 1, 1), B, hkv, grp, T, 1)
			logits = Concatenate([]*Node{logits, sk}, -1)
			rowLive := ReduceLogicalOr(keep, -1) // a padded query row keeps nothing, its sink neither
			live := BroadcastToDims(Reshape(rowLive, B, 1, 1, T, 1), B, hkv, grp, T, 1)
			mask = Concatenate([]*Node{mask, live}, -1)
		}
		p := MaskedSoftmax(logits, mask, -1)
		if c.Sinks {
			p = SliceAxis(p, -1, AxisRange(0, S))
		}
		out := Einsum("bhgts,bshd->bthgd", p, v)
		return Reshape(out, B, T, hkv*grp, d)
	}
}

func (g *GoMLX) Attend(c *engine.Config, w *engine.Weights, a *engine.AttnCall) error {
	window := c.Windows[a.Layer]
	key := execKey{c.Name, window}
	ex := g.execs[key]
	if ex == nil {
		var err error
		if ex, err = NewExec(g.backend, graphFn(c)); err != nil {
			return err
		}
		g.execs[key] = ex
	}
	hq, hkv, d := c.HeadsQ, c.HeadsKV, c.HeadDim
	S := (a.SeqK + bucket - 1) / bucket * bucket
	// Gather the pages into dense [B, S, HeadsKV, D] keys and values.
	k := make([]float32, a.B*S*hkv*d)
	v := make([]float32, a.B*S*hkv*d)
	keep := make([]bool, a.B*a.T*S)
	np := (a.SeqK + engine.PageSize - 1) / engine.PageSize
	row := hkv * d
	for b := range a.B {
		nq, nk := int(a.LensQ[b]), int(a.LensK[b])
		for j := range nk {
			off := (int(a.Table[b*np+j/engine.PageSize])*engine.PageSize + j%engine.PageSize) * row
			copy(k[(b*S+j)*row:][:row], a.K[off:off+row])
			copy(v[(b*S+j)*row:][:row], a.V[off:off+row])
		}
		for i := range nq {
			qp := nk - nq + i
			for j := range nk {
				keep[(b*a.T+i)*S+j] = j <= qp && (window == 0 || qp-j < window)
			}
		}
	}
	sinks := make([]float32, hq)
	if c.Sinks {
		copy(sinks, w.Layers[a.Layer].Sinks)
	}
	n := a.B * a.T * hq * d
	inputs := []*tensors.Tensor{
		tensors.FromFlatDataAndDimensions(a.Q[:n], a.B, a.T, hq, d),
		tensors.FromFlatDataAndDimensions(k, a.B, S, hkv, d),
		tensors.FromFlatDataAndDimensions(v, a.B, S, hkv, d),
		tensors.FromFlatDataAndDimensions(keep, a.B, a.T, S),
		tensors.FromFlatDataAndDimensions(sinks, hq),
	}
	defer func() {
		for _, t := range inputs {
			t.FinalizeAll()
		}
	}()
	out, err := ex.Exec1(inputs[0], inputs[1], inputs[2], inputs[3], inputs[4])
	if err != nil {
		return err
	}
	defer out.FinalizeAll()
	o, err := tensors.CopyFlatData[float32](out)
	if err != nil {
		return err
	}
	if len(o) != n {
		return fmt.Errorf("gomlx: %d outputs, want %d", len(o), n)
	}
	copy(a.Out, o)
	return nil
}

// Check serves a few requests with GoMLX's attention and with the Go
// loops and compares the logits of every position: the benchmark's
// attentions compute the same model.
func Check(g *GoMLX) error {
	for _, c := range engine.Configs {
		w := engine.NewWeights(c)
		var logits [2][][]float32
		for i, a := range []engine.Attention{engine.Loops{}, g} {
			var reqs []*engine.Request
			for r, n := range []int{150, 9, 40} {
				p := make([]int, n)
				for j := range p {
					p[j] = (j*31 + r*7) % c.Vocab
				}
				reqs = append(reqs, &engine.Request{Arrive: 2 * r, Prompt: p, MaxNew: 5})
			}
			if _, err := engine.Serve(engine.NewEngine(c, w, a, 64), reqs, true); err != nil {
				return fmt.Errorf("%s, %s: %w", c.Name, a.Name(), err)
			}
			for _, r := range reqs {
				logits[i] = append(logits[i], r.Logits...)
			}
		}
		var worst float64
		for p := range logits[0] {
			var big, e float64
			for v, x := range logits[0][p] {
				big = max(big, math.Abs(float64(x)))
				e = max(e, math.Abs(float64(logits[1][p][v]-x)))
			}
			worst = max(worst, e/max(big, 1))
		}
		fmt.Printf("%s: gomlx against loops: largest difference %.3g of the largest logit over %d positions\n", c.Name, worst, len(logits[0]))
		if !(worst < 1e-3) {
			return fmt.Errorf("%s: GoMLX's attention differs from the loops by %.3g", c.Name, worst)
		}
	}
	return nil
}
