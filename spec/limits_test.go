package spec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseFileSizeCap: a file larger than MaxFileSize is refused at once
// with an error naming it, whether it is a regular file or an endless
// device, without reading it all.
func TestParseFileSizeCap(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("# a comment\n"), MaxFileSize/12+1), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{big}
	if _, err := os.Stat("/dev/zero"); err == nil {
		paths = append(paths, "/dev/zero")
	}
	for _, p := range paths {
		done := make(chan error, 1)
		go func() {
			_, err := ParseFile(p)
			done <- err
		}()
		select {
		case err := <-done:
			var list ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("%s: error %v, want one positioned error", p, err)
			}
			want := p + ":1:1: spec file is larger than 1 MiB"
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s: error %q, want it to start %q", p, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ParseFile still reading after 5s", p)
		}
	}
	// A file of exactly the cap is read and parsed as usual.
	edge := filepath.Join(dir, "edge.yaml")
	src := "name: a\nmask: {full: {}}\n"
	pad := MaxFileSize - len(src)
	if err := os.WriteFile(edge, []byte(src+strings.Repeat("#", pad-1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := ParseFile(edge); err != nil || s.Name != "a" {
		t.Errorf("file of exactly %d bytes: %v", MaxFileSize, err)
	}
}

// TestParseErrorCap: a file with thousands of errors reports the first
// MaxErrors in file order and one last entry counting the rest.
func TestParseErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: a\nmask: {full: {}}\n")
	const n = 3000
	for k := range n {
		fmt.Fprintf(&b, "bogus%d: 1\n", k)
	}
	_, err := Parse("many.yaml", []byte(b.String()))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %v, want an ErrorList", err)
	}
	if len(list) != MaxErrors+1 {
		t.Fatalf("%d entries, want %d and a summary", len(list), MaxErrors+1)
	}
	for k := range MaxErrors {
		if want := fmt.Sprintf("many.yaml:%d:1: spec: unknown key \"bogus%d\"", k+3, k); !strings.HasPrefix(list[k].Error(), want) {
			t.Errorf("entry %d: %s, want %s...", k, list[k], want)
		}
	}
	last := list[MaxErrors].Error()
	if want := fmt.Sprintf("many.yaml:%d:1: and %d more errors", MaxErrors+3, n-MaxErrors); !strings.HasPrefix(last, want) {
		t.Errorf("last entry %q, want it to start %q", last, want)
	}
	// At the cap exactly, nothing is cut.
	var c strings.Builder
	c.WriteString("name: a\nmask: {full: {}}\n")
	for k := range MaxErrors {
		fmt.Fprintf(&c, "bogus%d: 1\n", k)
	}
	_, err = Parse("few.yaml", []byte(c.String()))
	if !errors.As(err, &list) || len(list) != MaxErrors || strings.Contains(err.Error(), "more errors") {
		t.Errorf("%d errors: got %d entries: %v", MaxErrors, len(list), err)
	}
}

// TestPageSize: page_size is optional, a positive integer at most
// MaxPageSize, reported by file, line and field otherwise.
func TestPageSize(t *testing.T) {
	s, err := Parse("p.yaml", []byte("name: p\nmask: {window: {size: 8}}\npage_size: 16\n"))
	if err != nil || s.PageSize != 16 {
		t.Fatalf("page_size 16: %v, %+v", err, s)
	}
	if s, err := Parse("p.yaml", []byte("name: p\nmask: {window: {size: 8}}\n")); err != nil || s.PageSize != 0 {
		t.Fatalf("no page_size: %v, %d", err, s.PageSize)
	}
	for _, v := range []string{"0", "-3", "1048577", "x", "1.5"} {
		_, err := Parse("p.yaml", []byte("name: p\nmask: {window: {size: 8}}\npage_size: "+v+"\n"))
		if err == nil || !strings.Contains(err.Error(), "p.yaml:3:") || !strings.Contains(err.Error(), "page_size") {
			t.Errorf("page_size %s: %v", v, err)
		}
	}
}
