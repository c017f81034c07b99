package applier

import (
	"context"
	"fmt"

	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Describer is a driver that can describe a resource as it is on the node,
// as one side of the diff of an update (see planner.ContentDiff): a
// file's content (no more than planner.MaxDiffBytes of it, and none of a
// sensitive one), or the fields of a model's or service's spec, named as
// render.Describe names them. spec is the resource's rendered spec.
type Describer interface {
	Describe(ctx context.Context, id string, spec any) (planner.Content, error)
}

// Describe returns resource id as it is on the node, through its driver;
// ok is false when the driver cannot describe it.
func (a *Applier) Describe(ctx context.Context, id string, spec any) (c planner.Content, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return planner.Content{}, false, err
	}
	kind, err := planner.KindOf(id)
	if err != nil {
		return planner.Content{}, false, err
	}
	d, ok := a.drivers[kind].(Describer)
	if !ok {
		return planner.Content{}, false, nil
	}
	if f, ok := spec.(render.File); ok && !f.Sensitive {
		// What is on the node was applied as sensitive: it stays hidden
		// when a commit drops the mark.
		inv, err := a.Inventory()
		if err != nil {
			return planner.Content{}, false, err
		}
		f.Sensitive = inv.Resources[id].Sensitive
		spec = f
	}
	c, err = d.Describe(ctx, id, spec)
	if err != nil {
		return planner.Content{}, false, fmt.Errorf("describe %s: %w", id, err)
	}
	return c, true, nil
}
