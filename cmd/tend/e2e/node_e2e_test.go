package e2e

// The commands that work on one node's state: status, logs, suspend,
// resume and retry need no fleet repo; apply refuses on a suspended node;
// a rolled-back commit is tried again with tend retry, a rewind accepted
// once with --allow-rewind.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tend-dev/tend/agent/status"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// nodeOnlyConfig writes an agent config with no source, only what the
// node-local commands need, and returns its path and the state dir.
func nodeOnlyConfig(t *testing.T, listen string) (config, stateDir string) {
	t.Helper()
	dir := t.TempDir()
	stateDir = filepath.Join(dir, "state")
	config = filepath.Join(dir, "agent.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(
		"apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nstateDir: %s\nlisten: %s\n", stateDir, listen)), 0o644))
	return config, stateDir
}

func TestNodeCommandsNeedNoSource(t *testing.T) {
	config, stateDir := nodeOnlyConfig(t, "off")

	out, errOut, code := tend(t, "suspend", "--config", config, "--reason", "maintenance")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Suspended")
	out, errOut, code = tend(t, "retry", "--config", config)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Nothing is quarantined on this node.\n", out)
	_, errOut, code = tend(t, "logs", "service/infer", "--config", config)
	require.Equal(t, 1, code)
	require.NotContains(t, errOut, "source.url")
	require.Contains(t, errOut, "infer")

	// listen: off: status reads stateDir, without asking anything.
	_, errOut, code = tend(t, "status", "--config", config)
	require.Equal(t, 1, code)
	require.Equal(t, "Error: listen is off, and neither an agent nor tend apply has written a status in "+stateDir+
		": has either run on this node, with this stateDir?\n", errOut)
	tr := status.NewTracker("cam-017", "v1")
	tr.SetApplied("main@sha1:aaa", "commit:aaa")
	require.NoError(t, status.WriteLast(stateDir, tr.Status()))
	out, errOut, code = tend(t, "status", "--config", config)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^Listen is off; last status written at \S+Z from `+regexp.QuoteMeta(filepath.Join(stateDir, "status.json"))+`\.\n\n`, out)
	require.Contains(t, out, "Applied revision: main@sha1:aaa\n")

	out, errOut, code = tend(t, "resume", "--config", config)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Resumed.\n", out)
}

// The agent writes its status in stateDir after every tick; with the agent
// gone, tend status shows it and says where it came from.
func TestStatusFromStateDirWhenNoAgentAnswers(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	rev := repo.Commit("one file")
	n := newNode(t, repo.Dir(), "--schedule", "@every 1s")
	a := startAgent(t, n)
	eventually(t, func() bool { return a.status()["appliedRevision"] == "HEAD@sha1:"+rev })
	eventually(t, func() bool { _, err := os.Stat(filepath.Join(n.state, "status.json")); return err == nil })
	a.stop()

	file := filepath.Join(n.state, "status.json")
	out, errOut, code := tend(t, "status", "--listen", a.addr, "--state-dir", n.state)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^No agent answered at `+regexp.QuoteMeta(a.addr)+`; last status written at \S+Z from `+regexp.QuoteMeta(file)+`\.\n\n`, out)
	require.Contains(t, out, "Applied revision: HEAD@sha1:"+rev+"\n")

	out, errOut, code = tend(t, "status", "--listen", a.addr, "--state-dir", n.state, "--format", "json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "No agent answered at "+a.addr)
	var s status.Status
	require.NoError(t, json.Unmarshal([]byte(out), &s), "stdout is the status document alone")
	require.Equal(t, "HEAD@sha1:"+rev, s.AppliedRevision)
}

func TestApplyRefusesWhileSuspended(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "1", "")))
	repo.Commit("one")
	n := newNode(t, repo.Dir())
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	_, errOut, code = n.tend("suspend", "--reason", "field test")
	require.Equal(t, 0, code, errOut)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "2", "")))
	repo.Commit("two")
	before := n.snapshot()
	out, errOut, code := n.tend("apply")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Regexp(t, `^Error: device cam-017 is suspended \(tend suspend at \S+Z: field test\): nothing is applied; `+
		"run `tend resume` to apply again, or `tend apply --force` to apply this once\n$", errOut)
	require.Equal(t, before, n.snapshot(), "a suspended node changed")

	out, errOut, code = n.tend("apply", "--force")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Apply complete")
	require.Equal(t, "2", n.read("etc/infer/a"))

	t.Run("by the agent config", func(t *testing.T) {
		_, errOut, code := n.tend("resume")
		require.Equal(t, 0, code, errOut)
		config := filepath.Join(t.TempDir(), "agent.yaml")
		require.NoError(t, os.WriteFile(config, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsuspend: true\n"), 0o644))
		_, errOut, code = n.tend("apply", "--config", config)
		require.Equal(t, 1, code)
		require.Equal(t, "Error: device cam-017 is suspended (suspend: true in the agent config): nothing is applied; "+
			"set suspend: false in the agent config to apply again, or `tend apply --force` to apply this once\n", errOut)
	})
}

// A commit rolled back for a service that did not become healthy is tried
// again after tend retry, without a new commit.
func TestRetryRolledBackCommit(t *testing.T) {
	prog := svcProg(t)
	marker := filepath.Join(t.TempDir(), "healthy")
	repo := testgit.NewRepo(t)
	service := func(health string) string {
		return fmt.Sprintf("  services:\n    - name: infer\n      command: [%q, \"-listen\", \"127.0.0.1:0\"]\n      stopTimeout: 2s\n%s",
			prog, health)
	}
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "1", ""))+service(""))
	repo.Commit("web")
	n := newNode(t, repo.Dir())
	t.Cleanup(func() { stopServices(t, n.state) })
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "2", ""))+
		service(fmt.Sprintf("      health: {exec: [\"/bin/sh\", \"-c\", \"test -e %s\"], interval: 100ms, startupGrace: 1s}\n", marker)))
	bad := repo.Commit("health check")
	_, errOut, code = n.tend("apply")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "did not become healthy")
	_, errOut, code = n.tend("apply")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "commit "+bad[:12]+" was rolled back on this node: ")
	require.Contains(t, errOut, "or run tend retry to try this one again")
	require.Equal(t, "1", n.read("etc/infer/a"))

	_, errOut, code = n.tend("retry", "0000000")
	require.Equal(t, 1, code)
	require.Equal(t, "Error: commit 0000000 is not quarantined on this node (HEAD@sha1:"+bad+" are quarantined)\n", errOut)

	require.NoError(t, os.WriteFile(marker, nil, 0o644)) // what broke it is fixed on the node
	out, errOut, code := n.tend("retry", bad[:8])
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^Retrying HEAD@sha1:`+bad+` \(rolled back at \S+Z: .*did not become healthy.*\)\.\n`+
		`The next tick or tend apply tries it again\.\n$`, out)
	out, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "at HEAD@sha1:"+bad)
	require.Equal(t, "2", n.read("etc/infer/a"))

	out, errOut, code = n.tend("retry")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Nothing is quarantined on this node.\n", out)
}

// A force-push back to an older commit is refused, and accepted once with
// --allow-rewind.
func TestAllowRewindFlag(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "1", "")))
	first := repo.Commit("one")
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "2", "")))
	repo.Commit("two")
	n := newNode(t, repo.Dir())
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	repo.ResetHard(first)
	_, errOut, code = n.tend("plan")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "refusing to rewind; set source.allowRewind: true, or run tend apply --allow-rewind once, to accept it")
	out, errOut, code := n.tend("plan", "--allow-rewind")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "~ file/etc/infer/a")
	_, errOut, code = n.tend("apply", "--allow-rewind")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "1", n.read("etc/infer/a"))
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
}

func TestValidateRefusesRelativeAllowPath(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(files(entry("/etc/infer/a", "1", ""))), 0o644))
	_, errOut, code := tend(t, "validate", "--allow-path", "etc/infer", dir)
	require.Equal(t, 1, code)
	require.Equal(t, "Error: --allow-path (allowPaths[0]): \"etc/infer\" must be an absolute, clean path such as /etc/infer\n", errOut)
}

// tend validate of this device's manifests reads the repo and writes
// nothing in stateDir.
func TestValidateWritesNoState(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/a", "1", "")))
	repo.Commit("one")
	n := newNode(t, repo.Dir())
	out, errOut, code := n.tend("validate")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "valid: device cam-017 at HEAD@sha1:")
	require.NoDirExists(t, n.state, "validate wrote state")
}

// Each command's help lists the flags it uses, and only those.
func TestHelpPerCommand(t *testing.T) {
	for _, command := range []string{"", "validate", "render", "plan", "apply", "agent", "diff", "publish", "status",
		"suspend", "resume", "retry", "state restore", "logs", "notify", "fleet status", "fleet release", "version"} {
		t.Run(command, func(t *testing.T) {
			args, name := append(strings.Fields(command), "--help"), strings.ReplaceAll(command, " ", "-")
			if command == "" {
				args, name = []string{"--help"}, "tend"
			}
			out, errOut, code := tend(t, args...)
			require.Equal(t, 0, code, errOut)
			golden.Assert(t, filepath.Join("help", name+".golden"), []byte(out))
		})
	}
	_, errOut, code := tend(t, "hub", "token", "create", "cam-1", "--db", "sqlite:///x.db")
	require.Equal(t, 1, code)
	require.Equal(t, "Error: the hub is its own binary now: run \"tend-hub token create cam-1 --db sqlite:///x.db\" (from the tend-hub package, archive or image; go install github.com/tend-dev/tend/cmd/tend-hub@latest)\n", errOut)
	out, _, _ := tend(t, "logs", "--help")
	require.NotContains(t, out, "(default -1)")
	require.False(t, strings.Contains(out, "--repo"), "logs lists --repo")
}
