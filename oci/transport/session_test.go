package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// TestSessionPingsOncePerRepository makes the requests of a cold pull of
// an ORAS model, as a tick does (resolve, manifest, layers), and checks
// that the registry is pinged once, not before every request, that new
// credentials make a new handshake, and that one after sessionTTL does
// too. (The store's TestPullPingsOnce pulls through a Store.)
func TestSessionPingsOncePerRepository(t *testing.T) {
	ctx := context.Background()
	clock := time.Now()
	sessions.mu.Lock()
	sessions.now = func() time.Time { return clock }
	sessions.mu.Unlock()
	t.Cleanup(func() {
		sessions.mu.Lock()
		sessions.now = time.Now
		sessions.mu.Unlock()
	})
	const repoName = "models/detector"
	reg := testoci.Start(t)
	repo, err := name.NewRepository(reg.Ref(repoName))
	require.NoError(t, err)
	log := reg.CountRequests()
	reg.PushFiles(t, repoName+":v1", map[string][]byte{"model.bin": []byte("weights"), "labels.txt": []byte("cat\n")})
	log.Take()

	pull := func(opts Options) {
		t.Helper()
		res, err := Resolve(ctx, reg.Ref(repoName+":v1"), "", opts)
		require.NoError(t, err)
		desc, err := GetManifest(ctx, repo.Digest(res.Digest), opts)
		require.NoError(t, err)
		m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
		require.NoError(t, err)
		client, err := opts.BlobClient(ctx, repo)
		require.NoError(t, err)
		for _, l := range m.Layers {
			resp, err := client.Get(fmt.Sprintf("%s://%s/v2/%s/blobs/%s", repo.Scheme(), repo.RegistryStr(), repo.RepositoryStr(), l.Digest))
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, http.StatusOK, resp.StatusCode)
		}
	}
	pull(Options{})
	require.Equal(t, map[string]int{"ping": 1, "HEAD manifest": 1, "GET manifest": 1, "GET blob": 2}, log.Take(),
		"one handshake for the pull")

	pull(Options{})
	require.Equal(t, map[string]int{"HEAD manifest": 1, "GET manifest": 1, "GET blob": 2}, log.Take(),
		"a second pull within the session makes no handshake")

	pull(Options{Keychain: staticKeychain{authn.FromConfig(authn.AuthConfig{Username: "u", Password: "p"})}})
	require.Equal(t, 1, log.Take()["ping"], "other credentials make a handshake of their own")

	clock = clock.Add(sessionTTL)
	pull(Options{})
	require.Equal(t, 1, log.Take()["ping"], "a session older than sessionTTL is made again")
}

type staticKeychain struct{ a authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }
