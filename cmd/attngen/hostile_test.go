package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/attngen/attngen/spec/spectest"
)

// runBounded runs one command line through run with a deadline, turning a
// panic into a test failure instead of a crash of the test binary.
func runBounded(t *testing.T, limit time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	type result struct {
		stdout, stderr string
		code           int
		panicked       any
		stack          []byte
	}
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		defer func() {
			if r := recover(); r != nil {
				done <- result{out.String(), errb.String(), -1, r, debug.Stack()}
			}
		}()
		c := run(args, &out, &errb)
		done <- result{out.String(), errb.String(), c, nil, nil}
	}()
	select {
	case r := <-done:
		if r.panicked != nil {
			t.Fatalf("attngen %s panicked: %v\n%s", strings.Join(args, " "), r.panicked, r.stack)
		}
		return r.stdout, r.stderr, r.code
	case <-time.After(limit):
		t.Fatalf("attngen %s still running after %v", strings.Join(args, " "), limit)
	}
	return
}

// TestHostileCommandLines runs the command lines of issue 8 item 9 (and
// relatives) that used to panic, crash, exhaust memory or run for minutes:
// each must end at once with its usage or input error, naming the flag or
// file, and never print a negative count.
func TestHostileCommandLines(t *testing.T) {
	ex := "../../spec/examples/window.yaml"
	dir := t.TempDir()

	// A spec file of 2 MiB: the cap refuses it before parsing.
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("# padding comment line\n"), 2<<20/23+1), 0o644); err != nil {
		t.Fatal(err)
	}
	// A spec under the cap with thousands of errors: the list is cut.
	var many strings.Builder
	many.WriteString("name: a\nmask: {full: {}}\n")
	for k := range 5000 {
		fmt.Fprintf(&many, "bogus%d: 1\n", k)
	}
	manyPath := filepath.Join(dir, "many.yaml")
	if err := os.WriteFile(manyPath, []byte(many.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// A union of 2,500 primitives, 100 KB: refused at its mask line
	// instead of taking a minute and a gigabyte to plan or generate.
	union := filepath.Join(dir, "union.yaml")
	if err := os.WriteFile(union, []byte(spectest.UnionYAML("union", 2500)), 0o644); err != nil {
		t.Fatal(err)
	}
	threadList := strings.TrimSuffix(strings.Repeat("1,", 1000), ",")

	cases := []struct {
		args []string
		code int
		want []string // all must appear on stderr
	}{
		{[]string{"bench", "-spec", ex, "-heads", "9223372036854775807"}, 2, []string{"-heads", "overflow"}},
		{[]string{"bench", "-spec", ex, "-batch", "9223372036854775807", "-heads", "2"}, 2, []string{"-batch", "overflow"}},
		{[]string{"bench", "-spec", ex, "-seq", "9223372036854775807"}, 2, []string{"-seq"}},
		{[]string{"bench", "-spec", ex, "-threads", "100000"}, 2, []string{"-threads 100000", "at most"}},
		{[]string{"bench", "-spec", ex, "-threads", threadList}, 2, []string{"-threads", "at most"}},
		{[]string{"bench", "-spec", ex, "-seq", "100000000", "-heads", "100"}, 2, []string{"memory", "limit"}},
		{[]string{"bench", "-spec", ex, "-reps", "1000000000"}, 2, []string{"-reps"}},
		{[]string{"bench", "-spec", ex, "-gpu", "-heads", "9223372036854775807"}, 2, []string{"-heads", "overflow"}},
		{[]string{"plan", "-spec", ex, "-seq", "1000000000"}, 2, []string{"-seq 1000000000", "at most"}},
		{[]string{"plan", "-spec", ex, "-seq", "1e9"}, 2, []string{"-seq", "invalid value"}},
		{[]string{"plan", "-spec", ex, "-seq", "9223372036854775807"}, 2, []string{"-seq"}},
		{[]string{"plan", "-spec", ex, "-seq", "4000000"}, 2, []string{"-seq 4000000", "at most"}},
		{[]string{"plan", "-spec", ex, "-seq", "262144", "-tile-q", "16"}, 2, []string{"16384 x 4096 tiles"}},
		{[]string{"plan", "-spec", ex, "-seq", "4096", "-tile-q", "9223372036854775807"}, 2, []string{"-tile-q"}},
		{[]string{"plan", "-spec", ex, "-seq", "4096", "-first", "9223372036854775807"}, 2, []string{"-first"}},
		{[]string{"check", "-spec", ex, "-seq", "1000000000"}, 2, []string{"-seq 1000000000", "at most"}},
		{[]string{"check", "-spec", ex, "-seq", "9223372036854775807"}, 2, []string{"-seq"}},
		{[]string{"show", "-spec", ex, "-seq", "1000000000", "-tile", "65536"}, 2, []string{"-seq 1000000000", "at most"}},
		{[]string{"show", "-spec", ex, "-seq", "9223372036854775807", "-tile", "9223372036854775807"}, 2, []string{"-seq"}},
		{[]string{"reach", "-spec", ex, "-seq", "9223372036854775807"}, 2, []string{"-seq"}},
		{[]string{"reach", "-spec", ex, "-seq", "100", "-layers", "9223372036854775807"}, 2, []string{"-layers"}},
		{[]string{"verify", "-spec", ex, "-dep-seq", "1000000000"}, 2, []string{"-dep-seq"}},
		{[]string{"check", "-spec", "/dev/zero"}, 1, []string{"/dev/zero", "larger than 1 MiB"}},
		{[]string{"check", "-spec", big}, 1, []string{big, "larger than 1 MiB"}},
		{[]string{"plan", "-spec", big}, 1, []string{big, "larger than 1 MiB"}},
		{[]string{"check", "-spec", manyPath}, 1, []string{"4980 more errors"}},
		{[]string{"plan", "-spec", union}, 1, []string{union + ":3:3: mask: 2500 primitives", "at most 1024"}},
		{[]string{"-spec", union, "-out", filepath.Join(dir, "out")}, 1, []string{union + ":3:3: mask: 2500 primitives"}},
		{[]string{"verify", "-spec", union}, 1, []string{union + ":3:3: mask: 2500 primitives"}},
		{[]string{"bench", "-spec", ex, "1", "-seq", "8192"}, 2, []string{`unexpected argument "1"`}},
	}
	start := time.Now()
	for _, c := range cases {
		if c.args[2] == "/dev/zero" {
			if _, err := os.Stat("/dev/zero"); err != nil {
				continue // no /dev/zero on this system; big.yaml covers the cap
			}
		}
		line := strings.Join(c.args, " ")
		for _, long := range []string{ex, big, manyPath, union, dir, "/dev/zero"} {
			line = strings.ReplaceAll(line, long, filepath.Base(long))
		}
		if len(line) > 100 {
			line = line[:100] + "..."
		}
		t.Run(line, func(t *testing.T) {
			stdout, stderr, code := runBounded(t, 5*time.Second, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstderr: %.600s", code, c.code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%.600s", w, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout not empty:\n%.600s", stdout)
			}
			if n := strings.Count(stderr, "\n"); n > 40 {
				t.Errorf("%d lines on stderr, want the error list cut short", n)
			}
		})
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("the hostile command lines took %v in all; each should be refused before any work", d)
	}
}

// TestPlanLargestSeqCounts: at the largest -seq plan accepts (2^18, 4096
// x 4096 tiles of 64), the counts it prints are never negative (they
// overflowed at -seq MaxInt64).
func TestPlanLargestSeqCounts(t *testing.T) {
	stdout, stderr, code := runBounded(t, 20*time.Second, "plan", "-spec", "../../spec/examples/window.yaml",
		"-seq", "262144", "-first", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	counted := 0
	for _, l := range strings.Split(stdout, "\n") {
		if !strings.HasPrefix(l, "query_tiles") && !strings.HasPrefix(l, "key_tiles") && !strings.HasPrefix(l, "# kept pairs") {
			continue
		}
		counted++
		for _, f := range strings.Fields(l) {
			if len(f) > 1 && f[0] == '-' && f[1] >= '0' && f[1] <= '9' {
				t.Errorf("negative number in %q", l)
			}
		}
	}
	if counted != 3 {
		t.Errorf("found %d count lines, want query_tiles, key_tiles and kept pairs:\n%s", counted, stdout)
	}
}
