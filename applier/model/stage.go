package model

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/oci/transport"
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
func (d *Driver) Stage(ctx context.Context, m render.Model, progress transport.Progress) (int64, error) {
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
// keep their blobs themselves). Their partial downloads are left for
// DropPartials.
func (d *Driver) Unstage() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dropped == nil {
		d.dropped = map[string]bool{}
	}
	for s := range d.staged {
		d.dropped[s] = true
	}
	clear(d.staged)
}

// DropPartials removes the partial downloads of the blobs Unstage let go
// (a superseded release's) that next, the models of the release staging
// now, do not use, and that no download holds (the partial file's flock
// tells; see store.Store.RemovePartial): a storm of releases superseding
// each other leaves no partial files behind. It reads next's manifests
// first (from the store, or the registry), so a blob the new release
// shares keeps its partial download to resume; when one cannot be read,
// nothing is removed and the partial files wait for the next call, or
// for garbage collection. Call it once the superseded downloads ended.
func (d *Driver) DropPartials(ctx context.Context, next []render.Model) error {
	keep := map[string]bool{}
	for _, m := range next {
		art, err := d.selected(ctx, m)
		if err != nil {
			return err
		}
		for _, b := range art.Blobs() {
			keep[b.Digest.String()] = true
		}
	}
	d.mu.Lock()
	for s := range d.staged {
		keep[s] = true
	}
	var drop []v1.Hash
	for s := range d.dropped {
		if h, err := v1.NewHash(s); err == nil && !keep[s] {
			drop = append(drop, h)
		}
	}
	clear(d.dropped)
	d.mu.Unlock()
	var errs []error
	for _, h := range drop {
		n, err := d.store.RemovePartial(h)
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			d.log.InfoContext(ctx, "partial download of a superseded release removed", logKeyDigest, h.String(), logKeyBytes, n)
		}
	}
	return errors.Join(errs...)
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
