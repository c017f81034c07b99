package container

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/render"
)

// Finish, once a plan applied in full, removes the containers of this
// device that tend recorded creating and no longer runs (see Prune), and the images that no declared service runs, keeping the
// node.KeepImages used last before them (what a rollback starts
// again). A node that runs no container asks no engine.
func (r *Runtime) Finish(ctx context.Context, node service.Node, declared []render.Service, live func() ([]service.Instance, error)) error {
	var images []string
	for _, s := range declared {
		if s.Kind == Kind && s.Image != "" && len(s.Replicas) > 0 && !slices.Contains(images, s.Replicas[0].Image) {
			images = append(images, s.Replicas[0].Image)
		}
	}
	// The images container services ran, the most recently used first.
	dir := statedir.Dir(node.StateDir).Services()
	var used []string
	if _, err := statedir.ReadJSON(dir.Images(), &used); err != nil {
		return err
	}
	if len(images) == 0 && len(used) == 0 {
		return nil
	}
	removed, err := r.Prune(ctx, node.Device, live)
	for _, id := range removed {
		r.log.WarnContext(ctx, "removed a container of this device that tend created and no longer runs", "container", id)
	}
	var errs []error
	errs = append(errs, err)
	keep, drop := keptImages(images, used, node.KeepImages)
	for _, image := range drop {
		if err := r.RemoveImage(ctx, image); err != nil {
			errs = append(errs, err)
			keep = append(keep, image) // asked again next time
		}
	}
	errs = append(errs, statedir.WriteJSON(string(dir), statedir.ImagesFile, keep, 0o644))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prune containers and images: %w", err)
	}
	return nil
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
