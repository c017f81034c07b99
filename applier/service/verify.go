package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/verify"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// verifyImage holds res, the resolution of service's image ref, when its
// digest is new to the service and does not carry the signatures
// runtime.verify and the service's own verify (own) ask for: the service keeps the image it runs, and the
// plan says why. An image the service already runs is checked again
// under the requirements asked for now, and only warned of (see
// verify.ActiveWarning): the verifier remembers what it verified, and
// for a while what it could not look up, so this asks the registry
// nothing unless verify changed (see verify.Verifier.Recheck).
func (d *Driver) verifyImage(ctx context.Context, service, ref string, own *manifest.ArtifactVerify, res render.Resolution) render.Resolution {
	reqs := manifest.Requirements(d.opts.Verify, own)
	if len(reqs) == 0 || res.Held != nil || !strings.HasPrefix(res.Digest, "sha256:") {
		return res
	}
	if applied, err := d.appliedImage(service); err == nil && applied.Digest == res.Digest {
		if res.Offline == nil && d.opts.Verifier != nil {
			if r, err := name.ParseReference(ref, d.opts.Registry.NameOptions(ref)...); err == nil {
				res.ActiveUnverified = verify.ActiveWarning(d.opts.Verifier.Recheck(ctx, verify.Target{Kind: verify.KindImage,
					ID: planner.ServiceID(service), Repository: r.Context(), Digest: res.Digest}, reqs))
			}
		}
		return res
	}
	err := errors.New("signature verification is required and this tend has no verifier")
	if d.opts.Verifier != nil {
		var r name.Reference
		if r, err = name.ParseReference(ref, d.opts.Registry.NameOptions(ref)...); err == nil {
			err = d.opts.Verifier.Verify(ctx, verify.Target{Kind: verify.KindImage, ID: planner.ServiceID(service),
				Repository: r.Context(), Digest: res.Digest}, reqs)
		}
	}
	if err != nil {
		res.Held = err
		res.Reason = fmt.Sprintf("image %s → %s, signature not verified", ref, planner.ShortDigest(res.Digest))
	}
	return res
}
