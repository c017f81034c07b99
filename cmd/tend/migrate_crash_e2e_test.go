package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/internal/testkit/oldtend"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// tend killed while it migrates a stateDir of format 1 (made by the
// baseline, the last tend of that format), after the copy of the old files
// is kept and after every file is rewritten: the marker is not written, the
// copy holds the files as they were, and the next apply finishes the
// migration, plans nothing, keeps the service's process and drops the
// copy.
func TestCrashDuringMigration(t *testing.T) {
	oldBin := oldtend.Build(t, oldtend.Release{Name: "baseline", Commit: oldtend.Baseline})
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/detector:v1", map[string][]byte{"model.onnx": []byte("weights v1")})
	worker, err := json.Marshal([]string{svcProg(t)})
	require.NoError(t, err)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
		"  files:\n    - {path: /etc/infer/config.yaml, content: \"threshold: 0.4\\n\"}\n"+
		"  models:\n    - {name: detector, ref: %q, path: /opt/models/detector}\n"+
		"  services:\n    - {name: worker, command: %s, stopTimeout: 2s}\n", reg.Ref("models/detector:v1"), worker))
	repo.Commit("a file, a model and a process service")

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
