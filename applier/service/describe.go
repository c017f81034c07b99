package service

import (
	"context"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

var _ applier.Describer = (*Driver)(nil)

// Describe returns the service as its first instance on the node was
// started (command, env, user, limits, restart policy, health probe),
// named as render.Describe names a declared one. A service with no
// instance record is an empty content.
func (d *Driver) Describe(_ context.Context, id string, _ any) (planner.Content, error) {
	recs, err := d.sup.serviceRecords(planner.ServiceName(id))
	if err != nil || len(recs) == 0 {
		return planner.Content{}, err
	}
	r := recs[0]
	var rep render.Replica
	if d, ok := r.Instance.Spec.(Describable); ok {
		rep = d.Describe()
	}
	rep.Health = probeHealth(r.Probe)
	c, _ := render.Describe(render.Service{Restart: r.Policy, Replicas: []render.Replica{rep}})
	return c, nil
}

// Describable is a Spec that says what it runs in the terms a manifest
// declares it (command, env, user, limits), for Describe.
type Describable interface {
	Describe() render.Replica
}

// probeHealth returns what a probe checks, as a manifest declares it.
func probeHealth(p *Probe) *manifest.Health {
	if p == nil {
		return nil
	}
	return &manifest.Health{HTTP: p.HTTP, TCP: p.TCP, Exec: p.Exec}
}
