package ptx

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attngen/attngen/gen"
	"github.com/attngen/attngen/runtime/gpu"
	"github.com/attngen/attngen/spec"
)

// goldenTargets are the targets TestKernelsGolden generates every example
// for: both element types on sm_80 and sm_90 (the mma.sync kernels) and
// on sm_90a (the wgmma forward), sm_80 also with SoftLg2.
var goldenTargets = []Config{
	{Target: SM80}, {Target: f16SM80}, {Target: SM80, SoftLg2: true},
	{Target: Target{SM: 90, Elem: "bf16"}}, {Target: Target{SM: 90, Elem: "f16"}},
	{Target: SM90a}, {Target: Target{SM: 90, Elem: "f16", Accel: true}},
}

// TestKernelsGolden hashes the module text of every kernel Kernels
// returns, for every example spec at both head dimensions and every
// target of goldenTargets, and compares the hashes with
// testdata/kernels.sha256, and so the descriptions of the kernels
// (KernelSet.GPU: parameter lists, shared memory, tensor maps): a refactoring of the emitter must leave them
// byte for byte as they were (rerun with -update after checking a change
// that is meant to alter the PTX). It takes about 8 s of CPU, and runs
// with -short too: it is the guard of every change to the emitter.
func TestKernelsGolden(t *testing.T) {
	t.Parallel()
	var lines []string
	for _, name := range exampleNames(t) {
		s, err := spec.ParseFile(filepath.Join("../../spec/examples", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []int{64, 128} { // the other sizes: TestPtxasHeadDims, the interpreter tests
			s.HeadDim, s.HeadDimV = d, d
			for _, cfg := range goldenTargets {
				p, err := gen.Compile(s, cfg.Target, nil)
				if err != nil {
					t.Fatalf("%s D=%d %s: %v", name, d, cfg.Target, err)
				}
				ks, err := Kernels(p, cfg)
				if err != nil {
					t.Fatalf("%s D=%d %s: %v", name, d, cfg.Target, err)
				}
				key := fmt.Sprintf("%s d%d %s lg2soft=%v", name, d, cfg.Target.Name(), cfg.SoftLg2)
				lines = append(lines, fmt.Sprintf("%s forward %x", key, sha256.Sum256([]byte(ks.Forward.PTX))))
				if ks.Backward != nil {
					lines = append(lines, fmt.Sprintf("%s backward %x", key, sha256.Sum256([]byte(ks.Backward.PTX))))
				}
				// the descriptions: the kernels' fields (parameter lists,
				// shared memory, head parameters) and what generated
				// packages embed (names, geometry, tensor maps)
				desc := fmt.Sprintf("%+v\n%+v\n%+v", ks.GPU(), ks.Forward, ks.Backward)
				lines = append(lines, fmt.Sprintf("%s kernels %x", key, sha256.Sum256([]byte(desc))))
			}
		}
	}
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", "kernels.sha256")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
	if len(wl) != len(gl) {
		t.Errorf("%d kernels, %s lists %d", len(gl)-1, path, len(wl)-1)
	}
	bad := 0
	for x := 0; x < min(len(wl), len(gl)); x++ {
		if wl[x] != gl[x] {
			bad++
			if bad <= 10 {
				t.Errorf("kernel %d differs:\n got  %s\n want %s", x, gl[x], wl[x])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d kernels differ from %s (rerun with -update after checking the change)", bad, len(gl)-1, path)
	}
}

// TestKernelsPerTarget checks what Kernels gives each kind of target: the
// forward and the backward's two kernels (one module, sharing the
// target's element type) for the plain targets, the sm_90a forward alone
// for the architecture-specific one; and that the zero target is SM80.
func TestKernelsPerTarget(t *testing.T) {
	t.Parallel()
	p := examplePlan(t, "causal")
	for _, tg := range []Target{{}, SM80, f16SM80, {SM: 90, Elem: "bf16"}, SM90a} {
		pt := p
		if tg.Accel {
			s, err := spec.ParseFile("../../spec/examples/causal.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if pt, err = gen.Compile(s, tg, nil); err != nil {
				t.Fatal(err)
			}
		}
		ks, err := Kernels(pt, Config{Target: tg})
		if err != nil {
			t.Fatalf("%s: %v", tg, err)
		}
		want := tg
		if want == (Target{}) {
			want = SM80
		}
		if ks.Target != want || ks.Forward.Target != want {
			t.Errorf("%v: set for %v, forward for %v", tg, ks.Target, ks.Forward.Target)
		}
		var kinds []string
		for _, k := range ks.GPU() {
			kinds = append(kinds, k.Kind+"/"+k.Target+"/"+k.Elem)
		}
		got := strings.Join(kinds, " ")
		wantKinds := fmt.Sprintf("%s/%s/%s", gpu.KindForward, want.Arch(), want.Elem)
		if want.HasBackward() {
			if ks.Backward == nil || ks.Backward.Target != want {
				t.Fatalf("%v: backward %+v", tg, ks.Backward)
			}
			wantKinds += fmt.Sprintf(" %s/%s/%s %s/%s/%s", gpu.KindBwdDQ, want.Arch(), want.Elem, gpu.KindBwdDKV, want.Arch(), want.Elem)
		} else if ks.Backward != nil {
			t.Errorf("%v: a backward for an architecture-specific target", tg)
		}
		if got != wantKinds {
			t.Errorf("%v: kernels %s, want %s", tg, got, wantKinds)
		}
	}
	if SM90a.HasBackward() || !SM80.HasBackward() {
		t.Error("HasBackward: sm_90a has no backward kernels, sm_80 has")
	}
}
