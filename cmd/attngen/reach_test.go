package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

func runReach(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"reach"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// reachOut is the part of the -json output the tests read.
type reachOut struct {
	Spec        string      `json:"spec"`
	Seq         int         `json:"seq"`
	Layers      int         `json:"layers"`
	MaxDistance int         `json:"max_distance"`
	Schedule    []string    `json:"schedule"`
	FullLayers  []int       `json:"full_layers"`
	Marginal    [][]float64 `json:"marginal"`
	Periodic    bool        `json:"periodic"`
	Period      int         `json:"period"`
	PerPhase    *struct {
		MaxDistance int         `json:"max_distance"`
		Depth       int         `json:"depth"`
		Groups      []struct{}  `json:"groups"`
		Coverage    [][]float64 `json:"coverage"`
	} `json:"per_phase"`
	Hops *struct {
		Min []int `json:"min"`
		Max []int `json:"max"`
	} `json:"hops"`
	CopyBound *struct {
		Target, Source, K int
		Reachable         bool
		Hops              int
		MaxAccuracy       float64 `json:"max_accuracy"`
		MinCrossEntropy   float64 `json:"min_cross_entropy"`
	} `json:"copy_bound"`
}

func decodeReach(t *testing.T, stdout string) reachOut {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var r reachOut
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout)
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		var x any
		_ = dec.Decode(&x)
		if dec.More() {
			t.Fatal("more than one JSON value")
		}
	}
	return r
}

// TestReachJSONMatchesBrute: for every example spec, the marginal of -json
// equals the brute force recursion over the spec's layer schedule.
func TestReachJSONMatchesBrute(t *testing.T) {
	files, err := filepath.Glob("../../spec/examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example specs: %v", err)
	}
	n, L := 300, 5
	if testing.Short() {
		n, L = 270, 4
	}
	for _, f := range files {
		stdout, stderr, code := runReach(t, "-spec", f, "-layers", itoa(L), "-seq", itoa(n), "-max-distance", itoa(n-1), "-json", "-hops")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", f, code, stderr)
		}
		got := decodeReach(t, stdout)
		s, err := spec.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		layers := make([]spec.Pattern, L)
		for k := 1; k <= L; k++ {
			layers[k-1] = s.LayerAt(k)
		}
		want := verify.BruteCounts(layers, n, n-1)
		if got.Spec != s.Name || got.Seq != n || got.Layers != L || got.MaxDistance != n-1 || len(got.Marginal) != L {
			t.Fatalf("%s: header %+v", f, got)
		}
		for l := 1; l <= L; l++ {
			if len(got.Marginal[l-1]) != n {
				t.Fatalf("%s: marginal[%d] has %d entries, want %d", f, l-1, len(got.Marginal[l-1]), n)
			}
			for d := 0; d < n; d++ {
				if w := float64(want[l-1][d]) / float64(n-d); got.Marginal[l-1][d] != w {
					t.Fatalf("%s: marginal[%d][%d] = %v, brute force %v", f, l-1, d, got.Marginal[l-1][d], w)
				}
			}
		}
		for d := 0; d < n; d++ {
			lo, hi := -1, -1
			for l := L; l >= 1; l-- {
				if want[l-1][d] > 0 {
					lo = l
				}
				if want[l-1][d] == n-d {
					hi = l
				}
			}
			if d == 0 {
				lo, hi = 0, 0
			}
			if got.Hops.Min[d] != lo || got.Hops.Max[d] != hi {
				t.Fatalf("%s: hops at distance %d: %d %d, brute force %d %d", f, d, got.Hops.Min[d], got.Hops.Max[d], lo, hi)
			}
		}
		_, periodic := verify.StackPeriod(layers, n)
		if got.Periodic != periodic || (got.PerPhase != nil) != (periodic && got.Period > 0) {
			t.Fatalf("%s: periodic %v period %d per_phase %v, want periodic %v", f, got.Periodic, got.Period, got.PerPhase != nil, periodic)
		}
		if got.PerPhase != nil && (got.PerPhase.Depth != L || len(got.PerPhase.Coverage) != L || len(got.PerPhase.Groups) == 0) {
			t.Fatalf("%s: per_phase %+v", f, got.PerPhase)
		}
	}
}

func itoa(k int) string {
	b, _ := json.Marshal(k)
	return string(b)
}

func TestReachText(t *testing.T) {
	stdout, stderr, code := runReach(t, "-spec", "../../spec/examples/bridge.yaml", "-layers", "4", "-seq", "2048", "-max-distance", "1023",
		"-target", "1000", "-source", "300", "-k", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"coverage: fraction of targets",
		"l=1     l=2     l=3     l=4",
		"period 256",
		"phases 0-31: d 0-(phi+512)",
		"phases 32-255: d 0-(phi+288)",
		"source not in R_4(target): top-1 accuracy <= 1/K = 0.25",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, _ = runReach(t, "-spec", "../../spec/examples/hybrid.yaml", "-layers", "8", "-seq", "512", "-max-distance", "300")
	if !strings.Contains(stdout, "layers 4, 8 full") || !strings.Contains(stdout, "saturates") {
		t.Errorf("hybrid: no saturation note:\n%s", stdout)
	}
	stdout, _, _ = runReach(t, "-spec", "../../spec/examples/streaming.yaml", "-layers", "2", "-seq", "256")
	if !strings.Contains(stdout, "not block-periodic") {
		t.Errorf("streaming:\n%s", stdout)
	}
	stdout, _, _ = runReach(t, "-spec", "../../spec/examples/dilated.yaml", "-layers", "2", "-seq", "256")
	if !strings.Contains(stdout, "phase 0: d 0, 8, ..., 248") {
		t.Errorf("dilated:\n%s", stdout)
	}
}

func TestReachCopyBoundJSON(t *testing.T) {
	for _, tc := range []struct {
		source    string
		reachable bool
		hops      int
	}{{"10", false, -1}, {"270", true, 3}} {
		stdout, stderr, code := runReach(t, "-spec", "../../spec/examples/bridge.yaml", "-layers", "3", "-seq", "600", "-max-distance", "300",
			"-json", "-target", "599", "-source", tc.source, "-k", "8")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		b := decodeReach(t, stdout).CopyBound
		if b == nil || b.Target != 599 || b.K != 8 || b.Reachable != tc.reachable || b.Hops != tc.hops {
			t.Fatalf("source %s: copy_bound %+v", tc.source, b)
		}
		if !tc.reachable && (b.MaxAccuracy != 0.125 || b.MinCrossEntropy != math.Log(8)) {
			t.Errorf("copy_bound %+v", b)
		}
		if tc.reachable && (b.MaxAccuracy != 1 || b.MinCrossEntropy != 0) {
			t.Errorf("copy_bound %+v", b)
		}
	}
}

func TestReachImages(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"c.png", "c.svg"} {
		path := filepath.Join(dir, name)
		_, stderr, code := runReach(t, "-spec", "../../spec/examples/hybrid.yaml", "-layers", "12", "-seq", "512", "-max-distance", "400", "-o", path)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".png") {
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 300 {
				t.Errorf("png is %v", b)
			}
		} else {
			s := string(data)
			if !strings.HasPrefix(s, "<svg") || strings.Count(s, "<polyline") < 10 || !strings.Contains(s, "l = 12") {
				t.Errorf("svg:\n%.400s", s)
			}
		}
	}
}

func TestReachBadFlags(t *testing.T) {
	ex := "../../spec/examples/block.yaml"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-spec", ex, "-seq", "100", "-max-distance", "100"}, "must be less than -seq"},
		{[]string{"-spec", ex, "-seq", "100", "-max-distance", "-5"}, "-max-distance must be at least 0"},
		{[]string{"-spec", ex, "-seq", "100", "-max-distance", "-1"}, "-max-distance must be at least 0 (omit it for -seq - 1 = 99), got -1"},
		{[]string{"-spec", ex, "-layers", "0"}, "-layers must be at least 1"},
		{[]string{"-spec", ex, "-seq", "0"}, "-seq must be at least 1"},
		{[]string{"-spec", ex, "-seq", "100000"}, "-seq 100000 is above"},
		{[]string{"-spec", ex, "-layers", "5000"}, "-layers 5000 is above"},
		{[]string{"-spec", ex, "-seq", "100", "-target", "5"}, "needs all of -target, -source and -k"},
		{[]string{"-spec", ex, "-seq", "100", "-target", "5", "-source", "100", "-k", "2"}, "must be positions below -seq"},
		{[]string{"-spec", ex, "-seq", "100", "-target", "5", "-source", "1", "-k", "-1"}, "-k must be at least 1"},
		{[]string{"-spec", ex, "-seq", "100", "-o", "x.jpg"}, "want a .png or .svg"},
		{[]string{"-spec", ex, "-seq", "100", "-hops"}, "use it with -json"},
		{[]string{"-spec", ex, "-seq", "100", "extra"}, "unexpected argument"},
		{[]string{"-seq", "100"}, "-spec FILE is required"},
		{[]string{"-spec", "no/such.yaml"}, "no such file"},
	} {
		stdout, stderr, code := runReach(t, tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want non-zero exit and %q", tc.args, code, stderr, stdout, tc.want)
		}
	}
}

// TestReachDefaultMaxDistance: without -max-distance, reach reports
// distances up to -seq - 1, as -max-distance S-1 does.
func TestReachDefaultMaxDistance(t *testing.T) {
	ex := "../../spec/examples/block.yaml"
	def, errs, code := runReach(t, "-spec", ex, "-seq", "100", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	given, errs, code := runReach(t, "-spec", ex, "-seq", "100", "-json", "-max-distance", "99")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if def != given {
		t.Errorf("without -max-distance:\n%.400s\nwith -max-distance 99:\n%.400s", def, given)
	}
}
