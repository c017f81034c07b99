package service

import (
	"context"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/render"
)

// Finisher is a Runtime that cleans up once a plan applied in full: what
// it runs that no record names, and what it keeps that no declared
// service needs (images). declared are the services declared, of every
// kind; live returns every instance the records name (its service,
// replica, invocation and spec): what the runtime started, and all it may
// count as its own.
type Finisher interface {
	Finish(ctx context.Context, node Node, declared []render.Service, live func() ([]Instance, error)) error
}

var _ applier.Finisher = (*Driver)(nil)

// Finish, once a plan applied in full, lets every runtime that cleans up
// do so (see Finisher).
func (d *Driver) Finish(ctx context.Context, declared map[string]any) error {
	var services []render.Service
	for _, spec := range declared {
		if s, ok := spec.(render.Service); ok {
			services = append(services, s)
		}
	}
	live := func() ([]Instance, error) {
		recs, err := d.sup.records()
		if err != nil {
			return nil, err
		}
		ins := make([]Instance, 0, len(recs))
		for _, r := range recs {
			ins = append(ins, r.Instance)
		}
		return ins, nil
	}
	for _, rt := range d.sup.rts.All() {
		if f, ok := rt.(Finisher); ok {
			if err := f.Finish(ctx, d.node(), services, live); err != nil {
				return err
			}
		}
	}
	return nil
}
