package diff

import (
	"context"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/verify"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// verifyingResolver resolves models and the images of container services
// in their registries and checks that each digest carries the signatures
// the node asks for (models.verify, runtime.verify) and the model's or
// service's own verify adds: a model or image a device would hold for its
// signature fails in CI.
type verifyingResolver struct {
	*render.Registry
	node     *manifest.ArtifactVerify // models.verify
	images   *manifest.ArtifactVerify // runtime.verify
	verifier *verify.Verifier
}

var _ render.ServiceImageResolver = (*verifyingResolver)(nil)

// verifying wraps reg in a verifyingResolver with the requirements of
// opts; a model or service that asks for no signature is only resolved.
func verifying(reg *render.Registry, opts Options) *verifyingResolver {
	return &verifyingResolver{Registry: reg, node: opts.Verify, images: opts.ImageVerify, verifier: &verify.Verifier{Options: opts.Registry}}
}

// Resolve resolves m, then checks the signatures of its digest.
func (r *verifyingResolver) Resolve(ctx context.Context, m manifest.Model) (render.Resolution, error) {
	res, err := r.Registry.Resolve(ctx, m)
	if err != nil {
		return res, err
	}
	reqs := manifest.Requirements(r.node, m.Verify)
	if len(reqs) == 0 || !strings.HasPrefix(res.Digest, "sha256:") {
		return res, nil
	}
	repo, err := name.NewRepository(render.Repository(m.Ref), r.Options.NameOptions(m.Ref)...)
	if err != nil {
		return res, err
	}
	if err := r.verifier.Verify(ctx, verify.Target{Kind: verify.KindModel, ID: planner.ModelID(m.Name), Repository: repo, Digest: res.Digest}, reqs); err != nil {
		return res, err
	}
	return res, nil
}

// ResolveServiceImage resolves the image of s, then checks the signatures
// of its digest against runtime.verify and s's own verify.
func (r *verifyingResolver) ResolveServiceImage(ctx context.Context, s manifest.Service) (render.Resolution, error) {
	res, err := r.Registry.ResolveImage(ctx, s.Name, s.Image)
	if err != nil {
		return res, err
	}
	reqs := manifest.Requirements(r.images, s.Verify)
	if len(reqs) == 0 || !strings.HasPrefix(res.Digest, "sha256:") {
		return res, nil
	}
	ref, err := name.ParseReference(s.Image, r.Options.NameOptions(s.Image)...)
	if err != nil {
		return res, err
	}
	if err := r.verifier.Verify(ctx, verify.Target{Kind: verify.KindImage, ID: planner.ServiceID(s.Name), Repository: ref.Context(), Digest: res.Digest}, reqs); err != nil {
		return res, err
	}
	return res, nil
}
