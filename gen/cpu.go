package gen

import (
	"github.com/attngen/attngen/kernel"
	"github.com/attngen/attngen/kernel/specmask"
)

// CPUTarget is the tile shape of the CPU microkernels.
var CPUTarget = Tiles{TargetName: "cpu", Q: kernel.TQ, K: kernel.TK}

// KernelMask is the plan's mask for the CPU driver. The plan must have been
// compiled for CPUTarget.
func (p *Plan) KernelMask() kernel.Mask {
	if p.TileQ != kernel.TQ || p.TileK != kernel.TK {
		panic("BUG: KernelMask on a plan not compiled for CPUTarget")
	}
	return specmask.New(p.Pattern, p.Layout.Stride)
}
