package gitsource_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
)

// TestRetries counts the requests a failing server sees: a server that is
// briefly unavailable gets two more tries within the fetch, one that says
// the credentials are wrong gets one and no more.
func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		permanent bool
		attempts  int64
	}{
		{"unavailable is retried", http.StatusServiceUnavailable, false, 3},
		{"bad gateway is retried", http.StatusBadGateway, false, 3},
		{"wrong credentials are not", http.StatusUnauthorized, true, 1},
		{"missing repository is not", http.StatusNotFound, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				http.Error(w, http.StatusText(tc.status), tc.status)
			}))
			defer srv.Close()
			_, err := gitsource.Fetch(context.Background(), gitsource.Source{URL: srv.URL + "/fleet.git", Ref: "main"},
				gitsource.Options{Dir: filepath.Join(t.TempDir(), "clone")})
			require.Error(t, err)
			require.Equal(t, tc.permanent, gitsource.IsPermanent(err), "%v", err)
			require.Equal(t, tc.attempts, hits.Load(), "requests seen by the server")
		})
	}
}
