package engine

import "fmt"

// Request is one sequence to serve: it joins the batch at step Arrive
// with its prompt, then decodes MaxNew tokens, one a step, and leaves.
type Request struct {
	Arrive int
	Prompt []int
	MaxNew int
	// Forced, when not nil, are the tokens the request picks (MaxNew of
	// them) instead of the greedy ones: a test feeds known tokens.
	Forced []int

	// Filled in by Serve: the prompt and the tokens picked, the logits of
	// every position fed (with all; else of the last position of each
	// step), and the steps the request joined and left at.
	Tokens       []int
	Logits       [][]float32
	Joined, Left int
	seq          *Seq
}

// Serve runs reqs to completion with continuous batching: at every step
// one batch holds the requests that join (their prompts, prefilled) and
// the running ones (their last token); a request leaves the batch as soon
// as it has its MaxNew tokens, and its pages go back to the pool. It
// returns the number of steps.
func Serve(e *Engine, reqs []*Request, all bool) (int, error) {
	for _, r := range reqs {
		if len(r.Prompt) == 0 || r.MaxNew < 1 || r.Forced != nil && len(r.Forced) != r.MaxNew {
			return 0, fmt.Errorf("request with %d prompt tokens, MaxNew %d, %d forced tokens", len(r.Prompt), r.MaxNew, len(r.Forced))
		}
		r.Tokens, r.Logits, r.seq = append([]int(nil), r.Prompt...), nil, nil
	}
	left := len(reqs)
	step := 0
	for ; left > 0; step++ {
		var batch []*Request
		var seqs []*Seq
		var toks [][]int
		for _, r := range reqs {
			switch {
			case r.seq == nil && r.Arrive <= step && len(r.Tokens) == len(r.Prompt):
				r.seq, r.Joined = &Seq{}, step
				toks = append(toks, r.Prompt)
			case r.seq != nil:
				toks = append(toks, r.Tokens[len(r.Tokens)-1:])
			default:
				continue
			}
			batch = append(batch, r)
			seqs = append(seqs, r.seq)
		}
		if len(batch) == 0 {
			continue
		}
		logits, err := e.Step(seqs, toks, all)
		if err != nil {
			return step, fmt.Errorf("step %d: %w", step, err)
		}
		V := e.c.Vocab
		for i, r := range batch {
			for p := 0; p < len(logits[i]); p += V {
				r.Logits = append(r.Logits, logits[i][p:p+V])
			}
			n := len(r.Tokens) - len(r.Prompt)
			next := Argmax(logits[i][len(logits[i])-V:])
			if r.Forced != nil {
				next = r.Forced[n]
			}
			r.Tokens = append(r.Tokens, next)
			if n+1 == r.MaxNew {
				e.Release(r.seq)
				r.seq, r.Left = nil, step
				left--
			}
		}
	}
	return step, nil
}
