package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/oci/verify"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// walked is what resolveSkipping pinned a model to and what it passed
// over.
type walked struct {
	pinned transport.Resolved // zero when every version was passed over
	skips  []render.Skip      // highest first
	// checked holds the verification of each digest the walk verified
	// (nil: it passed), which Resolve does not repeat.
	checked map[string]error
}

// resolveSkipping pins model m's ref (and policy) like resolve, but
// passes over the versions that cannot run here: those quarantined for
// it on this node, and, under a semver policy, those not signed as
// verify asks. A policy resolves to the highest tag that is neither;
// a tag that names a quarantined digest resolves to nothing. A version
// whose signatures could not be looked up is not passed over (nor is
// the active one, which is not verified again): Resolve holds it, as a
// ref that names one version is held. first is resolve's.
func (d *Driver) resolveSkipping(ctx context.Context, m manifest.Model, policy string, active *version, first bool) (walked, error) {
	q, err := d.quarantine()
	if err != nil {
		return walked{}, err
	}
	id := planner.ModelID(m.Name)
	quarantined := func(r transport.Resolved) (render.Skip, bool) {
		if _, ok := q[applier.ReleaseKey(id, r.Digest)]; !ok {
			return render.Skip{}, false
		}
		return render.Skip{ID: id, Tag: r.Tag, Digest: r.Digest, Reason: render.SkipQuarantined, Why: d.quarantinedError(m.Name, r)}, true
	}
	verifying := len(manifest.Requirements(d.opts.Verify, m.Verify)) > 0
	if policy == "" || len(q) == 0 && !verifying {
		pinned, err := d.resolve(ctx, m.Ref, policy, first)
		if err != nil {
			return walked{}, err
		}
		if s, ok := quarantined(pinned); ok {
			return walked{skips: []render.Skip{s}}, nil
		}
		return walked{pinned: pinned}, nil
	}
	w := walked{checked: map[string]error{}}
	passed := map[string]bool{} // digests, each listed once under its highest tag
	skip := func(ctx context.Context, r transport.Resolved) (bool, error) {
		if passed[r.Digest] {
			return true, nil
		}
		if s, ok := quarantined(r); ok {
			passed[r.Digest] = true
			w.skips = append(w.skips, s)
			return true, nil
		}
		if !verifying {
			return false, nil
		}
		err := d.verify(ctx, m, r.Digest, active, true)
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		w.checked[r.Digest] = err
		if !errors.Is(err, verify.ErrUnsigned) {
			return false, nil
		}
		passed[r.Digest] = true
		w.skips = append(w.skips, render.Skip{ID: id, Tag: r.Tag, Digest: r.Digest, Reason: render.SkipUnverified, Why: withoutID(err)})
		return true, nil
	}
	w.pinned, _, err = transport.ResolveSkipping(ctx, m.Ref, policy, d.opts.Registry, skip)
	if err != nil {
		return walked{}, err
	}
	for i := range w.skips {
		w.skips[i].Took = w.pinned.Tag
	}
	return w, nil
}

// withoutID is a failed verification as a skip names it: the
// resource it is for is said before it.
func withoutID(err error) error {
	var ve *verify.Error
	if !errors.As(err, &ve) || error(ve) != err {
		return err
	}
	c := *ve
	c.ID = ""
	return &c
}

// unverifiedSkip reports whether one of skips was passed over for its
// signature.
func unverifiedSkip(skips []render.Skip) bool {
	for _, s := range skips {
		if s.Reason == render.SkipUnverified {
			return true
		}
	}
	return false
}

// passedOver says why model want, under its policy, has no version to
// take: each matching tag was passed over (skips, one at least for its
// signature).
func passedOver(want render.Model, skips []render.Skip) error {
	errs := []error{fmt.Errorf("every tag matching %q was passed over (%s): sign one as verify asks, or push a signed version",
		want.Policy, planner.Count(len(skips), "tag"))}
	for _, s := range skips {
		errs = append(errs, s)
	}
	return errors.Join(errs...)
}
