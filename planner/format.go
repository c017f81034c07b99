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
		fmt.Fprintf(&b, "  %s %-*s  %s\n", a.Type.Symbol(), width, a.Resource, a.Reason)
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
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(cs.JSON())
}
