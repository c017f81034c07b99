package container

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// ImageResolver returns a resolver that pins the images of container
// services to digests, against what each service last applied (applied),
// asking each registry once per image for its life (the service driver
// makes one a tick).
func (r *Runtime) ImageResolver(node service.Node, applied func(service string) (service.AppliedImage, error)) render.ImageResolver {
	return &pinner{opts: node.Registry, state: node.StateDir, applied: applied, rt: r}
}

// pinner resolves images: one HEAD of a tag in its registry, with the
// registry options of the node (the same credentials as
// models).
type pinner struct {
	opts    transport.Options
	state   string // stateDir, for the releases rolled back here
	rt      *Runtime
	applied func(service string) (service.AppliedImage, error)

	mu          sync.Mutex
	resolved    map[string]resolvedImage // by image ref
	quarantined map[string]applier.Quarantined
}

type resolvedImage struct {
	pinned transport.Resolved
	err    error
}

// ResolveImage pins the image of a container service to a digest. Against
// what the service last applied: a registry that cannot be asked while
// the image is the one applied keeps the applied digest (the device is
// offline, a warning); a new image that cannot be asked holds the service;
// an image the registry says does not exist, or refuses, fails the render.
func (p *pinner) ResolveImage(ctx context.Context, svc, ref string) (render.Resolution, error) {
	rec, err := p.applied(svc)
	if err != nil {
		return render.Resolution{}, err
	}
	pinned, err := p.resolve(ctx, ref)
	if err != nil {
		same := rec.Image == ref && rec.Digest != ""
		switch {
		case ctx.Err() != nil, errors.Is(err, transport.ErrNotFound), errors.Is(err, transport.ErrUnauthorized):
			return render.Resolution{}, err
		case !same:
			return render.Resolution{Digest: ref, Held: fmt.Errorf("image %s cannot be resolved: %w", ref, err)}, nil
		}
		return render.Resolution{Digest: rec.Digest, Tag: rec.Tag,
			Offline: fmt.Errorf("%s kept at %s (%s): registry unreachable: %w", planner.ServiceID(svc), planner.ShortDigest(rec.Digest), ref, err)}, nil
	}
	res := render.Resolution{Digest: pinned.Digest, Tag: pinned.Tag}
	if e, ok, err := p.rolledBack(svc, pinned); err != nil {
		return render.Resolution{}, err
	} else if ok {
		// The tag moved to an image rolled back on this node: the
		// service keeps the image it runs, or waits.
		why := quarantinedError(svc, ref, pinned, e)
		if rec.Image != ref || rec.Digest == "" || rec.Digest == pinned.Digest {
			return render.Resolution{Digest: ref, Reason: "image " + ref + ", rolled back here", Held: why, Quarantined: why}, nil
		}
		return render.Resolution{Digest: rec.Digest, Tag: rec.Tag, Quarantined: why}, nil
	}
	if rec.Digest != "" && rec.Digest != pinned.Digest {
		res.Reason = ImageReason(rec.Image, rec.Digest, ref, pinned)
	}
	if rec.Digest != pinned.Digest {
		res.Pull = p.rt.missing(ctx, render.Repository(ref)+"@"+pinned.Digest)
	}
	return res, nil
}

// missing reports whether the engine lacks image; an engine that cannot
// say is taken to have it (the apply's pull says what is wrong).
func (r *Runtime) missing(ctx context.Context, image string) bool {
	_, err := r.cli.ImageInspect(ctx, image)
	return isNotFound(err)
}

// rolledBack returns the quarantine entry of the image pinned for
// service svc, when it was rolled back on this node (see
// applier.ReleaseKey).
func (p *pinner) rolledBack(svc string, pinned transport.Resolved) (applier.Quarantined, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.quarantined == nil {
		q, err := applier.LoadQuarantine(p.state)
		if err != nil {
			return applier.Quarantined{}, false, err
		}
		p.quarantined = q
	}
	e, ok := p.quarantined[applier.ReleaseKey(planner.ServiceID(svc), pinned.Digest)]
	return e, ok, nil
}

// quarantinedError says why service svc does not run the image ref
// pinned: e, and what to do.
func quarantinedError(svc, ref string, pinned transport.Resolved, e applier.Quarantined) error {
	id, short := planner.ServiceID(svc), planner.ShortDigest(pinned.Digest)
	return fmt.Errorf("%s image %s (%s) was rolled back on this node at %s: %s; push a new image, or run tend retry %s@%s",
		id, ref, short, e.At.UTC().Format(time.RFC3339), e.Reason, id, short)
}

// resolve pins ref in its registry, once per pinner.
func (p *pinner) resolve(ctx context.Context, ref string) (transport.Resolved, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.resolved[ref]; ok {
		return r.pinned, r.err
	}
	pinned, err := transport.Resolve(ctx, ref, "", p.opts)
	if ctx.Err() == nil {
		if p.resolved == nil {
			p.resolved = map[string]resolvedImage{}
		}
		p.resolved[ref] = resolvedImage{pinned, err}
	}
	return pinned, err
}

// ImageReason says why a container service's image changes, as plans
// print it: "image sha256:ab… → sha256:cd… (tag 24.08 moved)", or with
// another ref "(image REF)".
func ImageReason(oldRef, oldDigest, ref string, pinned transport.Resolved) string {
	s := "image " + planner.ShortDigest(oldDigest) + " → " + planner.ShortDigest(pinned.Digest)
	switch {
	case oldRef != ref:
		s += " (image " + ref + ")"
	case pinned.Tag != "":
		s += " (tag " + pinned.Tag + " moved)"
	}
	return s
}
