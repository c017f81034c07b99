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
	"github.com/tend-dev/tend/gating"
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
	require.Equal(t, "default", h.tracker.Status().Rollout, "the rollout a verdict names")

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

const quietRollout = "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n" +
	"  waves:\n    - selector: {matchLabels: {ring: canary}}\n    - {percent: 100}\n" +
	"  brakes: {hub: %q, minApplied: 1, onHubDown: %s}\n"

// A hub that hangs, or whose port is closed, costs one bounded wait: the
// next tick decides as onHubDown says without asking it, and reverts
// drift as every tick does; once the back-off has passed, the hub is
// asked again and its verdict counts.
func TestBrakesHubDownCostsOneWait(t *testing.T) {
	for _, tt := range []struct {
		name      string
		hangs     bool // else the port is closed
		onHubDown string
	}{
		{"hangs, hold", true, manifest.OnHubDownHold},
		{"hangs, proceed", true, manifest.OnHubDownProceed},
		{"closed port, hold", false, manifest.OnHubDownHold},
		{"closed port, proceed", false, manifest.OnHubDownProceed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store, err := hub.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
			require.NoError(t, err)
			defer store.Close()
			at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
			srv, err := hub.NewServer(store, hub.Options{PublicRead: true, Now: func() time.Time { return at }})
			require.NoError(t, err)
			quiet := &quietServer{next: srv, got: make(chan struct{}, 16)}
			addr, reopen := serveQuiet(t, quiet, tt.hangs)
			wave0 := 0
			canaryRuns := func(rev string) {
				t.Helper()
				_, err := store.Ingest(ctx, &status.Status{FormatVersion: status.FormatVersion, Device: "cam-001",
					AppliedRevision: rev, TargetRevision: rev, LastReconcile: at.Format(time.RFC3339Nano), Wave: &wave0}, at)
				require.NoError(t, err)
			}

			repo := testgit.NewRepo(t)
			hubURL := "http://" + addr
			repo.WriteFile("devices/cam-017/rollout.yaml", fmt.Sprintf(quietRollout, hubURL, tt.onHubDown))
			commit := func(content string) string {
				repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, content))
				return "HEAD@sha1:" + repo.Commit(content)
			}
			commit("v1")
			c := newConfig(t, repo.Dir())
			h := heldLoopOf(c)
			clock := &hubClock{t: at}
			h.r.Now = clock.now
			h.r.gating.HubTimeout = 500 * time.Millisecond
			drifted := func() {
				t.Helper()
				require.NoError(t, os.WriteFile(filepath.Join(c.Root, "etc/infer/a"), []byte("edited by hand"), 0o644))
			}
			held := func() float64 {
				t.Helper()
				return scrape(t, h.metrics)[`tend_release_held{reason="brakes"}`]
			}
			h.scheduled()
			require.NoError(t, h.err)
			require.Equal(t, "v1", h.file(t))

			// The first question waits for the hub, and gets no answer.
			canaryRuns(commit("v2"))
			drifted()
			h.scheduled()
			require.NoError(t, h.err)
			if tt.hangs {
				<-quiet.got
			}
			asked := quiet.asked.Load()
			downReason := "held: brakes: hub did not answer: " + hubURL + " (onHubDown: hold)"
			if tt.onHubDown == manifest.OnHubDownHold {
				require.NotNil(t, h.res.Held)
				require.Equal(t, downReason, h.res.Held.Reason)
				require.Equal(t, "v1", h.file(t), "drift is reverted while the hub is down")
				require.Equal(t, 1.0, held())
			} else {
				require.Nil(t, h.res.Held)
				require.Equal(t, "v2", h.file(t))
				require.Equal(t, 0.0, held())
			}

			// The hub is back, but the next tick does not ask it: it
			// decides at once, as onHubDown says.
			quiet.up.Store(true)
			reopen()
			if tt.onHubDown == manifest.OnHubDownProceed {
				canaryRuns(commit("v3"))
			}
			drifted()
			h.scheduled()
			require.NoError(t, h.err)
			require.Equal(t, asked, quiet.asked.Load(), "the second tick did not ask the hub")
			if tt.onHubDown == manifest.OnHubDownHold {
				require.Equal(t, downReason, h.res.Held.Reason)
				require.Equal(t, "v1", h.file(t), "drift is reverted while the hub is left alone")
				require.Equal(t, 1.0, held())
			} else {
				require.Nil(t, h.res.Held)
				require.Equal(t, "v3", h.file(t))
			}

			// Once the back-off has passed, the hub is asked, and its
			// verdict counts: go for a release the canary runs, wait for
			// one it has not.
			clock.add(gating.ServerDownBackoff.Delay(1))
			var v4 string
			if tt.onHubDown == manifest.OnHubDownProceed {
				v4 = commit("v4")
			}
			drifted()
			h.scheduled()
			require.NoError(t, h.err)
			<-quiet.got
			require.Equal(t, asked+1, quiet.asked.Load())
			if tt.onHubDown == manifest.OnHubDownHold {
				require.Nil(t, h.res.Held)
				require.Equal(t, "v2", h.file(t))
				require.Equal(t, 0.0, held())
			} else {
				require.NotNil(t, h.res.Held)
				require.Equal(t, "held: brakes: 0 of 0 wave-0 devices applied "+v4[:len("HEAD@sha1:")+12]+"… (minApplied 1)", h.res.Held.Reason)
				require.Equal(t, "v3", h.file(t), "drift is reverted while the brakes hold")
				require.Equal(t, 1.0, held())
			}
		})
	}
}
