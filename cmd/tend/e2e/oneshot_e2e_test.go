package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// A node reconciled by one-shot applies (a timer, no agent) has a status:
// each apply writes it to stateDir as an agent's tick does, and a failed
// apply keeps the last success and counts the failures.
func TestStatusAfterOneShotApply(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	good := repo.Commit("good")
	n := newNode(t, repo.Dir())
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	out, errOut, code := n.tend("status")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Listen is off; last status written at ")
	require.Contains(t, out, "HEAD@sha1:"+good)

	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.9\n", "0x1")))
	repo.Commit("bad mode")
	_, _, code = n.tend("apply")
	require.Equal(t, 1, code)
	out, errOut, code = n.tend("status", "--format", "json")
	require.Equal(t, 0, code, errOut)
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Equal(t, "HEAD@sha1:"+good, s["appliedRevision"])
	require.Contains(t, s["lastError"], "device.yaml:")
	require.Equal(t, 1.0, s["consecutiveFailures"])
	require.NotEmpty(t, s["lastSuccess"], "the last success is kept")
	require.Equal(t, "error", s["result"])
}

// `tend apply --ref X` beside an agent that follows another ref: apply
// warns that the agent's next tick reverts it and leaves the agent's
// status alone; the agent's tick names what it deletes in its log.
func TestApplyWarnsOfAnAgentOnAnotherRef(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	main := repo.Commit("main")
	branch := repo.Git("rev-parse", "--abbrev-ref", "HEAD")
	repo.Branch("trial")
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", ""), entry("/etc/infer/trial.txt", "x", "")))
	trial := repo.Commit("trial")
	repo.Checkout(branch)

	n := newNode(t, repo.Dir(), "--schedule", "@every 1h")
	a := startAgent(t, n)
	eventually(t, func() bool { return a.status()["appliedRevision"] == "HEAD@sha1:"+main })
	statusFile := filepath.Join(n.state, "status.json")
	eventually(t, func() bool { _, err := os.Stat(statusFile); return err == nil })

	_, errOut, code := n.tend("apply", "--ref", "trial")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "Warning: a tend agent (pid ")
	require.Contains(t, errOut, "runs on this stateDir and follows HEAD (last at HEAD@sha1:"+main+"): its next tick reverts this apply of trial@sha1:"+trial)
	require.FileExists(t, filepath.Join(n.root, "etc/infer/trial.txt"))
	b, err := os.ReadFile(statusFile)
	require.NoError(t, err)
	require.NotContains(t, string(b), "trial@sha1:", "the agent's status is its own")

	resp, err := http.Post("http://"+a.addr+"/reconcile", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(n.root, "etc/infer/trial.txt"))
		return os.IsNotExist(err)
	})
	eventually(t, func() bool { return strings.Contains(a.logs(), "msg=deleted") })
	require.Contains(t, a.logs(), "level=INFO msg=deleted resource=file/etc/infer/trial.txt action=delete")

	// On the agent's own ref, no warning.
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, errOut, "Warning")
	a.stop()
}
