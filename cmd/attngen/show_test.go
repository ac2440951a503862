package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

// bruteTiles classifies every tile of an n x n pattern by evaluating each
// element with At, and counts the kept pairs.
func bruteTiles(p spec.Pattern, n, tile int) (count [3]int64, kept int64) {
	for q0 := 0; q0 < n; q0 += tile {
		for k0 := 0; k0 < n; k0 += tile {
			q1, k1 := min(n, q0+tile)-1, min(n, k0+tile)-1
			var in int64
			for i := q0; i <= q1; i++ {
				for j := k0; j <= k1; j++ {
					if p.At(i, j) {
						in++
					}
				}
			}
			kept += in
			switch in {
			case 0:
				count[spec.Empty]++
			case int64(q1-q0+1) * int64(k1-k0+1):
				count[spec.FullT]++
			default:
				count[spec.Partial]++
			}
		}
	}
	return count, kept
}

var (
	tilesLine = regexp.MustCompile(`(?m)^tiles: (\d+) total, (\d+) full, (\d+) partial, (\d+) empty$`)
	keptLine  = regexp.MustCompile(`(?m)^kept pairs: (\d+) of (\d+) `)
)

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func runShow(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"show"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// TestShowCounts checks the printed tile classes and kept pairs against a
// brute-force count over every element.
func TestShowCounts(t *testing.T) {
	cases := []struct {
		file      string
		seq, tile int
	}{
		{"bridge", 1024, 64},
		{"bridge", 600, 48},
		{"streaming", 1500, 100},
		{"dilated", 512, 32},
		{"window", 1300, 128},
		{"document", 700, 64},
		{"se_bridge", 800, 64},
		{"block", 520, 128},
	}
	for _, c := range cases {
		path := "../../spec/examples/" + c.file + ".yaml"
		out, errs, code := runShow(t, "-spec", path, "-seq", fmt.Sprint(c.seq), "-tile", fmt.Sprint(c.tile))
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.file, code, errs)
		}
		m := tilesLine.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no tiles line in:\n%s", c.file, out)
		}
		s, err := spec.ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, kept := bruteTiles(s.Pattern(), c.seq, c.tile)
		nt := int64((c.seq + c.tile - 1) / c.tile)
		got := [3]int64{spec.Empty: atoi(t, m[4]), spec.Partial: atoi(t, m[3]), spec.FullT: atoi(t, m[2])}
		if atoi(t, m[1]) != nt*nt || got != want {
			t.Errorf("%s seq %d tile %d: printed %q, brute force %d full, %d partial, %d empty of %d",
				c.file, c.seq, c.tile, m[0], want[spec.FullT], want[spec.Partial], want[spec.Empty], nt*nt)
		}
		k := keptLine.FindStringSubmatch(out)
		if k == nil || atoi(t, k[1]) != kept || atoi(t, k[2]) != int64(c.seq)*int64(c.seq) {
			t.Errorf("%s: kept line %q, brute force %d", c.file, k, kept)
		}
		if strings.Contains(c.file, "document") != strings.Contains(out, "one document spanning the sequence") {
			t.Errorf("%s: document note wrong:\n%s", c.file, out)
		}
	}
}

func TestShowText(t *testing.T) {
	out, errs, code := runShow(t, "-spec", "../../spec/examples/bridge.yaml", "-seq", "1024", "-tile", "64")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// 16 x 16 tiles, two columns a cell: the tile picture has 16 lines of 32.
	// The first block's second query tile is full on key tile 0, partial on
	// the diagonal, empty after.
	if !strings.Contains(out, "\n|##++............................|\n") {
		t.Errorf("tile picture row missing:\n%s", out)
	}
	for _, s := range []string{"legend: # full tile", "mask density", "visited: 43 non-empty tiles", "24 of them full"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	// Many tiles: downsampled to at most -width columns.
	out, errs, code = runShow(t, "-spec", "../../spec/examples/window.yaml", "-seq", "65536", "-tile", "64", "-width", "80")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "|") && len([]rune(line)) > 82 {
			t.Fatalf("picture line of %d columns with -width 80: %q", len([]rune(line)), line)
		}
	}
	if !strings.Contains(out, "1 cell = 13 x 13 tiles") || !strings.Contains(out, "tiles: 1048576 total") {
		t.Errorf("downsampled output:\n%s", out)
	}
}

func TestShowImages(t *testing.T) {
	dir := t.TempDir()
	render := func(name string, extra ...string) []byte {
		t.Helper()
		path := filepath.Join(dir, name)
		args := append([]string{"-spec", "../../spec/examples/bridge.yaml", "-seq", "1024", "-tile", "64", "-o", path}, extra...)
		out, errs, code := runShow(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if !strings.Contains(out, "wrote "+path) || !tilesLine.MatchString(out) {
			t.Errorf("output:\n%s", out)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	a := render("a.png")
	if b := render("b.png"); !bytes.Equal(a, b) {
		t.Error("two PNG renders differ")
	}
	img, err := png.Decode(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	// 1024 positions at one pixel each, plus margins, title and legend.
	if s := img.Bounds().Size(); s.X < 1024 || s.Y < 1024 || s.X > 1200 || s.Y > 1200 {
		t.Errorf("PNG size %v", s)
	}
	small, err := png.Decode(bytes.NewReader(render("small.png", "-width", "256")))
	if err != nil {
		t.Fatal(err)
	}
	if s := small.Bounds().Size(); s.Y < 256 || s.Y > 450 {
		t.Errorf("PNG with -width 256: size %v", s)
	}

	sa := render("a.svg")
	if sb := render("b.svg"); !bytes.Equal(sa, sb) {
		t.Error("two SVG renders differ")
	}
	dec := xml.NewDecoder(bytes.NewReader(sa))
	var root string
	var texts []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			texts = append(texts, string(tok))
		}
	}
	if root != "svg" || !strings.Contains(strings.Join(texts, " "), "bridge: N = 1024, tile = 64") {
		t.Errorf("SVG root %q, text %q", root, texts)
	}
}

func TestShowBadFlags(t *testing.T) {
	bridge := "../../spec/examples/bridge.yaml"
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"-spec", bridge, "-seq", "0"}, "-seq must be at least 1"},
		{[]string{"-spec", bridge, "-tile", "0"}, "-tile must be at least 1"},
		{[]string{"-spec", bridge, "-seq", "100", "-tile", "128"}, "larger than -seq"},
		{[]string{"-spec", bridge, "-o", "mask.jpg"}, "unknown image format"},
		{[]string{"-spec", bridge, "-o", "mask"}, "unknown image format"},
		{[]string{"-spec", bridge, "-o", "m.png", "-width", "5000"}, "-width 5000"},
		{[]string{"-spec", bridge, "-width", "-1"}, "-width"},
		{[]string{"-spec", bridge, "-seq", "1000000", "-tile", "1"}, "tiles a side"},
		{[]string{"-spec", bridge, "extra"}, "unexpected argument"},
		{[]string{"-spec", bridge, "-bogus"}, "flag provided but not defined"},
		{[]string{"-seq", "64", "-tile", "32"}, "-spec FILE is required"},
		{[]string{"-spec", "../../spec/examples/missing.yaml"}, "missing.yaml"},
	}
	for _, c := range cases {
		out, errs, code := runShow(t, c.args...)
		if code == 0 || !strings.Contains(errs, c.msg) {
			t.Errorf("show %v: exit %d, stderr %q, want non-zero and %q (stdout %q)", c.args, code, errs, c.msg, out)
		}
	}
	if _, err := os.Stat("mask.jpg"); err == nil {
		t.Error("a rejected -o file was written")
	}
}

func TestShowDeterministicText(t *testing.T) {
	args := []string{"-spec", "../../spec/examples/dilated.yaml", "-seq", "777", "-tile", "32"}
	a, _, _ := runShow(t, args...)
	b, _, _ := runShow(t, args...)
	if a != b || a == "" {
		t.Error("two text renders differ")
	}
}
