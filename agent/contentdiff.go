package agent

import (
	"context"

	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// PlanDiff labels the two sides of the diffs of a plan made on the node.
var PlanDiff = planner.DiffOptions{From: "node", To: "declared"}

// addDiffs sets the diff of every update of the plan: what its resource
// is on the node, as its driver describes it, against its declaration.
// Only updates are read, one at a time, and a file no further than
// planner.MaxDiffBytes. A resource that cannot be described gets a diff
// saying so; the plan itself stands.
func (r *Reconciler) addDiffs(ctx context.Context, t *tick) {
	d := t.res.Desired
	for i, a := range t.res.Plan.Actions {
		if a.Type != planner.Update {
			continue
		}
		spec := d.Specs[a.Resource]
		after, ok := render.Describe(spec)
		if !ok {
			continue
		}
		before, ok, err := t.node.applier.Describe(ctx, a.Resource, spec)
		switch {
		case err != nil:
			t.res.Plan.Actions[i].Diff = "(no diff: " + err.Error() + ")\n"
		case ok:
			t.res.Plan.Actions[i].Diff = planner.ContentDiff(a, before, after, PlanDiff)
		}
	}
}
