package applier

import (
	"context"

	"github.com/tend-dev/tend/planner"
)

// Driver observes and changes the resources of one kind on the node.
type Driver interface {
	// Kind is the kind of resource the driver handles.
	Kind() planner.Kind
	// Observe reports the state of resource id on the node. A resource
	// that is not there is State{Exists: false} and no error.
	Observe(ctx context.Context, id string) (planner.State, error)
	// Apply executes one action. spec is the manifest item the resource was
	// declared by (manifest.File for files) and nil for Delete.
	Apply(ctx context.Context, a planner.Action, spec any) error
}

// Preparer is a driver with work to do before any action of a plan runs:
// the model driver pulls every model before anything that uses one is
// touched. Prepare must change nothing the node uses.
type Preparer interface {
	Prepare(ctx context.Context, a planner.Action, spec any) error
}

// Finisher is a driver with work to do once a whole plan has succeeded,
// such as collecting garbage. Its error is logged, not returned: the plan
// itself succeeded.
type Finisher interface {
	Finish(ctx context.Context) error
}

var _ Driver = (*FileDriver)(nil)
