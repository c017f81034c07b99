package agent

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
	"github.com/tend-dev/tend/source"
)

// Hold puts the node back at the revision it last applied, asking neither
// the fleet repo nor a registry: it reads that commit from the local clone,
// pins every model to the digest applied last, plans, and applies the plan
// only when each of its actions reverts drift (or is a restart that
// follows from one, or was owed). A plan with anything else (the node
// holds part of a newer commit whose apply failed) is returned unapplied:
// the next full tick deals with it.
//
// The loop runs it in place of the scheduled ticks that a failure backoff
// skips, so that backing off slows the retries of what fails, never the
// revert of drift. Before anything was applied there is nothing to hold:
// the result has no snapshot.
func (r *Reconciler) Hold(ctx context.Context) (*Result, error) {
	start := r.now()
	unlock, err := r.lock(ctx)
	if err != nil {
		return &Result{}, err
	}
	defer unlock()
	t := &tick{upTo: StepApply, hold: true, res: Result{Started: start}}
	err = r.steps(ctx, t, []step{
		{StepOpen, r.open},
		{StepOpen, r.resumeVerdict},
		{StepFetch, r.fetchApplied},
		{StepRender, r.renderApplied},
		{StepObserve, r.observe},
		{StepPlan, r.planReverts},
		{StepApply, r.applyPlan},
	})
	return &t.res, t.judged(err)
}

// holdApplied holds the tick at the applied revision (see decide): it
// reads and renders that instead of the target, and its plan only reverts
// drift. What the target's models have in the store (staged, or pulled by
// tend apply --stage-only) is kept from this tick's garbage collection.
func (r *Reconciler) holdApplied(ctx context.Context, t *tick) error {
	if d := t.res.Desired; d != nil {
		for _, res := range d.Resources {
			if m, ok := d.Specs[res.ID].(render.Model); ok {
				t.node.models.Keep(m)
			}
		}
	}
	t.hold = true
	for _, run := range []func(context.Context, *tick) error{r.fetchApplied, r.renderApplied} {
		if err := run(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// fetchApplied reads the last applied commit from the clone in stateDir (or
// the fleet artifact kept for it) with no remote (source.Fetcher's
// Applied). It leaves the tick without a snapshot (and stops it) when
// nothing was applied yet.
func (r *Reconciler) fetchApplied(ctx context.Context, t *tick) error {
	inv, err := t.node.applier.Inventory()
	if err != nil {
		return err
	}
	applied, err := source.ParseRevision(inv.Revision)
	if err != nil {
		t.upTo = StepFetch
		return nil
	}
	_, paths, err := r.Config.ExpandSource()
	if err != nil {
		return err
	}
	f, err := r.fetcher()
	if err != nil {
		return err
	}
	// Named as it was applied: snap.Revision.String() is inv.Revision.
	snap, err := f.Applied(ctx, applied, config.SourcePaths(paths))
	if err != nil {
		return err
	}
	if snap.Stale != nil {
		return snap.Stale
	}
	t.res.Snapshot = snap
	return nil
}

// renderApplied renders the held commit with every model pinned to the
// digest applied last.
func (r *Reconciler) renderApplied(ctx context.Context, t *tick) error {
	inv, err := t.node.applier.Inventory()
	if err != nil {
		return err
	}
	comp, err := LoadDevice(r.Config, t.res.Snapshot, true)
	if err != nil {
		return err
	}
	t.res.Desired, err = render.Render(ctx, comp.Device, t.res.Snapshot.Revision.String(), RenderOptions(r.Config, appliedDigests{inv}))
	return err
}

// planReverts plans, and stops the tick before applying unless every
// action only reverts drift (a resource Git also changed is not a revert:
// the node may hold a newer commit's part of it) or restarts a service for
// such a revert, or the tick rolls back a release judged unhealthy (see
// resumeVerdict).
func (r *Reconciler) planReverts(ctx context.Context, t *tick) error {
	if err := r.plan(ctx, t); err != nil {
		return err
	}
	if !onlyReverts(t.res.Plan.Actions) && t.verdict == nil {
		t.upTo = StepPlan
	}
	return nil
}

func onlyReverts(actions []planner.Action) bool {
	var reverted []string
	for _, a := range actions {
		if a.OnlyDrift() {
			reverted = append(reverted, a.Resource)
		}
	}
	for _, a := range actions {
		if a.OnlyDrift() {
			continue
		}
		if a.Type != planner.Restart || !slices.ContainsFunc(reverted, func(id string) bool { return strings.Contains(a.Reason, id) }) {
			return false
		}
	}
	return true
}

// appliedDigests pins each model to the digest recorded in the inventory
// when it was last applied, with no registry. A model without one is
// pinned by its declaration, which differs from anything applied: a
// change, which a hold does not apply.
type appliedDigests struct{ inv *applier.Inventory }

func (a appliedDigests) Resolve(ctx context.Context, m manifest.Model) (render.Resolution, error) {
	for _, f := range a.inv.Resources[planner.ModelID(m.Name)].Fields {
		if f.Name == planner.FieldDigest {
			return render.Resolution{Digest: f.Value}, nil
		}
	}
	return render.Declared{}.Resolve(ctx, m)
}

// ResolveImage pins a container service's image to the digest it last
// applied; without one, by its declaration (a change, not applied).
func (a appliedDigests) ResolveImage(ctx context.Context, service, ref string) (render.Resolution, error) {
	for _, f := range a.inv.Resources[planner.ServiceID(service)].Fields {
		if f.Name == planner.FieldImage {
			return render.Resolution{Digest: f.Value}, nil
		}
	}
	return render.Declared{}.ResolveImage(ctx, service, ref)
}

// holdDrift runs Hold in a tick that the failure backoff holds off, and
// reports what it reverted. While suspended nothing is applied, so
// nothing is held either.
func (l *Loop) holdDrift(ctx context.Context, log *slog.Logger) {
	if suspended, _ := Suspended(l.r.Config); suspended {
		return
	}
	res, err := l.r.Hold(ctx)
	device := l.r.Config.Device
	switch {
	case err != nil:
		log.Warn("backing off after failures; reverting drift to the applied revision failed", keyDevice, device, keyError, err.Error())
		return
	case res.Plan == nil || res.Plan.Empty():
		return
	case len(res.Applied) == 0:
		log.Debug("backing off after failures; the node holds part of a newer revision, left to the next full tick", keyDevice, device)
		return
	}
	log.Info("drift reverted to the applied revision while backing off after failures", keyDevice, device,
		keyRevision, res.Snapshot.Revision.String(), keyDrift, len(res.Drift), keyDuration, res.Duration.Round(time.Millisecond).String())
	if l.tracker != nil {
		st := statusTick(res)
		l.metrics.ObserveHold(st, l.tracker.ObserveHold(st))
		l.lastStatus.Write(log, l.r.Config, l.tracker.Status(), time.Now())
	}
	if l.opts.OnHold != nil {
		l.opts.OnHold(res)
	}
}
