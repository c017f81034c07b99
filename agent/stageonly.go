package agent

import (
	"context"
	"errors"

	"github.com/tend-dev/tend/planner"
)

// StepStage is the step of StageOnly that downloads the target's models.
const StepStage = "stage"

// StagedModel is a model StageOnly brought into the store.
type StagedModel struct {
	ID     string // model/NAME
	Ref    string
	Digest string
	// Bytes is what it downloaded: what render said activating the
	// version would download, less what another tend brought in since.
	Bytes int64
}

// StageOnly fetches and renders the target as a tick does and downloads
// every model version activating it would download into the store
// (verified, as model.Driver.Stage does), in the foreground, with the
// Meter shown how each download moves. It activates nothing: no file,
// model link or service changes, and the inventory stays as it was; the
// next apply of that target finds the blobs in the store and downloads
// nothing for them. It stages the target whatever its rollout says (the
// rollout governs activation), and on a suspended node too. Result.Staged
// lists what it downloaded and Result.Downloaded the bytes.
//
// It holds the stateDir lock only while it opens, fetches and renders
// (it updates the clone, and reads the inventory and the model records),
// and downloads without it, as the agent's Stager downloads beside its
// ticks: an agent's ticks on the node go on meanwhile, reverting drift.
// The store keeps the downloads apart (two of one blob take turns, see
// store.Store.Fetch; garbage collection leaves a blob being downloaded or
// unpacked alone), and a tick that holds the target's release keeps its
// blobs from garbage collection (see holdApplied). A blob that another
// tend's garbage collection removes meanwhile (one whose ticks hold no
// such release) is downloaded again by the apply that needs it.
//
// The target's container images the engine does not have are pulled
// too (service.Driver.Stage); Result.Staged lists the models only.
func (r *Reconciler) StageOnly(ctx context.Context) (*Result, error) {
	t := &tick{upTo: StepStage, res: Result{Started: r.now()}}
	if err := r.checkState(); err != nil {
		return &t.res, err
	}
	unlock, err := r.lock(ctx)
	if err != nil {
		return &t.res, err
	}
	if err := r.migrateState(r.logger()); err != nil {
		_ = unlock()
		return &t.res, err
	}
	err = r.steps(ctx, t, []step{
		{StepOpen, r.open},
		{StepFetch, r.fetch},
		{StepRender, r.render},
	})
	_ = unlock()
	if err != nil {
		return &t.res, err
	}
	if snap := t.res.Snapshot; snap != nil && snap.Stale != nil {
		// The node was held at its last applied commit: the target
		// cannot be used, and nothing of it is staged.
		t.res.FailedStep = StepFetch
		return &t.res, snap.Stale
	}
	err = r.steps(ctx, t, []step{{StepStage, r.stageTarget}})
	return &t.res, err
}

// stageTarget downloads the models of the tick's target that are not in
// the store, one after the other. A model held (its new ref could not be
// resolved) is not staged, and fails the step once the others are.
func (r *Reconciler) stageTarget(ctx context.Context, t *tick) error {
	need := toStage(t.res.Desired)
	var errs []error
	for _, svc := range need.images {
		if err := t.node.services.Stage(ctx, svc); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range need.models {
		n, err := t.node.models.Stage(ctx, m, nil)
		t.res.Downloaded += n
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		t.res.Staged = append(t.res.Staged, StagedModel{ID: planner.ModelID(m.Name), Ref: m.Ref, Digest: m.Digest, Bytes: n})
	}
	if held := t.res.Desired.Held; held != nil {
		errs = append(errs, held)
	}
	return errors.Join(errs...)
}
