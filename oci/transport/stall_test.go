package transport

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hangingRegistry accepts connections and answers nothing until the test
// ends: a hung registry, or a network that black-holes its answers.
func hangingRegistry(t *testing.T) string {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(func() { close(release); srv.Close() })
	return strings.TrimPrefix(srv.URL, "http://")
}

// A registry that never answers fails a resolve with ErrStalled after the
// timeout of silence, not never.
func TestResolveHangingRegistry(t *testing.T) {
	host := hangingRegistry(t)
	_, err := Resolve(context.Background(), host+"/models/detector:v1", "", Options{Insecure: []string{host}, Timeout: 200 * time.Millisecond})
	require.ErrorIs(t, err, ErrStalled)
	require.ErrorContains(t, err, host+" sent nothing, or less than 32768 bytes, for 200ms")
}

// A body that trickles (a byte now and then, never silent for the
// timeout) is cut once a timeout passes with less than MinProgress bytes,
// rather than holding a tick until its own timeout.
func TestTrickleIsStalled(t *testing.T) {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-r.Context().Done():
				return
			case <-tick.C:
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	client := &http.Client{Transport: Options{Timeout: 200 * time.Millisecond}.transport()}
	resp, err := client.Get(srv.URL + "/v2/models/m/blobs/sha256:00")
	require.NoError(t, err)
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	require.ErrorIs(t, err, ErrStalled)
	require.Less(t, n, int64(MinProgress), "cut before the body's end")
}
