package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tend-dev/tend/agent/status"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

const waveRollout = "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n  paused: %v\n  waves:\n    - {percent: 100, after: 1h}\n"

// heldMetrics is tend_release_held by reason.
func heldMetrics(t *testing.T, h *heldLoop) map[string]float64 {
	t.Helper()
	got := scrape(t, h.metrics)
	out := map[string]float64{}
	for _, reason := range []string{"wave", "window", "paused", "gate"} {
		v, ok := got[`tend_release_held{reason="`+reason+`"}`]
		require.True(t, ok, "tend_release_held{reason=%q} exists", reason)
		out[reason] = v
	}
	return out
}

// A commit that changes the device waits for its wave's after, counted
// from when the device first saw it (kept across a restart); meanwhile
// the node keeps the applied commit and drift is reverted to it. A commit
// that does not change the device is no release.
func TestRolloutHoldsReleaseUntilItsWaveOpens(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v1"))
	repo.WriteFile("devices/cam-017/rollout.yaml", fmt.Sprintf(waveRollout, false))
	repo.Commit("v1")
	h := newHeldLoop(t, repo)
	now := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	h.r.Now = func() time.Time { return now }
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held, "the first commit a device applies is not held")
	require.Equal(t, "v1", h.file(t))

	repo.WriteFile("devices/cam-017/README.md", "not a manifest")
	second := repo.Commit("no change for the device")
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held, "a commit that does not change the device is no release")
	require.NoFileExists(t, statedir.Dir(h.r.Config.StateDir).Releases())
	require.Equal(t, "HEAD@sha1:"+second, h.tracker.Status().AppliedRevision)

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v2"))
	release := repo.Commit("v2")
	observed := h.r.observations.Load()
	h.scheduled()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Held)
	require.Equal(t, observed+1, h.r.observations.Load(), "a held tick observes the node once")
	require.Equal(t, "held: rollout wave 0 opens 2026-12-03T14:00Z", h.res.Held.Reason)
	require.Equal(t, "v1", h.file(t), "the node keeps the applied release")
	st := h.tracker.Status()
	require.Equal(t, status.ResultHeld, st.Result)
	require.Equal(t, "held: rollout wave 0 opens 2026-12-03T14:00Z", st.Held)
	require.Equal(t, "HEAD@sha1:"+second, st.AppliedRevision)
	require.Equal(t, "HEAD@sha1:"+release, st.TargetRevision)
	require.Empty(t, st.LastError, "a held release is not an error")
	require.Equal(t, map[string]float64{"wave": 1, "window": 0, "paused": 0, "gate": 0}, heldMetrics(t, h))

	now = now.Add(30 * time.Minute)
	require.NoError(t, os.WriteFile(filepath.Join(h.r.Config.Root, "etc/infer/a"), []byte("edited by hand"), 0o644))
	observed = h.r.observations.Load()
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "v1", h.file(t), "drift is reverted to the applied release while it is held")
	require.Equal(t, observed+1, h.r.observations.Load(), "a held tick that reverts drift observes the node once")
	require.Len(t, h.res.Applied, 1)
	require.Equal(t, "held: rollout wave 0 opens 2026-12-03T14:00Z", h.res.Held.Reason, "the wave counts from the first sight")

	// A restarted agent (a new reconciler on the same stateDir) keeps
	// the first sight: the wave still opens at 14:00.
	restarted := &Reconciler{Config: h.r.Config, Now: func() time.Time { return now }}
	res, err := restarted.Plan(context.Background())
	require.NoError(t, err)
	require.Equal(t, "held: rollout wave 0 opens 2026-12-03T14:00Z", res.Held.Reason)
	require.True(t, res.Plan.Empty(), "the plan of a held release is the applied revision's")

	now = now.Add(30 * time.Minute)
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held)
	require.Equal(t, "v2", h.file(t), "the wave opened")
	st = h.tracker.Status()
	require.Equal(t, status.ResultSuccess, st.Result)
	require.Empty(t, st.Held)
	require.Equal(t, "HEAD@sha1:"+release, st.AppliedRevision)
	require.Equal(t, map[string]float64{"wave": 0, "window": 0, "paused": 0, "gate": 0}, heldMetrics(t, h))
}

// A paused rollout holds a release the device has not taken, and leaves
// what it applied; unpausing lets it through.
func TestPausedRolloutHoldsRelease(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v1"))
	repo.WriteFile("devices/cam-017/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec: {selector: {}, paused: true}\n")
	repo.Commit("v1")
	h := newHeldLoop(t, repo)
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "v1", h.file(t))

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v2"))
	repo.Commit("v2")
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "held: rollout paused", h.res.Held.Reason)
	require.Equal(t, "v1", h.file(t))
	require.Equal(t, 1.0, heldMetrics(t, h)["paused"])

	repo.WriteFile("devices/cam-017/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec: {selector: {}, paused: false}\n")
	repo.Commit("resume the rollout")
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held)
	require.Equal(t, "v2", h.file(t))
}

// A gate is asked before a release is taken: anything but 200 holds it,
// and the next tick asks again.
func TestGateHoldsReleaseUntilItAnswers200(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	asked := make(chan string, 10)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- r.URL.RawQuery
		w.WriteHeader(int(status.Load()))
	}))
	defer gate.Close()
	repo := testgit.NewRepo(t)
	rollout := "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n" +
		"  gate: {url: \"" + gate.URL + "/ok?revision={revision}&device={device}&wave={wave}\"}\n"
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v1"))
	repo.WriteFile("devices/cam-017/rollout.yaml", rollout)
	repo.Commit("v1")
	h := newHeldLoop(t, repo)
	h.scheduled()
	require.NoError(t, h.err, "a device that applied nothing takes its first commit at once")
	require.Equal(t, "v1", h.file(t))

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v2"))
	v2 := repo.Commit("v2")
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "held: gate answered 503", h.res.Held.Reason)
	require.Equal(t, "v1", h.file(t))
	require.Equal(t, 1.0, heldMetrics(t, h)["gate"])
	require.Equal(t, "revision="+v2+"&device=cam-017&wave=0", <-asked)

	status.Store(http.StatusOK)
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held)
	require.Equal(t, "v2", h.file(t))
}

// A closed maintenance window holds a release, while drift is still
// reverted; the release is taken once the window opens on its schedule,
// in its time zone.
func TestWindowHoldsReleaseUntilItOpens(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v1"))
	repo.WriteFile("devices/cam-017/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n"+
		"  window: {schedule: \"0 2 * * *\", duration: 3h, timeZone: Europe/Berlin}\n")
	repo.Commit("v1")
	h := newHeldLoop(t, repo)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, berlin) // outside 02:00–05:00
	h.r.Now = func() time.Time { return now }
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "v1", h.file(t), "the first commit is taken at once")

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v2"))
	repo.Commit("v2")
	h.scheduled()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Held)
	require.Equal(t, "held: outside maintenance window (opens 02:00 Europe/Berlin)", h.res.Held.Reason)
	require.Equal(t, time.Date(2026, 12, 4, 2, 0, 0, 0, berlin), h.res.Held.Opens.In(berlin))
	require.Equal(t, 1.0, heldMetrics(t, h)["window"])
	require.Equal(t, "v1", h.file(t))

	require.NoError(t, os.WriteFile(filepath.Join(h.r.Config.Root, "etc/infer/a"), []byte("edited by hand"), 0o644))
	now = time.Date(2026, 12, 4, 1, 59, 0, 0, berlin)
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "v1", h.file(t), "drift is reverted outside the window; the release still waits")
	require.Equal(t, "window", rolloutCause(h))

	now = time.Date(2026, 12, 4, 2, 0, 0, 0, berlin)
	h.scheduled()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Held)
	require.Equal(t, "v2", h.file(t), "the window opened")
	require.Equal(t, 0.0, heldMetrics(t, h)["window"])
}

func rolloutCause(h *heldLoop) string {
	if h.res.Held == nil {
		return ""
	}
	return h.res.Held.Cause
}

// A commit whose Rollout is invalid fails the tick with the error validate
// gives, naming the file and line, and the node keeps its applied release.
func TestBadRolloutKeepsAppliedRelease(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v1"))
	repo.Commit("v1")
	h := newHeldLoop(t, repo)
	h.scheduled()
	require.NoError(t, h.err)

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v2"))
	repo.WriteFile("devices/cam-017/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n"+
		"  waves:\n    - {percent: 50}\n    - {percent: 10}\n")
	repo.Commit("v2 with a bad rollout")
	h.scheduled()
	require.Error(t, h.err)
	require.Contains(t, h.err.Error(), "devices/cam-017/rollout.yaml:8: spec.waves[1].percent: percent 10 does not increase on the wave before (50)")
	require.Equal(t, "v1", h.file(t), "the node keeps its applied release")
}
