package applier

import (
	"context"

	"github.com/tend-dev/tend/planner"
)

// Driver observes and changes the resources of one kind on the node. spec
// is the rendered spec of the resource (render.File, render.Model or
// render.Service, as the driver's kind goes), nil for a resource tend
// manages but no longer declares.
type Driver interface {
	// Kind is the kind of resource the driver handles.
	Kind() planner.Kind
	// Observe reports the state of resource id on the node. A resource
	// that is not there is State{Exists: false} and no error.
	Observe(ctx context.Context, id string, spec any) (planner.State, error)
	// Apply executes one action; spec is nil for a Delete.
	Apply(ctx context.Context, a planner.Action, spec any) error
}

// Preparer is a driver with work to do before any action of a plan runs:
// the model driver pulls every model before anything that uses one is
// touched. Prepare must change nothing the node uses.
type Preparer interface {
	Prepare(ctx context.Context, a planner.Action, spec any) error
}

// Finisher is a driver with work to do once a whole plan has succeeded,
// such as collecting garbage; declared holds the spec of every declared
// resource of its kind, by id. Its error is logged, not returned: the plan
// itself succeeded.
type Finisher interface {
	Finish(ctx context.Context, declared map[string]any) error
}

// Undoer is a driver that can say, before an action runs, how to put its
// resource back as it is now. The applier rolls a plan back with these
// when a Runner's action fails.
type Undoer interface {
	Undo(ctx context.Context, a planner.Action, spec any) (func(context.Context) error, error)
}

// Downloader is a driver that pulls from registries: Downloaded is the
// bytes it pulled since it was made, manifests included.
type Downloader interface {
	Downloaded() int64
}

// Runner is a driver whose resources run (services). A failed create,
// update or restart of one means it did not start or did not become
// healthy: the whole plan is rolled back. In a rollback its resources are
// put back last and in plan order, so that they start again onto the
// models and files already put back.
type Runner interface {
	Driver
	Runs() bool
}
