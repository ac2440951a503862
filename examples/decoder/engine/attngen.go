package engine

import (
	"fmt"

	"github.com/attngen/attngen/examples/decoder/attn/gemma2global"
	"github.com/attngen/attngen/examples/decoder/attn/gemma2local"
	"github.com/attngen/attngen/examples/decoder/attn/gptossglobal"
	"github.com/attngen/attngen/examples/decoder/attn/gptosslocal"
	"github.com/attngen/attngen/examples/decoder/attn/llama"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/mask"
)

// Generated is the attention of the packages generated from specs/: one
// package per layer type, picked by the configuration and the layer's
// window.
type Generated struct{}

func (Generated) Name() string { return "attngen" }

// layerKind is one generated package: the configuration and window it
// serves, the head dim and page size it was generated for (checked
// against the configuration by main and the test), and its compiled mask.
// Every package's CompiledMask runs through runtime/cpu's ForwardArgs, so
// one call (layerKind.call) serves every layer type: the packages' own
// Shape, Args and Score types differ, the runtime's do not.
type layerKind struct {
	config            string
	window            int // 0: full causal
	headDim, pageSize int
	mask              mask.Mask
}

var layerKinds = []layerKind{
	{"llama3", 0, llama.HeadDim, llama.PageSize, llama.CompiledMask()},
	{"gemma2", 4096, gemma2local.HeadDim, gemma2local.PageSize, gemma2local.CompiledMask()},
	{"gemma2", 0, gemma2global.HeadDim, gemma2global.PageSize, gemma2global.CompiledMask()},
	{"gptoss", 128, gptosslocal.HeadDim, gptosslocal.PageSize, gptosslocal.CompiledMask()},
	{"gptoss", 0, gptossglobal.HeadDim, gptossglobal.PageSize, gptossglobal.CompiledMask()},
}

func kindOf(c *Config, window int) (*layerKind, error) {
	for i := range layerKinds {
		k := &layerKinds[i]
		if k.config == c.Name && k.window == window {
			if k.headDim != c.HeadDim || k.pageSize != PageSize {
				return nil, fmt.Errorf("%s, window %d: the package has head_dim %d and page_size %d, the model %d and %d", c.Name, window, k.headDim, k.pageSize, c.HeadDim, PageSize)
			}
			return k, nil
		}
	}
	return nil, fmt.Errorf("%s: no generated package for a window of %d", c.Name, window)
}

// CheckGenerated reports a layer of c that no generated package serves.
func CheckGenerated(c *Config) error {
	for _, wnd := range c.Windows {
		if _, err := kindOf(c, wnd); err != nil {
			return err
		}
	}
	return nil
}

func (Generated) Attend(c *Config, w *Weights, a *AttnCall) error {
	k, err := kindOf(c, c.Windows[a.Layer])
	if err != nil {
		return err
	}
	return k.call(c, w, a)
}

// call runs one layer's attention: q and out [B, T, HeadsQ, HeadDim]
// (BSHD), the cache in page pools [page][PageSize][HeadsKV][HeadDim]
// (Batch is the page stride), each sequence with its own query and key
// counts, and the layer's sink logits when the mask has learned sinks.
func (k *layerKind) call(c *Config, w *Weights, a *AttnCall) error {
	s := cpu.Shape{Batch: a.B, HeadsQ: c.HeadsQ, HeadsKV: c.HeadsKV, SeqQ: a.T, SeqK: a.SeqK, HeadDim: k.headDim, Scale: float32(c.Scale())}
	ly := cpu.BSHD(s, 0)
	ly.K = cpu.Strides{Batch: k.pageSize * c.HeadsKV * c.HeadDim, Head: c.HeadDim, Pos: c.HeadsKV * c.HeadDim}
	ly.V = ly.K
	args := cpu.Args{Q: a.Q, K: a.K, V: a.V, Out: a.Out, Paged: cpu.Paged{PageSize: k.pageSize, Table: a.Table},
		Shape: s, Layout: ly, SeqLensQ: a.LensQ, SeqLensK: a.LensK}
	if mask.ScoreOf(k.mask).LearnedSinks {
		args.Sinks = w.Layers[a.Layer].Sinks
	}
	return cpu.ForwardArgs(k.mask, cpu.Auto, args)
}
