package layering

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// cmd/tend is thin (DESIGN.md: flags → calls): no function of it is
// longer than maxCmdFunc lines, its body counted from { to }, and the
// files of its CI commands import no node's package (they build for
// every platform, and take their config from config, not agent).
const (
	cmdTend    = "cmd/tend"
	maxCmdFunc = 40
)

// ciCommandFiles are the files of cmd/tend's CI commands.
var ciCommandFiles = []string{"validate.go", "render.go", "diff.go", "publish.go", "notify.go", "schema.go", "fleet.go"}

// parsedFile is a Go file of a package, parsed.
type parsedFile struct {
	name string
	file *ast.File
}

// parseFiles parses the Go files of srcs (file name → source), in name
// order.
func parseFiles(fset *token.FileSet, srcs map[string]string) ([]parsedFile, error) {
	names := make([]string, 0, len(srcs))
	for name := range srcs {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]parsedFile, 0, len(names))
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, srcs[name], parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		out = append(out, parsedFile{name, f})
	}
	return out, nil
}

// longFuncs returns one line per function of files whose body is longer
// than max lines, naming it, where it starts and its length.
func longFuncs(fset *token.FileSet, files []parsedFile, max int) []string {
	var bad []string
	for _, f := range files {
		for _, d := range f.file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.Body.Rbrace).Line - fset.Position(fd.Body.Lbrace).Line + 1
			if n > max {
				bad = append(bad, fmt.Sprintf("%s:%d: %s is %d lines long: %s holds no function over %d lines; move its logic into a package, or split it",
					f.name, fset.Position(fd.Pos()).Line, funcName(fd), n, cmdTend, max))
			}
		}
	}
	return bad
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		t, star = s.X, "*"
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + star + id.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}

// nodeImports returns one line per file of names among files that imports
// a node's package (see nodeOnly), and per name that is not among them.
func nodeImports(files []parsedFile, names []string) []string {
	var bad []string
	for _, name := range names {
		i := slices.IndexFunc(files, func(f parsedFile) bool { return f.name == name })
		if i < 0 {
			bad = append(bad, fmt.Sprintf("%s has no file %s: update ciCommandFiles in internal/layering", cmdTend, name))
			continue
		}
		for _, spec := range files[i].file.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			rel, ok := strings.CutPrefix(path, module)
			for _, node := range nodeOnly {
				if ok && under(rel, node) {
					bad = append(bad, fmt.Sprintf("%s, of a CI command, imports %s, which acts on a node: load the config with config", name, rel))
				}
			}
		}
	}
	return bad
}

// cmdTendFiles parses the non-test Go files of cmd/tend.
func cmdTendFiles(t *testing.T, fset *token.FileSet) []parsedFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, cmdTend, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files in %s: %v", cmdTend, err)
	}
	srcs := map[string]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(p)] = string(b)
	}
	files, err := parseFiles(fset, srcs)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestCmdTendIsThin(t *testing.T) {
	fset := token.NewFileSet()
	files := cmdTendFiles(t, fset)
	for _, line := range longFuncs(fset, files, maxCmdFunc) {
		t.Error(line)
	}
	for _, line := range nodeImports(files, ciCommandFiles) {
		t.Error(line)
	}
}

// TestThinFindsBrokenRules feeds the checks files that break each rule
// once, so the test above cannot pass by checking nothing.
func TestThinFindsBrokenRules(t *testing.T) {
	long := "package main\n\nfunc short() {\n}\n\ntype cmd struct{}\n\nfunc (c *cmd) run() {\n" + strings.Repeat("\tprintln()\n", 4) + "}\n"
	ci := "package main\n\nimport (\n\t\"fmt\"\n\n\t\"" + module + "agent\"\n\t\"" + module + "config\"\n)\n"
	fset := token.NewFileSet()
	files, err := parseFiles(fset, map[string]string{"apply.go": long, "diff.go": ci})
	if err != nil {
		t.Fatal(err)
	}
	got := append(longFuncs(fset, files, 5), nodeImports(files, []string{"diff.go", "gone.go"})...)
	want := []string{
		"apply.go:8: (*cmd).run is 6 lines long: cmd/tend holds no function over 5 lines; move its logic into a package, or split it",
		"diff.go, of a CI command, imports agent, which acts on a node: load the config with config",
		"cmd/tend has no file gone.go: update ciCommandFiles in internal/layering",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the checks found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
