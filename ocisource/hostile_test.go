package ocisource_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/ocisource"
)

// A registry that redirects a request to itself is left after
// MaxRedirects redirects with an error naming it and the loop, not
// followed until the timeout; a node that applied an artifact holds it.
func TestFetchStopsARedirectLoop(t *testing.T) {
	reg := testoci.Start(t)
	origin, applied := fleetRepo(t, "good", time.Now())
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	n := newNode(t, reg.Host, "fleet:main")
	_, err := n.fetch(ocisource.Source{})
	require.NoError(t, err)

	var heads atomic.Int64
	reg.Use(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			return false
		}
		heads.Add(1)
		http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := ocisource.Fetch(ctx, ocisource.Source{URL: n.url, Paths: paths, LastApplied: applied}, ocisource.Options{Dir: n.dir, Client: n.client})
	require.NoError(t, err)
	require.ErrorIs(t, snap.Stale, ocisource.ErrRedirectLoop)
	require.ErrorContains(t, snap.Stale, "registry "+reg.Host+" redirected HEAD http://"+reg.Host+"/v2/fleet/manifests/main more than 10 times (a redirect loop?)")
	require.Equal(t, applied, snap.Revision.Commit, "held")
	require.LessOrEqual(t, heads.Load(), int64(ocisource.MaxRedirects+1), "the loop is left after MaxRedirects")

	// With nothing applied, the error is returned, and publish stops too.
	fresh := newNode(t, reg.Host, "fleet:main")
	_, err = ocisource.Fetch(ctx, ocisource.Source{URL: fresh.url, Paths: paths}, ocisource.Options{Dir: fresh.dir, Client: fresh.client})
	require.ErrorIs(t, err, ocisource.ErrRedirectLoop)
	require.NoError(t, ctx.Err(), "not left by the timeout")
	_, err = ocisource.Publish(ctx, openRepo(t, origin.Dir()), "main", "oci://"+reg.Host+"/fleet:main", ocisource.PublishOptions{Registry: registryOptions(reg.Host)})
	require.ErrorIs(t, err, ocisource.ErrRedirectLoop)
	require.NoError(t, ctx.Err(), "not left by the timeout")
}
