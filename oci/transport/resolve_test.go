package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	_ "github.com/tend-dev/tend/internal/testkit/golden"
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
		{"missing tag", repo + ":v8.5", "", "tag v8.5 not found in " + repo + "; close tags: v8.4.0, v8.0.0, v8, v9.0.0, latest (6 tags)"},
		{"missing tag not a version", repo + ":lates", "", "tag lates not found in " + repo + "; close tags: latest, v8, v8.0.0, v8.4.0, v9.0.0 (6 tags)"},
		{"missing digest", repo + "@sha256:" + strings.Repeat("a", 64), "", "manifest sha256:" + strings.Repeat("a", 64) + " not found in " + repo},
		{"missing repository", host + "/models/nope:v1", "", "tag v1 not found in " + host + "/models/nope: the repository does not exist; check the ref's registry and path"},
		{"no tag in range", repo, ">=10", `no tag of ` + repo + ` matches ">=10"; its 6 tags, highest first: v9.0.0, v8.4.0, v8.0.0, v8; not semver, never matched: latest, not-a-version`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(ctx, tt.ref, tt.semver, opts)
			require.True(t, errors.Is(err, ErrNotFound), "%v", err)
			require.EqualError(t, err, tt.want)
		})
	}

	t.Run("unreachable registry is not ErrNotFound", func(t *testing.T) {
		_, err := Resolve(ctx, "127.0.0.1:1/models/x:v1", "", opts)
		require.Error(t, err)
		require.False(t, errors.Is(err, ErrNotFound))
	})
}

func TestResolveNotFoundListsTags(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	repo := host + "/models/many"
	var tags []string
	for i := 1; i <= 12; i++ {
		tags = append(tags, fmt.Sprintf("v1.%d.0", i))
	}
	push(t, repo, append(tags, "nightly")...)
	push(t, host+"/models/empty-after-delete", "v1")
	opts := Options{Insecure: []string{host}}

	t.Run("a long list is cut", func(t *testing.T) {
		_, err := Resolve(context.Background(), repo, ">=2", opts)
		require.EqualError(t, err, `no tag of `+repo+` matches ">=2"; its 13 tags, highest first: `+
			`v1.12.0, v1.11.0, v1.10.0, v1.9.0, v1.8.0, v1.7.0, v1.6.0, v1.5.0, v1.4.0, v1.3.0 … and 2 more; not semver, never matched: nightly`)
	})
	t.Run("nearest versions first, at most five", func(t *testing.T) {
		_, err := Resolve(context.Background(), repo+":v1.6.1", "", opts)
		require.EqualError(t, err, "tag v1.6.1 not found in "+repo+"; close tags: v1.6.0, v1.7.0, v1.5.0, v1.8.0, v1.4.0 (13 tags)")
	})
	t.Run("tags that cannot be listed are said so", func(t *testing.T) {
		// A registry that answers HEAD with 404 and fails the tag list.
		broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/v2/":
				w.WriteHeader(http.StatusOK)
			case strings.HasSuffix(r.URL.Path, "/tags/list"):
				http.Error(w, "boom", http.StatusInternalServerError)
			default:
				w.WriteHeader(http.StatusNotFound)
			}
		}))
		t.Cleanup(broken.Close)
		bhost := strings.TrimPrefix(broken.URL, "http://")
		_, err := Resolve(context.Background(), bhost+"/models/x:v1", "", Options{Insecure: []string{bhost}})
		require.ErrorIs(t, err, ErrNotFound)
		require.ErrorContains(t, err, "tag v1 not found in "+bhost+"/models/x (its tags could not be listed: ")
		require.NotContains(t, err.Error(), "HEAD responses have no body")
	})
}

// FullVersion takes MAJOR.MINOR.PATCH, with a v, a prerelease or build
// metadata, and nothing shorter.
func TestFullVersion(t *testing.T) {
	for tag, full := range map[string]bool{
		"1.2.3": true, "v1.2.3": true, "1.2.3-rc.1": true, "1.2.3+build.7": true, "0.0.1": true,
		"v3": false, "3": false, "1.2": false, "v1.2": false, "1.2.3.4": false, "latest": false, "01.2.3": false, "V1.2.3": false,
	} {
		require.Equal(t, full, FullVersion(tag), tag)
	}
}
