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
	in := r.Instance
	c, _ := render.Describe(render.Service{Restart: r.Policy, Replicas: []render.Replica{{
		Command: in.Command, Env: in.Env, WorkingDir: in.WorkingDir, User: in.User, Group: in.Group,
		Memory: in.Memory, CPUMilli: in.CPUMilli, Health: probeHealth(r.Probe),
	}}})
	return c, nil
}

// probeHealth returns what a probe checks, as a manifest declares it.
func probeHealth(p *Probe) *manifest.Health {
	if p == nil {
		return nil
	}
	return &manifest.Health{HTTP: p.HTTP, TCP: p.TCP, Exec: p.Exec}
}
