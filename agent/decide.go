package agent

import (
	"context"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/gating"
	"github.com/tend-dev/tend/render"
)

// HeldRelease says why a tick did not take a release (see gating.Held):
// the node kept its applied revision and only reverted drift to it.
type HeldRelease = gating.Held

// decide, between render and observe, asks the gating whether the tick
// takes its rendered target (see gating.Decider.Decide): a release the
// device's Rollout, its brakes' hub, its gate or a service's update lock
// holds, or one that is still staging, is held, and the tick then reads
// and renders the last applied commit, with every model and image at its
// applied digest, instead; its plan only reverts drift (see
// planReverts). The node is observed once, after the decision, whichever
// revision the tick takes.
//
// With a Stager (the agent's loop), a release whose models are not all in
// the store is staged in the background, as the decision says, and taken
// by the first tick that finds nothing left to download.
func (r *Reconciler) decide(ctx context.Context, t *tick) error {
	comp, snap := t.res.Composed, t.res.Snapshot
	if t.hold || comp == nil || snap == nil || t.res.Desired == nil {
		return nil // held already: the target's source is downloading
	}
	inv, err := t.node.applier.Inventory()
	if err != nil {
		return err
	}
	f, err := r.fetcher()
	if err != nil {
		return err
	}
	stager := r.Stager
	if t.upTo != StepApply {
		stager = nil // plan and render stage nothing
	}
	need := toStage(t.res.Desired)
	d, err := r.gating.Decide(ctx, gating.Input{Config: r.Config, Composed: comp, Snapshot: snap, Desired: t.res.Desired,
		Inventory: inv, Applied: f, Record: t.upTo == StepApply, Stages: stager != nil, Download: !need.empty(),
		Now: r.now, Logger: r.logger()})
	t.res.TargetRelease = targetRelease(d.Release, t.res.Desired)
	t.res.Wave, t.res.Rollout = d.Wave, d.Rollout
	if d.Seen {
		t.res.Release = &status.SeenRelease{FirstSeen: d.FirstSeen}
	}
	if err != nil {
		return err
	}
	switch d.Stager {
	case gating.StartStaging:
		st := stager.Stage(t.node, d.StageKey, snap.Revision.String(), need)
		t.res.Staging = &st
	case gating.KeepStaged:
		stager.Supersede(d.StageKey)
		if st, ok := stager.Status(); ok {
			t.res.Staging = &st
		}
	case gating.ForgetStaging:
		stager.Forget(d.StageKey)
	}
	d.Log(ctx, r.logger())
	switch {
	case d.Verdict == gating.Take:
		return nil
	case d.First:
		t.upTo = StepDecide // staging the first commit: nothing to hold
		return nil
	case d.Verdict == gating.Hold:
		t.res.Held = d.Held
	}
	return r.holdApplied(ctx, t)
}

// targetRelease is the release of the tick's target d as the status
// reports it: its key (see gating.Decision.Release) and the models and
// container images d resolved.
func targetRelease(key api.ReleaseKey, d *render.Desired) *status.Release {
	rel := &status.Release{Key: key.String(), Revision: d.Revision}
	for _, r := range d.Resources {
		switch s := d.Specs[r.ID].(type) {
		case render.Model:
			rel.Resources = append(rel.Resources, status.ReleaseResource{ID: r.ID, Ref: s.Ref, Tag: s.Tag, Digest: s.Digest})
		case render.Service:
			if s.Kind == render.KindContainer {
				rel.Resources = append(rel.Resources, status.ReleaseResource{ID: r.ID, Ref: s.Image, Tag: s.ImageTag, Digest: s.ImageDigest})
			}
		}
	}
	return rel
}
