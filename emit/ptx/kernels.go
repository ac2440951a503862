package ptx

import (
	"fmt"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
)

// KernelSet is the kernels a target gets for a plan (Kernels): the
// forward, and the backward's dq and dk/dv kernels where the target has
// them.
type KernelSet struct {
	Target   Target
	Forward  *Forward
	Backward *Backward // nil for the architecture-specific targets (sm_90a)
}

// HasBackward reports whether target t gets the backward kernels: every
// target but the architecture-specific ones (sm_90a), whose backward is
// the mma.sync kernels of the plain target (sm_90 or sm_80), which run on
// those GPUs too.
func (t Target) HasBackward() bool { return !t.Accel }

// Kernels emits the kernels of plan p that cfg.Target gets: the forward
// kernel (the sm_90a one for the architecture-specific target) and, where
// t.HasBackward, the backward's two kernels (one module). It is the one
// place that decides which kernels a target has; attngen generate, verify
// and bench call it.
func Kernels(p *gen.Plan, cfg Config) (*KernelSet, error) {
	t := cfg.Target
	if t == (Target{}) {
		t = SM80
	}
	cfg.Target = t
	f, err := GenerateForward(p, cfg)
	if err != nil {
		return nil, err
	}
	ks := &KernelSet{Target: t, Forward: f}
	if !t.HasBackward() {
		return ks, nil
	}
	if ks.Backward, err = GenerateBackward(p, cfg); err != nil {
		return nil, fmt.Errorf("%s: backward kernels for %s: %w", p.Name, t.Name(), err)
	}
	return ks, nil
}

// GPU describes the set's kernels as generated packages embed them: the
// forward, then the backward's dq and dk/dv kernels.
func (s *KernelSet) GPU() []gpu.Kernel {
	out := []gpu.Kernel{s.Forward.Kernel()}
	if s.Backward != nil {
		bk := s.Backward.Kernels()
		out = append(out, bk[0], bk[1])
	}
	return out
}
