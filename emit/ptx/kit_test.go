package ptx

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// kernelTypes are the kernels built on the toolkit.
var kernelTypes = []string{"fwd80", "bwdK", "hop"}

// TestKitNotShadowed checks the package's structure: each kernel type
// embeds the toolkit (*kit) and nothing else, and none of them declares a
// method or field whose name is one of the toolkit's (its methods, its
// fields and those of its geometry), so that every kernel runs the
// toolkit's pieces as they are and no kernel's piece silently replaces
// one for the pieces that call it.
func TestKitNotShadowed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	names := map[string]map[string]bool{} // type -> its fields and methods
	embeds := map[string][]string{}
	add := func(typ, name string) {
		if names[typ] == nil {
			names[typ] = map[string]bool{}
		}
		names[typ][name] = true
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) != 1 {
					continue
				}
				rt := d.Recv.List[0].Type
				if s, ok := rt.(*ast.StarExpr); ok {
					rt = s.X
				}
				if id, ok := rt.(*ast.Ident); ok {
					add(id.Name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					ts, ok := sp.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, fl := range st.Fields.List {
						if len(fl.Names) == 0 {
							e := fl.Type
							if s, ok := e.(*ast.StarExpr); ok {
								e = s.X
							}
							embeds[ts.Name.Name] = append(embeds[ts.Name.Name], e.(*ast.Ident).Name)
							continue
						}
						for _, n := range fl.Names {
							add(ts.Name.Name, n.Name)
						}
					}
				}
			}
		}
	}
	if got := strings.Join(embeds["kit"], " "); got != "geom" {
		t.Fatalf("kit embeds %q, want geom", got)
	}
	toolkit := map[string]bool{}
	for _, typ := range []string{"kit", "geom"} {
		if len(names[typ]) == 0 {
			t.Fatalf("no fields or methods of %s found", typ)
		}
		for n := range names[typ] {
			if toolkit[n] {
				t.Errorf("kit redeclares its geometry's %s", n)
			}
			toolkit[n] = true
		}
	}
	for _, k := range kernelTypes {
		if got := strings.Join(embeds[k], " "); got != "kit" {
			t.Errorf("%s embeds %q, want kit alone", k, got)
		}
		var clash []string
		for n := range names[k] {
			if toolkit[n] {
				clash = append(clash, n)
			}
		}
		sort.Strings(clash)
		if len(clash) > 0 {
			t.Errorf("%s redeclares the toolkit's %s", k, strings.Join(clash, ", "))
		}
	}
}

// calls maps each function of the package (Type.method or func) to the
// names it calls as methods or functions and the Op constants it uses.
func packageCalls(t *testing.T) map[string]map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				rt := fd.Recv.List[0].Type
				if s, ok := rt.(*ast.StarExpr); ok {
					rt = s.X
				}
				if id, ok := rt.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			used := map[string]bool{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					switch fn := n.Fun.(type) {
					case *ast.SelectorExpr:
						used[fn.Sel.Name] = true
					case *ast.Ident:
						used[fn.Name] = true
					}
				case *ast.Ident:
					if strings.HasPrefix(n.Name, "Op") {
						used[n.Name] = true
					}
				}
				return true
			})
			out[name] = used
		}
	}
	return out
}

// TestScoreStageOnce checks that the score stage is written once: each of
// its concepts (score.go) is one toolkit method, called by every kernel
// at its place (scoreStage in the tile body of the sm_80 forward, the
// sm_90a forward and both backward kernels; scoreGrad in both backward
// kernels; prob in the online softmax and both backward kernels; rowTotal
// in the epilogue, which both forwards run; scoreHead where each kernel
// sets its query head; sinkGrad in the dq kernel), and no other function
// exponentiates (OpEx2 only in prob, in softmax's rescale factor, in the
// soft-cap's tanh, in the sink's terms of rowTotal and sinkGrad).
func TestScoreStageOnce(t *testing.T) {
	calls := packageCalls(t)
	want := map[string][]string{
		"scoreStage": {"bwdK.kernelDKV", "bwdK.kernelDQ", "fwd80.compute", "hop.finishTile"},
		"scoreGrad":  {"bwdK.kernelDKV", "bwdK.kernelDQ"},
		"prob":       {"bwdK.kernelDKV", "bwdK.kernelDQ", "kit.softmax"},
		"rowTotal":   {"kit.finish"},
		"scoreHead":  {"bwdK.kernelDKV", "bwdK.kernelDQ", "fwd80.kernel", "hop.item"},
		"sinkGrad":   {"bwdK.kernelDQ"},
		"tanh":       {"kit.scoreMasked", "kit.scoreStage"},
		"softmax":    {"fwd80.compute", "hop.finishTile"},
		"finish":     {"fwd80.kernel", "hop.kernel"},
		"OpEx2":      {"kit.prob", "kit.rowTotal", "kit.sinkGrad", "kit.softmax", "kit.tanh"},
	}
	for callee, callers := range want {
		var got []string
		for fn, used := range calls {
			if used[callee] {
				got = append(got, fn)
			}
		}
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(callers, " ") {
			t.Errorf("%s is used by %v, want %v", callee, got, callers)
		}
	}
}
