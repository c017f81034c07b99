package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tend-dev/tend/internal/failpoint"
)

// RollbackError says a plan was rolled back: a service did not become
// healthy after the update, and every action the plan had applied was
// undone, so the node runs what it ran before.
type RollbackError struct {
	Revision   string   // the revision that was rolled back
	Failed     string   // the resource whose failure caused it
	Cause      error    // why it failed
	RolledBack []string // the resources put back, in the order they were
	Undo       error    // what went wrong while rolling back, if anything
}

func (e *RollbackError) Error() string {
	s := fmt.Sprintf("%s did not become healthy: %v; rolled back %s to what ran before %s",
		e.Failed, e.Cause, strings.Join(e.RolledBack, ", "), e.Revision)
	if e.Undo != nil {
		s += fmt.Sprintf(" (rollback incomplete: %v)", e.Undo)
	}
	return s
}

func (e *RollbackError) Unwrap() error { return e.Cause }

// undoStep is how to put one resource back.
type undoStep struct {
	id   string
	runs bool // of a Runner's resource
	run  func(context.Context) error
}

// undoIDs returns the ids of steps, in order.
func undoIDs(steps []undoStep) []string {
	ids := make([]string, 0, len(steps))
	for _, s := range steps {
		ids = append(ids, s.id)
	}
	return ids
}

// rollback runs the undo steps: everything but what runs in reverse order,
// then what runs (services) in order, so they restart onto the models and
// files put back.
func rollback(ctx context.Context, steps []undoStep) ([]string, error) {
	var done []string
	var errs []error
	run := func(s undoStep) {
		if err := s.run(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.id, err))
			return
		}
		done = append(done, s.id)
		failpoint.Hit("rollback:step")
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if !steps[i].runs {
			run(steps[i])
		}
	}
	for _, s := range steps {
		if s.runs {
			run(s)
		}
	}
	return done, errors.Join(errs...)
}

// rollbackTimeout bounds a rollback, which ignores the tick's cancellation:
// a process stuck in the kernel must not hold the lock for ever.
const rollbackTimeout = 2 * time.Minute
