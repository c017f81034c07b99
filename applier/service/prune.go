package service

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/render"
)

// ContainerPruner is a container Runtime that removes what tend no longer
// needs: containers of the device that no record names, and images.
type ContainerPruner interface {
	Prune(ctx context.Context, device string, live func() (map[string]bool, error)) ([]string, error)
	RemoveImage(ctx context.Context, image string) error
}

var _ applier.Finisher = (*Driver)(nil)

// Finish, once a plan applied in full, removes the containers of this
// device that carry tend's labels and that no instance record names, and
// the images that no declared service runs, keeping the
// DriverOptions.KeepImages used last before them (what a rollback starts
// again). A node that runs no container asks no engine.
func (d *Driver) Finish(ctx context.Context, declared map[string]any) error {
	var images []string
	for _, spec := range declared {
		if s, ok := spec.(render.Service); ok && s.Image != "" && len(s.Replicas) > 0 && !slices.Contains(images, s.Replicas[0].Image) {
			images = append(images, s.Replicas[0].Image)
		}
	}
	var used []string
	if _, err := atomicfile.ReadJSON(d.sup.dir.Images(), &used); err != nil {
		return err
	}
	if len(images) == 0 && len(used) == 0 {
		return nil
	}
	p, ok := pruner(d.sup.rt)
	if !ok {
		return nil
	}
	live := func() (map[string]bool, error) {
		recs, err := d.sup.records()
		if err != nil {
			return nil, err
		}
		names := map[string]bool{}
		for _, r := range recs {
			if r.Instance.Invocation != "" {
				names[r.Instance.Invocation] = true
			}
		}
		return names, nil
	}
	removed, err := p.Prune(ctx, d.opts.Device, live)
	for _, id := range removed {
		d.sup.log.WarnContext(ctx, "removed a container of this device that no service record names", "container", id)
	}
	var errs []error
	errs = append(errs, err)
	keep, drop := keptImages(images, used, d.opts.KeepImages)
	for _, image := range drop {
		if err := p.RemoveImage(ctx, image); err != nil {
			errs = append(errs, err)
			keep = append(keep, image) // asked again next time
		}
	}
	errs = append(errs, atomicfile.WriteJSON(string(d.sup.dir), statedir.ImagesFile, keep, 0o644))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prune containers and images: %w", err)
	}
	return nil
}

// pruner is the container runtime of rt, when it prunes.
func pruner(rt Runtime) (ContainerPruner, bool) {
	if r, ok := rt.(Runtimes); ok {
		rt = r.Container
	}
	p, ok := rt.(ContainerPruner)
	return p, ok
}

// keptImages returns the images to keep, most recently used first: those
// in use, then the keep used last before them; and those to remove.
func keptImages(inUse, used []string, keep int) (kept, drop []string) {
	kept = slices.Clone(inUse)
	n := 0
	for _, image := range used {
		switch {
		case slices.Contains(kept, image):
		case n < keep:
			kept = append(kept, image)
			n++
		default:
			drop = append(drop, image)
		}
	}
	return kept, drop
}
