package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testnode"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/planner"
)

// A model followed by semver whose newest version makes its service
// unhealthy is rolled back and quarantined by its digest (the commit did
// not move): the next ticks keep the good version, without a restart, and
// say why; tend retry's unquarantine makes it tried again; a good higher
// version is taken.
func TestRolledBackModelVersionIsQuarantined(t *testing.T) {
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/m:1.1.0", map[string][]byte{"model.onnx": []byte("good")})
	repo := testgit.NewRepo(t)
	c := newConfig(t, repo.Dir())
	c.Registries.Insecure = []string{reg.Host}
	current := filepath.Join(c.StateDir, "models", "m", "current", "model.onnx")
	repo.WriteFile("devices/cam-017/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/m")+", policy: {semver: \">=1.0.0\"}}\n"+
		"  services:\n    - name: infer\n      command: [\"/bin/sh\", \"-c\", \"exec sleep 600\", \"${model:m}/model.onnx\"]\n      stopTimeout: 2s\n"+
		fmt.Sprintf("      health: {exec: [\"/bin/sh\", \"-c\", \"! grep -q bad %s\"], interval: 100ms, startupGrace: 1s}\n", current))
	repo.Commit("follow m by semver")
	h := heldLoopOf(c)
	t.Cleanup(func() { killServices(t, c.StateDir) })
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	h.r.Now = func() time.Time { return now }
	manual := func() {
		h.res, h.err = nil, nil
		h.tick(context.Background(), slog.New(slog.DiscardHandler), true)
	}
	model := func() string {
		b, err := os.ReadFile(current)
		require.NoError(t, err)
		return string(b)
	}
	manual()
	require.NoError(t, h.err)
	require.Equal(t, "good", model())
	held := func() float64 { return scrape(t, h.metrics)[`tend_release_held{reason="quarantined"}`] }
	require.Equal(t, 0.0, held(), "the series exists at zero")

	bad := reg.PushFiles(t, "models/m:1.2.0", map[string][]byte{"model.onnx": []byte("bad")})
	manual()
	var rb *applier.RollbackError
	require.True(t, errors.As(h.err, &rb), "%v", h.err)
	require.Equal(t, "good", model(), "rolled back")
	key := applier.ReleaseKey("model/m", bad)
	q, err := applier.LoadQuarantine(c.StateDir)
	require.NoError(t, err)
	require.Len(t, q, 1, "the commit did not move: only the model's digest is quarantined")
	reason := "service/infer did not become healthy: " + rb.Cause.Error()
	require.Equal(t, applier.Quarantined{Revision: key, Tag: "1.2.0", Applied: h.res.Desired.Revision, Reason: reason, At: now}, q[key])
	require.Equal(t, []status.Quarantined{{Release: key, Revision: h.res.Desired.Revision, Tag: "1.2.0", Reason: reason, At: "2026-12-03T09:00:00Z"}},
		h.tracker.Status().Quarantined, "the status document counts the failure of that release")

	short := planner.ShortDigest(bad)
	why := "model/m 1.2.0 (" + short + ") was rolled back on this node at 2026-12-03T09:00:00Z: " + reason +
		"; push a new version, or run tend retry model/m@" + short
	for i := range 3 {
		manual()
		require.NoError(t, h.err, "tick %d", i)
		require.Empty(t, h.res.Applied, "tick %d: nothing restarts", i)
		require.True(t, h.res.Plan.Empty(), "tick %d", i)
		require.Equal(t, "good", model())
		require.EqualError(t, h.res.Quarantined(), why)
		require.Equal(t, why, h.tracker.Status().Warning)
		require.Equal(t, 1.0, held())
	}

	cleared, err := applier.Unquarantine(c.StateDir, "model/m@"+short)
	require.NoError(t, err)
	require.Len(t, cleared, 1)
	manual()
	require.True(t, errors.As(h.err, &rb), "retried, and rolled back again: %v", h.err)
	require.Equal(t, "good", model())
	manual()
	require.NoError(t, h.err)
	require.Equal(t, 1.0, held(), "quarantined again")

	reg.PushFiles(t, "models/m:1.2.1", map[string][]byte{"model.onnx": []byte("fixed")})
	manual()
	require.NoError(t, h.err)
	require.Equal(t, "fixed", model(), "a new version is a new release")
	require.NoError(t, h.res.Quarantined())
	require.Equal(t, "", h.tracker.Status().Warning)
	require.Len(t, h.tracker.Status().Quarantined, 1, "1.2.0 stays rolled back here, for fleet views")
	require.Equal(t, 0.0, held())
}

// killServices kills the services a test's tend left running (see
// testnode.StopServices).
func killServices(t testing.TB, stateDir string) {
	t.Helper()
	testnode.StopServices(t, stateDir)
}
