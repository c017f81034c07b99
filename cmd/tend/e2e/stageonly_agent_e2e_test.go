package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// tend apply --stage-only downloads without the stateDir lock: while its
// download of a model is held mid-way by the registry, the agent on the
// node goes on ticking and reverts a hand edit of a file it manages. Once
// the registry lets the download end, stage-only exits 0 with the blob in
// the store, and the agent's tick that takes the release (its rollout's
// gate opened; `stage: onRelease`, so the agent stages nothing itself
// while the gate is closed) downloads nothing (counted at the registry).
func TestStageOnlyLeavesTheAgentTicking(t *testing.T) {
	reg := testoci.Start(t)
	weights := randomBytes(1<<20, 42)
	reg.PushFiles(t, "models/m:v2", map[string][]byte{"model.onnx": weights})
	gate := startGate(t)
	gate.open.Store(true)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: gated}\n"+
		"spec:\n  selector: {}\n  stage: onRelease\n  gate: {url: \""+gate.url+"\"}\n")
	config := "  files:\n    - {path: /etc/infer/config.yaml, content: \"threshold: 0.4\\n\"}\n"
	repo.WriteFile("devices/cam-017/device.yaml", stageDevice+config)
	first := repo.Commit("config")
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	a := startAgent(t, n, "--schedule", "@every 1s")
	defer a.stop()
	eventually(t, func() bool { return a.status()["appliedRevision"] == "HEAD@sha1:"+first })

	gate.open.Store(false)
	repo.WriteFile("devices/cam-017/device.yaml", stageDevice+config+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/m:v2")+", path: /opt/models/m}\n")
	second := repo.Commit("model")
	hold := reg.HoldBlob(testoci.Digest(weights), int64(len(weights)/2))
	defer hold.Release()
	served := reg.BlobBytes.Load()
	stage := exec.Command(tendBin, append(append([]string{"apply"}, n.flags...), "--stage-only")...)
	stage.Env = append(os.Environ(), "TEND_CONFIG=")
	var out, errOut bytes.Buffer
	stage.Stdout, stage.Stderr = &out, &errOut
	require.NoError(t, stage.Start())
	exited := make(chan error, 1)
	go func() { exited <- stage.Wait() }()
	t.Cleanup(func() { _ = stage.Process.Kill() })
	select {
	case <-hold.Held():
	case err := <-exited:
		t.Fatalf("tend apply --stage-only exited (%v) before its download was held:\n%s%s", err, out.String(), errOut.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("the download of tend apply --stage-only not held within 20s:\n%s", errOut.String())
	}

	n.write("etc/infer/config.yaml", "threshold: 0.99\n")
	eventually(t, func() bool { return n.read("etc/infer/config.yaml") == "threshold: 0.4\n" })
	require.Contains(t, a.logs(), "resource=file/etc/infer/config.yaml")
	select {
	case err := <-exited:
		t.Fatalf("tend apply --stage-only exited (%v) while its download was held", err)
	default:
	}
	require.NoFileExists(t, filepath.Join(n.root, "opt/models/m"), "the gate holds the release")

	hold.Release()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("tend apply --stage-only exited %d:\n%s%s", ee.ExitCode(), out.String(), errOut.String())
		}
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("tend apply --stage-only did not end within 20s of the release:\n%s", errOut.String())
	}
	require.Contains(t, out.String(), "Staged model/m: "+reg.Ref("models/m:v2"))
	require.Contains(t, out.String(), "Stage complete: 1 model staged (1.0 MB downloaded)")
	require.FileExists(t, filepath.Join(n.state, "blobs/sha256", strings.TrimPrefix(testoci.Digest(weights), "sha256:")))
	require.Equal(t, int64(len(weights)), reg.BlobBytes.Load()-served, "the blob, once")

	served = reg.BlobBytes.Load()
	gate.open.Store(true)
	a.reconcile()
	eventually(t, func() bool { return a.status()["appliedRevision"] == "HEAD@sha1:"+second })
	require.Equal(t, served, reg.BlobBytes.Load(), "the tick that takes the release downloads nothing")
	require.True(t, bytes.Equal(weights, []byte(n.read("opt/models/m/model.onnx"))))
}
