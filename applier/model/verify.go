package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/verify"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// errNoVerifier holds a model with a verify requirement on a driver that
// was given no verifier (a program built without one): nothing unchecked
// is staged.
var errNoVerifier = errors.New("signature verification is required and this tend has no verifier")

// verify checks that digest, what m resolved to, carries the signatures
// models.verify and m's own verify ask for. The active version is not
// checked again: it stays whatever happens. A candidate, a version a
// policy passes over when it is not signed, is checked with
// Verifier.VerifyCandidate: found unsigned, it is not asked of again for
// a while.
func (d *Driver) verify(ctx context.Context, m manifest.Model, digest string, active *version, candidate bool) error {
	reqs := manifest.Requirements(d.opts.Verify, m.Verify)
	if len(reqs) == 0 || (active != nil && active.Digest == digest) {
		return nil
	}
	if d.opts.Verifier == nil {
		return errNoVerifier
	}
	repo, err := d.repository(m.Ref)
	if err != nil {
		return err
	}
	t := verify.Target{Kind: verify.KindModel, ID: planner.ModelID(m.Name), Repository: repo, Digest: digest}
	if candidate {
		return d.opts.Verifier.VerifyCandidate(ctx, t, reqs)
	}
	return d.opts.Verifier.Verify(ctx, t, reqs)
}

// recheck checks digest, m's active version, again under the signatures
// models.verify and m's own verify ask for now, and returns the warning
// when it no longer carries them (see verify.ActiveWarning): nothing is
// rolled back. The verifier remembers a digest verified under the same
// requirements (their fields and the content of their key files), so a
// tick asks the registry nothing unless verify changed; one found
// unsigned is asked of again after verify.RecheckUnsigned, and one whose
// signatures could not be looked up after verify.RecheckBackoff (see
// Verifier.Recheck).
func (d *Driver) recheck(ctx context.Context, m manifest.Model, digest string) error {
	reqs := manifest.Requirements(d.opts.Verify, m.Verify)
	if len(reqs) == 0 || d.opts.Verifier == nil {
		return nil
	}
	repo, err := d.repository(m.Ref)
	if err != nil {
		return nil
	}
	t := verify.Target{Kind: verify.KindModel, ID: planner.ModelID(m.Name), Repository: repo, Digest: digest}
	return verify.ActiveWarning(d.opts.Verifier.Recheck(ctx, t, reqs))
}

// verifyBases checks the base ModelKits of want's version (see
// modelkit.Base) as verify checks the version itself: a signed ModelKit
// whose weights come from an unsigned base is held too.
func (d *Driver) verifyBases(ctx context.Context, m manifest.Model, want render.Model, active *version) error {
	reqs := manifest.Requirements(d.opts.Verify, m.Verify)
	if len(reqs) == 0 || (active != nil && active.Digest == want.Digest) {
		return nil
	}
	art, err := d.selected(ctx, want)
	if err != nil || len(art.Bases) == 0 {
		return err
	}
	if d.opts.Verifier == nil {
		return errNoVerifier
	}
	for _, b := range art.Bases {
		repo, err := d.repository(b.Ref)
		if err != nil {
			return err
		}
		target := verify.Target{Kind: verify.KindModel, ID: planner.ModelID(m.Name) + " base " + b.Ref, Repository: repo, Digest: b.Digest.String()}
		if err := d.opts.Verifier.Verify(ctx, target, reqs); err != nil {
			return fmt.Errorf("base ModelKit %s: %w", b.Ref, err)
		}
	}
	return nil
}

// unverified is the resolution of a model whose new digest does not carry
// the signatures asked for (or whose signatures could not be looked up):
// it is held, the active version stays, and the plan says why.
func unverified(want render.Model, active *render.Active, digest string, cause error) render.Resolution {
	from := "nothing"
	if active != nil {
		from = planner.ShortDigest(active.Digest)
	}
	return render.Resolution{
		Digest: digest,
		Tag:    want.Tag,
		Reason: fmt.Sprintf("%s → %s, signature not verified", from, planner.ShortDigest(digest)),
		Held:   cause,
	}
}
