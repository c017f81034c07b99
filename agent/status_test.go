package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tend-dev/tend/agent/status"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// While suspended, the status says so, why, and how many changes wait;
// tend_suspended is 1. `suspended` is in the JSON either way.
func TestSuspendedStatusAndGauge(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "a"))
	repo.Commit("one")
	h := newHeldLoop(t, repo)
	require.NoError(t, Suspend(h.r.Config.StateDir, "maintenance"))
	h.scheduled()
	require.NoError(t, h.err)

	st := h.tracker.Status()
	require.True(t, st.Suspended)
	require.Contains(t, st.SuspendReason, "tend suspend at ")
	require.Contains(t, st.SuspendReason, ": maintenance")
	require.Equal(t, status.ResultSuspended, st.Result)
	require.Equal(t, 1, st.Pending)
	got := scrape(t, h.metrics)
	require.Equal(t, 1.0, got[`tend_suspended`])
	require.Equal(t, 1.0, got[`tend_reconcile_total{result="noop"}`], "nothing applied, nothing failed")

	_, err := Resume(h.r.Config.StateDir)
	require.NoError(t, err)
	h.scheduled()
	require.NoError(t, h.err)
	st = h.tracker.Status()
	require.False(t, st.Suspended)
	require.Empty(t, st.SuspendReason)
	require.Equal(t, status.ResultSuccess, st.Result)
	require.Zero(t, st.Pending)
	require.Equal(t, 0.0, scrape(t, h.metrics)[`tend_suspended`])
	b, err := json.Marshal(st)
	require.NoError(t, err)
	require.Contains(t, string(b), `"suspended":false`)
}

// A suspended tick fails nothing: an action the plan knows will fail (a
// folder in a file's way) is pending like the others, not a failure that
// starts the backoff.
func TestSuspendedTickWithAFailingActionFailsNothing(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "a")+"    - {path: /etc/infer/sub, content: x}\n")
	repo.Commit("one")
	h := newHeldLoop(t, repo)
	require.NoError(t, os.MkdirAll(filepath.Join(h.r.Config.Root, "etc/infer/sub/x"), 0o755))
	require.NoError(t, Suspend(h.r.Config.StateDir, "maintenance"))
	h.scheduled()
	require.NoError(t, h.err)
	require.Zero(t, h.failures, "no backoff starts")

	st := h.tracker.Status()
	require.Equal(t, status.ResultSuspended, st.Result)
	require.Equal(t, 2, st.Pending)
	require.Equal(t, 1.0, scrape(t, h.metrics)[`tend_reconcile_total{result="noop"}`])
}
