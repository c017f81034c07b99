package store

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/transport"
)

// meterCall is one call a Tally made to its Meter.
type meterCall struct {
	name        string
	done, total int64
	end         bool
}

// recordingMeter keeps every call of a Tally. It checks that no two calls
// overlap, which Meter promises its implementations.
type recordingMeter struct {
	busy  sync.Mutex
	mu    sync.Mutex
	calls []meterCall
}

func (m *recordingMeter) Pull(name string, done, total int64) {
	if !m.busy.TryLock() {
		panic("Meter called from two goroutines at once")
	}
	defer m.busy.Unlock()
	m.add(meterCall{name: name, done: done, total: total})
}

func (m *recordingMeter) PullDone(name string) { m.add(meterCall{name: name, end: true}) }

func (m *recordingMeter) add(c meterCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, c)
}

func (m *recordingMeter) Calls() []meterCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]meterCall(nil), m.calls...)
}

// pushLayers pushes layers of the given sizes to repo and returns their
// descriptors.
func pushLayers(t *testing.T, repo name.Repository, sizes ...int64) []v1.Descriptor {
	t.Helper()
	var descs []v1.Descriptor
	for _, n := range sizes {
		l, err := random.Layer(n, "application/octet-stream")
		require.NoError(t, err)
		require.NoError(t, remoteWriteLayer(repo, l))
		d, err := l.Digest()
		require.NoError(t, err)
		size, err := l.Size()
		require.NoError(t, err)
		descs = append(descs, v1.Descriptor{Digest: d, Size: size})
	}
	return descs
}

// The bytes a pull reports add up to the sizes of its blobs: one blob
// already stored, one resumed after a dropped connection, one of several
// chunks, downloaded in parallel.
func TestFetchAllReportsProgress(t *testing.T) {
	f := newFlakyRegistry(t)
	repo, stored, storedSize := f.pushLayer(t)
	descs := append(pushLayers(t, repo, 3<<20, 700<<10, 10), v1.Descriptor{Digest: stored, Size: storedSize})
	var want int64
	for _, d := range descs {
		want += d.Size
	}
	s := newTestStore(t)
	_, err := s.Fetch(context.Background(), repo, stored, storedSize, transport.Options{})
	require.NoError(t, err)
	f.cuts.Store(1)

	m := &recordingMeter{}
	tally := transport.NewTally("model/detector", append(descs, descs[0]), m) // a blob listed twice counts once
	n, err := s.FetchAll(context.Background(), repo, descs, 3, transport.Options{Progress: tally})
	require.NoError(t, err)
	tally.Done()
	require.Equal(t, want-storedSize, n)

	calls := m.Calls()
	require.Greater(t, len(calls), len(descs), "the 3 MB blob reports each chunk")
	require.Equal(t, meterCall{name: "model/detector", end: true}, calls[len(calls)-1])
	require.Equal(t, meterCall{name: "model/detector", done: want, total: want}, calls[len(calls)-2])
	var last int64
	for _, c := range calls[:len(calls)-1] {
		require.Equal(t, want, c.total)
		require.GreaterOrEqual(t, c.done, last, "a resumed download goes on from its partial file")
		last = c.done
	}
	done, total := tally.Totals()
	require.Equal(t, [2]int64{want, want}, [2]int64{done, total})
}

// A registry that ignores the Range of a resumed download sends the blob
// from its start: it is downloaded whole, and its progress starts over.
func TestFetchStartsOverWhenRangeIsIgnored(t *testing.T) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Range")
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://") + "/models/detector")
	require.NoError(t, err)
	desc := pushLayers(t, repo, 64<<10)[0]
	blob := fetchBlob(t, repo, desc.Digest)
	s := newTestStore(t)
	require.NoError(t, os.WriteFile(s.partial(desc.Digest), blob[:desc.Size/2], 0o644))

	m := &recordingMeter{}
	n, err := s.Fetch(context.Background(), repo, desc.Digest, desc.Size, transport.Options{Progress: transport.NewTally("model/detector", []v1.Descriptor{desc}, m)})
	require.NoError(t, err)
	require.Equal(t, desc.Size, n)
	got, err := os.ReadFile(s.Path(desc.Digest))
	require.NoError(t, err)
	require.True(t, bytes.Equal(blob, got))
	calls := m.Calls()
	require.Equal(t, []meterCall{{"model/detector", desc.Size / 2, desc.Size, false}, {"model/detector", 0, desc.Size, false}}, calls[:2])
	require.Equal(t, meterCall{"model/detector", desc.Size, desc.Size, false}, calls[len(calls)-1])
}
