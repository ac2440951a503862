package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/spec/spectest"
)

// writeInts writes vals to a -data file, a few per line, with a comment.
func writeInts(t *testing.T, vals []int32) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# run-time data\n")
	for k, v := range vals {
		fmt.Fprintf(&b, "%d", v)
		if k%7 == 6 {
			b.WriteString("\n")
		} else {
			b.WriteString(", ")
		}
	}
	p := filepath.Join(t.TempDir(), "data.txt")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ancestor walks a parent array: j is i or an ancestor of i.
func ancestor(par []int32, i, j int) bool {
	for x := i; x >= 0; x = int(par[x]) {
		if x == j {
			return true
		}
	}
	return false
}

// TestShowData: show -data draws a tree mask on its parent array (and a
// document mask on its ids): the kept pairs printed equal a brute-force
// count from walking the parents, and the tile classes are sound.
func TestShowData(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 4 {
		n, tile := 150+r.IntN(200), 8+r.IntN(40)
		par := spectest.Parents(r, n)
		out, errs, code := runShow(t, "-spec", "../../spec/examples/tree.yaml", "-seq", fmt.Sprint(n), "-tile", fmt.Sprint(tile), "-data", writeInts(t, par))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var kept int64
		var count [3]int64
		for q0 := 0; q0 < n; q0 += tile {
			for k0 := 0; k0 < n; k0 += tile {
				var in, all int64
				for i := q0; i < min(n, q0+tile); i++ {
					for j := k0; j < min(n, k0+tile); j++ {
						all++
						if ancestor(par, i, j) {
							in++
						}
					}
				}
				kept += in
				switch in {
				case 0:
					count[spec.Empty]++
				case all:
					count[spec.FullT]++
				default:
					count[spec.Partial]++
				}
			}
		}
		k := keptLine.FindStringSubmatch(out)
		if k == nil || atoi(t, k[1]) != kept {
			t.Errorf("trial %d: kept line %q, brute force %d", trial, k, kept)
		}
		m := tilesLine.FindStringSubmatch(out)
		if m == nil || atoi(t, m[2]) > count[spec.FullT] || atoi(t, m[4]) > count[spec.Empty] {
			t.Errorf("trial %d: %q; brute force %v (empty, partial, full)", trial, m, count)
		}
		if strings.Contains(out, "note:") {
			t.Errorf("trial %d: a note although the data was given:\n%s", trial, out)
		}
	}
	// without data: one chain, and a note says so
	out, _, code := runShow(t, "-spec", "../../spec/examples/tree.yaml", "-seq", "64", "-tile", "16")
	if code != 0 || !strings.Contains(out, "note: tree mask drawn as one chain") {
		t.Errorf("no data: exit %d\n%s", code, out)
	}
	// document ids
	ids := make([]int32, 200)
	for k := 1; k < len(ids); k++ {
		ids[k] = ids[k-1] + int32(r.IntN(15)/14)
	}
	out, errs, code := runShow(t, "-spec", "../../spec/examples/document.yaml", "-seq", "200", "-tile", "16", "-data", writeInts(t, ids))
	if code != 0 {
		t.Fatalf("documents: exit %d: %s", code, errs)
	}
	s, err := spec.ParseFile("../../spec/examples/document.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := spec.NewDocs(ids)
	var kept int64
	for i := range 200 {
		for j := range 200 {
			if s.Pattern().AtDocs(i, j, d) {
				kept++
			}
		}
	}
	if k := keptLine.FindStringSubmatch(out); k == nil || atoi(t, k[1]) != kept {
		t.Errorf("documents: kept line %q, brute force %d", k, kept)
	}
}

var reachRow = regexp.MustCompile(`(?m)^ +(\d+) +(\d\.\d{4}) `)

// TestReachData: reach -data analyses a tree mask on its parent array:
// one-layer coverage at each distance is the fraction of targets whose
// source at that distance is an ancestor, by walking the parents.
func TestReachData(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n := 90
	par := spectest.Parents(r, n)
	var out, errb bytes.Buffer
	if code := run([]string{"reach", "-spec", "../../spec/examples/tree.yaml", "-seq", fmt.Sprint(n), "-layers", "1", "-data", writeInts(t, par)}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	rows := reachRow.FindAllStringSubmatch(out.String(), -1)
	if len(rows) < 10 {
		t.Fatalf("%d distance rows:\n%s", len(rows), out.String())
	}
	for _, m := range rows {
		d, _ := strconv.Atoi(m[1])
		hit := 0
		for tg := d; tg < n; tg++ {
			if ancestor(par, tg, tg-d) {
				hit++
			}
		}
		want := fmt.Sprintf("%.4f", float64(hit)/float64(n-d))
		if m[2] != want {
			t.Errorf("distance %d: coverage %s, brute force %s", d, m[2], want)
		}
	}
}

// TestDataErrors: bad -data files are errors naming the file and the
// problem, never a panic.
func TestDataErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		spec, data, want string
	}{
		{"tree", file("short", "-1 0 1"), "3 parent entries, -seq is 8"},
		{"tree", file("after", "-1 0 1 5 3 4 5 6"), "parent[3] = 5"},
		{"tree", file("word", "-1 0 x 2 3 4 5 6"), `"x" is not a 32-bit integer`},
		{"tree", file("big", "-1 0 1 2 3 4 5 99999999999"), "not a 32-bit integer"},
		{"document", file("down", "0 0 1 1 0 2 2 2"), "non-decreasing"},
		{"causal", file("none", "-1 0 1 2 3 4 5 6"), "reads no run-time data"},
		{"tree", filepath.Join(dir, "missing"), "no such file"},
	} {
		for _, cmd := range []string{"show", "reach"} {
			var out, errb bytes.Buffer
			args := []string{cmd, "-spec", "../../spec/examples/" + c.spec + ".yaml", "-seq", "8", "-data", c.data}
			if cmd == "show" {
				args = append(args, "-tile", "2")
			}
			if code := run(args, &out, &errb); code == 0 || !strings.Contains(errb.String(), c.want) {
				t.Errorf("%s %s %s: exit %d, stderr %q, want %q", cmd, c.spec, filepath.Base(c.data), code, errb.String(), c.want)
			}
		}
	}
}
