package gen

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"

	"github.com/attngen/attngen/spec"
)

// TestHeadParamsPackageAPI: a spec with head parameters generates a
// package whose entry points take a HeadParams (one []int32 field per
// parameter, in the mask's order) after their data argument and before the
// Shape, whose Args has a Heads field, and which exports ErrHeadParam; the
// package type-checks against the runtime. A spec without head parameters
// generates none of it.
func TestHeadParamsPackageAPI(t *testing.T) {
	for _, c := range []struct {
		src  string
		data string // the data argument before heads, or ""
	}{
		{"name: ph\nhead_dim: 128\npage_size: 16\nhead_params:\n  window: {min: 1, max: 8192}\n  sinks: {min: 0, max: 64}\n" +
			"mask: {union: [{global: {tokens: sinks}}, {window: {size: window}}]}\n", ""},
		{"name: phdocs\nhead_dim: 64\ncausal: false\nhead_params:\n  left: {min: 0, max: 90}\n  Right: {min: 0, max: 40}\n" +
			"mask: {intersect: [{document: {}}, {window: {left: left, right: Right}}]}\n", "docs"},
		{"name: plain\nhead_dim: 64\nmask: {window: {size: 30}}\n", ""},
	} {
		s, files, pkg := checkedPackage(t, c.src)
		api := string(files["attention.go"])
		if len(s.HeadParams) == 0 {
			if strings.Contains(api, "HeadParam") || strings.Contains(api, "heads HeadParams") {
				t.Errorf("%s: a package without head parameters mentions them", s.Name)
			}
			continue
		}
		hp := pkg.Scope().Lookup("HeadParams")
		if hp == nil {
			t.Fatalf("%s: no HeadParams type", s.Name)
		}
		st, ok := hp.Type().Underlying().(*types.Struct)
		if !ok || st.NumFields() != len(s.HeadParams) {
			t.Fatalf("%s: HeadParams is %v, want a struct of %d fields", s.Name, hp.Type().Underlying(), len(s.HeadParams))
		}
		for k, h := range s.HeadParams {
			f := st.Field(k)
			if want := strings.ToUpper(h.Name[:1]) + h.Name[1:]; f.Name() != want || f.Type().String() != "[]int32" || !f.Exported() {
				t.Errorf("%s: HeadParams field %d is %s %s, want %s []int32", s.Name, k, f.Name(), f.Type(), want)
			}
		}
		for _, h := range s.HeadParams {
			want := "// " + strings.ToUpper(h.Name[:1]) + h.Name[1:] + " holds head parameter " + h.Name
			if !strings.Contains(api, want) || !strings.Contains(api, "HeadsQ entries") {
				t.Errorf("%s: HeadParams lacks the doc comment %q ... HeadsQ entries", s.Name, want)
			}
		}
		if e := pkg.Scope().Lookup("ErrHeadParam"); e == nil {
			t.Errorf("%s: no ErrHeadParam", s.Name)
		}
		entries := []string{"Forward", "ForwardVariant", "Forward16", "ForwardVariant16", "Backward", "BackwardVariant"}
		if s.PageSize > 0 {
			entries = append(entries, "ForwardPaged", "ForwardPagedVariant")
		}
		for _, name := range entries {
			fn, ok := pkg.Scope().Lookup(name).(*types.Func)
			if !ok {
				t.Fatalf("%s: no %s", s.Name, name)
			}
			ps := fn.Type().(*types.Signature).Params()
			n := ps.Len()
			if ps.At(n-1).Name() != "s" || ps.At(n-2).Name() != "heads" || ps.At(n-2).Type() != hp.Type() {
				t.Errorf("%s: %s%v: want heads HeadParams just before the Shape", s.Name, name, ps)
			}
			if c.data != "" && ps.At(n-3).Name() != c.data {
				t.Errorf("%s: %s%v: want %s before heads", s.Name, name, ps, c.data)
			}
		}
		args, _ := pkg.Scope().Lookup("Args").Type().Underlying().(*types.Struct)
		found := false
		for i := 0; i < args.NumFields(); i++ {
			found = found || args.Field(i).Name() == "Heads" && args.Field(i).Type() == hp.Type()
		}
		if !found {
			t.Errorf("%s: Args has no Heads HeadParams field", s.Name)
		}
		if !strings.Contains(api, "// The mask takes head parameters") {
			t.Errorf("%s: the package documentation does not explain the head parameters", s.Name)
		}
	}
}

// checkedPackage generates the CPU package of the spec src and
// type-checks its attention.go and mask.go against the runtime: the spec,
// the generated files and the checked package.
func checkedPackage(t *testing.T, src string) (*spec.Spec, map[string][]byte, *types.Package) {
	t.Helper()
	s, err := spec.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(s, CPUTarget, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := PackageFiles(s, p, nil, "example.com/"+s.Name, s.Name, "gen test")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var asts []*ast.File
	for _, name := range []string{"attention.go", "mask.go"} {
		f, err := parser.ParseFile(fset, name, files[name], parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		asts = append(asts, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("example.com/"+s.Name, fset, asts, nil)
	if err != nil {
		t.Fatalf("%s: the generated package does not type-check: %v", s.Name, err)
	}
	return s, files, pkg
}
