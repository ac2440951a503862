package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

const headsSpec = "name: h\nhead_params:\n  window: {min: 1, max: 300}\n  sinks: {min: 0, max: 8}\nmask: {union: [{global: {tokens: sinks}}, {window: {size: window}}]}\n"

// TestShowHeads: -heads binds the head parameters: the tile counts and
// kept pairs are those of the bound mask by brute force; parameters not
// named are at their max; bad values are usage errors.
func TestShowHeads(t *testing.T) {
	f := filepath.Join(t.TempDir(), "h.yaml")
	if err := os.WriteFile(f, []byte(headsSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Parse(f, []byte(headsSpec))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag string
		vals []int
	}{{"window=37,sinks=0", []int{37, 0}}, {"sinks=3", []int{300, 3}}, {"", []int{300, 8}}} {
		args := []string{"show", "-spec", f, "-seq", "200", "-tile", "16"}
		if c.flag != "" {
			args = append(args, "-head-params", c.flag)
		}
		out, errOut, code := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		p, err := s.Pattern().Bind(c.vals)
		if err != nil {
			t.Fatal(err)
		}
		count, kept := bruteTiles(p, 200, 16)
		m := tilesLine.FindStringSubmatch(out)
		k := keptLine.FindStringSubmatch(out)
		if m == nil || k == nil {
			t.Fatalf("%v: no counts in\n%s", args, out)
		}
		if m[2] != strconv.FormatInt(int64(count[spec.FullT]), 10) || m[3] != strconv.FormatInt(count[spec.Partial], 10) || k[1] != strconv.FormatInt(kept, 10) {
			t.Errorf("-heads %q: tiles %v kept %v, brute force %v kept %d", c.flag, m[1:], k[1], count, kept)
		}
		if !strings.Contains(out, "note: head parameters window = "+strconv.Itoa(c.vals[0])) {
			t.Errorf("-heads %q: no note of the values:\n%s", c.flag, out)
		}
	}
	for _, bad := range []string{"window=0", "sinks=9", "win=3", "window=x", "window", "window=5,window=6", "sinks=1,window=5,sinks=1"} {
		if _, errOut, code := runCLI("show", "-spec", f, "-seq", "200", "-tile", "16", "-head-params", bad); code != 2 || !strings.HasPrefix(errOut, "attngen show: -head-params") {
			t.Errorf("-head-params %s: exit %d, %s", bad, code, errOut)
		}
	}
	// A parameter given twice is refused, not silently set to the last value.
	if _, errOut, code := runCLI("show", "-spec", f, "-seq", "200", "-tile", "16", "-head-params", "window=5,window=6"); code != 2 || !strings.Contains(errOut, "-head-params: window given twice (window=5, then \"window=6\")") {
		t.Errorf("-head-params window=5,window=6: exit %d, %s", code, errOut)
	}
	if _, errOut, code := runCLI("show", "-spec", "../../spec/examples/window.yaml", "-seq", "200", "-tile", "16", "-head-params", "w=1"); code != 2 || !strings.Contains(errOut, "declares no head_params") {
		t.Errorf("-heads on a spec without head_params: exit %d, %s", code, errOut)
	}
}

// TestBenchHeadParams: bench runs a mask with head parameters at the
// values -head-params gives every head (the others at their max): the
// kept pairs it reports are the bound mask's, by brute force, and bad
// values are usage errors.
func TestBenchHeadParams(t *testing.T) {
	f := filepath.Join(t.TempDir(), "h.yaml")
	if err := os.WriteFile(f, []byte(headsSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Parse(f, []byte(headsSpec))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag string
		vals []int
		text string
	}{{"window=37,sinks=0", []int{37, 0}, "window=37,sinks=0"}, {"", []int{300, 8}, "window=300,sinks=8"}} {
		args := []string{"bench", "-spec", f, "-seq", "200", "-heads", "3", "-threads", "1", "-reps", "1", "-variants", "purego", "-json"}
		if c.flag != "" {
			args = append(args, "-head-params", c.flag)
		}
		out, errOut, code := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		p, err := s.Pattern().Bind(c.vals)
		if err != nil {
			t.Fatal(err)
		}
		var kept int64
		for i := 0; i < 200; i++ {
			for j := 0; j < 200; j++ {
				if p.At(i, j) {
					kept++
				}
			}
		}
		if !strings.Contains(out, `"kept_pairs":`+strconv.FormatInt(kept, 10)+",") || !strings.Contains(out, `"head_params":"`+c.text+`"`) {
			t.Errorf("-head-params %q: want kept_pairs %d and head_params %s in\n%s", c.flag, kept, c.text, out)
		}
	}
	if _, errOut, code := runCLI("bench", "-spec", f, "-seq", "200", "-head-params", "window=0"); code != 2 || !strings.Contains(errOut, "outside its range") {
		t.Errorf("-head-params window=0: exit %d, %s", code, errOut)
	}
}
