package verify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/verify"
)

// Attestations (cosign attest: scans, provenance) are Sigstore bundles
// attached as referrers, as signatures are. They are not counted against
// the signatures tend reads: 20 of them listed ahead of a signature hold
// nothing, an attestation by the release key is no signature, those the
// index marks as attestations are not read at all, and past the bound of
// referrers read the error names it.
func TestReferrersAttestations(t *testing.T) {
	s := newSigned(t)
	ctx := context.Background()
	priv, pub := s.cosign.KeyPair("release")
	scanner, _ := s.cosign.KeyPair("scanner")
	repo := s.host + "/models/attested"

	d := s.push(t, "models/attested:v1", "weights attested")
	for i := range 20 {
		s.cosign.Attest(scanner, repo+"@"+d, fmt.Sprintf(`{"scan": %d}`, i))
	}
	s.cosign.Sign(priv, repo+"@"+d)
	idx := readReferrers(t, repo, d)
	var atts, sigs []map[string]any
	for _, m := range idx.manifests {
		if predicateOf(t, repo, m) == verify.SignPredicateType {
			sigs = append(sigs, m)
		} else {
			atts = append(atts, m)
		}
	}
	require.Len(t, sigs, 1, "cosign sign attached one signature")
	require.Len(t, atts, 20, "cosign attest attached 20 attestations")

	t.Run("20 attestations ahead of the signature", func(t *testing.T) {
		idx.put(t, append(append([]map[string]any{}, atts...), sigs...))
		v := &verify.Verifier{Options: s.opts}
		require.NoError(t, v.Verify(ctx, s.target(t, "models/attested", d), keys(pub)))
	})

	t.Run("an attestation by the release key is no signature", func(t *testing.T) {
		d := s.push(t, "models/attested:v2", "weights attested only")
		s.cosign.Attest(priv, repo+"@"+d, `{"scan": "clean"}`)
		v := &verify.Verifier{Options: s.opts}
		err := v.Verify(ctx, s.target(t, "models/attested", d), keys(pub))
		require.ErrorIs(t, err, verify.ErrUnsigned)
		require.Contains(t, err.Error(), "(found 1 attestation, which is no signature)")
	})

	t.Run("attestations the index marks are not read", func(t *testing.T) {
		// The referrers API copies a manifest's annotations into the
		// index: tend passes over what they say is an attestation
		// without reading it, however many there are.
		var marked []map[string]any
		for i := range 2 * verify.MaxReferrers {
			m := map[string]any{}
			for k, v := range atts[i%len(atts)] {
				m[k] = v
			}
			m["annotations"] = map[string]string{"dev.sigstore.bundle.predicateType": "https://cosign.sigstore.dev/attestation/v1"}
			marked = append(marked, m)
		}
		idx.put(t, append(marked, sigs...))
		v := &verify.Verifier{Options: s.opts}
		require.NoError(t, v.Verify(ctx, s.target(t, "models/attested", d), keys(pub)))
		require.LessOrEqual(t, v.Requests(), int64(4), "the referrers API, the tag index, the signature's manifest and its bundle")
	})

	t.Run("past the bound of referrers read", func(t *testing.T) {
		ahead := copies(t, repo, atts[0], verify.MaxReferrers)
		idx.put(t, append(ahead, sigs...))
		v := &verify.Verifier{Options: s.opts}
		err := v.Verify(ctx, s.target(t, "models/attested", d), keys(pub))
		require.ErrorIs(t, err, verify.ErrUnsigned)
		require.Contains(t, err.Error(), fmt.Sprintf("(found %d attestations, which are no signatures; 1 more Sigstore bundle referrers not read: over tend's bound of %d referrers (%d signatures) per digest)",
			verify.MaxReferrers, verify.MaxReferrers, verify.MaxSignatures))
	})
}

// referrers is the referrers tag index (sha256-HEX) of a digest, as
// cosign left it.
type referrers struct {
	ref       name.Reference
	mt        types.MediaType
	doc       map[string]any
	manifests []map[string]any
}

func readReferrers(t *testing.T, repo, digest string) *referrers {
	t.Helper()
	ref, err := name.ParseReference(repo+":"+strings.Replace(digest, ":", "-", 1), name.Insecure)
	require.NoError(t, err)
	desc, err := remote.Get(ref)
	require.NoError(t, err)
	x := &referrers{ref: ref, mt: desc.MediaType}
	require.NoError(t, json.Unmarshal(desc.Manifest, &x.doc))
	var idx struct {
		Manifests []map[string]any `json:"manifests"`
	}
	require.NoError(t, json.Unmarshal(desc.Manifest, &idx))
	x.manifests = idx.Manifests
	return x
}

// put replaces the index's entries with manifests, in that order, as
// whoever can push to the repository may.
func (x *referrers) put(t *testing.T, manifests []map[string]any) {
	t.Helper()
	x.doc["manifests"] = manifests
	raw, err := json.Marshal(x.doc)
	require.NoError(t, err)
	require.NoError(t, remote.Put(x.ref, rawIndex{raw: raw, mt: x.mt}))
}

// predicateOf is the predicate type cosign put in the annotations of the
// bundle manifest d describes.
func predicateOf(t *testing.T, repo string, d map[string]any) string {
	t.Helper()
	var m struct {
		Annotations map[string]string `json:"annotations"`
	}
	require.NoError(t, json.Unmarshal(manifestOf(t, repo, d).Manifest, &m))
	return m.Annotations["dev.sigstore.bundle.predicateType"]
}

func manifestOf(t *testing.T, repo string, d map[string]any) *remote.Descriptor {
	t.Helper()
	ref, err := name.ParseReference(repo+"@"+d["digest"].(string), name.Insecure)
	require.NoError(t, err)
	desc, err := remote.Get(ref)
	require.NoError(t, err)
	return desc
}

// copies pushes n copies of the bundle manifest d describes, each with
// another creation time, and returns their descriptors.
func copies(t *testing.T, repo string, d map[string]any, n int) []map[string]any {
	t.Helper()
	desc := manifestOf(t, repo, d)
	var out []map[string]any
	for i := range n {
		var m map[string]any
		require.NoError(t, json.Unmarshal(desc.Manifest, &m))
		m["annotations"].(map[string]any)["org.opencontainers.image.created"] = fmt.Sprintf("2026-12-07T00:00:%02dZ copy %d", i%60, i)
		raw, err := json.Marshal(m)
		require.NoError(t, err)
		digest := testoci.Digest(raw)
		ref, err := name.ParseReference(repo+"@"+digest, name.Insecure)
		require.NoError(t, err)
		require.NoError(t, remote.Put(ref, rawIndex{raw: raw, mt: desc.MediaType}))
		out = append(out, map[string]any{"mediaType": string(desc.MediaType), "size": len(raw), "digest": digest, "artifactType": verify.BundleArtifactType})
	}
	return out
}
