package oci

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	_ "github.com/tend-dev/tend/internal/golden"
)

// push writes a random artifact to the in-process registry under each tag
// and returns its digest.
func push(t *testing.T, repo string, tags ...string) string {
	t.Helper()
	img, err := random.Image(1024, 1)
	require.NoError(t, err)
	for _, tag := range tags {
		ref, err := name.ParseReference(repo + ":" + tag)
		require.NoError(t, err)
		require.NoError(t, remote.Write(ref, img))
	}
	d, err := img.Digest()
	require.NoError(t, err)
	return d.String()
}

func TestResolve(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	repo := host + "/models/detector"
	v8 := push(t, repo, "v8", "v8.0.0")
	v84 := push(t, repo, "v8.4.0")
	push(t, repo, "v9.0.0", "latest")
	push(t, repo, "not-a-version")
	ctx := context.Background()
	opts := Options{Insecure: []string{host}}

	tests := []struct {
		name, ref, semver string
		tag, digest       string
	}{
		{"tag", repo + ":v8", "", "v8", v8},
		{"digest", repo + "@" + v84, "", "", v84},
		{"highest tag in range", repo, ">=8.0.0 <9", "v8.4.0", v84},
		{"range of one", repo, "~8.0", "v8.0.0", v8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(ctx, tt.ref, tt.semver, opts)
			require.NoError(t, err)
			require.Equal(t, tt.tag, got.Tag)
			require.Equal(t, tt.digest, got.Digest)
			require.Positive(t, got.Size)
			require.Equal(t, tt.ref+" → "+tt.digest, got.String())
		})
	}

	bad := []struct {
		name, ref, semver, want string
	}{
		{"missing tag", repo + ":v7", "", "v7"},
		{"missing repository", host + "/models/nope:v1", "", "models/nope"},
		{"no tag in range", repo, ">=10", `no tag of ` + repo + ` matches ">=10"`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(ctx, tt.ref, tt.semver, opts)
			require.True(t, errors.Is(err, ErrNotFound), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}

	t.Run("unreachable registry is not ErrNotFound", func(t *testing.T) {
		_, err := Resolve(ctx, "127.0.0.1:1/models/x:v1", "", opts)
		require.Error(t, err)
		require.False(t, errors.Is(err, ErrNotFound))
	})
}
