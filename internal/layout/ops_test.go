package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// apiPaths are the beginnings of the local API's paths.
var apiPaths = []string{"/v1/", "/healthz", "/metrics", "/mcp"}

// TestAPIPathsOnlyInTheTable: the local API's paths are spelled in one
// place, the table of operations (internal/ops). A route, a tool's call or a
// CLI command's call made anywhere else would be an operation outside the
// table. (upstream/ clients speak to other services, whose paths may look
// alike: Q-Day's /v1/continuity.)
func TestAPIPathsOnlyInTheTable(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range []string{"cmd", "daemon", "internal", "packaging"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() {
				if rel == filepath.Join("internal", "ops") || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				for _, p := range apiPaths {
					if strings.HasPrefix(s, p) {
						t.Errorf("%s: the API path %q outside the table of operations (internal/ops): call or route it through the table", fset.Position(lit.Pos()), s)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
