package runner

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of runner may be, from its
// declaration to its closing brace: a longer one is several steps that
// want names of their own (issue #41).
const maxFuncLines = 80

// TestFunctionLength: no function of runner (tests aside) is longer than
// maxFuncLines.
func TestFunctionLength(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
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
			checked++
			from, to := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := to.Line - from.Line + 1; n > maxFuncLines {
				t.Errorf("%s:%d: %s is %d lines, more than %d", f, from.Line, fd.Name.Name, n, maxFuncLines)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d functions in %d files: the walk is wrong", checked, len(files))
	}
}
