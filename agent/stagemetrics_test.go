package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// shutGate holds the registry's downloads of the blobs it names while it
// is shut.
type shutGate struct {
	blobs []string // digests
	mu    sync.Mutex
	shut  chan struct{} // nil: open
}

func (g *shutGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut = make(chan struct{})
}

func (g *shutGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

func (g *shutGate) serve(_ http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet || !slices.ContainsFunc(g.blobs, func(d string) bool { return strings.HasSuffix(r.URL.Path, "/blobs/"+d) }) {
		return false
	}
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut != nil {
		select {
		case <-shut:
		case <-r.Context().Done():
		}
	}
	return false
}

// Every release the agent sees is measured from its first sight:
// tend_release_lag_seconds grows while it stages (tend_staging 1) or its
// rollout holds it, and tend_release_convergence_seconds observes, once,
// first sight to activation; tend_stage_bytes_total counts what the
// stager downloaded, and the activation downloads nothing.
func TestReleaseMetricsFromFirstSightToActivation(t *testing.T) {
	reg := testoci.Start(t)
	one, two := bytes.Repeat([]byte("1"), 64<<10), bytes.Repeat([]byte("2"), 96<<10)
	reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": one})
	reg.PushFiles(t, "models/m:v2", map[string][]byte{"model.onnx": two})
	gate := &shutGate{blobs: []string{testoci.Digest(one), testoci.Digest(two)}}
	reg.Use(gate.serve)
	t.Cleanup(gate.open)
	device := func(tag string) string {
		return fmt.Sprintf(oneFile, tag) + "  models:\n    - {name: m, ref: " + reg.Ref("models/m:"+tag) + "}\n"
	}
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", device("v1"))
	repo.Commit("v1")

	h := newHeldLoop(t, repo)
	h.r.Config.Registries.Insecure = []string{reg.Host}
	clock := newFakeClock()
	h.r.Now = clock.Now
	h.metrics.SetClock(clock.Now)
	st := &Stager{Now: clock.Now, Logger: slog.New(slog.DiscardHandler)}
	t.Cleanup(st.Stop)
	h.r.Stager = st
	h.watchStager(st)
	staged := func() bool {
		s, ok := st.Status()
		return ok && s.Staged
	}
	metric := func(series string) float64 {
		t.Helper()
		v, ok := scrape(t, h.metrics)[series]
		require.True(t, ok, "%s exists", series)
		return v
	}

	// The first commit stages; the node takes it once it is staged.
	gate.close()
	h.scheduled()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Staging, "the model stages in the background")
	require.Equal(t, clockT0, h.res.Release.FirstSeen)
	require.Equal(t, 1.0, metric("tend_staging"))
	clock.Advance(5 * time.Minute)
	require.Equal(t, 300.0, metric("tend_release_lag_seconds"), "read when scraped")
	gate.open()
	require.Eventually(t, staged, 10*time.Second, 10*time.Millisecond)
	require.Zero(t, metric("tend_staging"), "staged")
	require.Equal(t, float64(len(one)), metric("tend_stage_bytes_total"))
	require.Equal(t, float64(len(one)), metric("tend_model_bytes_downloaded_total"), "staged bytes are model bytes")

	clock.Advance(5 * time.Minute)
	pulled := reg.BlobBytes.Load()
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "v1", h.file(t))
	require.True(t, h.res.Release.Activated)
	require.Equal(t, pulled, reg.BlobBytes.Load(), "the activation downloads nothing")
	require.Equal(t, 1.0, metric("tend_release_convergence_seconds_count"))
	require.Equal(t, 600.0, metric("tend_release_convergence_seconds_sum"), "first sight to activation")
	require.Zero(t, metric("tend_release_lag_seconds"))
	require.Zero(t, metric("tend_staging"))

	// A release its rollout holds stages at once, and waits for its wave.
	repo.WriteFile("devices/cam-017/d.yaml", device("v2"))
	repo.WriteFile("devices/cam-017/rollout.yaml", fmt.Sprintf(waveRollout, false))
	repo.Commit("v2")
	clock.Advance(10 * time.Minute)
	seen := clock.Now()
	gate.close()
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "held: rollout wave 0 opens "+seen.Add(time.Hour).Format("2006-01-02T15:04Z"), h.res.Held.Reason)
	require.Equal(t, seen, h.res.Release.FirstSeen)
	require.Equal(t, 1.0, metric("tend_staging"))
	require.Equal(t, 1.0, metric(`tend_release_held{reason="wave"}`))
	gate.open()
	require.Eventually(t, staged, 10*time.Second, 10*time.Millisecond)

	clock.Advance(30 * time.Minute)
	h.scheduled()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Held)
	require.Equal(t, "v1", h.file(t))
	require.Zero(t, metric("tend_staging"), "staged, held")
	require.Equal(t, 1800.0, metric("tend_release_lag_seconds"))
	require.Equal(t, float64(len(one)+len(two)), metric("tend_stage_bytes_total"))

	clock.Advance(30 * time.Minute)
	pulled = reg.BlobBytes.Load()
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held, "the wave opened")
	require.Equal(t, "v2", h.file(t))
	require.Equal(t, pulled, reg.BlobBytes.Load(), "the activation downloads nothing")
	require.Equal(t, 2.0, metric("tend_release_convergence_seconds_count"))
	require.Equal(t, 600.0+3600, metric("tend_release_convergence_seconds_sum"))
	require.Equal(t, 1.0, metric(`tend_release_convergence_seconds_bucket{le="900"}`))
	require.Equal(t, 2.0, metric(`tend_release_convergence_seconds_bucket{le="3600"}`))
	require.Zero(t, metric("tend_release_lag_seconds"))

	clock.Advance(time.Hour)
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, 2.0, metric("tend_release_convergence_seconds_count"), "once per release")
	require.Zero(t, metric("tend_release_lag_seconds"))
}
