package nft

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoTextOutsideEmit: in this package's non-test
// files, only emit.go builds text. Elsewhere a fmt print function other
// than Errorf, a Write/WriteString call or a string conversion to word
// would let a value reach the ruleset without a typed constructor.
func TestNoTextOutsideEmit(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "emit.go" {
			continue
		}
		checked++
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range lint(fset, file) {
			t.Error(p)
		}
	}
	if checked == 0 {
		t.Fatal("no file checked")
	}
}

// TestLintCatches proves the lint can fail.
func TestLintCatches(t *testing.T) {
	src := `package nft
func f(t *text, name string) {
	t.b.WriteString(name)
	_ = fmt.Sprintf("chain %s", name)
	_ = word{name}
	_ = word{s: name}
	_ = fmt.Errorf("ok %s", name)
}`
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := lint(fset, file); len(got) != 4 {
		t.Fatalf("want 4 problems, got %d: %q", len(got), got)
	}
}

func lint(fset *token.FileSet, file *ast.File) []string {
	var out []string
	report := func(n ast.Node, msg string) { out = append(out, fset.Position(n.Pos()).String()+": "+msg) }
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if id, ok := n.Type.(*ast.Ident); ok && id.Name == "word" && len(n.Elts) > 0 {
				report(n, "word built outside emit.go")
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			name := sel.Sel.Name
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "fmt" && name != "Errorf" {
				report(n, "fmt."+name+" outside emit.go")
			}
			if strings.HasPrefix(name, "Write") {
				report(n, name+" outside emit.go")
			}
		}
		return true
	})
	return out
}
