package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

func runCheck(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"check"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

var shorthandNames = []string{"pbb", "se_bridge", "streaming", "strided"}

// TestCheckExamples: every example checks, and the masks printed are the
// normalized ones: no shorthand left, and they parse back to the same mask.
func TestCheckExamples(t *testing.T) {
	files, err := filepath.Glob("../../spec/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		stdout, stderr, code := runCheck(t, "-spec", f, "-seq", "300")
		if code != 0 || stderr != "" {
			t.Errorf("%s: exit %d, stderr:\n%s", f, code, stderr)
			continue
		}
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(stdout, f+": ok\n") {
			t.Errorf("%s: stdout does not start with %q:\n%s", f, f+": ok", stdout)
		}
		want := []string{
			"name: " + s.Name,
			fmt.Sprintf("causal: %v", s.Causal),
			fmt.Sprintf("head_dim: %d", s.HeadDim),
			"mask: " + s.Mask.String(),
		}
		for _, n := range s.MaskNames() {
			want = append(want, "masks."+n+": "+s.Masks[n].String())
		}
		for _, w := range want {
			if !strings.Contains(stdout, w+"\n") {
				t.Errorf("%s: stdout lacks line %q:\n%s", f, w, stdout)
			}
		}
		if s.Pattern().HasParams() {
			// one density line at every min, one at every max
			if !strings.Contains(stdout, "density at seq 300, every head parameter at its min: ") || !strings.Contains(stdout, "density at seq 300, every head parameter at its max: ") {
				t.Errorf("%s: no density lines at the head parameters' min and max:\n%s", f, stdout)
			}
		} else if !strings.Contains(stdout, "density at seq 300: ") {
			t.Errorf("%s: no density line:\n%s", f, stdout)
		}
		for _, line := range strings.Split(stdout, "\n") {
			rest, ok := strings.CutPrefix(line, "mask: ")
			if !ok {
				if k := strings.Index(line, ": {"); k > 0 && strings.HasPrefix(line, "masks.") {
					rest, ok = line[k+2:], true
				}
			}
			if !ok {
				continue
			}
			for _, sh := range shorthandNames {
				if strings.Contains(rest, sh) {
					t.Errorf("%s: printed mask names the shorthand %s: %s", f, sh, line)
				}
			}
			// The printed mask is a spec's mask again (causal written out:
			// a neighborhood not causal along both axes needs it).
			// The spec's head_params too, which the mask may name.
			r, err := spec.Parse("printed.yaml", []byte("name: p\ncausal: false\n"+spec.HeadParamsYAML(s.HeadParams)+"mask: "+rest+"\n"))
			if err != nil {
				t.Errorf("%s: printed mask %s does not parse: %v", f, rest, err)
			} else if r.Mask.String() != rest {
				t.Errorf("%s: printed mask %s parses to %s", f, rest, r.Mask)
			}
		}
	}
}

// TestCheckDefaultSeq: without -seq the density is at 4096.
func TestCheckDefaultSeq(t *testing.T) {
	stdout, stderr, code := runCheck(t, "-spec", "../../spec/examples/bridge.yaml")
	if code != 0 || stderr != "" || !strings.Contains(stdout, "density at seq 4096: ") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "mask: {union: [{block: {size: 256}}, {bridge: {block: 256, targets: 32, sources: 32}}]}\n") {
		t.Errorf("pbb not lowered:\n%s", stdout)
	}
}

// TestCheckMalformed: a bad spec exits 1 with every error on stderr as
// file:line:col: message, one per line, and nothing on stdout.
func TestCheckMalformed(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []string // "line:col: message prefix", in order
	}{
		{"syntax", "name: a\nmask: {full: {}\nhead_dim: 64\n",
			[]string{"2:1: invalid YAML: did not find expected ',' or '}'"}},
		{"empty", "", []string{"1:1: empty spec"}},
		{"top-level list", "- a\n- b\n", []string{"1:1: spec: want a mapping"}},
		{"shorthand", "name: a\nmask: {se_bridge: {block: 64, width: 8, sources: 8}}\n",
			[]string{"2:50: mask.se_bridge.sources: 8 must exceed width 8"}},
		{"alias", "name: a\nmask: &m {full: {}}\nmasks: {x: *m, y: *m}\n",
			[]string{"3:12: aliases (*m) are not supported", "3:19: aliases (*m) are not supported"}},
		{"second document", "name: a\nmask: {full: {}}\n---\nname: b\n",
			[]string{"3:1: spec: a second YAML document starts here"}},
		// A file that parses but asks for a head dimension no target runs:
		// check refuses it exactly as generation does.
		{"head_dim no target runs", "name: a\nmask: {full: {}}\nhead_dim: 100\n",
			[]string{"3:11: head_dim: 100 is not supported by the CPU runtime (its targets avx512, avx2, neon, purego run multiples of 8 from 8 to 256) nor by GPU target ptx-sm80-bf16 (it runs 32, 64, 96, 128, 192, 256, {qk: 192, v: 128})"}},
		{"too deep", "name: a\nmask: " + strings.Repeat("{union: [", 70) + "{full: {}}" + strings.Repeat("]}", 70) + "\n",
			[]string{fmt.Sprintf("2:%d: mask%s: masks nested more than 64 deep", 7+64*9, strings.Repeat(".union[0]", 64))}},
		{"several", strings.Join([]string{
			"name: Bad-Name",
			"mask:",
			"  union:",
			"    - pbb: {block: 16, width: 32}",
			"    - window: {size: 0}",
			"    - union: []",
			"    - {block: {size: 4}, window: {size: 2}}",
			"causal: yes",
			"head_dim: 2048",
			"schedule: [mask, missing]",
			"extra: 1",
			"",
		}, "\n"), []string{
			`1:7: name: "Bad-Name" is not a valid Go package name`,
			"4:31: mask.union[0].pbb.width: 32 is out of range (at most block = 16)",
			"5:22: mask.union[1].window.size: 0 is out of range (at least 1)",
			"6:14: mask.union[2].union: empty union",
			"7:26: mask.union[3]: two primitives in one map (block and window)",
			`8:9: causal: want true or false, got the string "yes"`,
			"9:11: head_dim: 2048 is not supported (want 1 to 1024",
			`10:18: schedule: unknown entry "missing"`,
			`11:1: spec: unknown key "extra"`,
		}},
	}
	dir := t.TempDir()
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("bad%d.yaml", k))
			if err := os.WriteFile(path, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := runCheck(t, "-spec", path, "-seq", "64")
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%s", stdout)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			pos := regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `:[1-9][0-9]*:[1-9][0-9]*: \S`)
			for _, l := range lines {
				if !pos.MatchString(l) {
					t.Errorf("stderr line %q is not %s:line:col: message", l, path)
				}
			}
			if len(lines) != len(c.want) {
				t.Errorf("%d errors on stderr, want %d:\n%s", len(lines), len(c.want), stderr)
			}
			for k := 0; k < min(len(lines), len(c.want)); k++ {
				if want := path + ":" + c.want[k]; !strings.HasPrefix(lines[k], want) {
					t.Errorf("stderr line %d:\n got %s\nwant %s...", k+1, lines[k], want)
				}
			}
		})
	}
}

// TestCheckUsageErrors: no -spec, a missing file, bad flags.
func TestCheckUsageErrors(t *testing.T) {
	stdout, stderr, code := runCheck(t)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "-spec FILE is required") {
		t.Errorf("no -spec: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	missing := filepath.Join(t.TempDir(), "none.yaml")
	stdout, stderr, code = runCheck(t, "-spec", missing)
	if code == 0 || stdout != "" || !strings.Contains(stderr, missing) {
		t.Errorf("missing file: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = runCheck(t, "-spec", "../../spec/examples/block.yaml", "-seq", "0")
	if code == 0 || stdout != "" || !strings.Contains(stderr, "-seq") {
		t.Errorf("-seq 0: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	_, _, code = runCheck(t, "-nope")
	if code == 0 {
		t.Errorf("unknown flag: exit 0")
	}
}
