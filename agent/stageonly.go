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
// (verified, as model.Driver.Stage does), in the foreground under the
// stateDir lock, with the Meter shown how each download moves. It
// activates nothing: no file, model link or service changes, and the
// inventory stays as it was; the next apply of that target finds the
// blobs in the store and downloads nothing for them. It stages the
// target whatever its rollout says (the rollout governs activation), and
// on a suspended node too. Result.Staged lists what it downloaded and
// Result.Downloaded the bytes.
//
// Only models are staged: a container image is pulled when its service
// is activated.
func (r *Reconciler) StageOnly(ctx context.Context) (*Result, error) {
	start := r.now()
	unlock, err := r.lock(ctx)
	if err != nil {
		return &Result{}, err
	}
	defer unlock()
	t := &tick{upTo: StepStage, res: Result{Started: start}}
	err = r.steps(ctx, t, []step{
		{StepOpen, r.open},
		{StepFetch, r.fetch},
		{StepRender, r.render},
		{StepStage, r.stageTarget},
	})
	if snap := t.res.Snapshot; err == nil && snap != nil && snap.Stale != nil {
		// The node was held at its last applied commit: the target
		// cannot be used, and nothing of it was staged.
		t.res.FailedStep = StepFetch
		return &t.res, snap.Stale
	}
	return &t.res, err
}

// stageTarget downloads the models of the tick's target that are not in
// the store, one after the other. A model held (its new ref could not be
// resolved) is not staged, and fails the step once the others are.
func (r *Reconciler) stageTarget(ctx context.Context, t *tick) error {
	if t.res.Snapshot.Stale != nil {
		return nil // StageOnly says why
	}
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
