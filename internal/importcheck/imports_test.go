package importcheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/valetkit/valet"

// class orders import groups: the standard library, other modules, valet.
func class(path string) int {
	switch {
	case path == module || strings.HasPrefix(path, module+"/"):
		return 2
	case strings.Contains(strings.SplitN(path, "/", 2)[0], "."):
		return 1
	default:
		return 0
	}
}

var className = [...]string{"standard library", "other modules", "valet"}

func TestImportGroups(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", "vendor", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		checked++
		for _, problem := range fileProblems(t, path) {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s: %s (goimports -local %s -w %s)", rel, problem, module, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files: is the walk rooted at the module?", checked)
	}
}

// fileProblems returns what is wrong with one file's import groups.
func fileProblems(t *testing.T, path string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var problems []string
	last, lastLine, groupClass := -1, -1, -1
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		c := class(p)
		line := fset.Position(spec.Pos()).Line
		if spec.Doc != nil {
			line = fset.Position(spec.Doc.Pos()).Line
		}
		newGroup := lastLine < 0 || line > lastLine+1
		switch {
		case !newGroup && c != groupClass:
			problems = append(problems, p+" ("+className[c]+") shares a group with "+className[groupClass])
		case newGroup && c < last:
			problems = append(problems, p+" ("+className[c]+") comes after "+className[last])
		}
		if newGroup {
			groupClass = c
		}
		if c > last {
			last = c
		}
		lastLine = fset.Position(spec.End()).Line
	}
	return problems
}
