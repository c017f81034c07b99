package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// profileFleet is a fleet of three devices: one with a Device document,
// two known only by the labels in their agent config. A base profile
// reaches every device, an orin profile the devices labelled hw=orin;
// cam-1's Device document removes a base file and adds its own.
func profileFleet(t *testing.T) *testgit.Repo {
	repo := testgit.NewRepo(t)
	repo.WriteFile("profiles/base.yaml", `apiVersion: tend.dev/v1alpha1
kind: Profile
metadata: {name: base}
spec:
  selector: {}
  vars: {threshold: "0.5"}
  files:
    - path: /etc/infer/config.yaml
      content: "device: ${device}\nthreshold: ${var:threshold}\nsite: ${label:site}\n"
    - path: /etc/infer/base.txt
      content: base
`)
	repo.WriteFile("profiles/orin.yaml", `apiVersion: tend.dev/v1alpha1
kind: Profile
metadata: {name: orin}
spec:
  selector: {matchExpressions: [{key: hw, operator: In, values: [orin]}]}
  priority: 10
  vars: {threshold: "0.7"}
  files:
    - path: /etc/infer/orin.txt
      content: "orin ${var:threshold}"
`)
	repo.WriteFile("devices/cam-1/device.yaml", `apiVersion: tend.dev/v1alpha1
kind: Device
metadata:
  name: cam-1
  labels: {hw: orin}
spec:
  files:
    - {path: /etc/infer/base.txt, absent: true}
    - {path: /etc/infer/own.txt, content: own}
`)
	repo.Commit("a fleet of profiles")
	return repo
}

// profileNode is a device of the fleet with labels in its agent config,
// reading the whole repo.
func profileNode(t *testing.T, url, device, labels string) *node {
	config := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(config, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nlabels: {"+labels+"}\n"), 0o644))
	n := newNode(t, url, "--device", device, "--path", ".", "--config", config)
	return n
}

func TestProfilesComposeEachDevice(t *testing.T) {
	repo := profileFleet(t)
	url := repo.URL(testgit.StartHTTP(t, filepath.Dir(repo.Dir())).URL)
	want := map[string]map[string]string{
		"cam-1": {"config.yaml": "device: cam-1\nthreshold: 0.7\nsite: a\n", "orin.txt": "orin 0.7", "own.txt": "own"},
		"cam-2": {"config.yaml": "device: cam-2\nthreshold: 0.5\nsite: b\n", "base.txt": "base"},
		"cam-3": {"config.yaml": "device: cam-3\nthreshold: 0.7\nsite: c\n", "base.txt": "base", "orin.txt": "orin 0.7"},
	}
	labels := map[string]string{"cam-1": "site: a", "cam-2": "site: b, hw: x86", "cam-3": "site: c, hw: orin"}
	nodes := map[string]*node{}
	for _, device := range []string{"cam-1", "cam-2", "cam-3"} {
		n := profileNode(t, url, device, labels[device])
		nodes[device] = n
		_, errOut, code := n.tend("apply")
		require.Equal(t, 0, code, "%s: %s", device, errOut)
		require.Equal(t, want[device], n.files("etc/infer"), device)
	}

	out, errOut, code := nodes["cam-1"].tend("render", "--explain")
	require.Equal(t, 0, code, errOut)
	golden.Assert(t, "render-explain.golden", []byte(out))

	t.Run("a label moved in the agent config moves the device between profiles", func(t *testing.T) {
		n := profileNode(t, url, "cam-3", "site: c, hw: x86")
		n.root, n.state = nodes["cam-3"].root, nodes["cam-3"].state
		n.flags = append(n.flags, "--root", n.root, "--state-dir", n.state)
		out, errOut, code := n.tend("apply")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "- file/etc/infer/orin.txt")
		require.Equal(t, map[string]string{"config.yaml": "device: cam-3\nthreshold: 0.5\nsite: c\n", "base.txt": "base"},
			n.files("etc/infer"), "what the orin profile brought is pruned, and nothing else")
	})
}

// render --explain says which layer set what from the fleet repo alone:
// before the root folder exists, with no stateDir, and with a model whose
// registry does not answer (nothing is resolved); it creates neither.
func TestRenderExplainNeedsNoNode(t *testing.T) {
	repo := profileFleet(t)
	repo.WriteFile("devices/cam-1/model.yaml", `apiVersion: tend.dev/v1alpha1
kind: Device
metadata: {name: cam-1}
spec:
  models:
    - {name: detector, ref: "127.0.0.1:1/models/detector:v1"}
`)
	repo.Commit("a model on a registry that is not up")
	n := profileNode(t, repo.Dir(), "cam-1", "site: a")
	require.NoError(t, os.Remove(n.root))
	out, errOut, code := n.tend("render", "--explain", "--insecure-registry", "127.0.0.1:1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "model/detector  from device/cam-1 (devices/cam-1/model.yaml:6)")
	require.Contains(t, out, "file/etc/infer/own.txt  from device/cam-1")
	for _, dir := range []string{n.root, n.state} {
		_, err := os.Stat(dir)
		require.ErrorIs(t, err, fs.ErrNotExist, "render --explain created %s", dir)
	}
}

// files returns the name and content of every file in dir under the root.
func (n *node) files(dir string) map[string]string {
	n.t.Helper()
	entries, err := os.ReadDir(filepath.Join(n.root, dir))
	require.NoError(n.t, err)
	out := map[string]string{}
	for _, e := range entries {
		out[e.Name()] = n.read(filepath.Join(dir, e.Name()))
	}
	return out
}

// Bad compositions are refused with the files and lines at fault, and the
// node keeps what it had.
func TestProfileErrorsChangeNothing(t *testing.T) {
	repo := profileFleet(t)
	n := profileNode(t, repo.Dir(), "cam-2", "site: b")
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	before := n.snapshot()
	for _, tc := range []struct {
		name, file, doc, want string
	}{
		{"a tie at equal priority", "profiles/tie.yaml", `apiVersion: tend.dev/v1alpha1
kind: Profile
metadata: {name: tie}
spec:
  selector: {}
  files:
    - {path: /etc/infer/base.txt, content: other}
`, "profiles/base.yaml"},
		{"an unknown operator", "profiles/bad.yaml", `apiVersion: tend.dev/v1alpha1
kind: Profile
metadata: {name: bad}
spec:
  selector: {matchExpressions: [{key: hw, operator: Has}]}
`, `unknown operator "Has"`},
		{"an undefined variable", "profiles/var.yaml", `apiVersion: tend.dev/v1alpha1
kind: Profile
metadata: {name: var}
spec:
  selector: {}
  priority: 5
  files:
    - {path: /etc/infer/v.txt, content: "${var:nope}"}
`, "nope"},
		{"a variable loop", "profiles/loop.yaml", `apiVersion: tend.dev/v1alpha1
kind: Profile
metadata: {name: loop}
spec:
  selector: {}
  priority: 5
  vars: {a: "${var:b}", b: "${var:a}"}
  files:
    - {path: /etc/infer/v.txt, content: "${var:a}"}
`, "loop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo.WriteFile(tc.file, tc.doc)
			repo.Commit(tc.name)
			_, errOut, code := n.tend("apply")
			require.Equal(t, 1, code)
			require.Contains(t, errOut, tc.file)
			require.Contains(t, errOut, tc.want)
			require.Equal(t, before, n.snapshot(), "nothing on the node changed")
			repo.Remove(tc.file)
			repo.Commit("fixed: " + tc.name)
		})
	}
}
