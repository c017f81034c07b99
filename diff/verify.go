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

// verifyingResolver resolves models in their registry and checks that
// each digest carries the signatures models.verify and the model's own
// verify ask for: a model a device would hold for its signature fails in
// CI.
type verifyingResolver struct {
	*render.Registry
	node     *manifest.ArtifactVerify
	verifier *verify.Verifier
}

// verifying wraps reg in a verifyingResolver, or returns it as it is
// when no model can ask for a signature (none does without the agents'
// models.verify unless its own verify does: that is checked per model).
func verifying(reg *render.Registry, opts Options) render.Resolver {
	return &verifyingResolver{Registry: reg, node: opts.Verify, verifier: &verify.Verifier{Options: opts.Registry}}
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
