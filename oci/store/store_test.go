package store

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/transport"
)

// flakyRegistry is the in-process registry behind a handler that can cut
// blob downloads half-way, as a dropped edge link does, and records the
// Range header of every blob request.
type flakyRegistry struct {
	srv  *httptest.Server
	cuts atomic.Int32 // blob responses still to cut

	mu     sync.Mutex // guards ranges: handlers run on their own goroutines
	ranges []string
}

// Ranges returns a copy of the Range headers of the blob requests so far.
func (f *flakyRegistry) Ranges() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ranges...)
}

// ResetRanges forgets the blob requests so far.
func (f *flakyRegistry) ResetRanges() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ranges = nil
}

func newFlakyRegistry(t *testing.T) *flakyRegistry {
	f := &flakyRegistry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/sha256:") {
			reg.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.ranges = append(f.ranges, r.Header.Get("Range"))
		f.mu.Unlock()
		if f.cuts.Add(-1) < 0 {
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
		panic(http.ErrAbortHandler) // drop the connection mid-body
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// pushLayer pushes a one-layer artifact and returns the repository and the
// layer's digest and size.
func (f *flakyRegistry) pushLayer(t *testing.T) (name.Repository, v1.Hash, int64) {
	img, err := random.Image(256<<10, 1)
	require.NoError(t, err)
	ref, err := name.ParseReference(strings.TrimPrefix(f.srv.URL, "http://") + "/models/detector:v8")
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img))
	layers, err := img.Layers()
	require.NoError(t, err)
	d, err := layers[0].Digest()
	require.NoError(t, err)
	size, err := layers[0].Size()
	require.NoError(t, err)
	return ref.Context(), d, size
}

func TestStoreFetch(t *testing.T) {
	ctx := context.Background()
	t.Run("stores once", func(t *testing.T) {
		f := newFlakyRegistry(t)
		repo, d, size := f.pushLayer(t)
		s, err := NewStore(t.TempDir(), nil)
		require.NoError(t, err)
		n, err := s.Fetch(ctx, repo, d, size, transport.Options{})
		require.NoError(t, err)
		require.Equal(t, size, n)
		require.True(t, s.Has(d))
		n, err = s.Fetch(ctx, repo, d, size, transport.Options{})
		require.NoError(t, err)
		require.Zero(t, n, "an unchanged blob is never downloaded twice")
		require.Len(t, f.Ranges(), 1)
	})
	t.Run("resumes after a dropped connection", func(t *testing.T) {
		f := newFlakyRegistry(t)
		repo, d, size := f.pushLayer(t)
		f.cuts.Store(1)
		s, err := NewStore(t.TempDir(), nil)
		require.NoError(t, err)
		n, err := s.Fetch(ctx, repo, d, size, transport.Options{})
		require.NoError(t, err)
		require.Equal(t, size, n, "every byte was downloaded once")
		ranges := f.Ranges()
		require.Len(t, ranges, 2)
		require.Empty(t, ranges[0])
		require.Regexp(t, `^bytes=\d+-\d+$`, ranges[1], "the second request resumes")
		require.True(t, s.Has(d))
	})
	t.Run("resumes a partial file after a restart", func(t *testing.T) {
		f := newFlakyRegistry(t)
		repo, d, size := f.pushLayer(t)
		s, err := NewStore(t.TempDir(), nil)
		require.NoError(t, err)
		// What an earlier run of the agent got before it was stopped.
		blob := fetchBlob(t, repo, d)
		f.ResetRanges()
		require.NoError(t, os.WriteFile(s.partial(d), blob[:size/3], 0o644))
		n, err := s.Fetch(ctx, repo, d, size, transport.Options{})
		require.NoError(t, err)
		require.Equal(t, size-size/3, n)
		require.Equal(t, []string{"bytes=" + itoa(size/3) + "-" + itoa(size-1)}, f.Ranges())
		got, err := os.ReadFile(s.Path(d))
		require.NoError(t, err)
		require.True(t, bytes.Equal(blob, got))
	})
	t.Run("a corrupt partial file is thrown away, never stored", func(t *testing.T) {
		f := newFlakyRegistry(t)
		repo, d, size := f.pushLayer(t)
		s, err := NewStore(t.TempDir(), nil)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(s.partial(d), bytes.Repeat([]byte("x"), int(size/2)), 0o644))
		_, err = s.Fetch(ctx, repo, d, size, transport.Options{})
		require.ErrorIs(t, err, transport.ErrDigestMismatch)
		require.False(t, s.Has(d))
		require.NoFileExists(t, s.partial(d))
		_, err = s.Fetch(ctx, repo, d, size, transport.Options{})
		require.NoError(t, err, "the next try starts over")
		require.True(t, s.Has(d))
	})
}

func fetchBlob(t *testing.T, repo name.Repository, d v1.Hash) []byte {
	l, err := remote.Layer(repo.Digest(d.String()))
	require.NoError(t, err)
	rc, err := l.Compressed()
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func remoteWriteLayer(repo name.Repository, l v1.Layer) error {
	return remote.WriteLayer(repo, l)
}
