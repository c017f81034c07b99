package e2e

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/planner"
)

// diffDevice declares a model at tag, a config file, a sensitive key and
// a service with replicas and a LOG_LEVEL.
func diffDevice(registry, tag, threshold, key, level string, replicas int) string {
	return `apiVersion: tend.dev/v1alpha1
kind: Device
metadata: {name: cam-017}
spec:
  models:
    - name: detector
      ref: ` + registry + `/models/detector:` + tag + `
      path: /opt/models/detector
  files:
    - path: /etc/infer/config.yaml
      content: "threshold: ` + threshold + `\nclasses: 80\n"
    - path: /etc/infer/key.pem
      content: "` + key + `\n"
      mode: "0600"
      sensitive: true
    - path: /etc/infer/labels.bin
      content: "person\n"
  services:
    - name: infer
      command: ["/bin/sh", "-c", "exec sleep 600"]
      env: {LOG_LEVEL: ` + level + `}
      replicas: ` + string(rune('0'+replicas)) + `
`
}

// tend plan --diff shows what each update changes: the content of text
// files (node against declaration), binary content by its sizes, a
// sensitive file by its sizes and digests only, and old and new spec
// fields of models and services.
func TestPlanDiff(t *testing.T) {
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": []byte("weights v8")})
	reg.PushFiles(t, "models/detector:v9", map[string][]byte{"model.onnx": []byte("weights v9")})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", diffDevice(reg.Host, "v8", "0.4", "hunter2", "info", 2))
	repo.Commit("v8")
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	t.Cleanup(func() { stopServices(t, n.state) })
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	repo.WriteFile("devices/cam-017/device.yaml", diffDevice(reg.Host, "v9", "0.5", "correct horse", "debug", 1))
	repo.Commit("v9")
	n.write("etc/infer/labels.bin", "\x00\x01\x02")
	dirs := map[string]string{repo.Dir(): "<repo>", n.root: "<root>", n.state: "<state>", reg.Host: "registry.local:5000"}

	out, errOut, code := n.tend("plan", "--diff")
	require.Equal(t, 0, code, errOut)
	golden.Assert(t, "plan-diff.golden", []byte(stable(out, dirs)))

	plain, _, code := n.tend("plan")
	require.Equal(t, 0, code)
	require.NotContains(t, plain, "threshold", "without --diff a plan shows no content")

	js, errOut, code := n.tend("plan", "--diff", "--format", "json")
	require.Equal(t, 0, code, errOut)
	var p planner.JSONPlan
	require.NoError(t, json.Unmarshal([]byte(js), &p))
	diffs := map[string]string{}
	for _, a := range p.Actions {
		diffs[a.Resource] = a.Diff
	}
	require.Contains(t, diffs["file/etc/infer/config.yaml"], "-threshold: 0.4\n+threshold: 0.5\n")
	require.Contains(t, diffs["file/etc/infer/key.pem"], planner.SensitiveHidden)
	for _, s := range []string{out, js, errOut} {
		require.NotContains(t, s, "hunter2")
		require.NotContains(t, s, "horse")
	}
}

// A file applied as sensitive stays hidden in a plan's diff when a commit
// drops the mark: what is on the node is the secret tend applied.
func TestPlanDiffKeepsAppliedSecretsHidden(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/key.pem", "old-secret-value\n", ""))+
		"      sensitive: true\n")
	repo.Commit("a secret")
	n := newNode(t, repo.Dir())
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/key.pem", "not a secret any more\n", "")))
	repo.Commit("no longer sensitive")
	out, errOut, code := n.tend("plan", "--diff")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, planner.SensitiveHidden)
	require.NotContains(t, out, "old-secret-value")
	out, _, _ = n.tend("plan", "--diff", "--format", "json")
	require.NotContains(t, out, "old-secret-value")
}
