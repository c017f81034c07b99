package verify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testcosign"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/oci/verify"
)

// signed is a registry (Debian's docker-registry, which has no referrers
// API) with artifacts, some signed by the real cosign CLI.
type signed struct {
	host   string
	cosign *testcosign.Cosign
	opts   transport.Options
}

func newSigned(t testing.TB) *signed {
	t.Helper()
	c := testcosign.New(t)
	host := testoci.StartDistribution(t)
	return &signed{host: host, cosign: c, opts: transport.Options{Insecure: []string{host}}}
}

// push pushes an artifact of one file under repo:tag and returns its
// digest.
func (s *signed) push(t testing.TB, repoTag, content string) string {
	t.Helper()
	d, err := testoci.PushFiles(s.host, repoTag, map[string][]byte{"model.bin": []byte(content)})
	require.NoError(t, err)
	return d
}

func (s *signed) target(t testing.TB, repo, digest string) verify.Target {
	t.Helper()
	r, err := name.NewRepository(s.host+"/"+repo, name.Insecure)
	require.NoError(t, err)
	return verify.Target{Kind: verify.KindModel, ID: "model/detector", Repository: r, Digest: digest}
}

func keys(paths ...string) []*manifest.ArtifactVerify {
	return []*manifest.ArtifactVerify{{Cosign: &manifest.CosignVerify{Keys: paths}}}
}

// TestCosignKeyBased signs artifacts with the real cosign CLI (a
// generated key pair, no transparency log) and verifies them offline.
func TestCosignKeyBased(t *testing.T) {
	s := newSigned(t)
	ctx := context.Background()
	priv, pub := s.cosign.KeyPair("release")
	otherPriv, otherPub := s.cosign.KeyPair("other")

	good := s.push(t, "models/detector:v1", "weights v1")
	s.cosign.Sign(priv, s.host+"/models/detector@"+good)

	t.Run("signed is accepted, then remembered", func(t *testing.T) {
		v := &verify.Verifier{Options: s.opts}
		var seen []string
		v.Observe = func(kind, result string) { seen = append(seen, kind+"/"+result) }
		require.NoError(t, v.Verify(ctx, s.target(t, "models/detector", good), keys(pub)))
		first := v.Requests()
		require.Positive(t, first)
		t.Logf("verification of a new digest: %d requests", first)
		require.NoError(t, v.Verify(ctx, s.target(t, "models/detector", good), keys(pub)))
		require.Equal(t, first, v.Requests(), "a digest verified under the same keys asks the registry nothing")
		require.Equal(t, []string{"model/ok"}, seen)
	})

	t.Run("either of two keys suffices", func(t *testing.T) {
		v := &verify.Verifier{Options: s.opts}
		require.NoError(t, v.Verify(ctx, s.target(t, "models/detector", good), keys(otherPub, pub)))
	})

	t.Run("a key removed from the config verifies again", func(t *testing.T) {
		v := &verify.Verifier{Options: s.opts}
		require.NoError(t, v.Verify(ctx, s.target(t, "models/detector", good), keys(otherPub, pub)))
		n := v.Requests()
		err := v.Verify(ctx, s.target(t, "models/detector", good), keys(otherPub))
		require.ErrorIs(t, err, verify.ErrUnsigned)
		require.Greater(t, v.Requests(), n, "another requirement asks the registry again")
		require.Contains(t, err.Error(), "found 1 signature by another key")
	})

	t.Run("unsigned is refused", func(t *testing.T) {
		bare := s.push(t, "models/detector:v2", "weights v2")
		v := &verify.Verifier{Options: s.opts}
		err := v.Verify(ctx, s.target(t, "models/detector", bare), keys(pub))
		var ve *verify.Error
		require.ErrorAs(t, err, &ve)
		require.Equal(t, "model/detector "+s.host+"/models/detector@"+bare+": no cosign signature by "+pub+
			" (found no cosign signature of this digest); sign it (cosign sign --key cosign.key "+s.host+"/models/detector@"+bare+
			") with the key whose public half is listed, or hold this release", err.Error())
	})

	t.Run("signed by another key is refused", func(t *testing.T) {
		d := s.push(t, "models/detector:v3", "weights v3")
		s.cosign.Sign(otherPriv, s.host+"/models/detector@"+d)
		v := &verify.Verifier{Options: s.opts}
		err := v.Verify(ctx, s.target(t, "models/detector", d), keys(pub))
		require.ErrorIs(t, err, verify.ErrUnsigned)
		require.Contains(t, err.Error(), "model/detector "+s.host+"/models/detector@"+d+": no cosign signature by "+pub+" (found 1 signature by another key)")
	})

	t.Run("the signature of another digest is refused", func(t *testing.T) {
		d := s.push(t, "models/detector:v4", "weights v4")
		copySignatures(t, s.host+"/models/detector", good, d)
		v := &verify.Verifier{Options: s.opts}
		err := v.Verify(ctx, s.target(t, "models/detector", d), keys(pub))
		require.ErrorIs(t, err, verify.ErrUnsigned)
		require.Contains(t, err.Error(), "(found 1 signature of another digest)")
	})

	t.Run("a tag pushed again after signing names an unsigned digest", func(t *testing.T) {
		first := s.push(t, "models/retag:v1", "weights one")
		s.cosign.Sign(priv, s.host+"/models/retag@"+first)
		again := s.push(t, "models/retag:v1", "weights two")
		res, err := transport.Resolve(ctx, s.host+"/models/retag:v1", "", s.opts)
		require.NoError(t, err)
		require.Equal(t, again, res.Digest)
		v := &verify.Verifier{Options: s.opts}
		require.ErrorIs(t, v.Verify(ctx, s.target(t, "models/retag", res.Digest), keys(pub)), verify.ErrUnsigned)
		require.NoError(t, v.Verify(ctx, s.target(t, "models/retag", first), keys(pub)))
	})

	t.Run("a referrer that cannot be read does not hide a signature", func(t *testing.T) {
		d := s.push(t, "models/junk:v1", "weights junk")
		s.cosign.Sign(priv, s.host+"/models/junk@"+d)
		// Whoever can push to the repository lists a referrer of their
		// own first in the referrers tag index: a "bundle" over the
		// bound, which is not read.
		big, err := testoci.PushArtifact(s.host, "models/junk:junk", verify.BundleArtifactType, "application/vnd.oci.empty.v1+json", []byte("{}"),
			[]testoci.Layer{{MediaType: verify.BundleArtifactType, Data: bytes.Repeat([]byte("x"), 2<<20)}})
		require.NoError(t, err)
		bigRef, err := name.ParseReference(s.host+"/models/junk@"+big, name.Insecure)
		require.NoError(t, err)
		bigDesc, err := remote.Get(bigRef)
		require.NoError(t, err)
		idxRef, err := name.ParseReference(s.host+"/models/junk:"+strings.Replace(d, ":", "-", 1), name.Insecure)
		require.NoError(t, err)
		desc, err := remote.Get(idxRef)
		require.NoError(t, err)
		var idx map[string]any
		require.NoError(t, json.Unmarshal(desc.Manifest, &idx))
		manifests, _ := idx["manifests"].([]any)
		require.NotEmpty(t, manifests, "cosign left its bundle in the referrers tag index")
		junk := map[string]any{"mediaType": string(bigDesc.MediaType), "size": bigDesc.Size,
			"digest": big, "artifactType": verify.BundleArtifactType}
		idx["manifests"] = append([]any{junk}, manifests...)
		raw, err := json.Marshal(idx)
		require.NoError(t, err)
		require.NoError(t, remote.Put(idxRef, rawIndex{raw: raw, mt: desc.MediaType}))
		v := &verify.Verifier{Options: s.opts}
		require.NoError(t, v.Verify(ctx, s.target(t, "models/junk", d), keys(pub)))
	})

	t.Run("cosign's legacy .sig format", func(t *testing.T) {
		d := s.push(t, "models/legacy:v1", "weights legacy")
		s.cosign.SignLegacy(priv, s.host+"/models/legacy@"+d)
		sig, err := name.ParseReference(s.host+"/models/legacy:"+strings.Replace(d, ":", "-", 1)+".sig", name.Insecure)
		require.NoError(t, err)
		_, err = remote.Get(sig)
		require.NoError(t, err, "cosign wrote the legacy .sig tag")
		v := &verify.Verifier{Options: s.opts}
		require.NoError(t, v.Verify(ctx, s.target(t, "models/legacy", d), keys(pub)))
		err = v.Verify(ctx, s.target(t, "models/legacy", d), keys(otherPub))
		require.ErrorIs(t, err, verify.ErrUnsigned)
		require.Contains(t, err.Error(), "(found 1 signature by another key)")
	})

	t.Run("a notation trust policy that is missing", func(t *testing.T) {
		v := &verify.Verifier{Options: s.opts}
		err := v.Verify(ctx, s.target(t, "models/detector", good), []*manifest.ArtifactVerify{
			{Notation: &manifest.NotationVerify{TrustPolicy: "/nonexistent/trustpolicy.json", TrustStore: "/nonexistent/truststore"}}})
		require.Error(t, err)
		require.False(t, errors.Is(err, verify.ErrUnsigned))
		require.Contains(t, err.Error(), "read Notation trust policy: open /nonexistent/trustpolicy.json")
	})

	t.Run("a key file that is not a key", func(t *testing.T) {
		v := &verify.Verifier{Options: s.opts}
		err := v.Verify(ctx, s.target(t, "models/detector", good), keys(priv))
		require.Error(t, err)
		require.False(t, errors.Is(err, verify.ErrUnsigned))
		require.Contains(t, err.Error(), "must be a PEM public key")
	})
}

// copySignatures puts the signatures cosign attached to from under the
// tags of to, as someone who can push to the registry but has no key
// might.
func copySignatures(t *testing.T, repo, from, to string) {
	t.Helper()
	copied := 0
	for _, suffix := range []string{"", ".sig"} {
		src, err := name.ParseReference(repo+":"+strings.Replace(from, ":", "-", 1)+suffix, name.Insecure)
		require.NoError(t, err)
		desc, err := remote.Get(src)
		if err != nil {
			continue
		}
		dst, err := name.ParseReference(repo+":"+strings.Replace(to, ":", "-", 1)+suffix, name.Insecure)
		require.NoError(t, err)
		require.NoError(t, remote.Tag(dst.(name.Tag), desc))
		copied++
	}
	require.Positive(t, copied, "cosign left no signature tag to copy")
	t.Logf("copied %d signature tags", copied)
}

// rawIndex is a manifest to put as it is.
type rawIndex struct {
	raw []byte
	mt  types.MediaType
}

func (r rawIndex) RawManifest() ([]byte, error)        { return r.raw, nil }
func (r rawIndex) MediaType() (types.MediaType, error) { return r.mt, nil }
