package planner

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// FormatVersion is the version of the JSON plan format.
const FormatVersion = "1"

// SummaryLine is the last line of a text plan.
func (s Summary) String() string {
	return fmt.Sprintf("Plan: %d to add, %d to change, %d to delete, %d unchanged.", s.Add, s.Change, s.Delete, s.Unchanged)
}

// maxWidth caps the column of resource ids in text output.
const maxWidth = 48

// WriteText writes the plan for people: a header, one line per action and
// the summary line.
func WriteText(w io.Writer, cs *Changeset) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan for device %s at %s\n", cs.Device, cs.Revision)
	width := 0
	for _, a := range cs.Actions {
		width = max(width, len(a.Resource))
	}
	width = min(width, maxWidth) // one long path must not pad every line
	if len(cs.Actions) == 0 {
		b.WriteString("  No changes: the device matches its declaration.\n")
	}
	for _, a := range cs.Actions {
		fmt.Fprintf(&b, "  %s %-*s  %s%s\n", a.Type.Symbol(), width, a.Resource, a.Reason, OriginSuffix(a))
		writeSkipped(&b, a)
		writeDiff(&b, a.Diff)
	}
	b.WriteString("\n")
	b.WriteString(cs.Summary().String())
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// JSONPlan is the machine-readable form of a plan.
type JSONPlan struct {
	FormatVersion string   `json:"formatVersion"`
	Device        string   `json:"device"`
	Revision      string   `json:"revision"`
	Actions       []Action `json:"actions"`
	Summary       Summary  `json:"summary"`
	// Apply, in the output of an apply, says what it applied.
	Apply *JSONApply `json:"apply,omitempty"`
}

// JSON returns the machine-readable form of the plan.
func (c *Changeset) JSON() JSONPlan {
	actions := c.Actions
	if actions == nil {
		actions = []Action{}
	}
	return JSONPlan{FormatVersion: FormatVersion, Device: c.Device, Revision: c.Revision, Actions: actions, Summary: c.Summary()}
}

// WriteJSON writes the plan for machines, indented, with a final newline.
func WriteJSON(w io.Writer, cs *Changeset) error {
	return encodeJSON(w, cs.JSON())
}

// OriginSuffix is what a text plan prints after an action's reason: the
// layer its resource came from, in parentheses, or nothing.
func OriginSuffix(a Action) string {
	if a.Origin == "" {
		return ""
	}
	return "  (" + a.Origin + ")"
}

// writeSkipped writes, under an action an apply leaves out, why.
func writeSkipped(b *strings.Builder, a Action) {
	if a.Error != "" {
		fmt.Fprintf(b, "      error: will fail: %s\n", a.Error)
	}
	if a.Held != "" {
		fmt.Fprintf(b, "      held: %s\n", a.Held)
	}
}

// Count writes n and the noun one, in the plural unless n is 1: "1 action",
// "3 actions". Text output counts with it.
func Count(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// JSONApply says, in the JSON of an apply, what was applied.
type JSONApply struct {
	Applied    int      `json:"applied"`
	Actions    int      `json:"actions"`
	NotApplied []string `json:"notApplied"`
	Error      string   `json:"error,omitempty"`
}

// WriteApplyJSON writes the plan of an apply and what it applied: applied
// actions of the plan's, the others not (err says why, or is nil).
func WriteApplyJSON(w io.Writer, cs *Changeset, applied []Action, err error) error {
	done := make(map[string]bool, len(applied))
	for _, a := range applied {
		done[a.Resource] = true
	}
	p := cs.JSON()
	p.Apply = &JSONApply{Applied: len(applied), Actions: len(cs.Actions), NotApplied: []string{}}
	for _, a := range cs.Actions {
		if !done[a.Resource] {
			p.Apply.NotApplied = append(p.Apply.NotApplied, a.Resource)
		}
	}
	if err != nil {
		p.Apply.Error = err.Error()
	}
	return encodeJSON(w, p)
}

// encodeJSON writes v indented, with a final newline, and without
// escaping <, > and & (a reason may name "<directory>").
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
