package engine

import (
	"fmt"

	"github.com/attngen/attngen/examples/decoder/attn/gemma2global"
	"github.com/attngen/attngen/examples/decoder/attn/gemma2local"
	"github.com/attngen/attngen/examples/decoder/attn/gptossglobal"
	"github.com/attngen/attngen/examples/decoder/attn/gptosslocal"
	"github.com/attngen/attngen/examples/decoder/attn/llama"
)

// Generated is the attention of the packages generated from specs/: one
// package per layer type, picked by the configuration and the layer's
// window.
type Generated struct{}

func (Generated) Name() string { return "attngen" }

// layerKind is one generated package: the configuration and window it
// serves, the head dim and page size it was generated for (checked
// against the configuration by main and the test), and its call.
type layerKind struct {
	config            string
	window            int // 0: full causal
	headDim, pageSize int
	call              func(c *Config, w *Weights, a *AttnCall) error
}

var layerKinds = []layerKind{
	{"llama3", 0, llama.HeadDim, llama.PageSize, callLlama},
	{"gemma2", 4096, gemma2local.HeadDim, gemma2local.PageSize, callGemma2Local},
	{"gemma2", 0, gemma2global.HeadDim, gemma2global.PageSize, callGemma2Global},
	{"gptoss", 128, gptosslocal.HeadDim, gptosslocal.PageSize, callGptOssLocal},
	{"gptoss", 0, gptossglobal.HeadDim, gptossglobal.PageSize, callGptOssGlobal},
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

// cacheStrides are the strides of the page pools, [page][PageSize][HeadsKV][HeadDim]:
// Batch is the page stride.
func cacheStrides(c *Config) (b, h, p int) {
	return PageSize * c.HeadsKV * c.HeadDim, c.HeadDim, c.HeadsKV * c.HeadDim
}

// The calls below are the same but for the package's types: each
// generated package has its own Shape, Args, Layout and Strides.

func callLlama(c *Config, w *Weights, a *AttnCall) error {
	s := llama.Shape{Batch: a.B, HeadsQ: c.HeadsQ, HeadsKV: c.HeadsKV, SeqQ: a.T, SeqK: a.SeqK, Scale: float32(c.Scale())}
	ly := llama.BSHD(s)
	pb, ph, pp := cacheStrides(c)
	ly.K = llama.Strides{Batch: pb, Head: ph, Pos: pp}
	ly.V = ly.K
	return llama.ForwardArgs(llama.Args{Q: a.Q, K: a.K, V: a.V, Out: a.Out, Table: a.Table, Shape: s, Layout: ly, SeqLensQ: a.LensQ, SeqLensK: a.LensK})
}

func callGemma2Local(c *Config, w *Weights, a *AttnCall) error {
	s := gemma2local.Shape{Batch: a.B, HeadsQ: c.HeadsQ, HeadsKV: c.HeadsKV, SeqQ: a.T, SeqK: a.SeqK, Scale: float32(c.Scale())}
	ly := gemma2local.BSHD(s)
	pb, ph, pp := cacheStrides(c)
	ly.K = gemma2local.Strides{Batch: pb, Head: ph, Pos: pp}
	ly.V = ly.K
	return gemma2local.ForwardArgs(gemma2local.Args{Q: a.Q, K: a.K, V: a.V, Out: a.Out, Table: a.Table, Shape: s, Layout: ly, SeqLensQ: a.LensQ, SeqLensK: a.LensK})
}

func callGemma2Global(c *Config, w *Weights, a *AttnCall) error {
	s := gemma2global.Shape{Batch: a.B, HeadsQ: c.HeadsQ, HeadsKV: c.HeadsKV, SeqQ: a.T, SeqK: a.SeqK, Scale: float32(c.Scale())}
	ly := gemma2global.BSHD(s)
	pb, ph, pp := cacheStrides(c)
	ly.K = gemma2global.Strides{Batch: pb, Head: ph, Pos: pp}
	ly.V = ly.K
	return gemma2global.ForwardArgs(gemma2global.Args{Q: a.Q, K: a.K, V: a.V, Out: a.Out, Table: a.Table, Shape: s, Layout: ly, SeqLensQ: a.LensQ, SeqLensK: a.LensK})
}

func callGptOssLocal(c *Config, w *Weights, a *AttnCall) error {
	s := gptosslocal.Shape{Batch: a.B, HeadsQ: c.HeadsQ, HeadsKV: c.HeadsKV, SeqQ: a.T, SeqK: a.SeqK, Scale: float32(c.Scale())}
	ly := gptosslocal.BSHD(s)
	pb, ph, pp := cacheStrides(c)
	ly.K = gptosslocal.Strides{Batch: pb, Head: ph, Pos: pp}
	ly.V = ly.K
	return gptosslocal.ForwardArgs(gptosslocal.Args{Q: a.Q, K: a.K, V: a.V, Out: a.Out, Table: a.Table, Shape: s, Layout: ly, SeqLensQ: a.LensQ, SeqLensK: a.LensK,
		Score: gptosslocal.Score{SinkLogits: w.Layers[a.Layer].Sinks}})
}

func callGptOssGlobal(c *Config, w *Weights, a *AttnCall) error {
	s := gptossglobal.Shape{Batch: a.B, HeadsQ: c.HeadsQ, HeadsKV: c.HeadsKV, SeqQ: a.T, SeqK: a.SeqK, Scale: float32(c.Scale())}
	ly := gptossglobal.BSHD(s)
	pb, ph, pp := cacheStrides(c)
	ly.K = gptossglobal.Strides{Batch: pb, Head: ph, Pos: pp}
	ly.V = ly.K
	return gptossglobal.ForwardArgs(gptossglobal.Args{Q: a.Q, K: a.K, V: a.V, Out: a.Out, Table: a.Table, Shape: s, Layout: ly, SeqLensQ: a.LensQ, SeqLensK: a.LensK,
		Score: gptossglobal.Score{SinkLogits: w.Layers[a.Layer].Sinks}})
}
