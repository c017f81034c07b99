package container

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"
)

// Prune removes the containers of device that carry tend's labels and
// whose invocation none of those live returns names: left by a tend that
// died between creating a container and recording it, or by a service
// removed while no agent ran. It lists the containers first and asks live
// after, so a container started meanwhile (its record written before its
// start) is named. One list call when there is nothing to remove. It
// returns the ids removed.
func (r *Runtime) Prune(ctx context.Context, device string, live func() (map[string]bool, error)) ([]string, error) {
	cs, err := r.List(ctx, device)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, nil
	}
	names, err := live()
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, c := range cs {
		if names[c.Labels[LabelInvocation]] {
			continue
		}
		if err := r.remove(ctx, c.ID); err != nil {
			return removed, err
		}
		removed = append(removed, c.ID)
	}
	return removed, nil
}

// RemoveImage removes image (REPO@sha256:…) from the engine. An image a
// container still uses, or that is gone already, is no error: it stays,
// or it was removed.
func (r *Runtime) RemoveImage(ctx context.Context, image string) error {
	_, err := r.cli.ImageRemove(ctx, image, client.ImageRemoveOptions{PruneChildren: true})
	switch {
	case err == nil, isNotFound(err), isConflict(err):
		return nil
	}
	return r.engineError(fmt.Errorf("remove image %s: %w", image, err))
}
