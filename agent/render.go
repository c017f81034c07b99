package agent

import (
	"context"
	"fmt"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/render"
)

// Manifests fetches this device's manifests from the fleet repo and loads
// and validates them, without looking at the node.
func (r *Reconciler) Manifests(ctx context.Context) (*gitsource.Snapshot, *manifest.Device, error) {
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	dev, err := LoadDevice(r.Config, snap, true)
	return snap, dev, err
}

// Render fetches this device's manifests and renders its desired state
// with resolver, without looking at the node. Paths are checked against
// allowPaths only when the config has some: render also serves to look at
// a device's state from a machine that is not the device.
func (r *Reconciler) Render(ctx context.Context, resolver render.Resolver) (*gitsource.Snapshot, *render.Desired, error) {
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	confine := len(r.Config.AllowPaths) > 0
	dev, err := LoadDevice(r.Config, snap, confine)
	if err != nil {
		return nil, nil, err
	}
	opts := RenderOptions(r.Config, resolver)
	opts.CheckAllowPaths = confine
	d, err := render.Render(ctx, dev, Revision(snap), opts)
	return snap, d, err
}

// LoadDevice loads and validates this device's manifests from a snapshot.
// With confine, files and models must lie under allowPaths.
func LoadDevice(c *manifest.AgentConfig, snap *gitsource.Snapshot, confine bool) (*manifest.Device, error) {
	inputs := make([]manifest.Input, len(snap.Files))
	for i, f := range snap.Files {
		inputs[i] = manifest.Input{Name: f.Path, Data: f.Data}
	}
	dev, err := manifest.LoadDevice(c.Device, inputs, manifest.ValidateOptions{AllowPaths: c.AllowPaths, CheckAllowPaths: confine})
	if err != nil {
		return nil, fmt.Errorf("invalid manifests for device %s at %s:\n%w", c.Device, Revision(snap), err)
	}
	return dev, nil
}

// Render loads this device's manifests from a snapshot and renders its
// desired state, pinning models through resolver.
func Render(ctx context.Context, c *manifest.AgentConfig, snap *gitsource.Snapshot, resolver render.Resolver) (*render.Desired, error) {
	dev, err := LoadDevice(c, snap, true)
	if err != nil {
		return nil, err
	}
	return render.Render(ctx, dev, Revision(snap), RenderOptions(c, resolver))
}

// RenderOptions are render's options from the agent config.
func RenderOptions(c *manifest.AgentConfig, resolver render.Resolver) render.Options {
	return render.Options{Root: c.Root, StateDir: c.StateDir, AllowPaths: c.AllowPaths, CheckAllowPaths: true, Resolver: resolver}
}
