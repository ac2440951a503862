package generated_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/attngen/attngen/generated/block"
	"github.com/attngen/attngen/generated/bridge"
	"github.com/attngen/attngen/generated/causal"
	"github.com/attngen/attngen/generated/dilated"
	"github.com/attngen/attngen/generated/document"
	"github.com/attngen/attngen/generated/hetero"
	"github.com/attngen/attngen/generated/hybrid"
	"github.com/attngen/attngen/generated/sebridge"
	"github.com/attngen/attngen/generated/streaming"
	"github.com/attngen/attngen/generated/window"
	"github.com/attngen/attngen/spec"
	"github.com/attngen/attngen/verify"
)

// pkg is one generated package seen through its API: run returns the
// package's ForwardVariant for variant v as a verify.Run.
type pkg struct {
	file      string
	mask      string
	headDim   int
	supported func(int) bool
	run       func(v int) verify.Run
}

// The variants, as the generated packages number them.
const (
	avx512 = 1
	avx2   = 2
	purego = 3
)

// api adapts a package without document ids.
func api[S any, V ~int](file, mask string, d int, sup func(V) bool, fwd func(V, []float32, []float32, []float32, []float32, []float32, S) error, mk func(verify.Shape) S) pkg {
	return pkg{file, mask, d, func(v int) bool { return sup(V(v)) }, func(v int) verify.Run {
		return func(out, lse, q, k, vv []float32, docs []int32, s verify.Shape) error {
			return fwd(V(v), out, lse, q, k, vv, mk(s))
		}
	}}
}

func packages() []pkg {
	return []pkg{
		api("block.yaml", block.Mask, block.HeadDim, block.Supported, block.ForwardVariant, func(s verify.Shape) block.Shape { return block.Shape(conv(s)) }),
		api("bridge.yaml", bridge.Mask, bridge.HeadDim, bridge.Supported, bridge.ForwardVariant, func(s verify.Shape) bridge.Shape { return bridge.Shape(conv(s)) }),
		api("causal.yaml", causal.Mask, causal.HeadDim, causal.Supported, causal.ForwardVariant, func(s verify.Shape) causal.Shape { return causal.Shape(conv(s)) }),
		api("dilated.yaml", dilated.Mask, dilated.HeadDim, dilated.Supported, dilated.ForwardVariant, func(s verify.Shape) dilated.Shape { return dilated.Shape(conv(s)) }),
		api("hetero.yaml", hetero.Mask, hetero.HeadDim, hetero.Supported, hetero.ForwardVariant, func(s verify.Shape) hetero.Shape { return hetero.Shape(conv(s)) }),
		api("hybrid.yaml", hybrid.Mask, hybrid.HeadDim, hybrid.Supported, hybrid.ForwardVariant, func(s verify.Shape) hybrid.Shape { return hybrid.Shape(conv(s)) }),
		api("se_bridge.yaml", sebridge.Mask, sebridge.HeadDim, sebridge.Supported, sebridge.ForwardVariant, func(s verify.Shape) sebridge.Shape { return sebridge.Shape(conv(s)) }),
		api("streaming.yaml", streaming.Mask, streaming.HeadDim, streaming.Supported, streaming.ForwardVariant, func(s verify.Shape) streaming.Shape { return streaming.Shape(conv(s)) }),
		api("window.yaml", window.Mask, window.HeadDim, window.Supported, window.ForwardVariant, func(s verify.Shape) window.Shape { return window.Shape(conv(s)) }),
		{"document.yaml", document.Mask, document.HeadDim, func(v int) bool { return document.Supported(document.Variant(v)) }, func(v int) verify.Run {
			return func(out, lse, q, k, vv []float32, docs []int32, s verify.Shape) error {
				return document.ForwardVariant(document.Variant(v), out, lse, q, k, vv, docs, document.Shape(conv(s)))
			}
		}},
	}
}

// shape is the common layout of every generated Shape.
type shape struct {
	Batch, HeadsQ, HeadsKV int
	SeqQ, SeqK             int
	HeadDim                int
	Scale                  float32
}

func conv(s verify.Shape) shape {
	return shape{s.Batch, s.HeadsQ, s.HeadsKV, s.SeqQ, s.SeqK, s.HeadDim, float32(s.Scale)}
}

// TestGeneratedPackages runs the checks of attngen verify on every
// generated package, through its public API, for every variant this
// machine supports.
func TestGeneratedPackages(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	files, _ := filepath.Glob("../spec/examples/*.yaml")
	pkgs := packages()
	if len(pkgs) != len(files) {
		t.Fatalf("%d example specs but %d generated packages under test", len(files), len(pkgs))
	}
	for _, p := range pkgs {
		s, err := spec.ParseFile(filepath.Join("../spec/examples", p.file))
		if err != nil {
			t.Fatal(err)
		}
		if s.Mask.String() != p.mask || s.HeadDim != p.headDim {
			t.Fatalf("%s: generated package is stale (mask %s, head_dim %d)", p.file, p.mask, p.headDim)
		}
		for _, v := range []int{avx512, avx2, purego} {
			if !p.supported(v) {
				continue
			}
			name := p.file + "/" + []string{"", "avx512", "avx2", "purego"}[v]
			run := p.run(v)
			for _, sh := range verify.Shapes(s.HeadDim) {
				if testing.Short() && sh.SeqK > 200 {
					continue
				}
				if _, err := verify.CheckNumeric(s.Pattern(), run, sh, r); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			dep := verify.Shape{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 50, SeqK: 70, HeadDim: s.HeadDim}
			if err := verify.CheckDependencies(s.Pattern(), run, dep, r); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !s.Mask.HasDocument() {
				pat := s.Pattern()
				layers := []spec.Pattern{pat, pat, pat}
				if err := verify.CheckStack(layers, []verify.Run{run, run, run}, 60, s.HeadDim, r); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
		}
	}
}
