package container

import (
	"context"
	"fmt"
	"slices"

	"github.com/moby/moby/client"

	"github.com/tend-dev/tend/applier/service"
)

// stopLeftovers stops and removes, before in's container is created, the
// containers labelled as the same replica (device, resource, replica)
// under another invocation that are running or created: what an engine
// killed during a start can leave beside the record, a duplicate replica
// nobody manages. A leftover the engine shows as created may still have
// its task running (the engine lost it when it died): its processes,
// found by the invocation in their environment, are killed first. It
// returns the ids removed.
func (r *Runtime) stopLeftovers(ctx context.Context, in Instance) ([]string, error) {
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{
		All: true,
		Filters: make(client.Filters).Add("label",
			LabelDevice+"="+in.Labels[LabelDevice], LabelResource+"="+in.Labels[LabelResource], LabelReplica+"="+replicaLabel(in.Replica)),
	})
	if err != nil {
		return nil, r.engineError(fmt.Errorf("service %s: list the containers of replica %d: %w", in.Service, in.Replica, err))
	}
	var removed []string
	for _, c := range res.Items {
		inv := c.Labels[LabelInvocation]
		if inv == "" || inv == in.Invocation || !slices.Contains([]string{"running", "created"}, string(c.State)) {
			continue
		}
		if c.State == "created" {
			killInvocation(inv)
		}
		if err := r.Stop(ctx, Proc{Container: c.ID}, service.DefaultStopTimeout); err != nil {
			return removed, fmt.Errorf("service %s: stop the leftover container %s of replica %d: %w", in.Service, short(c.ID), in.Replica, err)
		}
		removed = append(removed, c.ID)
	}
	return removed, nil
}
