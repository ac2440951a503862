package gen

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTargetFree: gen never imports an emitter (ARCHITECTURE.md: the plan is
// target-free; emitters depend on it, never the reverse).
func TestTargetFree(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(path, "/emit/") || strings.Contains(path, "avo") || strings.Contains(path, "yaml") {
				t.Errorf("%s imports %s: gen must not import emitters or carry YAML types", f, path)
			}
		}
	}
}
