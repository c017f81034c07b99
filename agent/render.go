package agent

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/render"
	"github.com/tend-dev/tend/source"
)

// Manifests fetches this device's manifests from the fleet repo at its
// target and loads and validates them. Nothing on the node is read or
// written: the repo is cloned into a temporary folder, removed after, and
// neither the last applied commit (the rewind check) nor the quarantine
// plays a part.
func (r *Reconciler) Manifests(ctx context.Context) (*source.Snapshot, *manifest.Device, error) {
	snap, comp, err := r.Compose(ctx, true)
	if comp == nil {
		return snap, nil, err
	}
	return snap, comp.Device, err
}

// Compose fetches this device's manifests from the fleet repo at its
// target and composes them (which layer set what: render --explain), as
// Manifests does: nothing on the node is read or written, neither root
// nor stateDir need exist, and no model or image is resolved. With
// confine, files and models must lie under allowPaths.
func (r *Reconciler) Compose(ctx context.Context, confine bool) (*source.Snapshot, *manifest.Composed, error) {
	dir, err := os.MkdirTemp("", "tend-compose-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	f, err := newFetcher(r.Config, dir, r.verifier(), r.logger())
	if err != nil {
		return nil, nil, err
	}
	snap, err := fetch(ctx, r.Config, f, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	comp, err := LoadDevice(r.Config, snap, confine)
	if err != nil {
		return snap, nil, err
	}
	return snap, comp, nil
}

// LoadDevice composes and validates this device's desired state from a
// snapshot: its Device documents and the profiles its labels select (the
// agent config's labels, under those of its Device documents in Git).
// With confine, files and models must lie under allowPaths. A Device
// document for another device is an error only under a path with
// {device}; elsewhere it is another device's, and ignored.
func LoadDevice(c *manifest.AgentConfig, snap *source.Snapshot, confine bool) (*manifest.Composed, error) {
	inputs := make([]manifest.Input, len(snap.Files))
	for i, f := range snap.Files {
		inputs[i] = manifest.Input{Name: f.Path, Data: f.Data, PerDevice: f.PerDevice}
	}
	comp, err := manifest.Compose(inputs, manifest.ComposeOptions{Device: c.Device, Labels: c.Labels,
		ValidateOptions: manifest.ValidateOptions{AllowPaths: c.AllowPaths, CheckAllowPaths: confine}})
	if err != nil {
		return nil, fmt.Errorf("invalid manifests for device %s at %s:\n%w", c.Device, snap.Revision.String(), err)
	}
	return comp, nil
}

// RenderOptions are render's options from the agent config.
func RenderOptions(c *manifest.AgentConfig, resolver render.Resolver) render.Options {
	return render.Options{Root: c.Root, StateDir: c.StateDir, AllowPaths: c.AllowPaths, CheckAllowPaths: true, Resolver: resolver}
}

// composeCache keeps the last composition of a tick: while the commit does
// not move (gitsource then reuses the files it read) and the config is the
// same, the composition is too, and a no-op tick does not parse and merge
// the profiles again.
type composeCache struct {
	mu   sync.Mutex
	key  string
	comp *manifest.Composed
}

func (cc *composeCache) load(c *manifest.AgentConfig, snap *source.Snapshot, confine bool) (*manifest.Composed, error) {
	if len(snap.Files) == 0 {
		return LoadDevice(c, snap, confine)
	}
	// A commit's files are the same at every read, so the revision and
	// the paths stand for them; the rest is what composing reads of the
	// config, quoted so that no two configs print alike.
	labels := make([]string, 0, len(c.Labels))
	for k, v := range c.Labels {
		labels = append(labels, strconv.Quote(k)+"="+strconv.Quote(v))
	}
	sort.Strings(labels)
	key := fmt.Sprintf("%q %q %q %q %q %q %v", snap.Revision.String(), c.Source.Path, c.Source.Paths, c.Device, labels, c.AllowPaths, confine)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.key == key {
		return cc.comp, nil
	}
	comp, err := LoadDevice(c, snap, confine)
	if err != nil {
		return nil, err
	}
	cc.key, cc.comp = key, comp
	return comp, nil
}
