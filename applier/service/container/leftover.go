package container

import (
	"context"
	"fmt"
	"slices"
	"syscall"

	"github.com/moby/moby/client"
	"github.com/prometheus/procfs"

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

// killInvocation kills the processes of this node whose environment names
// invocation (service.InvocationEnv): a task its engine no longer knows
// as running. Nothing is found when the engine runs elsewhere.
func killInvocation(invocation string) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return
	}
	want := service.InvocationEnv + "=" + invocation
	for _, p := range procs {
		env, err := p.Environ()
		if err == nil && slices.Contains(env, want) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
}
