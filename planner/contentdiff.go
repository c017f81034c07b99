package planner

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"
)

// Content is one side of the diff of an update: what a resource is on the
// node (or at the base revision) or as declared. A file has its bytes in
// Data; a model or service has the fields of its spec, one per line, in
// Fields. The planner never reads it itself: the observer and the
// renderer hand it over, and only for the actions a diff is asked for.
type Content struct {
	// Fields are named spec values in a fixed order: a model's ref and
	// tag, a service's command and env.NAME entries. Values are printed
	// as they are.
	Fields []Field
	// Data is a file's content, or its first bytes when it was too large
	// to read whole (Size is then larger than len(Data)).
	Data []byte
	Size int64
	// Sensitive hides Data: the diff says so and gives sizes and digests.
	Sensitive bool
}

// Partial reports whether Data holds only the start of the content.
func (c Content) Partial() bool { return int64(len(c.Data)) < c.Size }

// DiffOptions say how ContentDiff labels and bounds a diff.
type DiffOptions struct {
	// From and To name the two sides in the header of a unified diff:
	// "node" and "declared" for a plan, "base" and "head" for tend diff.
	From, To string
	// MaxLines bounds the lines of one diff; 0 means DefaultDiffLines.
	MaxLines int
}

// DefaultDiffLines is how many lines of one resource's diff are shown.
const DefaultDiffLines = 100

// MaxDiffBytes is the largest content diffed line by line; a larger one
// is described by its sizes. Observers read no more of a file than this.
const MaxDiffBytes = 1 << 20

// SensitiveHidden stands in for the content of a file marked sensitive.
const SensitiveHidden = "(sensitive content hidden)"

// ContentDiff returns what an update changes in words people read: one
// "name: old → new" line per plain field that changes (a file's mode, a
// service's replicas, command or env.NAME, a model's ref or tag; each name
// once, the sides' description of it before the planner's), then,
// for a file whose content changes, a unified diff of its text, or
// "binary content differs (N bytes → M bytes)", or for a sensitive file
// SensitiveHidden with sizes and digests. It is "" when there is nothing
// to add to the action's reason. A diff longer than opts.MaxLines is cut
// and says how many lines were left out.
func ContentDiff(a Action, before, after Content, opts DiffOptions) string {
	// A field the two sides describe is printed from them, once: a
	// container's image is its ref there, and its digest image.digest.
	described := make(map[string]bool, len(before.Fields)+len(after.Fields))
	for _, f := range slices.Concat(before.Fields, after.Fields) {
		described[f.Name] = true
	}
	var lines []string
	for _, c := range a.Changes {
		// A model's include is in its described fields.
		if c.Field != FieldContent && c.Field != FieldSpec && c.Field != FieldDigest && c.Field != FieldInclude && !described[c.Field] {
			lines = append(lines, fieldLine(c.Field, c.From, c.To))
		}
	}
	lines = append(lines, fieldChanges(before.Fields, after.Fields)...)
	if content := changeOf(a, FieldContent); content != nil {
		lines = append(lines, contentLines(a, *content, before, after, opts)...)
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(capLines(lines, opts.maxLines()), "\n") + "\n"
}

// AddDiffs sets the Diff of every update for which contents gives the two
// sides.
func (c *Changeset) AddDiffs(contents func(a Action) (before, after Content, ok bool), opts DiffOptions) {
	for i, a := range c.Actions {
		if a.Type != Update {
			continue
		}
		if before, after, ok := contents(a); ok {
			c.Actions[i].Diff = ContentDiff(a, before, after, opts)
		}
	}
}

func (o DiffOptions) maxLines() int {
	if o.MaxLines > 0 {
		return o.MaxLines
	}
	return DefaultDiffLines
}

// fieldChanges returns a line for every field that differs, in the order
// of after, then the fields only before has.
func fieldChanges(before, after []Field) []string {
	old := make(map[string]string, len(before))
	for _, f := range before {
		old[f.Name] = f.Value
	}
	seen := make(map[string]bool, len(after))
	var out []string
	for _, f := range after {
		seen[f.Name] = true
		if v, ok := old[f.Name]; !ok || v != f.Value {
			out = append(out, fieldLine(f.Name, v, f.Value))
		}
	}
	for _, f := range before {
		if !seen[f.Name] {
			out = append(out, fieldLine(f.Name, f.Value, ""))
		}
	}
	return out
}

// fieldLine prints one changed field; an empty side is "(none)".
func fieldLine(name, from, to string) string {
	return name + ": " + orNone(from) + " → " + orNone(to)
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return ShortDigest(v)
}

func changeOf(a Action, field string) *Change {
	for i := range a.Changes {
		if a.Changes[i].Field == field {
			return &a.Changes[i]
		}
	}
	return nil
}

// contentLines describes a change of a file's content.
func contentLines(a Action, digests Change, before, after Content, opts DiffOptions) []string {
	sizes := fmt.Sprintf("%s → %s", Count(int(before.Size), "byte"), Count(int(after.Size), "byte"))
	switch {
	case a.Sensitive || before.Sensitive || after.Sensitive:
		return []string{fmt.Sprintf("%s %s, %s → %s", SensitiveHidden, sizes, orNone(digests.From), orNone(digests.To))}
	case strings.HasPrefix(digests.From, "<"):
		return nil // not a file on the node: the reason says what is there
	case binary(before.Data) || binary(after.Data):
		return []string{"binary content differs (" + sizes + ")"}
	case before.Partial() || after.Partial() || before.Size > MaxDiffBytes || after.Size > MaxDiffBytes:
		return []string{fmt.Sprintf("content differs (%s; larger than %s, not diffed line by line)", sizes, Count(MaxDiffBytes, "byte"))}
	}
	path := FilePath(a.Resource)
	text := udiff.Unified(path+" ("+opts.From+")", path+" ("+opts.To+")", string(before.Data), string(after.Data))
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = visible(l)
	}
	return lines
}

// visible writes the control characters of a line of content (a carriage
// return, an escape) as \xNN, so that content cannot rewrite what a
// terminal shows of the plan.
func visible(line string) string {
	if !strings.ContainsFunc(line, control) {
		return line
	}
	var b strings.Builder
	for _, r := range line {
		if control(r) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func control(r rune) bool { return r != '\t' && unicode.IsControl(r) }

// binary reports whether data is not text: not valid UTF-8, or holding a
// NUL byte.
func binary(data []byte) bool {
	return !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0
}

// capLines keeps the first max lines and says how many were left out.
func capLines(lines []string, max int) []string {
	if len(lines) <= max {
		return lines
	}
	left := len(lines) - max
	word := "lines"
	if left == 1 {
		word = "line"
	}
	return append(lines[:max:max], fmt.Sprintf("… %d more %s of diff left out", left, word))
}

// diffIndent sets an action's diff under its line in a text plan.
const diffIndent = "      "

// writeDiff writes diff indented under its action, or nothing.
func writeDiff(b *strings.Builder, diff string) {
	for line := range strings.Lines(diff) {
		b.WriteString(diffIndent)
		b.WriteString(line)
	}
}
