package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/attngen/attngen/spec"
)

const usage = `attngen: fused sparse-attention kernels from mask specs

Generate a Go package with fused attention kernels for a spec:
  attngen -spec F [-out DIR] [-pkg NAME]

Commands:
  attngen verify -spec F                  check F's kernels against the float64 reference
  attngen bench -spec F -seq S -heads H -threads 1,2 [-json]
                                          effective GFLOP/s of every kernel variant vs the measured FMA peak
  attngen check -spec F [-seq N]          validate F, print the normalized mask and its density
  attngen show  -spec F -seq N -tile T [-o mask.png|mask.svg] [-width W]
                                          draw the mask and its tile classes
  attngen reach -spec F -layers L -seq S -max-distance D [-json] [-o coverage.png|.svg]
                                          reachability coverage of the layer schedule
  attngen plan  -spec F -seq S [-seq-q Q] [-tile-q T] [-tile-k T] [-dump PASS]
                                          print the tiled plan and its schedule

Run 'attngen COMMAND -h' for a command's flags.
`

// exitError carries an exit status through run.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmds := map[string]func([]string, io.Writer, io.Writer) error{
		"check":    cmdCheck,
		"show":     cmdShow,
		"reach":    cmdReach,
		"plan":     cmdPlan,
		"verify":   cmdVerify,
		"generate": cmdGenerate,
		"bench":    cmdBench,
	}
	cmd, ok := cmds[args[0]]
	if !ok && len(args[0]) > 1 && args[0][0] == '-' {
		cmd, ok, args = cmdGenerate, true, append([]string{"generate"}, args...)
	}
	if !ok {
		fmt.Fprintf(stderr, "attngen: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err := cmd(args[1:], stdout, stderr); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "attngen %s: %v\n", args[0], err)
			return 1
		}
		return 0
	}
	return 0
}

// newFlags makes a flag set that reports to stderr and never exits.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("attngen "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// loadSpec parses the spec file; on failure it prints every positioned error
// to stderr and returns an exitError.
func loadSpec(path string, stderr io.Writer) (*spec.Spec, error) {
	if path == "" {
		fmt.Fprintln(stderr, "attngen: -spec FILE is required")
		return nil, exitError{2}
	}
	s, err := spec.ParseFile(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, exitError{1}
	}
	return s, nil
}

// positive checks integer flags that must be at least 1.
func positive(pairs ...any) error {
	for k := 0; k+1 < len(pairs); k += 2 {
		if v := pairs[k+1].(int); v < 1 {
			return fmt.Errorf("-%s must be at least 1, got %d", pairs[k], v)
		}
	}
	return nil
}
