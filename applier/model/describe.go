package model

import (
	"context"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

var _ applier.Describer = (*Driver)(nil)

// Describe returns the model's active version as a diff shows it: the ref
// (and policy) it was pulled for, the tag it resolved through, its
// digest, the include its folder was made with and the base ModelKits it
// was pinned to. A model with no active version is an empty content.
func (d *Driver) Describe(_ context.Context, id string, _ any) (planner.Content, error) {
	rec, err := d.record(planner.ModelName(id))
	if err != nil {
		return planner.Content{}, err
	}
	p := rec.pinned()
	if p == nil {
		return planner.Content{}, nil
	}
	c, _ := render.Describe(render.Model{Ref: p.Ref, Policy: p.Policy, Tag: p.Tag, Digest: p.Digest, Include: p.Include, Bases: p.Bases})
	return c, nil
}
