package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/testgit"
)

// heldLoop is a loop whose ticks a test runs one by one, with the tracker
// and metrics Start would make, and the result of its last tick.
type heldLoop struct {
	*Loop
	res     *Result
	err     error
	heldOff int
}

func newHeldLoop(t *testing.T, repo *testgit.Repo) *heldLoop {
	t.Helper()
	c := newConfig(t, repo.Dir())
	h := &heldLoop{}
	h.Loop = NewLoop(&Reconciler{Config: c}, LoopOptions{
		Schedule:  everyTick(time.Hour),
		Backoff:   func(int) time.Duration { return time.Hour },
		OnHeldOff: func() { h.heldOff++ },
		OnTick:    func(r *Result, err error) { h.res, h.err = r, err },
	})
	h.tracker = NewTracker(c.Device, "test")
	h.metrics = NewMetrics()
	h.observed = make(chan struct{})
	return h
}

// scheduled runs one scheduled tick.
func (h *heldLoop) scheduled() {
	h.res, h.err = nil, nil
	h.tick(context.Background(), slog.New(slog.DiscardHandler), false)
}

func (h *heldLoop) file(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.r.Config.Root, "etc/infer/a"))
	require.NoError(t, err)
	return string(b)
}

// A commit rolled back on this node is reported as what it is, even when
// why it was rolled back quotes a probe's "connection refused"; the fetch
// succeeded, and the node is held at the last applied commit.
func TestQuarantinedCommitIsNotAFetchError(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "good"))
	good := repo.Commit("good")
	h := newHeldLoop(t, repo)
	h.scheduled()
	require.NoError(t, h.err)

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "bad"))
	bad := repo.Commit("bad")
	why := "service/web did not become healthy: dial tcp 127.0.0.1:8080: connect: connection refused"
	require.NoError(t, applier.Quarantine(h.r.Config.StateDir, bad, applier.Quarantined{Revision: "main@sha1:" + bad, Reason: why}))
	h.scheduled()
	require.Error(t, h.err)
	require.Equal(t, "commit "+bad[:12]+" was rolled back on this node: "+why+"; push a fix as a new commit; holding the last applied commit "+good[:12], h.err.Error())
	require.Equal(t, "good", h.file(t), "held at the last applied commit")

	got := scrape(t, h.metrics)
	require.Equal(t, 0.0, got[`tend_source_fetch_total{result="error"}`], "the repo was fetched")
	require.Equal(t, 2.0, got[`tend_source_fetch_total{result="changed"}`]+got[`tend_source_fetch_total{result="unchanged"}`])
	require.Equal(t, h.err.Error(), h.tracker.Status().LastError)
}
