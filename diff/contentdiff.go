package diff

import (
	"fmt"
	"html"
	"strings"

	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// BaseHead labels the two sides of the diffs of tend diff.
var BaseHead = planner.DiffOptions{From: "base", To: "head"}

// addDiffs sets the diff of every update of cs: the resource as base
// declares it against head. An unresolved model has none: its reason
// already names the old and new ref, and nothing else is known of it.
func addDiffs(cs *planner.Changeset, base, head *render.Desired, resolved bool) {
	if base == nil {
		return
	}
	cs.AddDiffs(func(a planner.Action) (planner.Content, planner.Content, bool) {
		if a.Kind == planner.KindModel && !resolved {
			return planner.Content{}, planner.Content{}, false
		}
		before, ok := render.Describe(base.Specs[a.Resource])
		if !ok {
			return planner.Content{}, planner.Content{}, false
		}
		after, ok := render.Describe(head.Specs[a.Resource])
		return before, after, ok
	}, BaseHead)
}

// mdDiffs is the diffs of a plan's updates as a pull-request comment shows
// them: the resource, then its diff in a diff block.
func mdDiffs(cs *planner.Changeset) string {
	if cs == nil {
		return ""
	}
	var b strings.Builder
	for _, a := range cs.Actions {
		if a.Diff == "" {
			continue
		}
		fence := codeFence(a.Diff)
		fmt.Fprintf(&b, "<code>%s</code>\n\n%sdiff\n%s%s\n\n", html.EscapeString(a.Resource), fence, a.Diff, fence)
	}
	return b.String()
}

// withoutDiffs returns d with the diffs of its plan left out, and a note
// saying so, for a comment that has no room for them.
func withoutDiffs(d Device) Device {
	if d.Plan == nil {
		return d
	}
	cs := *d.Plan
	cs.Actions = make([]planner.Action, len(d.Plan.Actions))
	left := false
	for i, a := range d.Plan.Actions {
		left = left || a.Diff != ""
		a.Diff = ""
		cs.Actions[i] = a
	}
	if !left {
		return d
	}
	d.Plan = &cs
	note := "its content diffs are left out of this comment (GitHub's comment size limit): run `tend diff --diff` to see them"
	if d.Note != "" {
		note = d.Note + "; " + note
	}
	d.Note = note
	return d
}
