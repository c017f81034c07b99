package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/oci"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

var _ render.ImageResolver = (*Driver)(nil)

// ResolveImage pins the image of a container service to a digest: one
// HEAD of its tag in its registry, with the registry options the driver
// was given (the same credentials as models). Against what the service
// last applied: a registry that cannot be asked while the image is the
// one applied keeps the applied digest (the device is offline, a
// warning); a new image that cannot be asked holds the service; an image
// the registry says does not exist, or refuses, fails the render.
func (d *Driver) ResolveImage(ctx context.Context, service, ref string) (render.Resolution, error) {
	rec, err := d.record(service)
	if err != nil {
		return render.Resolution{}, err
	}
	pinned, err := d.resolve(ctx, ref)
	if err != nil {
		same := rec != nil && rec.Image == ref && rec.ImageDigest != ""
		switch {
		case ctx.Err() != nil, errors.Is(err, oci.ErrNotFound), errors.Is(err, oci.ErrUnauthorized):
			return render.Resolution{}, err
		case !same:
			return render.Resolution{Digest: ref, Held: fmt.Errorf("image %s cannot be resolved: %w", ref, err)}, nil
		}
		return render.Resolution{Digest: rec.ImageDigest, Tag: rec.ImageTag,
			Offline: fmt.Errorf("%s kept at %s (%s): registry unreachable: %w", planner.ServiceID(service), planner.ShortDigest(rec.ImageDigest), ref, err)}, nil
	}
	res := render.Resolution{Digest: pinned.Digest, Tag: pinned.Tag}
	if rec != nil && rec.ImageDigest != "" && rec.ImageDigest != pinned.Digest {
		res.Reason = ImageReason(rec.Image, rec.ImageDigest, ref, pinned)
	}
	return res, nil
}

// resolve pins ref in its registry, once per driver (a tick): services
// that run one image ask its registry once.
func (d *Driver) resolve(ctx context.Context, ref string) (oci.Resolved, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.resolved[ref]; ok {
		return r.pinned, r.err
	}
	pinned, err := oci.Resolve(ctx, ref, "", d.opts.Registry)
	if ctx.Err() == nil {
		if d.resolved == nil {
			d.resolved = map[string]resolvedImage{}
		}
		d.resolved[ref] = resolvedImage{pinned, err}
	}
	return pinned, err
}

type resolvedImage struct {
	pinned oci.Resolved
	err    error
}

// ImageReason says why a container service's image changes, as plans
// print it: "image sha256:ab… → sha256:cd… (tag 24.08 moved)", or with
// another ref "(image REF)".
func ImageReason(oldRef, oldDigest, ref string, pinned oci.Resolved) string {
	s := "image " + planner.ShortDigest(oldDigest) + " → " + planner.ShortDigest(pinned.Digest)
	switch {
	case oldRef != ref:
		s += " (image " + ref + ")"
	case pinned.Tag != "":
		s += " (tag " + pinned.Tag + " moved)"
	}
	return s
}

var _ applier.Preparer = (*Driver)(nil)

// Prepare pulls the image of a container service that a plan creates or
// updates before any action of the plan runs: an image that cannot be
// pulled (it does not exist, not for this platform, the registry refuses)
// fails the plan with nothing stopped.
func (d *Driver) Prepare(ctx context.Context, a planner.Action, spec any) error {
	s, ok := spec.(render.Service)
	if !ok || s.Image == "" || len(s.Replicas) == 0 {
		return nil
	}
	p, ok := d.sup.rt.(Puller)
	if !ok {
		return nil
	}
	if err := p.EnsureImage(ctx, s.Name, s.Replicas[0].Image); err != nil {
		return fmt.Errorf("image %s: %w", s.Image, err)
	}
	return nil
}
