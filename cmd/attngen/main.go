package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/attngen/attngen/spec"
)

// cmdDoc describes one command for the usage texts. The table holds only
// data, so that the command functions may read it.
type cmdDoc struct {
	name     string
	synopsis string // after "attngen "
	summary  string
}

var cmdDocs = []cmdDoc{
	{"generate", "-spec F [-out DIR] [-pkg NAME] [-sm 80,90a|none] [-dtype bf16,f16] [-verify]",
		"generate a Go package with F's fused attention kernels (the default command: 'attngen -spec F' is 'attngen generate -spec F')"},
	{"verify", "verify -spec F [-seed N] [-sm 80,90a] [-dtype bf16] [-gpu] [-layout bhsd|bshd|packed] [-no-ptx]",
		"check F's CPU kernels, and its PTX kernels under the interpreter (or on the GPU with -gpu), against the float64 reference"},
	{"bench", "bench -spec F [-seq S] [-heads H] [-batch B] [-threads 1,2] [-reps R] [-pass fwd|bwd|both] [-json] [-gpu]",
		"effective GFLOP/s of every kernel variant against the measured FMA peak"},
	{"check", "check -spec F [-seq N] [-sm 80] [-dtype bf16]",
		"validate F, print the normalized mask and its density"},
	{"show", "show -spec F [-seq N] [-tile T] [-data FILE] [-head-params name=v,...] [-o mask.png|mask.svg] [-width W]",
		"draw the mask and its tile classes"},
	{"reach", "reach -spec F [-layers L] [-seq S] [-max-distance D] [-data FILE] [-head-params name=v,...] [-json] [-o coverage.png|.svg]",
		"reachability coverage of the layer schedule"},
	{"plan", "plan -spec F [-seq S] [-seq-q Q] [-tile-q T] [-tile-k T] [-dump PASS]",
		"print the tiled plan and its schedule"},
	{"help", "help [COMMAND]", "print this text, or a command's usage and flags"},
	{"version", "version", "print attngen's module version (also: attngen -version)"},
}

func docOf(name string) cmdDoc {
	for _, d := range cmdDocs {
		if d.name == name {
			return d
		}
	}
	return cmdDoc{name: name, synopsis: name}
}

// usage is the top-level help text.
func usage() string {
	var b strings.Builder
	b.WriteString("attngen: fused sparse-attention kernels from mask specs\n\nUsage:\n")
	for _, d := range cmdDocs {
		fmt.Fprintf(&b, "  attngen %s\n      %s\n", d.synopsis, d.summary)
	}
	b.WriteString(`
Generation flags:
  -out DIR     folder of the generated package (default: the spec's name)
  -pkg NAME    package name (default: the spec's name)
  -sm LIST     SM versions of the GPU kernels, comma separated (default 80,90a: the sm_80
               kernels and the sm_90a forward); none: no GPU kernel
  -dtype LIST  element types of the GPU kernels, comma separated: bf16 (default), f16
  -verify      after writing, verify the kernels just written (same -sm and -dtype)

Every command taking -spec F also takes F as its one argument ('attngen check F').
Flags may come before or after it. Exit status: 0 success, 1 failure (a bad spec,
a failed check), 2 usage error (unknown command or flag, bad or out-of-range flag
value, stray argument).

Run 'attngen help COMMAND' or 'attngen COMMAND -h' for a command's flags.
`)
	return b.String()
}

// exitError carries an exit status through run; its message, if any, has
// been printed already.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// usageError is a bad command line: run prints it with the command's
// synopsis and exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit status: 0
// success, 1 failure, 2 usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 || args[0] != "help" {
			if len(args) > 1 {
				fmt.Fprintf(stderr, "attngen: unexpected argument %q after %s\n", args[1], args[0])
				return 2
			}
			fmt.Fprint(stdout, usage())
			return 0
		}
		if len(args) > 2 {
			fmt.Fprintf(stderr, "attngen help: one command at a time, got %q\n", args[1:])
			return 2
		}
		if args[1] == "help" || args[1] == "version" {
			d := docOf(args[1])
			fmt.Fprintf(stdout, "usage: attngen %s\n\n%s\n", d.synopsis, d.summary)
			return 0
		}
		// A command's usage is what its -h prints.
		args = []string{args[1], "-h"}
	case "version", "-version", "--version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "attngen %s: unexpected argument %q\n", args[0], args[1])
			return 2
		}
		fmt.Fprintln(stdout, versionLine())
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
		fmt.Fprintf(stderr, "attngen: unknown command %q\nRun 'attngen help' for the commands.\n", args[0])
		return 2
	}
	err := cmd(args[1:], stdout, stderr)
	var ee exitError
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "attngen %s: %v\nusage: attngen %s\nRun 'attngen help %s' for its flags.\n", args[0], ue.msg, docOf(args[0]).synopsis, args[0])
		return 2
	default:
		fmt.Fprintf(stderr, "attngen %s: %v\n", args[0], err)
		return 1
	}
}

// modulePath is attngen's module.
const modulePath = "github.com/attngen/attngen"

// versionLine is what attngen version prints: the version of attngen's
// module in the binary's build information, which is "(devel)" when the
// binary was built inside a checkout of attngen itself (go build, go run)
// rather than from a module version.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "attngen (devel): no build information in this binary"
	}
	m := &bi.Main
	if bi.Main.Path != modulePath {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				m = d
			}
		}
	}
	if m == nil {
		// A test binary, or attngen's package copied into another module.
		return fmt.Sprintf("attngen (devel): built as part of %s, not from an attngen module version", orDash(bi.Main.Path))
	}
	v := m.Version
	if v == "" {
		v = "(devel)"
	}
	var notes []string
	if m.Replace != nil {
		notes = append(notes, "replaced by "+m.Replace.Path+" "+m.Replace.Version)
	}
	if v == "(devel)" {
		notes = append(notes, "built from a source checkout, not a published version")
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				notes = append(notes, "revision "+s.Value)
			}
		}
	}
	line := "attngen " + v
	if len(notes) > 0 {
		line += " (" + strings.Join(strings.Fields(strings.Join(notes, "; ")), " ") + ")"
	}
	return line
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// newFlags makes a flag set that never prints or exits by itself: parseArgs
// reports its errors.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	if name == "" {
		name = "generate"
	}
	fs := flag.NewFlagSet("attngen "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	return fs
}

// parseArgs parses a command's flags, which may come before and after its
// positional arguments ("--" ends the flags). A command taking a spec file
// (specPath not nil) accepts it as its one positional argument instead of
// -spec; any other argument is a usage error. -h prints the command's
// usage to stdout and returns flag.ErrHelp.
func parseArgs(fs *flag.FlagSet, args []string, stdout io.Writer, specPath *string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(stdout, fs)
			return flag.ErrHelp
		}
		if err != nil {
			return usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if k := len(args) - len(rest) - 1; k >= 0 && args[k] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if specPath != nil && len(pos) > 0 && *specPath == "" {
		*specPath, pos = pos[0], pos[1:]
		if *specPath == "" {
			return usagef("empty spec file name")
		}
	}
	if len(pos) > 0 {
		if specPath != nil {
			return usagef("unexpected argument %q: the spec file is given once, by -spec or as the one argument; other values go with their flags (-name value)", pos[0])
		}
		return usagef("unexpected argument %q", pos[0])
	}
	return nil
}

// printCommandUsage writes a command's synopsis, summary and flags.
func printCommandUsage(w io.Writer, fs *flag.FlagSet) {
	d := docOf(strings.TrimPrefix(fs.Name(), "attngen "))
	fmt.Fprintf(w, "usage: attngen %s\n\n%s\n\nFlags:\n", d.synopsis, d.summary)
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// loadSpec parses the spec file; on failure it prints the positioned errors
// to stderr and returns an exitError.
func loadSpec(path string, stderr io.Writer) (*spec.Spec, error) {
	if path == "" {
		fmt.Fprintln(stderr, "attngen: -spec FILE is required (or give the spec file as the argument)")
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
			return usagef("-%s must be at least 1, got %d", pairs[k], v)
		}
	}
	return nil
}

// atMost checks an integer flag against its upper bound; why says what the
// bound protects.
func atMost(name string, v, limit int, why string) error {
	if v > limit {
		return usagef("-%s %d: at most %d (%s)", name, v, limit, why)
	}
	return nil
}
