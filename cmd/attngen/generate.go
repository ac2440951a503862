package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/cpu"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/spec"
)

// defaultSM is the -sm of attngen generate: the sm_80 kernels, which every
// GPU of compute capability 8.0 or later runs, and the sm_90a forward,
// which only 9.0 devices run and runners pick only when asked for
// (gpu.Kernel.OptIn) until a GPU run has verified it.
const defaultSM = "80,90a"

// cmdGenerate is the main job: attngen -spec F -out DIR [-pkg NAME].
func cmdGenerate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("", stderr)
	path := fs.String("spec", "", "spec file (YAML)")
	out := fs.String("out", "", "folder of the generated package (default: the spec's name, here)")
	pkg := fs.String("pkg", "", "package name (default: the spec's name)")
	check := fs.Bool("verify", false, "after generating, run attngen verify on the spec's kernels")
	dtype := fs.String("dtype", "bf16", "element types of the GPU kernels, comma separated: bf16, f16")
	sm := fs.String("sm", defaultSM, "SM versions of the GPU kernels (compute capability x 10; 90a: the sm_90a forward), comma separated; none: no GPU kernel")
	if err := parseArgs(fs, args, stdout, path); err != nil {
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
	if err := checkTargets(s, gpus); err != nil {
		return err
	}
	name := s.Name
	if *pkg != "" {
		if err := spec.CheckPackageName(*pkg); err != nil {
			return fmt.Errorf("-pkg: %v", err)
		}
		name = *pkg
	}
	dir := *out
	if dir == "" {
		dir = s.Name
	}
	importPath, err := gen.ImportPath(dir)
	if err != nil {
		return err
	}
	kept := withoutVerify(args) // the command recorded in the files
	// A package comment of the user's (gen.go, doc.go) in the folder is the
	// package's; attention.go then writes none.
	userDoc, err := gen.PackageDocIn(dir)
	if err != nil {
		return err
	}
	files, err := packageFiles(s, importPath, name, gpus, "attngen "+strings.Join(quoteArgs(kept), " "), gen.PackageOptions{NoPackageDoc: userDoc != ""})
	if err != nil {
		return err
	}
	if err := gen.WritePackage(dir, files); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote package %s (%s) to %s: %d files\n", name, importPath, filepath.Clean(dir), len(files))
	if *check {
		// Verify what was written: the same spec and the same GPU targets.
		return cmdVerify([]string{"-spec", *path, "-sm", *sm, "-dtype", *dtype}, stdout, stderr)
	}
	return nil
}

// withoutVerify drops the -verify flag (in any of its spellings: -verify,
// --verify, -verify=BOOL) from a command line; every other argument,
// a spec file named verify.yaml included, is kept.
func withoutVerify(args []string) []string {
	var kept []string
	for k, a := range args {
		if k > 0 && args[k-1] == "--" {
			kept = append(kept, args[k:]...)
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if strings.HasPrefix(a, "-") && name == "verify" {
			continue
		}
		kept = append(kept, a)
	}
	return kept
}

// gpuTargets parses -sm and -dtype into the PTX targets to build: every
// SM version with every element type; an SM version with the suffix a
// (90a) is its architecture-specific target (ptx.SM90a's kernel).
func gpuTargets(sms, dtypes string) ([]ptx.Target, error) {
	if sms == "none" || sms == "" {
		return nil, nil
	}
	var out []ptx.Target
	for _, v := range strings.Split(sms, ",") {
		num, accel := strings.CutSuffix(strings.TrimPrefix(strings.TrimSpace(v), "sm_"), "a")
		n, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("-sm %q: want SM versions such as 80, 80,90 or 80,90a, or none", sms)
		}
		for _, e := range strings.Split(dtypes, ",") {
			e = strings.TrimSpace(e)
			if e == "fp16" {
				e = "f16"
			}
			t := ptx.Target{SM: n, Elem: e, Accel: accel}
			if err := t.Check(); err != nil {
				return nil, fmt.Errorf("-sm %s -dtype %s: %v", sms, dtypes, err)
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// checkTargets reports, at the spec's head_dim line, what refuses the
// spec's head dimension: the CPU runtime, which every generated package
// holds (all its targets, named as such, or the CPU targets that do), and
// the GPU targets of -sm and -dtype that do. A package runs on any machine,
// so the message does not depend on which instructions this one has.
func checkTargets(s *spec.Spec, gpus []ptx.Target) error {
	at := s.HeadDimPos
	if at.Line == 0 {
		at = spec.Pos{File: s.File, Line: 1, Col: 1}
	}
	var cpuNames, gpuNames []string
	var cpuDims, gpuDims []string
	for _, t := range cpu.Targets {
		v := s.HeadDimV
		if v == 0 {
			v = s.HeadDim
		}
		if t.Supports(s.HeadDim, v) != nil {
			cpuNames, cpuDims = append(cpuNames, t.Name), append(cpuDims, t.HeadDimText())
		}
	}
	for _, t := range gpus {
		if t.Supports(s.HeadDim, s.HeadDimV) != nil {
			gpuNames, gpuDims = append(gpuNames, t.Name()), append(gpuDims, t.HeadDimText())
		}
	}
	var who []string
	switch {
	case len(cpuNames) == 0:
	case len(cpuNames) == len(cpu.Targets):
		who = append(who, "the CPU runtime "+refusers("its targets", cpuNames, cpuDims))
	default:
		who = append(who, refusers("CPU target", cpuNames, cpuDims))
	}
	if len(gpuNames) > 0 {
		who = append(who, refusers("GPU target", gpuNames, gpuDims))
	}
	if len(who) == 0 {
		return nil
	}
	dims := fmt.Sprint(s.HeadDim)
	if s.HeadDimV != 0 && s.HeadDimV != s.HeadDim {
		dims = fmt.Sprintf("{qk: %d, v: %d}", s.HeadDim, s.HeadDimV)
	}
	return fmt.Errorf("%s: head_dim: %s is not supported by %s", at, dims, strings.Join(who, " nor by "))
}

// refusers names targets and the head dimensions they run: "CPU target
// avx2 (it runs 64, 128)", "GPU targets a, b (they run 64, 128)"; for the
// CPU runtime's, "(its targets avx512, avx2, neon, purego run 64, 128)". Targets
// whose lists differ get one each.
func refusers(what string, names []string, dims []string) string {
	list := func(d string) string { return d }
	same := true
	for _, d := range dims {
		same = same && d == dims[0]
	}
	if strings.HasPrefix(what, "its") {
		if same {
			return fmt.Sprintf("(%s %s run %s)", what, strings.Join(names, ", "), list(dims[0]))
		}
		var each []string
		for k, n := range names {
			each = append(each, n+" runs "+list(dims[k]))
		}
		return "(" + strings.Join(each, ", ") + ")"
	}
	switch {
	case len(names) == 1:
		return fmt.Sprintf("%s %s (it runs %s)", what, names[0], list(dims[0]))
	case same:
		return fmt.Sprintf("%ss %s (they run %s)", what, strings.Join(names, ", "), list(dims[0]))
	}
	var each []string
	for k, n := range names {
		each = append(each, n+" (runs "+list(dims[k])+")")
	}
	return what + "s " + strings.Join(each, ", ")
}

// packageFiles builds every file of the generated package: the CPU plan's
// compiled mask and API, and per GPU target the PTX forward kernel and the
// backward's two kernels with their launch descriptions.
func packageFiles(s *spec.Spec, importPath, name string, gpus []ptx.Target, command string, opts gen.PackageOptions) (map[string][]byte, error) {
	if err := checkTargets(s, gpus); err != nil {
		return nil, err
	}
	p, err := gen.Compile(s, gen.CPUTarget, nil)
	if err != nil {
		return nil, err
	}
	var ks []gpu.Kernel
	for _, t := range gpus {
		k, err := gpuKernels(s, t)
		if err != nil {
			return nil, err
		}
		ks = append(ks, k...)
	}
	return gen.PackageFilesWith(s, p, ks, importPath, name, command, opts)
}

// gpuKernels emits the spec's PTX kernels for a target, as ptx.Kernels
// decides them: the forward, then (for targets that have them) the
// backward's dq and dk/dv kernels (one module).
func gpuKernels(s *spec.Spec, t ptx.Target) ([]gpu.Kernel, error) {
	plan, err := gen.Compile(s, t, nil)
	if err != nil {
		return nil, err
	}
	ks, err := ptx.Kernels(plan, ptx.Config{Target: t})
	if err != nil {
		return nil, err
	}
	return ks.GPU(), nil
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for k, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'$\\") {
			a = fmt.Sprintf("%q", a)
		}
		out[k] = filepath.ToSlash(a)
	}
	return out
}
