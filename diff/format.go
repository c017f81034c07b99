package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/planner"
)

// FormatVersion is the version of the JSON diff format.
const FormatVersion = "1"

// Totals count the devices of a diff by status and their actions by kind.
type Totals struct {
	Devices   int `json:"devices"`
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
	Added     int `json:"added"`
	Removed   int `json:"removed"`
	Errors    int `json:"errors"`
	Add       int `json:"add"`
	Change    int `json:"change"`
	Delete    int `json:"delete"`
	// Rollouts counts the Rollout documents that differ.
	Rollouts int `json:"rollouts,omitempty"`
}

// Totals counts the result.
func (r *Result) Totals() Totals {
	t := Totals{Devices: len(r.Devices) + r.Unchanged, Unchanged: r.Unchanged, Rollouts: len(r.Rollouts)}
	for _, d := range r.Devices {
		switch d.Status {
		case Added:
			t.Added++
		case Removed:
			t.Removed++
		case Changed:
			t.Changed++
		case Failed:
			t.Errors++
		}
		if d.Plan != nil {
			s := d.Plan.Summary()
			t.Add, t.Change, t.Delete = t.Add+s.Add, t.Change+s.Change, t.Delete+s.Delete
		}
	}
	return t
}

// String is the last line of a text diff.
func (t Totals) String() string {
	changing := t.Added + t.Removed + t.Changed
	var b strings.Builder
	switch {
	case changing == 0 && t.Errors == 0 && t.Rollouts == 0:
		fmt.Fprintf(&b, "No changes: %s, none changes.", planner.Count(t.Devices, "device"))
		return b.String()
	case changing == 0 && t.Errors == 0:
		fmt.Fprintf(&b, "No plan changes: %s, none changes; %s changed.", planner.Count(t.Devices, "device"), planner.Count(t.Rollouts, "rollout"))
		return b.String()
	}
	fmt.Fprintf(&b, "%d of %s change (%d added, %d removed, %d changed)", changing, planner.Count(t.Devices, "device"), t.Added, t.Removed, t.Changed)
	if t.Errors > 0 {
		fmt.Fprintf(&b, ", %d with errors", t.Errors)
	}
	fmt.Fprintf(&b, ", %d unchanged. Plan: %d to add, %d to change, %d to delete.", t.Unchanged, t.Add, t.Change, t.Delete)
	if t.Rollouts > 0 {
		fmt.Fprintf(&b, " %s changed.", planner.Count(t.Rollouts, "rollout"))
	}
	return b.String()
}

// WriteText writes the diff for people: for every device that changes,
// its status, its rollout wave and when it takes the change (when a
// rollout governs it) and the planner's text plan; for every device that
// cannot be planned, why; the changed profiles and rollouts; warnings;
// and the totals.
func WriteText(w io.Writer, r *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Diff of %s → %s\n", describe(r.Base), describe(r.Head))
	for _, d := range r.Devices {
		fmt.Fprintf(&b, "\n=== %s: %s", d.Name, d.Status)
		if d.Path != "" {
			fmt.Fprintf(&b, " (%s)", d.Path)
		}
		b.WriteString("\n")
		if d.Note != "" {
			fmt.Fprintf(&b, "Note: %s\n", d.Note)
		}
		if d.Err != nil {
			fmt.Fprintf(&b, "Error: %s\n", indent(d.Err.Error(), "  "))
			continue
		}
		if d.Rollout != nil {
			fmt.Fprintf(&b, "Rollout: %s\n", d.Rollout)
		}
		if err := planner.WriteText(&b, shownPlan(d)); err != nil {
			return err
		}
	}
	if len(r.Profiles) > 0 {
		b.WriteString("\nProfiles changed:\n")
		for _, p := range r.Profiles {
			fmt.Fprintf(&b, "  %s\n", p.Summary(0))
		}
	}
	if len(r.Rollouts) > 0 {
		b.WriteString("\nRollouts changed:\n")
		for _, c := range r.Rollouts {
			fmt.Fprintf(&b, "  %s\n", c.Summary())
			for _, l := range append(c.FieldLines(), c.DeviceLines(0)...) {
				fmt.Fprintf(&b, "    %s\n", l)
			}
		}
	}
	for _, w := range r.Warnings() {
		fmt.Fprintf(&b, "\nWarning: %s\n", w)
	}
	fmt.Fprintf(&b, "\n%s\n", r.Totals())
	_, err := io.WriteString(w, b.String())
	return err
}

// shownPlan is the plan of d as text and markdown show it: the layer of
// each action only when a profile applies to the device (otherwise every
// action is its own Device document's).
func shownPlan(d Device) *planner.Changeset {
	if d.Profiles || d.Plan == nil {
		return d.Plan
	}
	cs := *d.Plan
	cs.Actions = append([]planner.Action(nil), cs.Actions...)
	for i := range cs.Actions {
		cs.Actions[i].Origin = ""
	}
	return &cs
}

// describe names a revision in a header: "main (1a2b3c4d5e6f)".
func describe(r Revision) string {
	if r.Commit == "" {
		return r.Name
	}
	return fmt.Sprintf("%s (%s)", r.Name, short(r.Commit))
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// indent indents every line but the first.
func indent(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// JSONDiff is the machine-readable form of a diff.
type JSONDiff struct {
	FormatVersion string       `json:"formatVersion"`
	Base          Revision     `json:"base"`
	Head          Revision     `json:"head"`
	Resolved      bool         `json:"resolved"`
	Devices       []JSONDevice `json:"devices"`
	// Profiles are the changed profiles and the devices each reaches.
	Profiles []ProfileChange `json:"profiles,omitempty"`
	// Rollouts are the changed Rollout documents and the devices each
	// governs.
	Rollouts []RolloutChange `json:"rollouts,omitempty"`
	// Warnings are what is worth a look but no error (devices that
	// render to nothing).
	Warnings []string `json:"warnings,omitempty"`
	Totals   Totals   `json:"totals"`
}

// JSONDevice is one device of a JSONDiff.
type JSONDevice struct {
	Device string            `json:"device"`
	Status Status            `json:"status"`
	Path   string            `json:"path,omitempty"`
	Plan   *planner.JSONPlan `json:"plan,omitempty"`
	Error  string            `json:"error,omitempty"`
	Note   string            `json:"note,omitempty"`
	// Rollout is set when a rollout governs the device's change.
	Rollout *JSONRollout `json:"rollout,omitempty"`
}

// JSON returns the machine-readable form of the diff.
func (r *Result) JSON() JSONDiff {
	out := JSONDiff{FormatVersion: FormatVersion, Base: r.Base, Head: r.Head, Resolved: r.Resolved, Devices: []JSONDevice{}, Profiles: r.Profiles,
		Rollouts: r.Rollouts, Warnings: r.Warnings(), Totals: r.Totals()}
	for _, d := range r.Devices {
		jd := JSONDevice{Device: d.Name, Status: d.Status, Path: d.Path, Note: d.Note}
		if d.Plan != nil {
			p := d.Plan.JSON()
			jd.Plan = &p
		}
		if d.Err != nil {
			jd.Error = d.Err.Error()
		}
		if d.Rollout != nil {
			jd.Rollout = d.Rollout.JSON()
		}
		out.Devices = append(out.Devices, jd)
	}
	return out
}

// WriteJSON writes the diff for machines, indented, with a final newline.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r.JSON())
}

// restarts counts the actions of a plan that restart a service: restarts,
// and updates that restart it whole.
func restarts(cs *planner.Changeset) int {
	n := 0
	for _, a := range cs.Actions {
		if a.Type == planner.Restart || a.Restart {
			n++
		}
	}
	return n
}

// downloadRE finds what a resolved model's action says it downloads, in
// the form of printable.HumanBytes: "…, 1.2 MB to download".
var downloadRE = regexp.MustCompile(`([0-9]+(?:\.[0-9]+)?) ([kMGTPE]?)B to download`)

// download adds up what a plan's model actions download, from their
// reasons (rounded as they print it). ok is false when none downloads.
func download(cs *planner.Changeset) (bytes int64, ok bool) {
	for _, a := range cs.Actions {
		if a.Kind != planner.KindModel || a.Type == planner.Delete {
			continue
		}
		m := downloadRE.FindStringSubmatch(a.Reason)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			continue
		}
		mult := 1.0
		if m[2] != "" {
			for range strings.Index("kMGTPE", m[2]) + 1 {
				mult *= 1000
			}
		}
		bytes += int64(v * mult)
		ok = true
	}
	return bytes, ok
}
