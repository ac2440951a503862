package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

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
	p, err := gen.Compile(s, gen.CPUTarget, nil)
	if err != nil {
		return err
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
	command := "attngen " + strings.Join(quoteArgs(kept), " ")
	files, err := gen.PackageFiles(s, p, runtimeSources, importPath, name, command)
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
