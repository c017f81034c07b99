package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Resolve pins m to a digest in its registry, for render. A ref by digest
// whose manifest is in the store needs no registry. When the registry
// cannot be asked and the active version was pulled for the same ref, the
// model is held there: the resolution names the active digest and says
// why in Held. When the digest is not the active one, the reason says what
// changed and what pulling it costs, from its manifest (read into the
// store).
func (d *Driver) Resolve(ctx context.Context, m manifest.Model) (render.Resolution, error) {
	rec, err := d.record(m.Name)
	if err != nil {
		return render.Resolution{}, err
	}
	want := render.Model{Name: m.Name, Ref: m.Ref, Path: m.Path}
	if m.Policy != nil {
		want.Policy = m.Policy.Semver
	}
	if _, err := d.repository(m.Ref); err != nil {
		return render.Resolution{}, err
	}
	var res render.Resolution
	pinned, err := d.resolve(ctx, m.Ref, want.Policy)
	if err != nil {
		act := rec.active()
		if act == nil || rec.Ref != m.Ref || rec.Policy != want.Policy || errors.Is(err, oci.ErrNotFound) && want.Policy == "" {
			return render.Resolution{}, err
		}
		pinned = oci.Resolved{Ref: m.Ref, Tag: act.Tag, Digest: act.Digest}
		res.Held = fmt.Errorf("%s held at %s (%s): %w", planner.ModelID(m.Name), render.ShortDigest(act.Digest), m.Ref, err)
	}
	res.Digest, res.Tag = pinned.Digest, pinned.Tag
	want.Digest, want.Tag = pinned.Digest, pinned.Tag
	if act := rec.active(); act != nil && act.Digest == pinned.Digest {
		return res, nil
	}
	download := int64(-1) // a held model downloads nothing this tick
	if res.Held == nil {
		if download, err = d.missing(ctx, want); err != nil {
			return render.Resolution{}, err
		}
	}
	res.Reason = render.ModelReason(want, rec.pinned(), download)
	return res, nil
}

func (d *Driver) resolve(ctx context.Context, ref, policy string) (oci.Resolved, error) {
	if policy == "" {
		if r, err := name.NewDigest(ref, d.opts.Registry.NameOptions(ref)...); err == nil {
			if h, err := v1.NewHash(r.DigestStr()); err == nil && d.store.Has(h) {
				return oci.Resolved{Ref: ref, Digest: h.String()}, nil
			}
		}
	}
	return oci.Resolve(ctx, ref, policy, d.opts.Registry)
}

// missing returns the bytes of m's blobs that are not in the store.
func (d *Driver) missing(ctx context.Context, m render.Model) (int64, error) {
	art, err := d.artifact(ctx, m)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, desc := range art.Blobs() {
		if !d.store.Has(desc.Digest) {
			n += desc.Size
		}
	}
	return n, nil
}
