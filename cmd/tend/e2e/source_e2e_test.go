package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// withConfig points the node at an agent config file with extra source
// settings (YAML lines under source:).
func withConfig(t *testing.T, n *node, sourceLines string) {
	path := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(path, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: unused\n"+sourceLines), 0o644))
	for i, f := range n.flags {
		if f == "--config" {
			n.flags[i+1] = path
		}
	}
}

func TestSignedCommitsOnly(t *testing.T) {
	trusted := testgit.NewGPGKey(t, "Fleet Release <release@example.com>")
	stranger := testgit.NewGPGKey(t, "Someone Else <else@example.com>")
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	repo.CommitSigned("signed", trusted)
	n := newNode(t, repo.Dir())
	withConfig(t, n, "  verify: {keyring: "+testgit.WriteKeyring(t, trusted)+"}\n")

	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	before := n.snapshot()

	for name, commit := range map[string]func(){
		"unsigned":             func() { repo.Commit("unsigned") },
		"signed by a stranger": func() { repo.CommitSigned("stranger", stranger) },
	} {
		t.Run(name, func(t *testing.T) {
			repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.9\n", "")))
			commit()
			_, errOut, code := n.tend("apply")
			require.Equal(t, 1, code)
			require.Contains(t, errOut, repo.Head()[:12])
			require.Equal(t, before, n.snapshot(), "nothing on the node changed")
		})
	}
}

func TestRewindRefused(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "v1\n", "")))
	first := repo.Commit("v1")
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "v2\n", "")))
	repo.Commit("v2")
	n := newNode(t, repo.Dir())
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	repo.ResetHard(first) // a force-push back to v1
	n.write("etc/infer/config.yaml", "edited by hand\n")
	_, errOut, code = n.tend("apply")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "allowRewind")
	require.Equal(t, "v2\n", n.read("etc/infer/config.yaml"), "held at the last applied commit: the refusal does not stop drift reverts")

	withConfig(t, n, "  allowRewind: true\n")
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "v1\n", n.read("etc/infer/config.yaml"))
}

func TestAnotherRefStartsTheRewindCheckOver(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "main\n", "")))
	base := repo.Commit("main")
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "main 2\n", "")))
	repo.Commit("main 2")
	repo.Git("branch", "devices/cam-017", base)
	repo.Checkout("devices/cam-017")
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "own branch\n", "")))
	repo.Commit("cam-017's own branch, not descending from main's tip")
	repo.Checkout("main")

	n := newNode(t, repo.Dir(), "--ref", "main")
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "main 2\n", n.read("etc/infer/config.yaml"))

	_, errOut, code = n.tend("apply", "--ref", "devices/{device}")
	require.Equal(t, 0, code, "moving the device to its own branch is not a rewind: %s", errOut)
	require.Equal(t, "own branch\n", n.read("etc/infer/config.yaml"))
}

// A local repo path that does not exist is named as such, not as a
// matter of credentials.
func TestMissingLocalRepoIsNamed(t *testing.T) {
	n := newNode(t, filepath.Join(t.TempDir(), "fleet-typo"))
	_, errOut, code := n.tend("plan")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "fleet-typo (no such file or folder on this machine: check source.url or --repo)")
	require.NotContains(t, errOut, "credentials")
}
