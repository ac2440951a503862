package engine

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// PageSize is the key positions a page of the KV cache holds: the
// specs' page_size (every generated package's PageSize; main checks).
const PageSize = 16

// AttnCall is one layer's attention over a batch of sequences, as the
// engine lays it out: a grid of B batch rows of T query rows each (row b
// uses its first LensQ[b]), the projections' [B][T][HeadsQ][HeadDim]
// (BSHD), and a paged cache shared by every sequence, pages of
// [PageSize][HeadsKV][HeadDim].
type AttnCall struct {
	Layer        int
	B, T, SeqK   int
	LensQ, LensK []int32
	Q, Out       []float32
	K, V         []float32
	Table        []int32 // B rows of ceil(SeqK/PageSize) pages
}

// Attention computes one layer's attention for a Config.
type Attention interface {
	Name() string
	Attend(c *Config, w *Weights, a *AttnCall) error
}

// Seq is one sequence in the engine: its pages and the positions cached.
type Seq struct {
	pages []int32
	n     int
}

// Len is the number of positions in the sequence's cache.
func (s *Seq) Len() int { return s.n }

// Engine runs a Config's decoder over batches of sequences with a paged
// KV cache, in float32.
type Engine struct {
	c    *Config
	w    *Weights
	attn Attention
	// per layer: the page pools of keys and values
	kpool, vpool [][]float32
	free         []int32
	rope         rope
	buf          struct{ x, h, q, kv, o, g, u, att []float32 }
	// AttnTime is the time spent in Attend since the engine was made.
	AttnTime time.Duration
}

// ErrCache: the page pool is exhausted.
var ErrCache = errors.New("KV cache full")

// NewEngine makes an engine with a pool of pages pages for every layer.
func NewEngine(c *Config, w *Weights, attn Attention, pages int) *Engine {
	e := &Engine{c: c, w: w, attn: attn, rope: rope{half: c.HeadDim / 2, theta: c.RopeTheta}}
	n := pages * PageSize * c.HeadsKV * c.HeadDim
	for range c.Layers() {
		e.kpool = append(e.kpool, make([]float32, n))
		e.vpool = append(e.vpool, make([]float32, n))
	}
	for p := pages - 1; p >= 0; p-- {
		e.free = append(e.free, int32(p))
	}
	return e
}

// Release returns a finished sequence's pages to the pool. Their data stay
// there, stale, for the next sequence that takes them.
func (e *Engine) Release(s *Seq) {
	e.free = append(e.free, s.pages...)
	s.pages, s.n = nil, 0
}

func grow(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	*b = (*b)[:n]
	clear(*b)
	return *b
}

// Step feeds toks[b] to seqs[b], every sequence in one batch (a new
// sequence its prompt, a running one its next token), and returns each
// sequence's logits: of every token fed with all, else of its last.
func (e *Engine) Step(seqs []*Seq, toks [][]int, all bool) ([][]float32, error) {
	c, w := e.c, e.w
	B, T := len(seqs), 0
	if B != len(toks) {
		return nil, fmt.Errorf("%d sequences, %d token lists", B, len(toks))
	}
	seqK := 0
	for b, s := range seqs {
		if len(toks[b]) == 0 {
			return nil, fmt.Errorf("sequence %d: no token", b)
		}
		T = max(T, len(toks[b]))
		n := s.n + len(toks[b])
		seqK = max(seqK, n)
		for len(s.pages)*PageSize < n {
			if len(e.free) == 0 {
				return nil, fmt.Errorf("%w: %d pages of %d positions", ErrCache, len(e.kpool[0])/(PageSize*c.HeadsKV*c.HeadDim), PageSize)
			}
			s.pages = append(s.pages, e.free[len(e.free)-1])
			e.free = e.free[:len(e.free)-1]
		}
	}
	e.rope.grow(seqK)
	H, dq, dkv := c.Hidden, c.HeadsQ*c.HeadDim, c.HeadsKV*c.HeadDim
	// The grid's rows that hold tokens, and their positions.
	var rows, pos []int
	for b, s := range seqs {
		for i := range toks[b] {
			rows = append(rows, b*T+i)
			pos = append(pos, s.n+i)
		}
	}
	// The page table: B rows of ceil(SeqK/PageSize) entries (a shorter
	// sequence's row ends in entries that are never read).
	np := (seqK + PageSize - 1) / PageSize
	table := make([]int32, B*np)
	lensQ, lensK := make([]int32, B), make([]int32, B)
	for b, s := range seqs {
		copy(table[b*np:], s.pages[:(s.n+len(toks[b])+PageSize-1)/PageSize])
		lensQ[b], lensK[b] = int32(len(toks[b])), int32(s.n+len(toks[b]))
	}
	x := grow(&e.buf.x, B*T*H)
	hb := grow(&e.buf.h, B*T*H)
	q := grow(&e.buf.q, B*T*dq)
	kv := grow(&e.buf.kv, B*T*2*dkv)
	att := grow(&e.buf.att, B*T*dq)
	o := grow(&e.buf.o, B*T*H)
	g := grow(&e.buf.g, B*T*c.Inter)
	u := grow(&e.buf.u, B*T*c.Inter)
	for _, r := range rows {
		copy(x[r*H:(r+1)*H], w.Embed[toks[r/T][r%T]*H:][:H])
	}
	for l := range w.Layers {
		L := &w.Layers[l]
		for _, r := range rows {
			rmsNorm(hb[r*H:(r+1)*H], x[r*H:(r+1)*H], L.AttnNorm)
		}
		matMul(q, dq, hb, H, rows, L.Wq, dq, H)
		matMul(kv, 2*dkv, hb, H, rows, L.Wk, dkv, H)
		matMul(kv[dkv:], 2*dkv, hb, H, rows, L.Wv, dkv, H)
		for i, r := range rows {
			p := pos[i]
			e.rope.apply(q[r*dq:(r+1)*dq], c.HeadsQ, p)
			kr := kv[r*2*dkv:][:dkv]
			e.rope.apply(kr, c.HeadsKV, p)
			s := seqs[r/T]
			off := (int(s.pages[p/PageSize])*PageSize + p%PageSize) * dkv
			copy(e.kpool[l][off:off+dkv], kr)
			copy(e.vpool[l][off:off+dkv], kv[r*2*dkv+dkv:][:dkv])
		}
		t0 := time.Now()
		err := e.attn.Attend(c, w, &AttnCall{
			Layer: l, B: B, T: T, SeqK: seqK, LensQ: lensQ, LensK: lensK,
			Q: q, Out: att, K: e.kpool[l], V: e.vpool[l], Table: table,
		})
		e.AttnTime += time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %s attention: %w", l, e.attn.Name(), err)
		}
		matMul(o, H, att, dq, rows, L.Wo, H, dq)
		for _, r := range rows {
			xr, or := x[r*H:(r+1)*H], o[r*H:(r+1)*H]
			for i := range xr {
				xr[i] += or[i]
			}
			rmsNorm(hb[r*H:(r+1)*H], xr, L.MLPNorm)
		}
		matMul(g, c.Inter, hb, H, rows, L.Wgate, c.Inter, H)
		matMul(u, c.Inter, hb, H, rows, L.Wup, c.Inter, H)
		for _, r := range rows {
			gr, ur := g[r*c.Inter:(r+1)*c.Inter], u[r*c.Inter:(r+1)*c.Inter]
			for i := range gr {
				gr[i] = silu(gr[i]) * ur[i]
			}
		}
		matMul(o, H, g, c.Inter, rows, L.Wdown, H, c.Inter)
		for _, r := range rows {
			xr, or := x[r*H:(r+1)*H], o[r*H:(r+1)*H]
			for i := range xr {
				xr[i] += or[i]
			}
		}
	}
	for b, s := range seqs {
		s.n += len(toks[b])
	}
	// Logits of the rows asked for.
	var out []int
	for b := range seqs {
		if all {
			for i := range toks[b] {
				out = append(out, b*T+i)
			}
		} else {
			out = append(out, b*T+len(toks[b])-1)
		}
	}
	for _, r := range out {
		rmsNorm(hb[r*H:(r+1)*H], x[r*H:(r+1)*H], w.FinalNorm)
	}
	lg := make([]float32, len(out)*c.Vocab)
	dense := make([]int, len(out))
	hs := make([]float32, len(out)*H)
	for i, r := range out {
		copy(hs[i*H:], hb[r*H:(r+1)*H])
		dense[i] = i
	}
	matMul(lg, c.Vocab, hs, H, dense, w.Unembed, c.Vocab, H)
	res := make([][]float32, B)
	i := 0
	for b := range seqs {
		n := 1
		if all {
			n = len(toks[b])
		}
		res[b] = lg[i*c.Vocab : (i+n)*c.Vocab]
		i += n
	}
	return res, nil
}

// Argmax is the greedy choice of a logits row.
func Argmax(l []float32) int {
	best, bi := float32(math.Inf(-1)), 0
	for i, v := range l {
		if v > best {
			best, bi = v, i
		}
	}
	return bi
}
