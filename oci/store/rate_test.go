package store

import (
	"crypto/rand"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
)

// Waiting for the cap is not the registry's silence: a download slower
// than the stall timeout allows between two chunks, because of the cap
// alone, completes.
func TestMaxRateIsNotAStall(t *testing.T) {
	reg := testoci.Start(t)
	data := make([]byte, 160<<10)
	_, _ = rand.Read(data)
	reg.PushFiles(t, "models/slow:v1", map[string][]byte{"model.bin": data})
	repo, err := name.NewRepository(reg.Ref("models/slow"))
	require.NoError(t, err)
	d, err := v1.NewHash(testoci.Digest(data))
	require.NoError(t, err)
	var gets atomic.Int32
	reg.Use(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			gets.Add(1)
		}
		return false
	})
	s, err := NewStore(t.TempDir(), nil)
	require.NoError(t, err)
	// 32 KiB (the burst) every half second, against a timeout of 200ms.
	rate, err := manifest.ParseRate("64KiB/s")
	require.NoError(t, err)
	opts := transport.Options{MaxRate: rate, Timeout: 200 * time.Millisecond}
	n, err := s.Fetch(t.Context(), repo, d, int64(len(data)), opts)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)
	require.Equal(t, int32(1), gets.Load(), "one request, never cut as stalled and resumed")
	require.NoError(t, s.Verify(d))
	require.True(t, s.Has(d))
}
