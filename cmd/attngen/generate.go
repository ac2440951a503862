package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/attngen/attngen/emit/ptx"
	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/kernel"
	"github.com/attngen/attngen/kernel/specmask"
	"github.com/attngen/attngen/spec"
)

// runtimeSources is what generated packages carry.
var runtimeSources = gen.Runtime{Spec: spec.AlgebraSources, Kernel: kernel.Sources, SpecMask: specmask.Sources}

// cmdGenerate is the main job: attngen -spec F -out DIR [-pkg NAME].
func cmdGenerate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("", stderr)
	path := fs.String("spec", "", "spec file (YAML)")
	out := fs.String("out", "", "folder of the generated package (default: the spec's name, here)")
	pkg := fs.String("pkg", "", "package name (default: the spec's name)")
	check := fs.Bool("verify", false, "after generating, run attngen verify on the spec's kernels")
	dtype := fs.String("dtype", "bf16", "element type of the GPU kernel: bf16 or f16")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	s, err := loadSpec(*path, stderr)
	if err != nil {
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
	var kept []string // the command recorded in the files, without -verify
	for _, a := range args {
		if !strings.HasPrefix(strings.TrimLeft(a, "-"), "verify") {
			kept = append(kept, a)
		}
	}
	elem := map[string]ptx.Type{"bf16": ptx.BF16, "f16": ptx.F16, "fp16": ptx.F16}[*dtype]
	if elem == ptx.NoType {
		return fmt.Errorf("-dtype %q: want bf16 or f16", *dtype)
	}
	files, err := packageFiles(s, importPath, name, elem, "attngen "+strings.Join(quoteArgs(kept), " "))
	if err != nil {
		return err
	}
	if err := gen.WritePackage(dir, files); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote package %s (%s) to %s: %d files\n", name, importPath, filepath.Clean(dir), len(files))
	if *check {
		return cmdVerify([]string{"-spec", *path}, stdout, stderr)
	}
	return nil
}

// packageFiles builds every file of the generated package: the CPU plan and
// runtime, and the PTX kernel with its launch description.
func packageFiles(s *spec.Spec, importPath, name string, elem ptx.Type, command string) (map[string][]byte, error) {
	p, err := gen.Compile(s, gen.CPUTarget, nil)
	if err != nil {
		return nil, err
	}
	gpu, err := gpuKernel(s, elem)
	if err != nil {
		return nil, err
	}
	return gen.PackageFiles(s, p, runtimeSources, gpu, importPath, name, command)
}

// gpuKernel emits the spec's PTX forward kernel and describes it.
func gpuKernel(s *spec.Spec, elem ptx.Type) (*gen.GPUKernel, error) {
	plan, err := gen.Compile(s, ptx.Sm80, nil)
	if err != nil {
		return nil, err
	}
	f, err := ptx.GenerateForward(plan, ptx.Config{Elem: elem})
	if err != nil {
		return nil, err
	}
	k := &gen.GPUKernel{Name: f.Name, Target: "sm_80", Elem: f.Elem.String(), PTX: f.PTX,
		TileQ: ptx.TileQ, Threads: ptx.Threads, DynShared: f.DynShared, Stride: max(f.Stride, 1)}
	for _, prm := range f.Params {
		k.Params = append(k.Params, gen.GPUParam{Name: prm.Name, Type: prm.T.String(), Doc: prm.Doc})
	}
	return k, nil
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
