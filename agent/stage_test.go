package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// blobGate holds the download of the blobs it names until opened, and
// says when a request for one began and when one was given up.
type blobGate struct {
	digests   map[string]bool
	open      chan struct{}
	started   chan string
	cancelled chan string
}

func newBlobGate(reg *testoci.Registry, contents ...[]byte) *blobGate {
	g := &blobGate{digests: map[string]bool{}, open: make(chan struct{}), started: make(chan string, 16), cancelled: make(chan string, 16)}
	for _, c := range contents {
		sum := sha256.Sum256(c)
		g.digests["sha256:"+hex.EncodeToString(sum[:])] = true
	}
	reg.Use(func(w http.ResponseWriter, r *http.Request) bool {
		d := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/blobs/") || !g.digests[d] {
			return false
		}
		g.started <- d
		select {
		case <-g.open:
			return false
		case <-r.Context().Done():
			g.cancelled <- d
			return true
		}
	})
	return g
}

// stagedLoop is a held loop with a stager whose readiness a test waits
// for.
type stagedLoop struct {
	*heldLoop
	ready chan struct{}
}

func newStagedLoop(t *testing.T, repo *testgit.Repo, reg *testoci.Registry) *stagedLoop {
	t.Helper()
	c := newConfig(t, repo.Dir())
	c.Registries.Insecure = []string{reg.Host}
	h := &stagedLoop{heldLoop: heldLoopOf(c), ready: make(chan struct{}, 16)}
	st := &Stager{Ready: func() { h.ready <- struct{}{} }, Logger: slog.New(slog.DiscardHandler)}
	h.r.Stager = st
	h.showStaging()
	t.Cleanup(st.Stop)
	t.Cleanup(func() { killServices(t, c.StateDir) })
	return h
}

func (h *stagedLoop) manual() {
	h.res, h.err = nil, nil
	h.tick(context.Background(), slog.New(slog.DiscardHandler), true)
}

func (h *stagedLoop) read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

const stageDevice = "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"

// A release whose model is not in the store is staged in the background:
// while it downloads, ticks keep the applied release converged (a hand
// edit is reverted) and status says how the staging goes; once staged,
// the next tick activates the model and the file that goes with it in one
// apply that downloads nothing. A newer commit supersedes a release that
// stages: its download is given up, and the commit is applied at once.
func TestStagingNeverHoldsTheTick(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	h := newStagedLoop(t, repo, reg)
	c := h.r.Config
	model := filepath.Join(c.StateDir, "models", "m", "current", "model.onnx")
	file := filepath.Join(c.Root, "etc/infer/a")
	commit := func(tag, content string) {
		spec := "  files:\n    - {path: /etc/infer/a, content: " + content + "}\n"
		if tag != "" {
			spec = "  models:\n    - {name: m, ref: " + reg.Ref("models/m:"+tag) + "}\n" + spec
		}
		repo.WriteFile("devices/cam-017/d.yaml", stageDevice+spec)
		repo.Commit(content)
	}

	// The first release is staged too, then taken.
	reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": []byte("v1")})
	commit("v1", "a1")
	h.manual()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Staging, "nothing applied yet: the release stages first")
	require.Empty(t, h.tracker.Status().AppliedRevision, "nothing is applied while the first release stages")
	require.NotEmpty(t, h.tracker.Status().TargetRevision)
	<-h.ready
	h.manual()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Staging)
	require.Equal(t, "v1", h.read(t, model))
	require.Equal(t, "a1", h.read(t, file))

	// v2 stages while its blob is held back by the registry.
	v2 := bytes.Repeat([]byte("v2"), 1<<19)
	gate := newBlobGate(reg, v2)
	reg.PushFiles(t, "models/m:v2", map[string][]byte{"model.onnx": v2})
	commit("v2", "a2")
	h.manual()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Staging)
	require.Equal(t, []string{"model/m"}, h.res.Staging.Resources)
	require.Equal(t, int64(len(v2)), h.res.Staging.TotalBytes)
	<-gate.started
	require.Equal(t, "v1", h.read(t, model), "nothing switches while the release stages")
	require.Equal(t, "a1", h.read(t, file))
	st := h.tracker.Status().Staging
	require.NotNil(t, st, "status shows the staging")
	require.Equal(t, h.res.Staging.Revision, st.Revision)
	require.Less(t, st.Bytes, st.TotalBytes)

	require.NoError(t, os.WriteFile(file, []byte("by hand"), 0o644))
	h.manual()
	require.NoError(t, h.err)
	require.Equal(t, "a1", h.read(t, file), "drift is reverted while the release stages")
	require.Equal(t, "v1", h.read(t, model))

	close(gate.open)
	<-h.ready
	before := reg.BlobBytes.Load()
	h.manual()
	require.NoError(t, h.err)
	require.Equal(t, "v2", h.read(t, model)[:2])
	require.Equal(t, "a2", h.read(t, file), "the file and the model switch in one apply")
	require.Equal(t, before, reg.BlobBytes.Load(), "the activation downloaded nothing")
	require.Nil(t, h.tracker.Status().Staging)

	// v3 stages; a commit without the model supersedes it.
	v3 := bytes.Repeat([]byte("v3"), 1<<19)
	gate = newBlobGate(reg, v3)
	reg.PushFiles(t, "models/m:v3", map[string][]byte{"model.onnx": v3})
	commit("v3", "a3")
	h.manual()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Staging)
	<-gate.started
	commit("", "a4")
	h.manual()
	require.NoError(t, h.err)
	require.Equal(t, "a4", h.read(t, file), "the newer commit is applied at once")
	<-gate.cancelled // the staging's download was given up
	require.Nil(t, h.res.Staging)
	require.Nil(t, h.tracker.Status().Staging)
	require.Equal(t, "", h.read(t, model), "the model is no longer declared")
}

// A release held by a closed maintenance window is staged while it waits
// (stage onSight, the default): the window's first tick activates it and
// downloads nothing. With stage onRelease nothing is downloaded until the
// rollout lets the release through.
func TestStagingBeforeTheWindowOpens(t *testing.T) {
	for _, tt := range []struct{ stage string }{{""}, {"onRelease"}} {
		t.Run("stage="+tt.stage, func(t *testing.T) {
			reg := testoci.Start(t)
			repo := testgit.NewRepo(t)
			h := newStagedLoop(t, repo, reg)
			berlin, err := time.LoadLocation("Europe/Berlin")
			require.NoError(t, err)
			now := time.Date(2026, 12, 3, 12, 0, 0, 0, berlin) // outside 02:00–05:00
			h.r.Now = func() time.Time { return now }
			rollout := "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n" +
				"  window: {schedule: \"0 2 * * *\", duration: 3h, timeZone: Europe/Berlin}\n"
			if tt.stage != "" {
				rollout += "  stage: " + tt.stage + "\n"
			}
			repo.WriteFile("devices/cam-017/rollout.yaml", rollout)
			repo.WriteFile("devices/cam-017/d.yaml", stageDevice+"  files:\n    - {path: /etc/infer/a, content: a1}\n")
			repo.Commit("one file")
			h.manual()
			require.NoError(t, h.err)

			big := bytes.Repeat([]byte("w"), 1<<20)
			reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": big})
			repo.WriteFile("devices/cam-017/d.yaml", stageDevice+"  models:\n    - {name: m, ref: "+reg.Ref("models/m:v1")+"}\n"+
				"  files:\n    - {path: /etc/infer/a, content: a1}\n")
			repo.Commit("a model")
			before := reg.BlobBytes.Load()
			h.manual()
			require.NoError(t, h.err)
			require.NotNil(t, h.res.Held, "the window is closed")
			if tt.stage == "onRelease" {
				require.Nil(t, h.res.Staging, "onRelease: nothing is staged while the release is held")
				h.manual()
				require.Less(t, reg.BlobBytes.Load()-before, int64(1024), "nothing but the artifact's config was read while held")
			} else {
				require.NotNil(t, h.res.Staging, "onSight: the release stages while held")
				<-h.ready
				h.manual()
				require.NoError(t, h.err)
				require.NotNil(t, h.res.Held, "staged, still held by the window")
				require.Equal(t, h.res.Staging.TotalBytes, h.tracker.Status().Staging.Bytes, "everything is in the store")
				before = reg.BlobBytes.Load()

				// An agent started again knows nothing of what it staged:
				// a tick that reverts drift (and collects garbage) keeps
				// the held release's blobs all the same.
				h.r.Stager.Stop()
				h.r.nodes.node.models.Unstage() // a new agent's driver keeps nothing
				h.r.Stager = &Stager{Ready: func() { h.ready <- struct{}{} }, Logger: slog.New(slog.DiscardHandler)}
				t.Cleanup(h.r.Stager.Stop)
				require.NoError(t, os.WriteFile(filepath.Join(h.r.Config.Root, "etc/infer/a"), []byte("by hand"), 0o644))
				h.manual()
				require.NoError(t, h.err)
				require.NotNil(t, h.res.Held)
				require.Equal(t, "a1", h.read(t, filepath.Join(h.r.Config.Root, "etc/infer/a")), "drift reverted, garbage collected")
			}

			now = time.Date(2026, 12, 4, 2, 0, 0, 0, berlin)
			h.manual()
			require.NoError(t, h.err)
			if tt.stage == "onRelease" {
				require.NotNil(t, h.res.Staging, "the window opened: now it stages")
				<-h.ready
				h.manual()
				require.NoError(t, h.err)
				require.Equal(t, big, []byte(h.read(t, filepath.Join(h.r.Config.StateDir, "models", "m", "current", "model.onnx"))))
				return
			}
			require.Nil(t, h.res.Held)
			require.Nil(t, h.res.Staging)
			require.Equal(t, big, []byte(h.read(t, filepath.Join(h.r.Config.StateDir, "models", "m", "current", "model.onnx"))))
			require.Equal(t, before, reg.BlobBytes.Load(), "the activation in the window downloaded nothing")
		})
	}
}

// A staging whose download fails says why in status and is tried again
// by the first tick after its backoff, not before; the tick itself never
// fails for it.
func TestStagingFailureBacksOff(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	h := newStagedLoop(t, repo, reg)
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	h.r.Stager.Now = func() time.Time { return now }
	h.r.Stager.Backoff = backoff.Exponential{Initial: time.Minute, Max: time.Hour}
	weights := bytes.Repeat([]byte("x"), 4096)
	sum := sha256.Sum256(weights)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	var asked atomic.Int64
	var broken atomic.Bool
	broken.Store(true)
	reg.Use(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+digest) {
			return false
		}
		asked.Add(1)
		if broken.Load() {
			http.Error(w, "disk on fire", http.StatusInternalServerError)
			return true
		}
		return false
	})
	reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": weights})
	repo.WriteFile("devices/cam-017/d.yaml", stageDevice+"  models:\n    - {name: m, ref: "+reg.Ref("models/m:v1")+"}\n")
	repo.Commit("a model")

	h.manual()
	require.NoError(t, h.err)
	<-h.ready // failed
	h.manual()
	require.NoError(t, h.err, "a staging failure is not the tick's")
	require.NotNil(t, h.res.Staging)
	require.Contains(t, h.res.Staging.Err, "500")
	require.Contains(t, h.tracker.Status().Staging.Error, "500")
	tried := asked.Load()

	now = now.Add(59 * time.Second)
	h.manual()
	require.Equal(t, tried, asked.Load(), "not tried again within its backoff")

	broken.Store(false)
	now = now.Add(time.Second)
	h.manual()
	require.NoError(t, h.err)
	<-h.ready
	require.Greater(t, asked.Load(), tried, "tried again once its backoff was over")
	h.manual()
	require.NoError(t, h.err)
	require.Nil(t, h.res.Staging)
	require.Equal(t, weights, []byte(h.read(t, filepath.Join(h.r.Config.StateDir, "models", "m", "current", "model.onnx"))))
}

// A fleet artifact's layer downloads beside the ticks too: until it is
// whole the node holds its applied revision and reverts drift to it, and
// status says what downloads; the tick after it is whole applies it.
func TestOCISourceStagesInBackground(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", stageDevice+"  files:\n    - {path: /etc/infer/a, content: one}\n")
	repo.Commit("one")
	c := newConfig(t, "oci://"+reg.Ref("fleet:main"))
	c.Registries.Insecure = []string{reg.Host}
	h := &stagedLoop{heldLoop: heldLoopOf(c), ready: make(chan struct{}, 16)}
	h.r.Stager = &Stager{Ready: func() { h.ready <- struct{}{} }, Logger: slog.New(slog.DiscardHandler)}
	h.showStaging()
	t.Cleanup(func() { h.r.Stager.Stop(); h.r.stopSource() })
	file := filepath.Join(c.Root, "etc/infer/a")

	publishFleet(t, reg, repo)
	h.manual()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Staging, "nothing applied yet: the artifact downloads first")
	require.Equal(t, []string{ResourceSource}, h.res.Staging.Resources)
	<-h.ready
	h.manual()
	require.NoError(t, h.err)
	require.Equal(t, "one", h.read(t, file))

	var shut atomic.Bool
	shut.Store(true)
	opened := make(chan struct{})
	reg.Use(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/fleet/blobs/") && shut.Load() {
			select {
			case <-opened:
			case <-r.Context().Done():
			}
		}
		return false
	})
	repo.WriteFile("devices/cam-017/d.yaml", stageDevice+"  files:\n    - {path: /etc/infer/a, content: two}\n")
	two := repo.Commit("two")
	publishFleet(t, reg, repo)
	require.NoError(t, os.WriteFile(file, []byte("by hand"), 0o644))
	h.manual()
	require.NoError(t, h.err, "a download under way is no failure")
	require.Equal(t, "one", h.read(t, file), "drift is reverted while the artifact downloads")
	st := h.tracker.Status().Staging
	require.NotNil(t, st)
	require.Equal(t, "main@sha1:"+two, st.Revision)
	require.Equal(t, []string{ResourceSource}, st.Resources)

	close(opened)
	<-h.ready
	h.manual()
	require.NoError(t, h.err)
	require.Equal(t, "two", h.read(t, file))
	require.Nil(t, h.tracker.Status().Staging)
}
