package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// TestApplySeveralPaths: --path given twice reads a shared folder and the
// device's own; Device documents of the device in both are merged, and a
// commit that changes only the shared folder is applied.
func TestApplySeveralPaths(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("profiles/base.yaml", files(entry("/etc/infer/base.conf", "level: 1\n", "")))
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/own.conf", "mine\n", "")))
	repo.WriteFile("devices/cam-018/device.yaml", strings.ReplaceAll(files(entry("/etc/infer/x", "x", "")), "cam-017", "cam-018"))
	repo.Commit("shared and own")
	n := newNode(t, repo.Dir(), "--path", "profiles") // newNode gives --path devices/{device}

	out, errOut, code := n.tend("validate")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "valid: device cam-017 at HEAD@sha1:")
	require.Contains(t, out, ": 0 models, 2 files, 0 services")

	out, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Apply complete: 2 actions applied")
	require.Equal(t, "level: 1\n", n.read("etc/infer/base.conf"))
	require.Equal(t, "mine\n", n.read("etc/infer/own.conf"))
	require.NoFileExists(t, filepath.Join(n.root, "etc/infer/x"), "another device's folder is not read")

	repo.WriteFile("profiles/base.yaml", files(entry("/etc/infer/base.conf", "level: 2\n", "")))
	repo.Commit("shared folder only")
	out, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Plan: 0 to add, 1 to change, 0 to delete, 1 unchanged.")
	require.Equal(t, "level: 2\n", n.read("etc/infer/base.conf"))

	// A misspelt shared path is refused, naming it; nothing changes.
	before := n.snapshot()
	_, errOut, code = n.tend("apply", "--path", "profile", "--path", "devices/{device}")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `source path "profile" not found`)
	require.Equal(t, before, n.snapshot())
}

// TestCISeveralPaths: diff and validate --all with source.paths in the
// agent config: a change of the shared path reaches every device.
func TestCISeveralPaths(t *testing.T) {
	repo := testgit.NewRepo(t)
	for _, name := range []string{"cam-001", "cam-002"} {
		repo.WriteFile("devices/"+name+"/device.yaml", fleetDevice(name, "threshold: 0.4\n", ""))
	}
	repo.WriteFile("common/notes.yaml", "# version 1\n")
	repo.Commit("fleet")
	repo.WriteFile("common/notes.yaml", "# version 2\n")
	repo.Commit("shared only")
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: "+repo.Dir()+
		"\n  paths: [common, \"devices/{device}\"]\n"), 0o644))

	out, errOut, code := tend(t, "diff", "--config", cfg, "--base", "HEAD~1", "--head", "HEAD", "--log-format", "text", "--log-level", "debug")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "No changes")
	require.Contains(t, errOut, "rendered=2", "the shared path changed: both devices are rendered")

	out, errOut, code = tend(t, "validate", "--all", "--config", cfg, "--log-format", "text")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "valid: device cam-001")
	require.Contains(t, out, "valid: device cam-002")

	require.NoError(t, os.WriteFile(cfg, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: "+repo.Dir()+
		"\n  path: devices\n  paths: [common]\n"), 0o644))
	_, errOut, code = tend(t, "diff", "--config", cfg, "--base", "HEAD~1", "--head", "HEAD", "--log-format", "text")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, `agent.yaml:6: source.paths: source.path "devices" and source.paths are both set`)

	require.NoError(t, os.WriteFile(cfg, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: "+repo.Dir()+
		"\n  paths: [common, devices]\n"), 0o644))
	_, errOut, code = tend(t, "diff", "--config", cfg, "--base", "HEAD~1", "--head", "HEAD", "--log-format", "text")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "none of the source paths (--path common, devices) contains {device}")
}
