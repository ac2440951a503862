package main

import (
	"fmt"
	"io"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

func cmdCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", stderr)
	path := fs.String("spec", "", "spec file (YAML)")
	seq := fs.Int("seq", 4096, "sequence length for the density")
	dtype := fs.String("dtype", "bf16", "element types of the GPU kernels to check the spec against (as attngen -spec)")
	sm := fs.String("sm", "80", "SM versions of the GPU kernels to check the spec against (as attngen -spec); none: CPU only")
	if err := parseArgs(fs, args, stdout, path); err != nil {
		return err
	}
	if err := positive("seq", *seq); err != nil {
		return err
	}
	if err := atMost("seq", *seq, maxAnalysisSeq, analysisWhy); err != nil {
		return err
	}
	gpus, err := gpuTargets(*sm, *dtype)
	if err != nil {
		return usageError{err.Error()}
	}
	s, err := loadSpec(*path, stderr)
	if err != nil {
		return err
	}
	// check accepts exactly what generate accepts: the targets run it
	if err := checkTargets(s, gpus); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	fmt.Fprintf(stdout, "%s: ok\n", s.File)
	fmt.Fprintf(stdout, "name: %s\ncausal: %v\nhead_dim: %s\n", s.Name, s.Causal, headDimString(s))
	fmt.Fprint(stdout, spec.HeadParamsYAML(s.HeadParams))
	fmt.Fprintf(stdout, "mask: %s\n", s.Mask)
	if s.Score.Active() {
		fmt.Fprintf(stdout, "score: %s\n", s.Score)
	}
	for _, n := range s.MaskNames() {
		fmt.Fprintf(stdout, "masks.%s: %s\n", n, s.Masks[n])
	}
	if len(s.Schedule) > 0 {
		fmt.Fprint(stdout, "schedule: [")
		for k, e := range s.Schedule {
			if k > 0 {
				fmt.Fprint(stdout, ", ")
			}
			fmt.Fprint(stdout, e.Name)
		}
		fmt.Fprintln(stdout, "]")
	}
	causal := verify.KeptPairs(spec.Pattern{Mask: spec.Full(), Causal: true}, *seq, *seq)
	density := func(p spec.Pattern, note string) {
		kept := verify.KeptPairs(p, *seq, *seq)
		fmt.Fprintf(stdout, "density at seq %d%s: %.6f of all pairs, %.6f of causal (%d kept pairs)\n",
			*seq, note, float64(kept)/float64(*seq)/float64(*seq), float64(kept)/float64(causal), kept)
	}
	p := s.Pattern()
	if !p.HasParams() {
		density(p, "")
	}
	for _, end := range []string{"min", "max"} {
		if !p.HasParams() {
			break
		}
		vals := p.MaxBound()
		if end == "min" {
			for k, hp := range p.Params {
				vals[k] = hp.Min
			}
		}
		b, err := p.Bind(vals)
		if err != nil {
			return err
		}
		density(b, ", every head parameter at its "+end)
	}
	if s.Mask.HasDocument() {
		fmt.Fprintln(stdout, "note: document masks are counted as one document spanning the sequence")
	}
	if s.Mask.HasTree() {
		fmt.Fprintln(stdout, "note: tree masks are counted as one chain (causal attention); the parent array comes at run time")
	}
	return nil
}

// headDimString is a spec's head_dim as it would be written: one size, or
// {qk: D1, v: D2}.
func headDimString(s *spec.Spec) string {
	if s.HeadDimV != 0 && s.HeadDimV != s.HeadDim {
		return fmt.Sprintf("{qk: %d, v: %d}", s.HeadDim, s.HeadDimV)
	}
	return fmt.Sprint(s.HeadDim)
}
