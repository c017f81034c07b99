package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// commitHash matches commit hashes, and model digests, which are kept: the
// example model's content, and so its digests, are the same on every run.
var commitHash = regexp.MustCompile(`sha256:[0-9a-f]+|[0-9a-f]{40}|\b[0-9a-f]{12}\b`)

// stable replaces what changes from run to run (commit hashes, temp
// folders) so output can be compared with a golden file.
func stable(s string, dirs map[string]string) string {
	for dir, name := range dirs {
		s = strings.ReplaceAll(s, dir, name)
	}
	return commitHash.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "sha256:") {
			return m
		}
		return "<commit>"
	})
}

// TestGoldenOutput pins what people read: render, plan and the errors of
// validate.
func TestGoldenOutput(t *testing.T) {
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": []byte("weights"), "labels.txt": []byte("person\n")})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", `apiVersion: tend.dev/v1alpha1
kind: Device
metadata:
  name: cam-017
  labels: {site: plant-a}
spec:
  models:
    - name: detector
      ref: `+reg.Host+`/models/detector:v8
      path: /opt/models/detector
  files:
    - path: /etc/infer/config.yaml
      content: |
        threshold: 0.4
      mode: "0600"
  services:
    - name: infer
      command: ["/bin/sh", "-c", "exec sleep 600", "${model:detector}/model.onnx"]
      restartOn: [file:/etc/infer/config.yaml]
`)
	repo.WriteFile("devices/cam-017/extra.yml", files(entry("/etc/infer/labels.txt", "person\n", "")))
	repo.Commit("cam-017")
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	t.Cleanup(func() { stopServices(t, n.state) })
	dirs := map[string]string{repo.Dir(): "<repo>", n.root: "<root>", n.state: "<state>", reg.Host: "registry.local:5000"}

	out, errOut, code := n.tend("render")
	require.Equal(t, 0, code, errOut)
	golden.Assert(t, "render.golden", []byte(stable(out, dirs)))

	out, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	golden.Assert(t, "apply.golden", []byte(stable(out, dirs)))

	n.write("etc/infer/labels.txt", "")
	out, errOut, code = n.tend("plan")
	require.Equal(t, 0, code, errOut)
	golden.Assert(t, "plan.golden", []byte(stable(out, dirs)))

	repo.WriteFile("devices/cam-017/extra.yml", files(
		entry("etc/infer/a", "1", ""),
		entry("/etc/infer/b", "1", "0x1"),
		entry("/etc/other/c", "1", "")))
	repo.Commit("broken")
	_, errOut, code = n.tend("validate")
	require.Equal(t, 1, code)
	golden.Assert(t, "validate-errors.golden", []byte(stable(errOut, dirs)))
}

// tend render resolves models as the agent does: with the registry down it
// prints the digest applied last while the ref is unchanged (offline, a
// warning, exit 0), and a new ref as held, unresolved (exit 1).
func TestRenderHoldsWhenTheRegistryIsDown(t *testing.T) {
	reg := testoci.Start(t)
	digest := reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": []byte("weights")})
	reg.PushFiles(t, "models/detector:v9", map[string][]byte{"model.onnx": []byte("weights 9")})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", distDevice(reg.Ref("models/detector:v8")))
	repo.Commit("cam-017")
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)

	out, errOut, code := n.tend("render")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "digest: "+digest)
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)

	reg.Use(func(w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	out, errOut, code = n.tend("render")
	require.Equal(t, 0, code, "an offline device renders what it applied: %s", errOut)
	require.Contains(t, out, "digest: "+digest, "the applied version is printed")
	require.Contains(t, out, "offline: ")
	require.Contains(t, errOut, "Warning: ")
	require.NotContains(t, out, "held:")

	repo.WriteFile("devices/cam-017/device.yaml", distDevice(reg.Ref("models/detector:v9")))
	repo.Commit("v9")
	out, errOut, code = n.tend("render")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "held: 'registry unreachable for "+reg.Ref("models/detector:v9"))
	require.NotContains(t, out, "digest: ", "no digest is printed for a ref that was not resolved")
	require.Contains(t, errOut, "model/detector held: registry unreachable for")
}
