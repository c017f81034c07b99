package store

import (
	"context"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
)

// TestPullPingsOnce pulls an ORAS model cold, as a tick does (resolve,
// manifest, blobs), and checks that the registry is pinged once, not
// before every request, that the empty config is not asked for, and that
// a second pull within the session makes no handshake (see the
// transport's TestSessionPingsOncePerRepository).
func TestPullPingsOnce(t *testing.T) {
	ctx := context.Background()
	repo, reg := testRepo(t)
	log := reg.CountRequests()
	reg.PushFiles(t, testRepoName+":v1", map[string][]byte{"model.bin": []byte("weights"), "labels.txt": []byte("cat\n")})
	log.Take()

	pull := func(opts transport.Options) {
		t.Helper()
		res, err := transport.Resolve(ctx, reg.Ref(testRepoName+":v1"), "", opts)
		require.NoError(t, err)
		s, err := NewStore(t.TempDir(), nil)
		require.NoError(t, err)
		a, _, err := s.FetchArtifact(ctx, repo, v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(res.Digest, "sha256:")}, modelkit.NodePlatform(), opts)
		require.NoError(t, err)
		_, err = s.FetchAll(ctx, repo, a.Blobs(), 2, opts)
		require.NoError(t, err)
	}
	pull(transport.Options{})
	require.Equal(t, map[string]int{"ping": 1, "HEAD manifest": 1, "GET manifest": 1, "GET blob": 2}, log.Take(),
		"one handshake for the pull; the empty config's blob is known")

	pull(transport.Options{})
	require.Equal(t, map[string]int{"HEAD manifest": 1, "GET manifest": 1, "GET blob": 2}, log.Take(),
		"a second pull within the session makes no handshake")
}

// TestResolveIntoReadsTheManifestOnce: resolving a first pull's tag with
// a GET keeps its manifest, so that reading the artifact next asks the
// registry nothing more; a tag it does not have fails as Resolve does.
func TestResolveIntoReadsTheManifestOnce(t *testing.T) {
	ctx := context.Background()
	repo, reg := testRepo(t)
	log := reg.CountRequests()
	d := reg.PushFiles(t, testRepoName+":v1", map[string][]byte{"model.bin": []byte("weights")})
	s, err := NewStore(t.TempDir(), nil)
	require.NoError(t, err)
	log.Take()

	res, err := s.ResolveInto(ctx, reg.Ref(testRepoName+":v1"), transport.Options{})
	require.NoError(t, err)
	require.Equal(t, d, res.Digest)
	require.Equal(t, "v1", res.Tag)
	h, err := v1.NewHash(res.Digest)
	require.NoError(t, err)
	_, _, err = s.FetchArtifact(ctx, repo, h, modelkit.NodePlatform(), transport.Options{})
	require.NoError(t, err)
	got := log.Take()
	delete(got, "ping")
	require.Equal(t, map[string]int{"GET manifest": 1}, got, "the manifest is read once, the empty config never")

	_, err = s.ResolveInto(ctx, reg.Ref(testRepoName+":v2"), transport.Options{})
	require.ErrorIs(t, err, transport.ErrNotFound)
	require.ErrorContains(t, err, "tag v2 not found in "+repo.String())
}
