package agent

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/hub"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/manifest"
)

// hubClock is the hub's settable clock.
type hubClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *hubClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *hubClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const brakesRollout = "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n" +
	"  waves:\n    - selector: {matchLabels: {ring: canary}}\n    - {percent: 100}\n" +
	"  brakes: {hub: %q, minApplied: 1, soak: 10m, onHubDown: %s}\n"

// A device of wave 1 asks a real hub before it takes a release: it holds
// (reason brakes, drift still reverted) until the canary ran the release
// healthy for soak, holds a release the canary rolled back, and goes on
// without the hub only when onHubDown says proceed.
func TestBrakesHoldReleaseUntilTheHubSaysGo(t *testing.T) {
	ctx := context.Background()
	store, err := hub.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	require.NoError(t, err)
	defer store.Close()
	clock := &hubClock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	srv, err := hub.NewServer(store, hub.Options{ReadToken: "read-token", Now: clock.now})
	require.NoError(t, err)
	web := httptest.NewServer(srv)
	defer web.Close()
	wave0 := 0
	canary := func(applied, target string, failed bool) {
		t.Helper()
		st := &status.Status{FormatVersion: status.FormatVersion, Device: "cam-001", AppliedRevision: applied, TargetRevision: target,
			LastReconcile: clock.now().Format(time.RFC3339Nano), Wave: &wave0}
		if failed {
			st.Quarantined = []status.Quarantined{{Release: target, Revision: target, Reason: "service web: health check failed"}}
		}
		_, err := store.Ingest(ctx, st, clock.now())
		require.NoError(t, err)
	}

	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v1"))
	repo.WriteFile("devices/cam-017/rollout.yaml", fmt.Sprintf(brakesRollout, web.URL, "hold"))
	v1 := "HEAD@sha1:" + repo.Commit("v1")
	c := newConfig(t, repo.Dir())
	tok, err := store.CreateToken(ctx, c.Device, clock.now())
	require.NoError(t, err)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600))
	c.Report = &manifest.Report{URL: web.URL + "/v1/reports", TokenFile: tokenFile}
	h := heldLoopOf(c)
	held := func() float64 {
		t.Helper()
		v, ok := scrape(t, h.metrics)[`tend_release_held{reason="brakes"}`]
		require.True(t, ok, "tend_release_held{reason=brakes} exists")
		return v
	}
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "v1", h.file(t), "a device that applied nothing takes its first commit at once")
	require.Equal(t, 0.0, held())
	require.Equal(t, 1, *h.tracker.Status().Wave)

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v2"))
	v2 := "HEAD@sha1:" + repo.Commit("v2")
	canary(v1, v1, false)
	h.scheduled()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Held)
	require.Equal(t, "held: brakes: 0 of 0 wave-0 devices ran "+v2[:len("HEAD@sha1:")+12]+"… healthy for 10m0s (minApplied 1)", h.res.Held.Reason)
	require.Equal(t, "v1", h.file(t))
	require.Equal(t, 1.0, held())

	canary(v2, v2, false)
	clock.add(9 * time.Minute)
	require.NoError(t, os.WriteFile(filepath.Join(c.Root, "etc/infer/a"), []byte("edited by hand"), 0o644))
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "held: brakes: 0 of 1 wave-0 devices ran "+v2[:len("HEAD@sha1:")+12]+"… healthy for 10m0s (minApplied 1)", h.res.Held.Reason)
	require.Equal(t, "v1", h.file(t), "drift is reverted while the brakes hold")

	clock.add(time.Minute)
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held)
	require.Equal(t, "v2", h.file(t), "the canary ran it healthy for soak")
	require.Equal(t, 0.0, held())

	// v3 fails on the canary: a new commit counts afresh, and holds.
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v3"))
	v3 := "HEAD@sha1:" + repo.Commit("v3")
	canary(v2, v3, true)
	clock.add(time.Hour)
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "held: brakes: 1 of 1 wave-0 devices failed "+v3[:len("HEAD@sha1:")+12]+"… (maxFailed 0)", h.res.Held.Reason)
	require.Equal(t, "held: brakes: 1 of 1 wave-0 devices failed "+v3[:len("HEAD@sha1:")+12]+"… (maxFailed 0)", h.tracker.Status().Held)
	require.Equal(t, "v2", h.file(t))

	// The hub goes down: onHubDown hold holds, proceed goes on.
	web.Close()
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "held: brakes: hub did not answer: "+web.URL+" (onHubDown: hold)", h.res.Held.Reason)
	repo.WriteFile("devices/cam-017/rollout.yaml", fmt.Sprintf(brakesRollout, web.URL, "proceed"))
	repo.Commit("proceed without the hub")
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held)
	require.Equal(t, "v3", h.file(t))
}

func TestBrakesTokenGoesOnlyToTheReportHub(t *testing.T) {
	require.True(t, sameOrigin("https://hub.example:8420/v1/reports", "https://HUB.example:8420"))
	require.False(t, sameOrigin("https://hub.example:8420/v1/reports", "https://other.example:8420"))
	require.False(t, sameOrigin("https://hub.example:8420/v1/reports", "http://hub.example:8420"))
}
