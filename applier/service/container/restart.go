package container

import (
	"context"
	"fmt"
	"slices"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/tend-dev/tend/applier/service"
)

// RestartInPlace starts p's container, which exited, again: the same
// container, as the engine's own restart policy does, so that its output
// and exit state stay for a post-mortem (`tend logs --previous`). It keeps
// its labels, name and invocation. When the container cannot be started
// in place it returns an error matching service.ErrRecreate, having
// started nothing: it is gone, or not exited (being removed, dead, or
// running again by another hand), or what it runs is no longer what in
// runs (its image digest, command, environment, user, limits, network,
// devices, or the paths its mounts lead to now: a ${model:…} link moved).
// in is checked as Run checks it first (a mount source that is gone is an
// ErrInvalidInstance error).
func (r *Runtime) RestartInPlace(ctx context.Context, in Instance, p Proc) (Proc, error) {
	cfg, host, err := r.spec(in)
	if err != nil {
		return Proc{}, err
	}
	if p.Container == "" {
		return Proc{}, fmt.Errorf("%w: service %s replica %d: no container recorded", service.ErrRecreate, in.Service, in.Replica)
	}
	res, err := r.cli.ContainerInspect(ctx, p.Container, client.ContainerInspectOptions{})
	if isNotFound(err) {
		return Proc{}, fmt.Errorf("%w: service %s replica %d: container %s is gone", service.ErrRecreate, in.Service, in.Replica, short(p.Container))
	}
	if err != nil {
		return Proc{}, r.engineError(fmt.Errorf("service %s: inspect container %s: %w", in.Service, short(p.Container), err))
	}
	c := res.Container
	if c.State == nil || c.State.Status != container.StateExited {
		state := "unknown"
		if c.State != nil {
			state = string(c.State.Status)
		}
		return Proc{}, fmt.Errorf("%w: service %s replica %d: container %s is %s, not exited", service.ErrRecreate, in.Service, in.Replica, short(p.Container), state)
	}
	if what := differs(c, cfg, host); what != "" {
		return Proc{}, fmt.Errorf("%w: service %s replica %d: container %s runs another %s", service.ErrRecreate, in.Service, in.Replica, short(p.Container), what)
	}
	started := time.Now()
	if _, err := r.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		if cerrdefs.IsUnavailable(err) || ctx.Err() != nil || client.IsErrConnectionFailed(err) {
			return Proc{}, r.engineError(fmt.Errorf("service %s: start container %s: %w", in.Service, short(c.ID), err))
		}
		return Proc{}, fmt.Errorf("%w: service %s replica %d: the engine could not start container %s again: %v", service.ErrRecreate, in.Service, in.Replica, short(c.ID), err)
	}
	np, err := r.Proc(ctx, c.ID)
	if err != nil {
		return Proc{}, fmt.Errorf("service %s: %w", in.Service, err)
	}
	np.Limits, np.Started = p.Limits, started
	return np, nil
}

// differs names what the container c runs that cfg and host, what Run
// would create for the instance now, do not; "" when nothing. The engine
// adds the image's environment, labels and defaults to what a container
// was created with, so only what tend sets is compared.
func differs(c container.InspectResponse, cfg *container.Config, host *container.HostConfig) string {
	cc, ch := c.Config, c.HostConfig
	if cc == nil || ch == nil {
		return "configuration (the engine shows none)"
	}
	switch {
	case cc.Image != cfg.Image:
		return "image"
	case cfg.Entrypoint != nil && !slices.Equal(cc.Entrypoint, cfg.Entrypoint),
		cfg.Cmd != nil && !slices.Equal(cc.Cmd, cfg.Cmd):
		return "command"
	case cfg.User != "" && cc.User != cfg.User, cfg.WorkingDir != "" && cc.WorkingDir != cfg.WorkingDir:
		return "user or working directory"
	case ch.NetworkMode != host.NetworkMode:
		return "network"
	case ch.Memory != host.Memory || ch.MemorySwap != host.MemorySwap || ch.NanoCPUs != host.NanoCPUs:
		return "resource limits"
	case !slices.EqualFunc(ch.Mounts, host.Mounts, sameMount):
		return "mounts"
	case !slices.Equal(ch.Devices, host.Devices) || len(ch.DeviceRequests) != len(host.DeviceRequests):
		return "devices"
	}
	for _, e := range cfg.Env {
		if !slices.Contains(cc.Env, e) {
			return "environment"
		}
	}
	for k, v := range cfg.Labels {
		if cc.Labels[k] != v {
			return "spec (label " + k + ")"
		}
	}
	return ""
}

// sameMount reports whether two bind mounts mount the same path at the
// same place the same way.
func sameMount(a, b mount.Mount) bool {
	return a.Type == b.Type && a.Source == b.Source && a.Target == b.Target && a.ReadOnly == b.ReadOnly
}
