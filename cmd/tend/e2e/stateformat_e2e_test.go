package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/internal/testkit/oldtend"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// formatOneFleet is a fleet repo and a registry for one device with a
// file, a model and a process service, and the baseline tend: the last
// of state format 1.
func formatOneFleet(t *testing.T) (repo *testgit.Repo, reg *testoci.Registry, oldBin string) {
	t.Helper()
	oldBin = oldtend.Build(t, oldtend.AtBaseline(t))
	reg = testoci.Start(t)
	reg.PushFiles(t, "models/detector:v1", map[string][]byte{"model.onnx": []byte("weights v1")})
	worker, err := json.Marshal([]string{svcProg(t)})
	require.NoError(t, err)
	repo = testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
		"  files:\n    - {path: /etc/infer/config.yaml, content: \"threshold: 0.4\\n\"}\n"+
		"  models:\n    - {name: detector, ref: %q, path: /opt/models/detector}\n"+
		"  services:\n    - {name: worker, command: %s, stopTimeout: 2s}\n", reg.Ref("models/detector:v1"), worker))
	repo.Commit("a file, a model and a process service")
	return repo, reg, oldBin
}

// tend killed while it migrates a stateDir of format 1 (made by the
// baseline, the last tend of that format), after the copy of the old files
// is kept and after every file is rewritten: the marker is not written, the
// copy holds the files as they were, and the next apply finishes the
// migration, plans nothing, keeps the service's process and drops the
// copy.
func TestCrashDuringMigration(t *testing.T) {
	repo, reg, oldBin := formatOneFleet(t)

	for _, point := range []string{"format:copied", "format:upgraded"} {
		t.Run(point, func(t *testing.T) {
			n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
			t.Cleanup(func() { stopServices(t, n.state) })
			out, errOut, code := n.tendAt(oldBin, "apply")
			require.Equal(t, 0, code, "%s%s", out, errOut)
			pid := servicePID(t, n.state, "worker")
			require.NotZero(t, pid)
			d := statedir.Dir(n.state)
			inv := readFile(t, d.Inventory())

			n.crashApply(point)
			require.NoFileExists(t, d.Format(), "the marker is written last")
			require.Equal(t, inv, readFile(t, filepath.Join(d.FormatCopy(1), statedir.InventoryFile)), "the copy holds the inventory as it was")
			if point == "format:copied" {
				require.Equal(t, inv, readFile(t, d.Inventory()), "nothing is rewritten before the copy is whole")
			} else {
				require.NotEqual(t, inv, readFile(t, d.Inventory()))
			}

			out, errOut, code = n.tend("apply")
			require.Equal(t, 0, code, "the apply after the crash did not converge:\n%s%s", out, errOut)
			require.Contains(t, out, "Plan: 0 to add, 0 to change, 0 to delete, 3 unchanged.")
			require.Equal(t, statedir.Format, stateFormat(t, readFile(t, d.Format())))
			require.NoDirExists(t, d.FormatCopy(1), "the copy is dropped after the apply that succeeded")
			require.Equal(t, pid, servicePID(t, n.state, "worker"), "the worker was restarted")
			require.Equal(t, "weights v1", n.read("opt/models/detector/model.onnx"))
			require.Empty(t, n.temps(), "temporary files left")
			_, err := os.Stat(d.FormatCopy(1) + ".partial")
			require.True(t, os.IsNotExist(err), "a partial copy is left")
		})
	}
}

// Across the state format of the baseline (format 1) and this tend's: a
// migration waits for the older agent to stop; tend retry migrates and
// keeps the copy, which tend state restore puts back for the baseline to
// run on as before; this tend's apply migrates again and drops the copy,
// after which the baseline applies nothing; and a later format is
// refused by every command of this tend, without a change.
func TestStateFormatAcrossVersions(t *testing.T) {
	repo, reg, oldBin := formatOneFleet(t)
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	t.Cleanup(func() { stopServices(t, n.state) })
	d := statedir.Dir(n.state)
	out, errOut, code := n.tendAt(oldBin, "apply")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	pid := servicePID(t, n.state, "worker")
	require.NotZero(t, pid)
	formatOne := treeSnapshot(n.state)

	// The baseline's agent runs: this tend migrates nothing.
	a := startAgentAt(t, n, oldBin, "--schedule", "@every 1h")
	eventually(t, func() bool { return strings.Contains(a.logs(), "msg=reconciled") })
	before := treeSnapshot(n.state)
	out, errOut, code = n.tend("apply")
	require.NotEqual(t, 0, code, "tend apply migrated under the older agent\n%s%s", out, errOut)
	require.Contains(t, errOut, fmt.Sprintf("is in state format 1 and an agent runs on it (pid %d)", a.cmd.Process.Pid))
	require.NoFileExists(t, d.Format())
	require.Equal(t, before, treeSnapshot(n.state), "a refused migration changed the stateDir")
	a.stop()

	// This tend's first apply migrates and fails (a ref that is not
	// there): the copy stays, and tend state restore puts it back.
	_, errOut, code = n.tend("apply", "--ref", "no-such-branch")
	require.NotEqual(t, 0, code, errOut)
	require.Equal(t, statedir.Format, stateFormat(t, readFile(t, d.Format())))
	require.DirExists(t, d.FormatCopy(1))
	require.NotEqual(t, readFile(t, d.Inventory()), formatOne[d.Inventory()])
	out, errOut, code = runTend(t, tendBin, "state", "restore", "--state-dir", n.state)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Restored: "+n.state+" is in state format 1 again")
	after := treeSnapshot(n.state)
	for p, v := range formatOne {
		if strings.HasSuffix(p, ".json") && !strings.HasSuffix(p, statedir.StatusFile) {
			require.Equal(t, v, after[p], "%s is not as the baseline left it", p)
		}
	}
	require.NoFileExists(t, d.Format())
	require.NoDirExists(t, d.FormatCopy(1))
	out, errOut, code = n.tendAt(oldBin, "plan", "--detailed-exitcode")
	require.Equal(t, 0, code, "the baseline has something to do after the restore\n%s%s", out, errOut)

	// This tend's apply migrates again, and drops the copy with its success.
	out, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "Plan: 0 to add, 0 to change, 0 to delete, 3 unchanged.")
	require.Equal(t, pid, servicePID(t, n.state, "worker"), "the worker was restarted")
	require.Equal(t, statedir.Format, stateFormat(t, readFile(t, d.Format())))
	require.NoDirExists(t, d.FormatCopy(1))
	_, errOut, code = runTend(t, tendBin, "state", "restore", "--state-dir", n.state)
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "holds no copy to restore (it is in state format "+strconv.Itoa(statedir.Format)+")")

	// The baseline applies nothing on it.
	inv := readFile(t, d.Inventory())
	out, errOut, code = n.tendAt(oldBin, "apply")
	require.NotEqual(t, 0, code, "the baseline applied on a stateDir of format %d\n%s%s", statedir.Format, out, errOut)
	require.Contains(t, errOut, `formatVersion "`+strconv.Itoa(statedir.Format)+`", this tend reads "1"`)
	require.Equal(t, inv, readFile(t, d.Inventory()))

	// A later tend's stateDir: refused by every command, nothing changed.
	future := fmt.Sprintf(`{"formatVersion": "%d", "tend": "v9.9.9", "commit": "abc"}`, statedir.Format+1)
	require.NoError(t, os.WriteFile(d.Format(), []byte(future), 0o644))
	state, root := treeSnapshot(n.state), treeSnapshot(n.root)
	for _, command := range [][]string{{"apply"}, {"apply", "--stage-only"}, {"plan"}, {"render"}, {"agent"},
		{"status"}, {"retry"}, {"suspend"}, {"resume"}, {"logs", "service/worker"}, {"state", "restore"}} {
		flags := n.flags
		switch command[0] {
		case "apply", "plan", "render", "agent":
		default:
			flags = []string{"--state-dir", n.state} // the commands of the node's state alone
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // an agent that does not refuse runs on
		cmd := exec.CommandContext(ctx, tendBin, append(append(append([]string{}, command...), flags...), "--listen", "off")...)
		if command[0] == "logs" || command[0] == "state" || command[0] == "retry" {
			cmd = exec.CommandContext(ctx, tendBin, append(append([]string{}, command...), flags...)...)
		}
		cmd.Env = append(os.Environ(), "TEND_CONFIG=")
		b, err := cmd.CombinedOutput()
		cancel()
		require.Error(t, err, "tend %s on a stateDir of format %d:\n%s", strings.Join(command, " "), statedir.Format+1, b)
		require.Contains(t, string(b), fmt.Sprintf("is in state format %d, written by tend v9.9.9; this tend reads format %d and older: install tend v9.9.9 or later",
			statedir.Format+1, statedir.Format), "tend %s", strings.Join(command, " "))
	}
	require.Equal(t, state, treeSnapshot(n.state), "a refused tend changed its stateDir")
	require.Equal(t, root, treeSnapshot(n.root), "a refused tend changed the node")
	require.True(t, processAlive(pid), "a refused tend stopped the worker")
}
