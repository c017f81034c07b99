package cosign

import (
	"context"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/verify"
)

func init() { verify.RegisterCosign(load) }

// load reads the files of c into its policy.
func load(c *manifest.CosignVerify) (verify.CosignPolicy, error) {
	return loadPolicy(c)
}

var _ verify.CosignPolicy = (*policy)(nil)

// Check verifies t's Sigstore bundles against p, then its signatures in
// cosign's legacy format when none passed.
func (p *policy) Check(ctx context.Context, sigs *verify.Signatures, t verify.Target) error {
	found, err := sigs.Bundles(ctx)
	if err != nil {
		return err
	}
	tl := tally{attestation: found.Attestations, unread: found.Unread}
	for _, b := range found.Raw {
		if p.checkBundle(b, t.Digest, &tl) {
			return nil
		}
	}
	ok, err := p.legacy(ctx, sigs, t.Digest, &tl)
	if err != nil {
		return err
	}
	if !ok {
		return &verify.Error{ID: t.ID, Repository: t.Repository.String(), Digest: t.Digest,
			Requirement: p.describe(), Found: tl.found(), Fix: p.fix(t)}
	}
	return nil
}
