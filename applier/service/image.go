package service

import (
	"context"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// ImageResolving is a Runtime whose services run images pinned to a
// digest at render time. The driver asks it for a resolver once (a tick:
// services that run one image ask its registry once); applied says what a
// service last applied (the zero AppliedImage when nothing).
type ImageResolving interface {
	ImageResolver(node Node, applied func(service string) (AppliedImage, error)) render.ImageResolver
}

// AppliedImage is the image a service last applied: as declared, the
// digest it ran and the tag it resolved through.
type AppliedImage struct {
	Image, Digest, Tag string
}

// Preparer is a Runtime that checks, before any action of a plan runs,
// that the instances a plan starts can run (and fetches what they need),
// so that a plan that cannot work fails with nothing stopped.
type Preparer interface {
	Prepare(ctx context.Context, s render.Service, ins []Instance) error
}

var _ render.ImageResolver = (*Driver)(nil)

// ResolveImage pins the image of a service through the runtime that
// resolves images, against what the service last applied; by its
// declaration (render.Declared) on a node without one.
func (d *Driver) ResolveImage(ctx context.Context, service, ref string) (render.Resolution, error) {
	r := d.imageResolver()
	if r == nil {
		return render.Declared{}.ResolveImage(ctx, service, ref)
	}
	res, err := r.ResolveImage(ctx, service, ref)
	if err != nil {
		return res, err
	}
	return d.verifyImage(ctx, service, ref, nil, res), nil
}

// ResolveServiceImage is ResolveImage of s's image, which must also carry
// the signatures s's own verify asks for.
func (d *Driver) ResolveServiceImage(ctx context.Context, s manifest.Service) (render.Resolution, error) {
	r := d.imageResolver()
	if r == nil {
		return render.Declared{}.ResolveImage(ctx, s.Name, s.Image)
	}
	res, err := r.ResolveImage(ctx, s.Name, s.Image)
	if err != nil {
		return res, err
	}
	return d.verifyImage(ctx, s.Name, s.Image, s.Verify, res), nil
}

// imageResolver is the driver's resolver of images, made once.
func (d *Driver) imageResolver() render.ImageResolver {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.resolvers["image"]; ok {
		return r
	}
	var r render.ImageResolver
	for _, rt := range d.sup.rts.All() {
		if ir, ok := rt.(ImageResolving); ok {
			r = ir.ImageResolver(d.node(), d.appliedImage)
			break
		}
	}
	if d.resolvers == nil {
		d.resolvers = map[string]render.ImageResolver{}
	}
	d.resolvers["image"] = r
	return r
}

// appliedImage is the image service last applied, from its record.
func (d *Driver) appliedImage(service string) (AppliedImage, error) {
	rec, err := d.record(service)
	if err != nil || rec == nil {
		return AppliedImage{}, err
	}
	return AppliedImage{Image: rec.Image, Digest: rec.ImageDigest, Tag: rec.ImageTag}, nil
}

var _ applier.Preparer = (*Driver)(nil)

// Prepare has the runtime of a service that a plan creates or updates
// check its instances and fetch what they need (a container's image),
// when it prepares, before any action of the plan runs.
func (d *Driver) Prepare(ctx context.Context, a planner.Action, spec any) error {
	s, ok := spec.(render.Service)
	if !ok || len(s.Replicas) == 0 {
		return nil
	}
	rt, err := d.runtime(s)
	if err != nil {
		return err
	}
	p, ok := rt.(Preparer)
	if !ok {
		return nil
	}
	ins, _, err := d.instances(s)
	if err != nil {
		return err
	}
	return p.Prepare(ctx, s, ins)
}

// ImageFetcher is a Runtime that fetches an image ahead of the start that
// needs it (the engine pulls it), for the agent to stage a release.
type ImageFetcher interface {
	EnsureImage(ctx context.Context, service, image string) error
}

// Stage has the runtime of s fetch what its instances need to start (a
// container's image), changing nothing that runs. The agent stages a
// release with it in the background, beside its ticks.
func (d *Driver) Stage(ctx context.Context, s render.Service) error {
	if len(s.Replicas) == 0 {
		return nil
	}
	rt, err := d.runtime(s)
	if err != nil {
		return err
	}
	if f, ok := rt.(ImageFetcher); ok {
		return f.EnsureImage(ctx, s.Name, s.Replicas[0].Image)
	}
	return nil
}
