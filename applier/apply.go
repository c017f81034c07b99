package applier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tend-dev/tend/api"
	"log/slog"
	"slices"
	"time"

	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Apply executes the plan's actions in order, each with its resource's
// spec in d (Delete with nil), stopping at the first error.
//
// The inventory is then updated for every action that succeeded: a created
// or updated resource is recorded with its desired fields, a deleted one is
// removed. A declared resource without an action is recorded with its
// desired fields (it matches the node); a managed one that is not declared
// is dropped, whether deleted, gone from the node, or left there because
// tend did not create it; one whose action failed or was not reached keeps
// its entry.
//
// Actions the plan marks as failing or held (planner.Action.Skipped) are
// left out: their resources keep their inventory entries, the revision
// does not move, and Apply returns a planner.SkippedError naming them once
// the rest is applied.
//
// An entry new to the inventory is marked Created when its action put it
// where nothing was (see createdBy); a resource adopted as found, or
// replacing what was found, is not, and is never deleted. An entry already
// in the inventory keeps its mark.
//
// The inventory is bound to this applier's root and to d's device, and
// refused as Observe refuses it. Only when every action succeeded do its
// Revision and AppliedAt move to d. It is saved atomically in every case,
// except that a tick that changes nothing writes nothing.
func (a *Applier) Apply(ctx context.Context, d *render.Desired, cs *planner.Changeset) (res Result, err error) {
	if cs == nil {
		return Result{}, errors.New("apply: no plan")
	}
	inv, err := a.loadInventory(d.Device)
	if err != nil {
		return Result{}, err
	}
	// The copy read stays the tick's while it is what stateDir holds
	// (saved, or unchanged), so that what reads the inventory after Apply
	// in this tick does not read and decode it again.
	current := false
	defer func() {
		if !current {
			a.mu.Lock()
			a.loaded = nil
			a.mu.Unlock()
		}
	}()
	before := fingerprint(inv)
	release := ReleaseOf(inv, d) // against the inventory as it is before the plan
	defer func() { res.Downloaded = a.downloaded() }()
	skipErr := cs.Skip()
	cs, res.Skipped = runnable(cs)
	applyErr := a.prepare(ctx, cs, d.Specs, &res)
	if applyErr == nil {
		if err := ctx.Err(); err != nil {
			applyErr = fmt.Errorf("apply stopped before its first action: %w", err)
		}
	}
	var o outcome
	var intent map[string]bool
	if applyErr == nil {
		intent, applyErr = a.intend(inv, d, cs)
		if applyErr != nil {
			return res, applyErr // nothing was touched
		}
	}
	if applyErr == nil {
		actx, stop := a.graced(ctx)
		o, applyErr = a.run(actx, d, cs, &res, inv)
		stop()
	} else {
		o = outcome{pending: map[string]bool{}}
		for _, act := range cs.Actions {
			o.pending[act.Resource] = true
		}
	}
	for _, act := range res.Skipped {
		o.pending[act.Resource] = true
	}
	full := applyErr == nil && skipErr == nil
	if len(res.Applied) == 0 {
		// Nothing of it applied: the next ReleaseOf is the same, and the
		// inventory need not say it is pending.
		release = ""
	}
	a.record(inv, d, o, intent, full, release)
	if applyErr == nil {
		applyErr = skipErr
	}
	changed := len(res.Applied) > 0 || fingerprint(inv) != before
	if full && changed {
		// Something changed, or left the inventory: there may be garbage.
		// The plan applied in full, so its cleanup runs even if the tick
		// ended meanwhile.
		a.finish(context.WithoutCancel(ctx), d)
	}
	if !changed && full {
		// A no-op tick writes nothing: flash storage on a device polled
		// every 30s should not take an fsynced write per tick.
		current = true
		return res, nil
	}
	if full {
		inv.AppliedAt = a.now().Truncate(time.Second) // as saved: RFC 3339, in seconds
	}
	if err := inv.Save(a.stateDir); err != nil {
		return res, errors.Join(applyErr, err)
	}
	current = true
	return res, applyErr
}

// outcome is what running a plan's actions did, for the inventory.
type outcome struct {
	pending map[string]bool // ids whose action has not succeeded, or was undone
	created map[string]bool // ids whose action put them where nothing was
	// left is the id of a failed action not undone, whose resource may be
	// there in part (a service left to its restart policy on a first
	// deploy): what intend recorded of it stays.
	left string
}

// graced returns a context for the actions of a plan: once the first runs,
// the plan runs to its end. A shutdown (SIGTERM) or the tick's timeout
// gives it ShutdownGrace more, so the node holds the old revision or the
// new one, never part of each. Pulls, the long part, are done by then.
// Past the grace the action in flight fails, and a service's failure rolls
// the plan back. stop releases it, and returns once its watch of the
// tick is over, so a tick that ends after its apply is not taken for one
// that ended during it.
func (a *Applier) graced(tick context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(tick))
	finished, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-finished:
			return
		case <-tick.Done():
		}
		a.logger.Info("tick ended during an apply; the plan in progress runs to its end",
			"grace", ShutdownGrace.String(), "cause", context.Cause(tick).Error())
		select {
		case <-finished:
		case <-time.After(ShutdownGrace):
			cancel()
		}
	}()
	return ctx, func() { close(finished); cancel(); <-watched }
}

// run applies the plan's actions in order, stopping at the first error; a
// failed action of a Runner rolls back every action applied before it,
// unless first: no revision was ever applied on this node, there is
// nothing to go back to, and the failed service is left to its restart
// policy (a rollback would leave the node running nothing). Before a
// Runner's action that could be rolled back, it records that the release
// awaits its verdict (see Verdict), and removes the record once the run
// is over.
func (a *Applier) run(ctx context.Context, d *render.Desired, cs *planner.Changeset, res *Result, inv *Inventory) (outcome, error) {
	first := inv.Revision == ""
	o := outcome{pending: make(map[string]bool, len(cs.Actions)), created: map[string]bool{}}
	for _, act := range cs.Actions {
		o.pending[act.Resource] = true
	}
	var undo []undoStep
	var verdict awaiting
	defer verdict.done(ctx, a)
	for _, act := range cs.Actions {
		// Drift reverts are not undone: that would put back a change made
		// by hand.
		if u, ok := a.drivers[act.Kind].(Undoer); ok && !act.IsDrift() {
			if fn, err := u.Undo(ctx, act, d.Specs[act.Resource]); err != nil {
				a.logger.WarnContext(ctx, "cannot roll this action back", logKeyResource, act.Resource, logKeyError, err.Error())
			} else if fn != nil {
				undo = append(undo, undoStep{id: act.Resource, runs: a.runs(act.Kind), run: fn})
			}
		}
		if a.runs(act.Kind) && act.Type != planner.Delete && !first {
			if err := verdict.before(a, inv, d, act, undoIDs(undo)); err != nil {
				return o, err
			}
		}
		if err := a.applyOne(ctx, act, d.Specs); err != nil {
			failed := act
			res.Failed = &failed
			if !a.runs(act.Kind) || act.Type == planner.Delete {
				return o, fmt.Errorf("apply %s: %w", act.Resource, err)
			}
			if first {
				o.left = act.Resource
				return o, fmt.Errorf("%s did not become healthy: %w; not rolled back: no revision was applied on this node before, "+
					"so there is nothing to go back to (it is restarted under its restart policy; fix it in a new commit)", act.Resource, err)
			}
			for _, done := range res.Applied {
				o.pending[done.Resource] = true // undone: the inventory keeps what ran before
			}
			return o, a.rollBack(ctx, inv, d, act, err, undo, res)
		}
		delete(o.pending, act.Resource)
		o.created[act.Resource] = createdBy(act)
		res.Applied = append(res.Applied, act)
		a.logApplied(ctx, act)
		failpoint.Hit("apply:done")
	}
	return o, nil
}

// logApplied logs one applied action, at debug; a delete at info, "deleted"
// and the resource: a tick's summary counts deletes, and what went (a
// resource only another ref declared, applied by hand) is named.
func (a *Applier) logApplied(ctx context.Context, act planner.Action) {
	attrs := []slog.Attr{
		slog.String(logKeyResource, act.Resource),
		slog.String(logKeyAction, act.Type.String()),
		slog.String(logKeyReason, act.Reason),
	}
	if act.IsDrift() {
		attrs = append(attrs, slog.Bool(logKeyDrift, true))
	}
	if act.Type == planner.Delete {
		a.logger.LogAttrs(ctx, slog.LevelInfo, "deleted", attrs...)
		return
	}
	a.logger.LogAttrs(ctx, slog.LevelDebug, "applied", attrs...)
}

// intend records in the inventory, before any action runs, every resource
// the plan will create where nothing is (Created, no fields yet), and saves
// it: a tick whose last save fails (a full disk) or that is killed leaves
// what it created marked as tend's, to be pruned when no longer declared,
// not taken for something found on the node. It returns the ids it
// added, which record drops again when their action did not succeed.
func (a *Applier) intend(inv *Inventory, d *render.Desired, cs *planner.Changeset) (map[string]bool, error) {
	var intent map[string]bool
	for _, act := range cs.Actions {
		if _, managed := inv.Resources[act.Resource]; managed || !createdBy(act) {
			continue
		}
		if intent == nil {
			intent = map[string]bool{}
		}
		intent[act.Resource] = true
		inv.Resources[act.Resource] = InventoryEntry{Created: true}
	}
	if intent == nil {
		return nil, nil
	}
	inv.Root, inv.Device = a.root, d.Device
	if err := inv.Save(a.stateDir); err != nil {
		for id := range intent {
			delete(inv.Resources, id)
		}
		return nil, fmt.Errorf("record what the plan creates before creating it (nothing was applied): %w", err)
	}
	return intent, nil
}

// record updates the inventory for what the plan did (see Apply); with
// done, the whole plan succeeded and the revision moves to d's, with the
// key of its release (ReleaseOf, "" when it made none); otherwise the
// release, when part of it applied, is kept as pending. The entries
// intend added for actions that did not succeed are dropped.
func (a *Applier) record(inv *Inventory, d *render.Desired, o outcome, intent map[string]bool, done bool, release api.ReleaseKey) {
	for id := range intent {
		if o.pending[id] && id != o.left {
			delete(inv.Resources, id)
		}
	}
	declared := make(map[string]bool, len(d.Resources))
	for _, r := range d.Resources {
		declared[r.ID] = true
		if o.pending[r.ID] {
			continue
		}
		e := InventoryEntry{Fields: slices.Clone(r.Fields), Created: o.created[r.ID], Sensitive: r.Sensitive}
		if prev, managed := inv.Resources[r.ID]; managed {
			e.Created = prev.Created
		}
		inv.Resources[r.ID] = e
	}
	for _, id := range sortedKeys(inv.Resources) {
		if !declared[id] && !o.pending[id] {
			// Deleted, gone from the node, or not tend's to delete.
			delete(inv.Resources, id)
		}
	}
	inv.Root, inv.Device = a.root, d.Device
	switch {
	case done:
		if release != "" {
			inv.Release = release
		}
		inv.Revision, inv.Declaration, inv.Pending = d.Revision, d.Declaration(), ""
	case release != "":
		inv.Pending = release
	}
}

// ShutdownGrace is how long a plan that has started applying may run on
// after its tick is cancelled (SIGTERM) or times out.
var ShutdownGrace = 45 * time.Second

// rollBack undoes every action of the plan applied so far, the failed one
// included, and returns the RollbackError that says so. It first
// quarantines what made the release new (see releaseKeys), against inv as
// it was before the plan.
func (a *Applier) rollBack(ctx context.Context, inv *Inventory, d *render.Desired, failed planner.Action, cause error, undo []undoStep, res *Result) error {
	a.logger.ErrorContext(ctx, "rolling back", logKeyResource, failed.Resource, logKeyError, cause.Error())
	// The rollback must finish even when the tick's time is up, within
	// bounds.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	reason := fmt.Sprintf("%s did not become healthy: %v", failed.Resource, cause)
	qerr := a.quarantine(ctx, releaseKeys(inv, d, undoIDs(undo), reason, a.now().UTC()))
	done, err := rollback(ctx, undo)
	res.RolledBack = done
	for _, id := range done {
		a.logger.WarnContext(ctx, "rolled back", logKeyResource, id)
	}
	rb := &RollbackError{Revision: d.Revision, Failed: failed.Resource, Cause: cause, RolledBack: done, Undo: err}
	if qerr != nil {
		return errors.Join(rb, qerr)
	}
	return rb
}

// prepare runs every driver's preparation of the plan's creates and
// updates (pulling models) before any action: a model that cannot be pulled
// fails the plan before anything on the node is touched.
func (a *Applier) prepare(ctx context.Context, cs *planner.Changeset, specs map[string]any, res *Result) error {
	for _, act := range cs.Actions {
		p, ok := a.drivers[act.Kind].(Preparer)
		if !ok || act.Type != planner.Create && act.Type != planner.Update {
			continue
		}
		if err := p.Prepare(ctx, act, specs[act.Resource]); err != nil {
			failed := act
			res.Failed = &failed
			return fmt.Errorf("apply %s: %w", act.Resource, err)
		}
	}
	return nil
}

// finish lets drivers clean up after a plan applied in full, each with the
// specs of its kind's declared resources.
func (a *Applier) finish(ctx context.Context, d *render.Desired) {
	for _, kind := range a.sortedKinds() {
		f, ok := a.drivers[kind].(Finisher)
		if !ok {
			continue
		}
		declared := map[string]any{}
		for _, r := range d.Resources {
			if r.Kind == kind {
				declared[r.ID] = d.Specs[r.ID]
			}
		}
		if err := f.Finish(ctx, declared); err != nil {
			a.logger.WarnContext(ctx, "clean up after apply", "kind", kind.String(), "error", err.Error())
		}
	}
}

// runs reports whether kind's driver is a Runner.
func (a *Applier) runs(kind planner.Kind) bool {
	r, ok := a.drivers[kind].(Runner)
	return ok && r.Runs()
}

func (a *Applier) applyOne(ctx context.Context, act planner.Action, specs map[string]any) error {
	drv, ok := a.drivers[act.Kind]
	if !ok {
		return fmt.Errorf("this tend has no driver for %s resources", act.Kind)
	}
	var spec any
	if act.Type != planner.Delete {
		if spec = specs[act.Resource]; spec == nil && act.Type != planner.Restart {
			return errors.New("no spec for it in the desired state the plan was made from")
		}
	}
	return drv.Apply(ctx, act, spec)
}

// createdBy reports whether act, which succeeded, put its resource where
// nothing was: a Create, or an Update over a directory. tend never replaces
// a directory, so that write succeeded only because the directory was
// gone: pruned once a delete earlier in the plan emptied it (a folder x/…
// replaced by a file x).
func createdBy(act planner.Action) bool {
	switch act.Type {
	case planner.Create:
		return true
	case planner.Update:
		for _, c := range act.Changes {
			if c.From == planner.ValueDirectory {
				return true
			}
		}
	}
	return false
}

// fingerprint is what a save would change, AppliedAt aside.
func fingerprint(inv *Inventory) string {
	b, _ := json.Marshal(struct {
		Device, Root, Revision, Release, Declaration, Pending string
		Resources                                             map[string]InventoryEntry
	}{inv.Device, inv.Root, inv.Revision, string(inv.Release), inv.Declaration, string(inv.Pending), inv.Resources})
	return string(b)
}

// runnable returns cs without the actions an apply leaves out, and those.
func runnable(cs *planner.Changeset) (*planner.Changeset, []planner.Action) {
	skipped := cs.Skipped()
	if len(skipped) == 0 {
		return cs, nil
	}
	run := *cs
	run.Actions = nil
	for _, act := range cs.Actions {
		if !act.Skipped() {
			run.Actions = append(run.Actions, act)
		}
	}
	return &run, skipped
}
