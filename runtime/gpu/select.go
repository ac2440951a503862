package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// parseTarget reads a target "sm_XY" or "sm_XYa" as its SM version (XY)
// and whether it is the architecture-specific variant.
func parseTarget(t string) (sm int, accel bool, err error) {
	s, ok := strings.CutPrefix(t, "sm_")
	if ok {
		s, accel = strings.CutSuffix(s, "a")
		sm, err = strconv.Atoi(s)
	}
	if !ok || err != nil || sm < 10 {
		return 0, false, fmt.Errorf("gpu: target %q: want sm_XY or sm_XYa (e.g. sm_80, sm_90a)", t)
	}
	return sm, accel, nil
}

// CanRun reports why a device of compute capability major.minor cannot
// run a kernel of the given target (nil when it can): PTX for sm_XY runs
// on compute capability X.Y and later (the driver compiles it for the
// device), PTX for an architecture-specific target sm_XYa only on X.Y.
func CanRun(target string, major, minor int) error {
	sm, accel, err := parseTarget(target)
	if err != nil {
		return err
	}
	if major < 1 || minor < 0 || minor > 9 {
		return fmt.Errorf("gpu: compute capability %d.%d is not one a device reports", major, minor)
	}
	dev := 10*major + minor
	switch {
	case accel && dev != sm:
		return fmt.Errorf("gpu: an %s kernel runs only on devices of compute capability %d.%d; this one is %d.%d", target, sm/10, sm%10, major, minor)
	case dev < sm:
		return fmt.Errorf("gpu: an %s kernel needs compute capability %d.%d or later; this device is %d.%d", target, sm/10, sm%10, major, minor)
	}
	return nil
}

// Select picks the kernel of the given kind and element type for a device
// of compute capability major.minor from a package's GPUKernels.
//
// With target "" it returns, of the kernels the device can run (CanRun)
// that are not OptIn, the one of the highest target, an architecture-
// specific one above the plain one of its SM version (the first listed
// among equals). A kernel no GPU run has verified (OptIn: the sm_90a
// kernels until docs/gpu-results.md records one) is thus never picked by
// default. With a target ("sm_90a") it returns that target's kernel,
// OptIn or not, and an error when the list has none or the device cannot
// run it.
func Select(ks []Kernel, kind, elem string, major, minor int, target string) (Kernel, error) {
	if target != "" {
		if _, _, err := parseTarget(target); err != nil {
			return Kernel{}, err
		}
		for _, k := range ks {
			if k.Kind == kind && k.Elem == elem && k.Target == target {
				if err := CanRun(target, major, minor); err != nil {
					return Kernel{}, err
				}
				return k, nil
			}
		}
		return Kernel{}, fmt.Errorf("gpu: no %s %s kernel for %s", target, kindName(kind), elem)
	}
	best, bestRank := -1, -1
	var why []string
	for x, k := range ks {
		if k.Kind != kind || k.Elem != elem {
			continue
		}
		sm, accel, err := parseTarget(k.Target)
		if err != nil {
			return Kernel{}, fmt.Errorf("gpu: kernel %q: %w", k.Name, err)
		}
		if k.OptIn {
			why = append(why, k.Target+" only when asked for")
			continue
		}
		if err := CanRun(k.Target, major, minor); err != nil {
			why = append(why, strings.TrimPrefix(err.Error(), "gpu: "))
			continue
		}
		rank := 2 * sm
		if accel {
			rank++
		}
		if rank > bestRank {
			best, bestRank = x, rank
		}
	}
	if best < 0 {
		msg := fmt.Sprintf("gpu: no %s kernel for %s runs on compute capability %d.%d", kindName(kind), elem, major, minor)
		if len(why) > 0 {
			msg += " (" + strings.Join(why, "; ") + ")"
		}
		return Kernel{}, fmt.Errorf("%s", msg)
	}
	return ks[best], nil
}

// kindName names a kernel kind in messages.
func kindName(kind string) string {
	if kind == KindForward {
		return "forward"
	}
	return kind
}
