package model

import (
	"context"
	"fmt"
	"maps"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/oci"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Stage brings every blob of m's artifact that its include selects into the
// store (a tar layer unpacked into its tree) and changes nothing else: no
// record, no version folder, nothing in use. It may run
// beside a tick (the agent stages a release in the background while its
// ticks keep the applied one converged). The blobs, and the partial
// downloads of those not whole yet, are kept from garbage collection until
// Unstage, so a later Prepare of m finds them and downloads nothing. It
// returns the bytes downloaded; progress, when not nil, is told how each
// blob moves.
func (d *Driver) Stage(ctx context.Context, m render.Model, progress oci.Progress) (int64, error) {
	if _, err := v1.NewHash(m.Digest); err != nil {
		return 0, fmt.Errorf("%s: stage %s: not resolved to a digest", planner.ModelID(m.Name), m.Ref)
	}
	d.keepStaged(m.Digest) // the manifest, before it is read
	art, err := d.selected(ctx, m)
	if err != nil {
		return 0, err
	}
	blobs := art.Blobs()
	digests := make([]string, 0, len(blobs))
	for _, b := range blobs {
		digests = append(digests, b.Digest.String())
	}
	d.keepStaged(digests...)
	limit, err := d.unpackLimit()
	if err != nil {
		return 0, err
	}
	if err := d.refused(m.Digest, limit); err != nil {
		return 0, fmt.Errorf("%s: %w", planner.ModelID(m.Name), err)
	}
	return d.fetch(ctx, m, art, progress, limit)
}

// Unstage lets garbage collection have the blobs Stage kept (a staged
// release superseded, or activated: its models are declared then, and
// keep their blobs themselves).
func (d *Driver) Unstage() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.staged)
}

func (d *Driver) keepStaged(digests ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.staged == nil {
		d.staged = map[string]bool{}
	}
	for _, s := range digests {
		d.staged[s] = true
	}
}

// Keep keeps what m's artifact has in the store from this tick's garbage
// collection (the driver forgets it with the tick): the models of a
// release held while the applied one is reverted to.
func (d *Driver) Keep(m render.Model) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keptDigests == nil {
		d.keptDigests = map[string]bool{}
	}
	d.keptDigests[m.Digest] = true
}

// addStaged adds the blobs Stage and Keep keep to keep.
func (d *Driver) addStaged(keep map[string]bool) {
	d.mu.Lock()
	kept := slices.Collect(maps.Keys(d.keptDigests))
	for s := range d.staged {
		keep[s] = true
	}
	d.mu.Unlock()
	for _, digest := range kept {
		keep[digest] = true
		for _, b := range d.blobs(render.Model{Digest: digest}) {
			keep[b] = true
		}
	}
}
