package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/attngen/attngen/spec"
)

// maxDataFile bounds a -data file (bytes): reach and show take at most
// 32768 positions.
const maxDataFile = 1 << 22

// dataKind says what run-time data the spec's layers read: "tree" (a
// parent array), "document" (document ids) or "" (none).
func dataKind(s *spec.Spec) (string, error) {
	var tree, doc bool
	for _, p := range s.Layers() {
		tree = tree || p.Mask.HasTree()
		doc = doc || p.Mask.HasDocument()
	}
	switch {
	case tree && doc:
		return "", usagef("-data: the layers read both a parent array (tree) and document ids; one file cannot give both")
	case tree:
		return "tree", nil
	case doc:
		return "document", nil
	}
	return "", nil
}

// readCapped reads all of r, the -data file named path, refusing it once
// it passes maxDataFile bytes: the read itself is bounded, so a pipe or a
// device (/dev/zero) that never ends costs at most maxDataFile+1 bytes.
func readCapped(r io.Reader, path string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDataFile+1))
	if err != nil {
		return nil, fmt.Errorf("-data %s: %v", path, err)
	}
	if len(b) > maxDataFile {
		return nil, fmt.Errorf("-data %s: more than %d bytes (%s), the cap on a -data file: reach and show take at most 32768 positions", path, maxDataFile, byteSize(maxDataFile))
	}
	return b, nil
}

// loadData reads the run-time data of the spec's masks from a file of n
// integers (one per position, separated by spaces, commas or newlines; a
// '#' starts a comment to the end of its line): the parent array of a tree
// mask (-1 for a root, each parent before its child) or the document ids
// of a document mask (non-decreasing).
func loadData(path string, s *spec.Spec, n int) (*spec.Docs, error) {
	kind, err := dataKind(s)
	if err != nil {
		return nil, err
	}
	if kind == "" {
		return nil, usagef("-data %s: the mask reads no run-time data (only tree and document masks do)", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-data: %v", err)
	}
	defer f.Close()
	b, err := readCapped(f, path)
	if err != nil {
		return nil, err
	}
	var vals []int32
	for ln, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("-data %s:%d: %q is not a 32-bit integer", path, ln+1, f)
			}
			vals = append(vals, int32(v))
		}
	}
	if len(vals) != n {
		what := "parent entries"
		if kind == "document" {
			what = "document ids"
		}
		return nil, fmt.Errorf("-data %s: %d %s, -seq is %d (one per position)", path, len(vals), what, n)
	}
	var d *spec.Docs
	if kind == "tree" {
		d, err = spec.NewTree(vals)
	} else {
		d, err = spec.NewDocs(vals)
	}
	if err != nil {
		return nil, fmt.Errorf("-data %s: %v", path, err)
	}
	return d, nil
}

// withData sets the data on every pattern whose mask reads it.
func withData(ps []spec.Pattern, d *spec.Docs) {
	for k := range ps {
		if ps[k].Mask.HasData() {
			ps[k].Data = d
		}
	}
}

// dataNote is the note for masks drawn or analysed without their data.
func dataNote(s *spec.Spec, verb string) string {
	kind, _ := dataKind(s)
	switch kind {
	case "tree":
		return "note: tree mask " + verb + " as one chain (causal attention); -data FILE gives its parent array"
	case "document":
		return "note: document mask " + verb + " as one document spanning the sequence; -data FILE gives its ids"
	}
	return ""
}

// headValues reads a -head-params flag ("name=value,name=value";
// parameters not named take their max): the values in the order of the
// spec's head_params, and the note to print (which values were used), ""
// for a spec without head parameters.
func headValues(s *spec.Spec, flag string) ([]int, string, error) {
	if len(s.HeadParams) == 0 {
		if flag != "" {
			return nil, "", usagef("-head-params %s: the spec declares no head_params", flag)
		}
		return nil, "", nil
	}
	vals := map[string]int{}
	for _, hp := range s.HeadParams {
		vals[hp.Name] = hp.Max
	}
	given := map[string]bool{}
	for _, f := range strings.FieldsFunc(flag, func(r rune) bool { return r == ',' }) {
		name, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if _, known := vals[name]; !ok || !known {
			return nil, "", usagef("-head-params: %q: want name=value with a name from head_params (%s)", f, headNames(s))
		}
		x, err := strconv.Atoi(v)
		if err != nil {
			return nil, "", usagef("-head-params: %q: %q is not an integer", f, v)
		}
		if given[name] {
			return nil, "", usagef("-head-params: %s given twice (%s=%d, then %q); give each parameter once", name, name, vals[name], strings.TrimSpace(f))
		}
		vals[name] = x
		given[name] = true
	}
	var used []string
	out := make([]int, len(s.HeadParams))
	for k, hp := range s.HeadParams {
		x := vals[hp.Name]
		if x < hp.Min || x > hp.Max {
			return nil, "", usagef("-head-params: %s = %d is outside its range [%d, %d]", hp.Name, x, hp.Min, hp.Max)
		}
		src := "given"
		if !given[hp.Name] {
			src = "its max; -head-params sets it"
		}
		used = append(used, fmt.Sprintf("%s = %d (%s)", hp.Name, x, src))
		out[k] = x
	}
	return out, "note: head parameters " + strings.Join(used, ", "), nil
}

// bindHeads binds the head parameters of every pattern to the values of a
// -head-params flag (headValues) and returns headValues' note.
func bindHeads(s *spec.Spec, ps []spec.Pattern, flag string) (string, error) {
	vals, note, err := headValues(s, flag)
	if err != nil || vals == nil {
		return note, err
	}
	byName := map[string]int{}
	for k, hp := range s.HeadParams {
		byName[hp.Name] = vals[k]
	}
	for k := range ps {
		if !ps[k].HasParams() {
			continue
		}
		v := make([]int, len(ps[k].Params))
		for j, hp := range ps[k].Params {
			v[j] = byName[hp.Name]
		}
		b, err := ps[k].Bind(v)
		if err != nil {
			return "", err
		}
		ps[k] = b
	}
	return note, nil
}

func headNames(s *spec.Spec) string {
	var n []string
	for _, hp := range s.HeadParams {
		n = append(n, hp.Name)
	}
	return strings.Join(n, ", ")
}
