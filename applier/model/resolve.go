package model

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Resolve pins m to a digest in its registry, for render. A ref by digest
// whose manifest is in the store needs no registry. When the registry
// cannot be asked:
//   - and the active version was pulled for the same ref and policy, the
//     device is offline: the model stays at the active digest, and the
//     resolution says why in Offline;
//   - otherwise (a new ref, or nothing active) the model cannot take its
//     declaration now: the resolution is held (Held), its digest the ref
//     as declared, and the plan leaves the model and what uses it alone.
//
// A registry that answered (credentials refused, no tag matching the
// policy) is not offline: for the ref applied last the model is held, and
// for a new ref it is an error.
//
// A digest rolled back on this node (see applier.ReleaseKey) is passed
// over, and Quarantined says so: a policy resolves to the highest tag
// whose digest is not quarantined, and a tag that moved to a quarantined
// digest keeps the active one. A policy passes over a version that does
// not carry the signatures verify asks for in the same way (Skips lists
// both); when every version it names was passed over, one at least for
// its signature, the model is held.
//
// A tag that the registry says does not exist is an error. When the digest
// is not the active one, the reason says what changed and what pulling it
// costs, from its manifest (read into the store).
func (d *Driver) Resolve(ctx context.Context, m manifest.Model) (render.Resolution, error) {
	rec, err := d.record(m.Name)
	if err != nil {
		return render.Resolution{}, err
	}
	want := render.Model{Name: m.Name, Ref: m.Ref, Path: m.Path, Include: m.Include}
	if m.Policy != nil {
		want.Policy = m.Policy.Semver
	}
	if _, err := d.repository(m.Ref); err != nil {
		return render.Resolution{}, err
	}
	var res render.Resolution
	w, err := d.resolveSkipping(ctx, m, want.Policy, rec.active(), rec.active() == nil)
	pinned := w.pinned
	if err != nil {
		if errors.Is(err, transport.ErrNotFound) && want.Policy == "" {
			return render.Resolution{}, err
		}
		if ctx.Err() != nil {
			return render.Resolution{}, err
		}
		act := rec.active()
		same := act != nil && rec.Ref == m.Ref && rec.Policy == want.Policy
		answered := errors.Is(err, transport.ErrNotFound) || errors.Is(err, transport.ErrUnauthorized)
		switch {
		case answered && !same:
			return render.Resolution{}, err // fix the ref or the credentials
		case answered || !same:
			// The registry refused what it was asked (credentials, no tag
			// matching any more): not offline, a failure, but only of this
			// model and what uses it. Or a new ref that cannot be asked.
			return held(want, rec.pinned(), err), nil
		}
		pinned = transport.Resolved{Ref: m.Ref, Tag: act.Tag, Digest: act.Digest}
		res.Offline = fmt.Errorf("%s kept at %s (%s): registry unreachable: %w", planner.ModelID(m.Name), planner.ShortDigest(act.Digest), m.Ref, err)
	}
	var quarantined []error
	for _, s := range w.skips {
		if s.Reason == render.SkipQuarantined {
			quarantined = append(quarantined, s.Why)
		}
	}
	res.Quarantined = errors.Join(quarantined...)
	if want.Policy != "" {
		res.Skips = w.skips
	}
	if len(w.skips) > 0 && pinned.Digest == "" {
		if unverifiedSkip(w.skips) {
			// Every version the policy names was passed over, one at
			// least for its signature: held, as a version that is not
			// signed is.
			want.Tag = w.skips[0].Tag
			r := unverified(want, rec.pinned(), w.skips[0].Digest, passedOver(want, w.skips))
			r.Quarantined, r.Skips = res.Quarantined, res.Skips
			return r, nil
		}
		// Every version the ref or policy names was rolled back here:
		// the active one stays, or the one before it when the active
		// one is rolled back too (tend died before putting it back);
		// with none, the model waits.
		keep := d.kept(rec, m.Name)
		if keep == nil {
			return render.Resolution{Digest: m.Ref, Reason: "nothing → " + m.Ref + ", rolled back here", Held: res.Quarantined, Quarantined: res.Quarantined, Skips: res.Skips}, nil
		}
		pinned = transport.Resolved{Ref: m.Ref, Tag: keep.Tag, Digest: keep.Digest}
	}
	res.Digest, res.Tag = pinned.Digest, pinned.Tag
	want.Digest, want.Tag = pinned.Digest, pinned.Tag
	if act := rec.active(); act != nil && act.Digest == pinned.Digest && slices.Equal(act.Include, m.Include) {
		res.Bases = act.Bases // pinned when it was read
		if res.Offline == nil {
			res.ActiveUnverified = d.recheck(ctx, m, act.Digest)
		}
		return res, nil
	}
	verr, ok := w.checked[pinned.Digest]
	if !ok {
		verr = d.verify(ctx, m, pinned.Digest, rec.active(), false)
	}
	if verr != nil {
		r := unverified(want, rec.pinned(), pinned.Digest, verr)
		r.Skips = res.Skips
		return r, nil
	}
	download, need, bases, err := d.missing(ctx, want)
	if err != nil {
		return render.Resolution{}, err
	}
	if err := d.verifyBases(ctx, m, want, rec.active()); err != nil {
		return unverified(want, rec.pinned(), pinned.Digest, err), nil
	}
	res.Bases, want.Bases = bases, bases
	res.Reason = render.ModelReason(want, rec.pinned(), download)
	if err := d.checkSpace(m.Name, need); err != nil {
		// Known before a byte is downloaded: the plan says so.
		res.Reason += "; will fail: " + err.Error()
	}
	res.Download = download
	return res, nil
}

// held is the resolution of a model whose new ref could not be resolved:
// its digest is the ref as declared, which matches nothing on the node.
func held(want render.Model, active *render.Active, cause error) render.Resolution {
	declared := want.Ref
	if want.Policy != "" {
		declared += " (semver " + want.Policy + ")"
	}
	from := "nothing"
	if active != nil {
		from = planner.ShortDigest(active.Digest)
	}
	return render.Resolution{
		Digest: declared,
		Reason: from + " → " + declared + ", not resolved",
		Held:   fmt.Errorf("registry unreachable for %s: %w", want.Ref, cause),
	}
}

// resolve pins ref under policy. With first set (no version of the model
// on the node), a ref without a policy is resolved by reading its
// manifest into the store, which the pull reads next: one request where a
// HEAD and a GET were two. A ref by digest already stored needs none.
func (d *Driver) resolve(ctx context.Context, ref, policy string, first bool) (transport.Resolved, error) {
	if policy == "" {
		if r, err := name.NewDigest(ref, d.opts.Registry.NameOptions(ref)...); err == nil {
			if h, err := v1.NewHash(r.DigestStr()); err == nil && d.store.Has(h) {
				return transport.Resolved{Ref: ref, Digest: h.String()}, nil
			}
		}
		if first {
			return d.store.ResolveInto(ctx, ref, d.opts.Registry)
		}
	}
	return transport.Resolve(ctx, ref, policy, d.opts.Registry)
}

// missing returns the bytes of m's blobs that are not in the store, of
// the files its include selects, the room pulling them takes (see need),
// and the base ModelKits of its version.
func (d *Driver) missing(ctx context.Context, m render.Model) (int64, int64, []string, error) {
	art, err := d.selected(ctx, m)
	if err != nil {
		return 0, 0, nil, err
	}
	var n int64
	for _, desc := range art.Blobs() {
		if !d.store.Has(desc.Digest) {
			n += desc.Size
		}
	}
	_, need := d.need(art)
	return n, need, render.BaseStrings(art.Bases), nil
}
