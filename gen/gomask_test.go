package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/attngen/attngen/runtime/mask"
	"github.com/attngen/attngen/spec"
)

// query is one call of a compiled mask's methods in TestGoMaskRandom.
type query struct {
	Docs              []int32
	Q0, Q1, K0, K1, X int
	N, I, KW          int
	Next, Last, Class int
	Word              uint64
}

// TestGoMaskRandom: the Go code gen writes for a mask (GoMaskFile)
// computes what the plan's programs compute, on random masks (documents,
// residue layouts, nested unions and intersections): the rendered code of
// 40 random plans is compiled in a scratch module, run on random
// arguments, and compared with Prog.Eval.
func TestGoMaskRandom(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a module: skipped under -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", []byte("module example.com/rt\n\ngo 1.26\n\nrequire github.com/attngen/attngen v0.0.0\n\nreplace github.com/attngen/attngen => "+root+"\n"))
	r := rand.New(rand.NewPCG(81, 82))
	const n = 40
	var main bytes.Buffer
	main.WriteString("package main\n\nimport (\n\t\"encoding/json\"\n\t\"os\"\n\n\t\"github.com/attngen/attngen/runtime/mask\"\n")
	plans := make([]*Plan, n)
	queries := make([][]query, n)
	for k := range plans {
		pat := randomPattern(r, 300)
		if k%8 == 0 {
			pat = spec.Pattern{Mask: spec.Dilated(2+r.IntN(9), r.IntN(5)), Causal: r.IntN(3) != 0}
		}
		p, err := Compile(&spec.Spec{Name: "m", Mask: pat.Mask, Causal: pat.Causal, HeadDim: 64}, CPUTarget, nil)
		if err != nil {
			t.Fatal(err)
		}
		plans[k] = p
		src, err := GoMaskFile(p, fmt.Sprintf("m%d", k), "gen test")
		if err != nil {
			t.Fatal(err)
		}
		write(fmt.Sprintf("m%d/mask.go", k), src)
		write(fmt.Sprintf("m%d/api.go", k), []byte(fmt.Sprintf("package m%d\n\nimport \"github.com/attngen/attngen/runtime/mask\"\n\nvar Mask mask.Mask = compiled{}\n", k)))
		fmt.Fprintf(&main, "\tm%d \"example.com/rt/m%d\"\n", k, k)
	}
	main.WriteString(")\n\ntype query struct {\n\tDocs []int32\n\tQ0, Q1, K0, K1, X int\n\tN, I, KW int\n\tNext, Last, Class int\n\tWord uint64\n}\n\n")
	main.WriteString("func main() {\n\tmasks := []mask.Mask{")
	for k := range plans {
		fmt.Fprintf(&main, "m%d.Mask, ", k)
	}
	main.WriteString(`}
	var qs [][]query
	data, _ := os.ReadFile(os.Args[1])
	if err := json.Unmarshal(data, &qs); err != nil {
		panic(err)
	}
	for k, m := range masks {
		for n := range qs[k] {
			q := &qs[k][n]
			var d *mask.Docs
			if q.Docs != nil {
				d, _ = mask.NewDocs(q.Docs)
			}
			q.Next, q.Last = m.Hull(q.Q0, q.Q1, q.X, d)
			q.Class = int(m.Class(q.Q0, q.Q1, q.K0, q.K1, d))
			q.Word = m.Word(q.I, q.KW, q.N, d)
		}
	}
	out, _ := json.Marshal(qs)
	os.Stdout.Write(out)
}
`)
	write("main.go", main.Bytes())
	for k, p := range plans {
		for rep := 0; rep < 200; rep++ {
			nk := 1 + r.IntN(400)
			q := query{N: nk}
			if p.Pred.UsesDocs() {
				q.Docs = make([]int32, nk)
				for x := 1; x < nk; x++ {
					q.Docs[x] = q.Docs[x-1]
					if r.IntN(30) == 0 {
						q.Docs[x]++
					}
				}
			}
			q.Q0 = r.IntN(nk)
			q.Q1 = min(nk-1, q.Q0+r.IntN(48))
			q.K0 = r.IntN(nk)
			q.K1 = min(nk-1, q.K0+r.IntN(64))
			q.X, q.I, q.KW = r.IntN(nk), r.IntN(nk), 64*r.IntN((nk+63)/64)
			queries[k] = append(queries[k], q)
		}
	}
	in, _ := json.Marshal(queries)
	write("queries.json", in)
	cmd := exec.Command(goBin, "run", ".", filepath.Join(dir, "queries.json"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += "\n" + string(ee.Stderr)
		}
		t.Fatalf("running the rendered masks: %s", msg)
	}
	var got [][]query
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for k, p := range plans {
		m := p.Mask()
		for n, q := range got[k] {
			var d *mask.Docs
			if q.Docs != nil {
				d, _ = mask.NewDocs(q.Docs)
			}
			next, last := m.Hull(q.Q0, q.Q1, q.X, d)
			class := int(m.Class(q.Q0, q.Q1, q.K0, q.K1, d))
			word := m.Word(q.I, q.KW, q.N, d)
			if q.Next != next || q.Last != last || q.Class != class || q.Word != word {
				t.Fatalf("mask %d (%v) query %d %+v: rendered Go gives hull (%d, %d) class %d word %x; the plan (%d, %d) %d %x",
					k, p.Pattern, n, queries[k][n], q.Next, q.Last, q.Class, q.Word, next, last, class, word)
			}
		}
	}
}
