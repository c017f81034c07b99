package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// checkedFleet is a fleet that validate has something to say about in
// every document: profile inference (hw: orin) writes ${batch} for
// ${var:batch}; profile site-b uses a variable nobody sets, so both
// devices at site b are invalid by the same line; profile edge applies
// to no device and is checked on its own; the rollout's canary wave
// selects ring: canray, which no device has; and cam-3 has a problem of
// its own (a typo of camera, which no profile sets either).
var checkedFleet = map[string]string{
	"profiles/inference.yaml": `apiVersion: tend.dev/v1alpha1
kind: Profile
metadata: {name: inference}
spec:
  selector: {matchLabels: {hw: orin}}
  vars: {batch: "8"}
  files:
    - path: /etc/infer/config.yaml
      content: "batch: ${batch}\n"
`,
	"profiles/site-b.yaml": `apiVersion: tend.dev/v1alpha1
kind: Profile
metadata: {name: site-b}
spec:
  selector: {matchLabels: {site: b}}
  files:
    - path: /etc/infer/site
      content: "camera: ${var:camera}\n"
`,
	"profiles/edge.yaml": `apiVersion: tend.dev/v1alpha1
kind: Profile
metadata: {name: edge}
spec:
  selector: {matchLabels: {tier: edge}}
  files:
    - path: /etc/infer/edge.sh
      content: "echo $${HOME} ${LANG:-C} ${device} ${label:site}\n"
`,
	"profiles/rollout.yaml": `apiVersion: tend.dev/v1alpha1
kind: Rollout
metadata: {name: default}
spec:
  selector: {}
  waves:
    - selector: {matchLabels: {ring: canray}}
    - {percent: 100, after: 1h}
`,
	"devices/cam-1/device.yaml": "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-1, labels: {hw: orin, site: a, ring: canary}}\n",
	"devices/cam-2/device.yaml": "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-2, labels: {hw: orin, site: b}}\n",
	"devices/cam-3/device.yaml": "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-3, labels: {hw: x86, site: b}}\n" +
		"spec:\n  files: [{path: /etc/infer/name, content: \"${var:cameras}\"}]\n",
}

func writeFleet(t *testing.T, dir string, fleet map[string]string) {
	t.Helper()
	for name, data := range fleet {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
}

// withStderr is a command's output as a golden file holds it.
func withStderr(out, errOut string) []byte {
	return []byte(out + "--- stderr\n" + errOut)
}

// tend validate FILE|DIR checks every document it is given and says what
// it checked: each device, each problem once under the devices it is a
// problem of, each profile with the devices it applies to (invalid ones
// included) or checked on its own, each rollout with its waves, the
// warnings (a mistyped ${…}, a wave that takes no device), and whether
// allowPaths were checked.
func TestValidateFilesChecksEveryDocument(t *testing.T) {
	dir := t.TempDir()
	writeFleet(t, dir, checkedFleet)
	dirs := map[string]string{dir: "<fleet>"}

	out, errOut, code := tend(t, "validate", dir)
	require.Equal(t, 1, code, errOut)
	golden.Assert(t, "validate-files.golden", withStderr(stable(out, dirs), errOut))

	// The profiles alone: each is checked on its own, and one that uses a
	// variable no profile sets fails naming file:line.
	out, errOut, code = tend(t, "validate", filepath.Join(dir, "profiles"))
	require.Equal(t, 1, code, errOut)
	golden.Assert(t, "validate-files-profiles.golden", withStderr(stable(out, dirs), errOut))

	// With allowPaths from a flag, the note says which.
	out, _, _ = tend(t, "validate", "--allow-path", "/etc/infer", dir)
	require.Contains(t, out, "\n(paths checked against allowPaths /etc/infer)\n")
}

// tend validate --all reports the same checks of a fleet repo.
func TestValidateAllChecksEveryDocument(t *testing.T) {
	r := testgit.NewRepo(t)
	for name, data := range checkedFleet {
		r.WriteFile(name, data)
	}
	r.Commit("fleet")
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: "+r.Dir()+
		"\n  paths: [profiles, \"devices/{device}\"]\n"), 0o644))
	out, errOut, code := tend(t, "validate", "--all", "--config", cfg, "--log-format", "text")
	require.Equal(t, 1, code, errOut)
	golden.Assert(t, "validate-all-checks.golden", withStderr(stable(out, map[string]string{r.Dir(): "<repo>"}), errOut))
}

// tend validate of this device prints the warnings of its composition.
func TestValidateDeviceWarns(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "${batch} $${batch}", "")))
	repo.Commit("one")
	n := newNode(t, repo.Dir())
	out, errOut, code := n.tend("validate")
	require.Equal(t, 0, code, errOut)
	golden.Assert(t, "validate-device-warnings.golden", withStderr(stable(out, nil), errOut))
}
