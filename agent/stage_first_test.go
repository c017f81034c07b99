package agent

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// The first release of a node is staged, then taken: once it is
// applied, nothing stages any more, and status says so at once, not only
// from the next tick on.
func TestFirstReleaseLeavesNoStaging(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	h := newStagedLoop(t, repo, reg)
	reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": []byte("v1")})
	repo.WriteFile("devices/cam-017/d.yaml", stageDevice+"  models:\n    - {name: m, ref: "+reg.Ref("models/m:v1")+"}\n")
	repo.Commit("a model")
	h.manual()
	require.NoError(t, h.err)
	require.NotNil(t, h.tracker.Status().Staging, "nothing applied yet: the release stages first")
	<-h.ready
	before := reg.BlobBytes.Load()
	h.manual()
	require.NoError(t, h.err)
	require.Equal(t, before, reg.BlobBytes.Load(), "the activation downloaded nothing")
	require.Equal(t, "v1", h.read(t, filepath.Join(h.r.Config.StateDir, "models", "m", "current", "model.onnx")))
	require.Nil(t, h.res.Staging)
	_, staging := h.r.Stager.Status()
	require.False(t, staging, "the release is applied: it stages no more")
	require.Nil(t, h.tracker.Status().Staging, "status shows the applied release staging")
}

// A node that has applied nothing yet stages its first release; a newer
// commit that needs nothing downloaded supersedes it: it is applied at
// once, and the first release's download is given up.
func TestFirstReleaseSuperseded(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	h := newStagedLoop(t, repo, reg)
	weights := bytes.Repeat([]byte("w"), 1<<20)
	gate := newBlobGate(reg, weights)
	defer close(gate.open)
	reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": weights})
	repo.WriteFile("devices/cam-017/d.yaml", stageDevice+"  models:\n    - {name: m, ref: "+reg.Ref("models/m:v1")+"}\n")
	repo.Commit("a model")
	h.manual()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Staging)
	<-gate.started

	repo.WriteFile("devices/cam-017/d.yaml", stageDevice+"  files:\n    - {path: /etc/infer/a, content: a1}\n")
	repo.Commit("a file instead")
	h.manual()
	require.NoError(t, h.err)
	require.Equal(t, "a1", h.read(t, filepath.Join(h.r.Config.Root, "etc/infer/a")))
	select {
	case <-gate.cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the superseded download was not given up")
	}
	require.Nil(t, h.tracker.Status().Staging)
}
