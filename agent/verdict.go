package agent

import (
	"context"
	"errors"

	"github.com/tend-dev/tend/applier"
)

// resumeVerdict judges, in a tick that applies, the release a killed tend
// left awaiting its verdict (see applier.Applier.ResumeVerdict), before the
// source is read. A release found unhealthy is quarantined, and the tick
// rolls it back: it reads the revision applied last from the node's copy
// of the source and renders it as a hold does (every model and image
// pinned to the digest applied last, no remote asked), and applies its
// plan in full. The verdict is the tick's error (see judged); the next
// tick takes the target again, the release refused.
func (r *Reconciler) resumeVerdict(ctx context.Context, t *tick) error {
	if t.upTo != StepApply {
		return nil
	}
	err := t.node.applier.ResumeVerdict(ctx)
	if ve := (*applier.VerdictError)(nil); errors.As(err, &ve) {
		t.verdict = err
		return nil
	}
	return err
}

// judged returns the tick's error err with the verdict resumeVerdict
// reached, if it found the release unhealthy: the tick that rolls a
// release back fails, as an apply's rollback does.
func (t *tick) judged(err error) error {
	if t.verdict == nil {
		return err
	}
	if t.res.FailedStep == "" {
		t.res.FailedStep = StepApply
	}
	return errors.Join(t.verdict, err)
}
