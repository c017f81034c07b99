package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-dev/tend/agent/status"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
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
	return heldLoopOf(newConfig(t, repo.Dir()))
}

// heldLoopOf is a held loop of config c: ticks hourly, an hour of backoff.
func heldLoopOf(c *manifest.AgentConfig) *heldLoop {
	h := &heldLoop{}
	h.Loop = NewLoop(&Reconciler{Config: c}, LoopOptions{
		Schedule:  everyTick(time.Hour),
		Backoff:   func(int) time.Duration { return time.Hour },
		OnHeldOff: func() { h.heldOff++ },
		OnTick:    func(r *Result, err error) { h.res, h.err = r, err },
	})
	h.tracker = status.NewTracker(c.Device, "test")
	h.metrics = status.NewMetrics()
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
	require.Equal(t, "commit "+bad[:12]+" was rolled back on this node: "+why+"; push a fix as a new commit, or run tend retry to try this one again; holding the last applied commit "+good[:12], h.err.Error())
	require.Equal(t, "good", h.file(t), "held at the last applied commit")

	got := scrape(t, h.metrics)
	require.Equal(t, 0.0, got[`tend_source_fetch_total{result="error"}`], "the repo was fetched")
	require.Equal(t, 2.0, got[`tend_source_fetch_total{result="changed"}`]+got[`tend_source_fetch_total{result="unchanged"}`])
	require.Equal(t, h.err.Error(), h.tracker.Status().LastError)
}

// While the loop backs off after failures (here an hour), a scheduled tick
// still reverts drift to the applied revision, without the repo or a
// registry: after a commit rolled back on this node, with the repo
// unreachable, and with a registry failing to serve a moved tag.
func TestBackoffStillRevertsDrift(t *testing.T) {
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": []byte("one")})
	for _, tc := range []struct {
		name string
		fail func(t *testing.T, h *heldLoop, repo *testgit.Repo)
	}{
		{"commit rolled back here", func(t *testing.T, h *heldLoop, repo *testgit.Repo) {
			repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "bad"))
			bad := repo.Commit("bad")
			require.NoError(t, applier.Quarantine(h.r.Config.StateDir, bad, applier.Quarantined{Revision: "main@sha1:" + bad, Reason: "service/web did not become healthy"}))
		}},
		{"repo unreachable", func(t *testing.T, h *heldLoop, repo *testgit.Repo) {
			require.NoError(t, os.Rename(repo.Dir(), repo.Dir()+".gone"))
		}},
		{"registry failing", func(t *testing.T, h *heldLoop, repo *testgit.Repo) {
			// The tag moves, and the new version cannot be downloaded.
			reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": []byte("two")})
			reg.Use(func(w http.ResponseWriter, r *http.Request) bool {
				if strings.Contains(r.URL.Path, "/blobs/") {
					http.Error(w, "down", http.StatusNotFound)
					return true
				}
				return false
			})
			t.Cleanup(func() { reg.Use(nil) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := testgit.NewRepo(t)
			repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "good")+
				"  models:\n    - {name: m, ref: "+reg.Ref("models/m:v1")+"}\n")
			repo.Commit("good")
			h := newHeldLoop(t, repo)
			h.r.Config.Registries.Insecure = []string{reg.Host}
			var held []*Result
			h.opts.OnHold = func(r *Result) { held = append(held, r) }
			h.scheduled()
			require.NoError(t, h.err)

			tc.fail(t, h, repo)
			h.scheduled()
			require.Error(t, h.err)
			failure := h.err.Error()

			file := filepath.Join(h.r.Config.Root, "etc/infer/a")
			require.NoError(t, os.WriteFile(file, []byte("edited by hand"), 0o644))
			asked := reg.Requests.Load()
			h.scheduled()
			require.Equal(t, asked, reg.Requests.Load(), "a registry was asked")
			require.Equal(t, 1, h.heldOff, "the tick is in the backoff")
			require.Nil(t, h.res, "no full tick ran")
			require.Equal(t, "good", h.file(t), "the drift was not reverted while backing off")
			require.Len(t, held, 1)
			require.Len(t, held[0].Drift, 1)
			require.Equal(t, "file/etc/infer/a", held[0].Drift[0].Resource)

			st := h.tracker.Status()
			require.Equal(t, failure, st.LastError, "the failure still stands")
			require.Len(t, st.Drift, 1)
			require.NotEmpty(t, st.Drift[0].Reverted)
			require.Equal(t, 1.0, scrape(t, h.metrics)[`tend_drift_total{kind="file"}`])

			h.scheduled() // nothing drifted: nothing to do
			require.Len(t, held, 1)
		})
	}
}

// A backoff hold puts back only what Git did not change. After a commit
// applied in part (a file updated, another blocked by a folder in its
// way), a hand edit of the updated file is not "reverted" to the older,
// last fully applied commit's content: the next full tick owns it.
func TestHoldLeavesWhatGitChanged(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "good"))
	repo.Commit("good")
	h := newHeldLoop(t, repo)
	h.scheduled()
	require.NoError(t, h.err)

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "new")+"    - {path: /etc/infer/sub, content: x}\n")
	repo.Commit("new, in part")
	require.NoError(t, os.MkdirAll(filepath.Join(h.r.Config.Root, "etc/infer/sub/x"), 0o755))
	h.scheduled()
	require.Error(t, h.err)
	require.Equal(t, "new", h.file(t), "the part of the commit that could be applied was")

	require.NoError(t, os.WriteFile(filepath.Join(h.r.Config.Root, "etc/infer/a"), []byte("edited by hand"), 0o644))
	var held []*Result
	h.opts.OnHold = func(r *Result) { held = append(held, r) }
	h.scheduled()
	require.Equal(t, 1, h.heldOff, "the tick was held off by the backoff")
	require.Equal(t, "edited by hand", h.file(t), "the older commit's content is not put back")
	for _, r := range held {
		require.Empty(t, r.Applied)
	}
}
