package container

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"

	"github.com/tend-dev/tend/applier/service"
)

// Prune removes the containers of device that tend recorded creating
// and no longer runs: a container named as a recorded instance's (tend's
// name for its device, service and replica) whose invocation label is not
// the recorded one. A container no record names is left alone, whatever
// labels it carries: it may be someone else's. It lists the containers
// first and asks live after, so a container started meanwhile (its record
// written before its start) is named. One list call when there is nothing
// to remove. It returns the ids removed.
func (r *Runtime) Prune(ctx context.Context, device string, live func() ([]service.Instance, error)) ([]string, error) {
	cs, err := r.List(ctx, device)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, nil
	}
	ins, err := live()
	if err != nil {
		return nil, err
	}
	recorded := recordedNames(ins)
	var removed []string
	for _, c := range cs {
		inv, ok := recorded[c.Name]
		if !ok || inv[c.Labels[LabelInvocation]] {
			continue
		}
		if err := r.remove(ctx, c.ID); err != nil {
			return removed, err
		}
		removed = append(removed, c.ID)
	}
	return removed, nil
}

// recordedNames returns, by container name, the invocations the records
// name for the container instances among ins.
func recordedNames(ins []service.Instance) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, in := range ins {
		ci, err := instance(in)
		if err != nil {
			continue // another runtime's
		}
		name := Name(ci)
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		out[name][in.Invocation] = true
	}
	return out
}

// RemoveImage removes image (REPO@sha256:…) from the engine. An image a
// container still uses, or that is gone already, is no error: it stays,
// or it was removed.
func (r *Runtime) RemoveImage(ctx context.Context, image string) error {
	_, err := r.cli.ImageRemove(ctx, image, client.ImageRemoveOptions{PruneChildren: true})
	switch {
	case err == nil, isNotFound(err), isConflict(err):
		return nil
	}
	return r.engineError(fmt.Errorf("remove image %s: %w", image, err))
}
