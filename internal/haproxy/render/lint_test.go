package render

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoUnencodedOutput: in this package's non-test files,
// text can reach a file only through package encode. It fails on
//   - text/template or html/template,
//   - any fmt print function (Sprintf, Fprintf, ...) and strconv.Quote*,
//   - Write/WriteString calls (hand-built buffers),
//   - a %s, %v or %q in fmt.Errorf whose argument is not wrapped in
//     encode.Printable (errors reach Events and logs).
func TestNoUnencodedOutput(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		checked++
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range lint(fset, file) {
			t.Error(problem)
		}
	}
	if checked < 5 {
		t.Fatalf("only %d files checked", checked)
	}
}

// TestLintCatches proves the lint can fail.
func TestLintCatches(t *testing.T) {
	src := `package x
import (
	"fmt"
	"strings"
	"text/template"
)
func f(b *strings.Builder, r rule, err error) error {
	b.WriteString(r.Value)
	_ = fmt.Sprintf("acl x path %s", r.Value)
	_ = template.New("x")
	_ = fmt.Errorf("ok %d %w %s", r.Port, err, encode.Printable(r.Value))
	return fmt.Errorf("bad %v", r.Value)
}`
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := lint(fset, file)
	if len(got) != 4 {
		t.Fatalf("want 4 problems (template, WriteString, Sprintf, Errorf %%v), got %d: %q", len(got), got)
	}
}

func lint(fset *token.FileSet, file *ast.File) []string {
	var out []string
	report := func(n ast.Node, msg string) { out = append(out, fset.Position(n.Pos()).String()+": "+msg) }
	for _, imp := range file.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "text/template" || p == "html/template" {
			report(imp, "imports "+p)
		}
	}
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, _ := sel.X.(*ast.Ident)
		switch {
		case pkg != nil && pkg.Name == "fmt" && sel.Sel.Name == "Errorf":
			out = append(out, lintErrorf(fset, call)...)
		case pkg != nil && pkg.Name == "fmt":
			report(call, "fmt."+sel.Sel.Name+": build config text with package encode")
		case pkg != nil && pkg.Name == "strconv" && strings.Contains(sel.Sel.Name, "Quote"):
			report(call, "strconv."+sel.Sel.Name+" is not an HAProxy encoder")
		case strings.HasPrefix(sel.Sel.Name, "Write"):
			report(call, sel.Sel.Name+": build config text with package encode")
		}
		return true
	})
	return out
}

// lintErrorf pairs each verb of a constant format with its argument.
func lintErrorf(fset *token.FileSet, call *ast.CallExpr) []string {
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok {
		return []string{fset.Position(call.Pos()).String() + ": fmt.Errorf with a non-constant format"}
	}
	format, _ := strconv.Unquote(lit.Value)
	var out []string
	arg := 1
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0123456789.", format[j]) >= 0 {
			j++
		}
		if j >= len(format) || format[j] == '%' {
			i = j
			continue
		}
		if strings.IndexByte("svq", format[j]) >= 0 && arg < len(call.Args) && !isPrintable(call.Args[arg]) {
			out = append(out, fset.Position(call.Args[arg].Pos()).String()+": %"+string(format[j])+" argument not wrapped in encode.Printable")
		}
		arg++
		i = j
	}
	return out
}

func isPrintable(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, _ := sel.X.(*ast.Ident)
	return pkg != nil && pkg.Name == "encode" && sel.Sel.Name == "Printable"
}
