package agent

import (
	"context"
	"fmt"
	"os"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/render"
)

// Manifests fetches this device's manifests from the fleet repo at its
// target and loads and validates them. Nothing on the node is read or
// written: the repo is cloned into a temporary folder, removed after, and
// neither the last applied commit (the rewind check) nor the quarantine
// plays a part.
func (r *Reconciler) Manifests(ctx context.Context) (*gitsource.Snapshot, *manifest.Device, error) {
	dir, err := os.MkdirTemp("", "tend-validate-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	snap, err := fetchInto(ctx, r.Config, nil, dir, r.logger())
	if err != nil {
		return nil, nil, err
	}
	dev, err := LoadDevice(r.Config, snap, true)
	return snap, dev, err
}

// LoadDevice loads and validates this device's manifests from a snapshot.
// With confine, files and models must lie under allowPaths.
func LoadDevice(c *manifest.AgentConfig, snap *gitsource.Snapshot, confine bool) (*manifest.Device, error) {
	inputs := make([]manifest.Input, len(snap.Files))
	for i, f := range snap.Files {
		inputs[i] = manifest.Input{Name: f.Path, Data: f.Data, PerDevice: f.PerDevice}
	}
	dev, err := manifest.LoadDevice(c.Device, inputs, manifest.ValidateOptions{AllowPaths: c.AllowPaths, CheckAllowPaths: confine})
	if err != nil {
		return nil, fmt.Errorf("invalid manifests for device %s at %s:\n%w", c.Device, Revision(snap), err)
	}
	return dev, nil
}

// RenderOptions are render's options from the agent config.
func RenderOptions(c *manifest.AgentConfig, resolver render.Resolver) render.Options {
	return render.Options{Root: c.Root, StateDir: c.StateDir, AllowPaths: c.AllowPaths, CheckAllowPaths: true, Resolver: resolver}
}
