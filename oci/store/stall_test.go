package store

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/transport"
)

// A blob download that stops half-way without closing the connection is
// cut after the timeout of silence and resumed from where it stopped.
func TestFetchStalledDownloadResumes(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	release := make(chan struct{})
	var stall atomic.Bool
	var ranges []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/sha256:") {
			reg.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		mu.Unlock()
		if !stall.CompareAndSwap(true, false) {
			reg.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		reg.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		body := rec.Body.Bytes()
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		<-release // and then nothing, the connection open
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(256<<10, 1)
	require.NoError(t, err)
	ref, err := name.ParseReference(host + "/models/detector:v8")
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img))
	layers, err := img.Layers()
	require.NoError(t, err)
	d, err := layers[0].Digest()
	require.NoError(t, err)
	size, err := layers[0].Size()
	require.NoError(t, err)

	stall.Store(true)
	n, err := newTestStore(t).Fetch(context.Background(), ref.Context(), d, size, transport.Options{Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, size, n)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"", "bytes=" + itoa(size/2) + "-" + itoa(size-1)}, ranges, "not resumed where it stalled")
}
