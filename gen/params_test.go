package gen

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// paramPattern draws a random pattern and turns some of its window sides
// and global token counts into head parameters (up to three, random
// ranges within [0, n+8]).
func paramPattern(r *rand.Rand, n int) spec.Pattern {
	for {
		p := randomPattern(r, n)
		var params []spec.HeadParam
		ref := func() spec.Ref {
			if len(params) < 3 && (len(params) == 0 || r.IntN(2) == 0) {
				lo := r.IntN(n + 1)
				hi := lo + r.IntN(9)
				params = append(params, spec.HeadParam{Name: string(rune('a' + len(params))), Min: lo, Max: hi})
			}
			k := r.IntN(len(params))
			return spec.Ref{Param: k + 1, Name: params[k].Name}
		}
		var walk func(m *spec.Mask)
		walk = func(m *spec.Mask) {
			switch m.Op {
			case spec.OpWindow:
				if r.IntN(3) > 0 {
					m.LeftRef = ref()
				}
				if r.IntN(3) == 0 {
					m.RightRef = ref()
				}
			case spec.OpGlobal:
				if r.IntN(3) > 0 {
					m.TokensRef = ref()
				}
			}
			for _, a := range m.Args {
				walk(a)
			}
		}
		walk(p.Mask)
		if len(params) == 0 {
			continue
		}
		p.Params = params
		// the unbound instance: every field at its parameter's Max
		b, err := p.Bind(p.MaxBound())
		if err != nil {
			panic(err)
		}
		p.Mask = withRefs(b.Mask, p.Mask)
		return p
	}
}

// withRefs is bound's values with m's Refs (the tree of m).
func withRefs(bound, m *spec.Mask) *spec.Mask {
	c := *bound
	c.LeftRef, c.RightRef, c.TokensRef = m.LeftRef, m.RightRef, m.TokensRef
	for k := range c.Args {
		c.Args[k] = withRefs(bound.Args[k], m.Args[k])
	}
	return &c
}

// headDocs is the run-time data of one head: docs (or none) with vals.
func headDocs(docs *mask.Docs, vals []int) *mask.Docs {
	v := make([]int32, len(vals))
	for k, x := range vals {
		v[k] = int32(x)
	}
	d := &mask.Docs{}
	d.SetHead(docs, v)
	return d
}

// TestHeadParamPrograms: on random masks with head parameters and random
// values per head, every program evaluated with the values (IRParam)
// agrees with the pattern bound to them: the predicate and the keep word
// pair for pair, the key and query hulls and the class soundly (and the
// class of a primitive exactly), by brute force.
func TestHeadParamPrograms(t *testing.T) {
	r := rand.New(rand.NewPCG(91, 92))
	for iter := 0; iter < 300; iter++ {
		n := 1 + r.IntN(150)
		pat := paramPattern(r, n)
		pred, hull, qhull, class := LowerPred(pat), LowerHull(pat), LowerQHull(pat), LowerClass(pat)
		word := LowerWord(pred)
		if pred.Params() == 0 || hull.Params() == 0 && class.Params() == 0 {
			t.Fatalf("%v: programs read no head parameter\n%s", pat, pred)
		}
		var docs *mask.Docs
		if pred.UsesDocs() {
			docs = randomDocs(r, n)
		}
		for head := 0; head < 4; head++ {
			vals := make([]int, len(pat.Params))
			for k, hp := range pat.Params {
				vals[k] = hp.Min + r.IntN(hp.Max-hp.Min+1)
				if head == 0 {
					vals[k] = hp.Min
				}
			}
			bound, err := pat.Bind(vals)
			if err != nil {
				t.Fatal(err)
			}
			d := headDocs(docs, vals)
			for i := 0; i < n; i++ {
				for k0 := 0; k0 < n; k0 += 64 {
					var w [1]int64
					word.Eval([]int64{int64(i), int64(k0)}, d, nil, w[:])
					for c := 0; c < 64 && k0+c < n; c++ {
						want := bound.AtDocs(i, k0+c, docs)
						if evalPred(pred, i, k0+c, d) != want {
							t.Fatalf("%v at %v: pred(%d, %d) disagrees with the bound mask %v\n%s", pat, vals, i, k0+c, bound, pred)
						}
						if w[0]>>uint(c)&1 != 0 != want {
							t.Fatalf("%v at %v: word(%d, %d) lane %d disagrees\n%s", pat, vals, i, k0, c, word)
						}
					}
				}
			}
			for rep := 0; rep < 15; rep++ {
				q0 := r.IntN(n)
				q1 := q0 + r.IntN(min(n-q0, 40))
				x := r.IntN(n)
				var h [2]int64
				hull.Eval([]int64{int64(q0), int64(q1), int64(x)}, d, nil, h[:])
				for i := q0; i <= q1; i++ {
					for j := 0; j < n; j++ {
						if bound.AtDocs(i, j, docs) && (j > int(h[1]) || j >= x && j < int(h[0])) {
							t.Fatalf("%v at %v: hull(%d, %d, %d) = %v excludes kept (%d, %d)\n%s", pat, vals, q0, q1, x, h, i, j, hull)
						}
					}
				}
				k0 := r.IntN(n)
				k1 := k0 + r.IntN(min(n-k0, 40))
				var c [1]int64
				class.Eval([]int64{int64(q0), int64(q1), int64(k0), int64(k1)}, d, nil, c[:])
				kept, total := countKept(q0, q1, k0, k1, func(i, j int) bool { return bound.AtDocs(i, j, docs) })
				switch {
				case mask.Class(c[0]) == mask.Empty && kept > 0, mask.Class(c[0]) == mask.Full && kept < total:
					t.Fatalf("%v at %v: class of [%d,%d]x[%d,%d] is %v, %d of %d kept\n%s", pat, vals, q0, q1, k0, k1, mask.Class(c[0]), kept, total, class)
				case !pat.Mask.Op.Combinator() && docs == nil && bound.ExactClass() && mask.Class(c[0]) == mask.Partial && (kept == 0 || kept == total):
					t.Fatalf("%v at %v: primitive class of [%d,%d]x[%d,%d] is partial, %d of %d kept", pat, vals, q0, q1, k0, k1, kept, total)
				}
			}
			if msg := checkQHull(r, bound, qhull, n, d, 6); msg != "" {
				t.Fatalf("at %v: %s", vals, msg)
			}
		}
	}
}

// TestHeadParamPlanText: a plan with head parameters prints them and
// reads back to the same programs.
func TestHeadParamPlanText(t *testing.T) {
	s, err := spec.Parse("p.yaml", []byte("name: p\nhead_params:\n  w: {min: 1, max: 300}\n  g: {min: 0, max: 4}\nmask: {union: [{global: {tokens: g}}, {window: {size: w}}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(s, Tiles{"t", 64, 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	text := p.Text(200, 200, 2)
	if !strings.Contains(text, "head_param w 1 300\nhead_param g 0 4\n") {
		t.Fatalf("plan text lacks the head parameters:\n%s", text)
	}
	d, err := ParseText(text)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Plan.Text(200, 200, 2); got != text {
		t.Fatalf("plan text does not read back:\n%s\nvs\n%s", got, text)
	}
	if len(d.Plan.HeadParams()) != 2 || d.Plan.HeadParams()[0].Max != 300 {
		t.Fatalf("head parameters read back as %+v", d.Plan.HeadParams())
	}
}

// TestCompileRefusesUndeclaredRefs: a spec built in code whose mask names
// a head parameter it does not declare is refused, not compiled into a
// plan that reads values no caller gives.
func TestCompileRefusesUndeclaredRefs(t *testing.T) {
	m := spec.Window(8)
	m.LeftRef = spec.Ref{Param: 1, Name: "w", Add: -1}
	_, err := Compile(&spec.Spec{Name: "x", Mask: m, Causal: true, HeadDim: 64}, Tiles{"t", 64, 64}, nil)
	if err == nil || !strings.Contains(err.Error(), "declares 0 head parameters") {
		t.Fatalf("got %v", err)
	}
	if _, err := Compile(&spec.Spec{Name: "x", Mask: m, Causal: true, HeadDim: 64, HeadParams: []spec.HeadParam{{Name: "w", Min: 1, Max: 9}}}, Tiles{"t", 64, 64}, nil); err != nil {
		t.Fatal(err)
	}
}
