package layering

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the module's folder, from this package's.
const root = "../.."

// designFlow returns the stages of the flow DESIGN.md draws: the first
// line of the picture under "## Flow and packages".
func designFlow(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "## Flow and packages\n")
	_, picture, ok2 := strings.Cut(after, "```\n")
	if !ok || !ok2 {
		t.Fatal("DESIGN.md has no picture under ## Flow and packages")
	}
	line, _, _ := strings.Cut(picture, "\n")
	stages := strings.Fields(strings.ReplaceAll(line, "──▶", " "))
	if len(stages) < 5 || stages[0] != "source" {
		t.Fatalf("DESIGN.md's flow %q is not source ──▶ …", line)
	}
	return stages
}

// chainRE finds a flow drawn in prose: two or more words joined by arrows.
var chainRE = regexp.MustCompile(`[a-z]+(?:\s*(?:→|──▶)\s*[a-z]+)+`)

// flowErrors returns one line per doc whose text (by file) draws a flow
// that is not a run of the stages of flow, in flow's order.
func flowErrors(flow []string, docs map[string]string) []string {
	var bad []string
	for file, text := range docs {
		for _, chain := range chainRE.FindAllString(text, -1) {
			drawn := strings.Fields(strings.NewReplacer("→", " ", "──▶", " ").Replace(chain))
			if !isRun(flow, drawn) {
				bad = append(bad, fmt.Sprintf("%s draws the flow %s; DESIGN.md draws %s: draw a run of it, in its order and words",
					file, strings.Join(drawn, " → "), strings.Join(flow, " → ")))
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// isRun reports whether part is a run of consecutive elements of whole.
func isRun(whole, part []string) bool {
	for i := range whole {
		if i+len(part) <= len(whole) && slices.Equal(whole[i:i+len(part)], part) {
			return true
		}
	}
	return false
}

// comment is the text of the // comments of a Go file, one line.
func comment(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "//"); ok {
			b.WriteString(c)
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// TestDocsDrawDesignFlow holds the package comments to DESIGN.md's
// picture: a doc.go that draws the flow (source → manifest → …) draws a
// piece of the one DESIGN.md draws.
func TestDocsDrawDesignFlow(t *testing.T) {
	flow := designFlow(t)
	docs := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() == "doc.go" {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			docs[filepath.ToSlash(rel)] = comment(string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 20 {
		t.Fatalf("found %d doc.go files: not the module", len(docs))
	}
	for _, line := range flowErrors(flow, docs) {
		t.Error(line)
	}
}

// TestFlowErrorsFindsAStrayFlow feeds flowErrors docs that draw the flow
// right and wrong, so the test above cannot pass by finding nothing.
func TestFlowErrorsFindsAStrayFlow(t *testing.T) {
	flow := []string{"source", "manifest", "render", "planner", "status"}
	got := flowErrors(flow, map[string]string{
		"a/doc.go": comment("// In the flow (source → manifest\n// → render) it parses."),
		"b/doc.go": comment("// It is first (source ──▶ manifest)."),
		"c/doc.go": comment("// (render → planner → report)"),
		"d/doc.go": comment("// (manifest → source)"),
	})
	want := []string{
		"c/doc.go draws the flow render → planner → report; DESIGN.md draws source → manifest → render → planner → status: draw a run of it, in its order and words",
		"d/doc.go draws the flow manifest → source; DESIGN.md draws source → manifest → render → planner → status: draw a run of it, in its order and words",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("flowErrors found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
