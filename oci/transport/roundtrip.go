package transport

import (
	"context"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
)

// RepoTransport returns the authenticated transport tend reaches repo
// with: its credentials, plain HTTP where insecure, retries, the stall
// timeout and the download cap, shared for a minute by the requests to
// the same repository (one registry handshake). For a package that sends
// requests of its own, such as signature lookups.
func (o Options) RepoTransport(ctx context.Context, repo name.Repository) (http.RoundTripper, error) {
	return o.repoTransport(ctx, repo)
}
