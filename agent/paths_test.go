package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tend-dev/tend/agent/status"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// deviceFile is a Device document of cam-017 declaring one file.
const deviceFile = "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - {path: %s, content: %s}\n"

// TestTickReadsEverySourcePath: the agent reads a shared folder and the
// device's own, and a commit that changes only the shared folder is a new
// revision, applied at the next tick.
func TestTickReadsEverySourcePath(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("profiles/base.yaml", fmt.Sprintf(deviceFile, "/etc/infer/base", "v1"))
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(deviceFile, "/etc/infer/own", "own"))
	repo.WriteFile("devices/cam-018/d.yaml", "not read by cam-017: {")
	first := repo.Commit("one")
	c := newConfig(t, repo.Dir())
	c.Source.Path, c.Source.Paths = "", []string{"profiles", "devices/{device}"}
	require.NoError(t, c.Validate())

	var res *Result
	var tickErr error
	loop := NewLoop(&Reconciler{Config: c}, LoopOptions{Schedule: everyTick(time.Hour),
		OnTick: func(r *Result, err error) { res, tickErr = r, err }})
	tick := func() {
		t.Helper()
		loop.tick(context.Background(), loop.r.logger(), false)
	}
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(c.Root, p))
		require.NoError(t, err)
		return string(b)
	}

	tick()
	require.NoError(t, tickErr)
	require.Equal(t, first, res.Snapshot.Revision.Commit)
	require.Equal(t, 2, res.Plan.Summary().Add)
	require.Equal(t, "v1", read("etc/infer/base"))
	require.Equal(t, "own", read("etc/infer/own"))

	tick()
	require.NoError(t, tickErr)
	require.Equal(t, status.ResultNoop, res.Outcome(tickErr))

	repo.WriteFile("profiles/base.yaml", fmt.Sprintf(deviceFile, "/etc/infer/base", "v2"))
	second := repo.Commit("shared folder only")
	tick()
	require.NoError(t, tickErr)
	require.Equal(t, second, res.Snapshot.Revision.Commit)
	require.Equal(t, status.ResultSuccess, res.Outcome(tickErr))
	require.Equal(t, 1, res.Plan.Summary().Change)
	require.Equal(t, "v2", read("etc/infer/base"))

	// A commit that deletes the shared folder is refused, naming it; the
	// node keeps what it applied.
	repo.Remove("profiles")
	repo.Commit("drop the shared folder")
	tick()
	require.ErrorContains(t, tickErr, `source.paths of device cam-017`)
	require.ErrorContains(t, tickErr, `source path "profiles" not found`)
	require.Equal(t, "v2", read("etc/infer/base"))
}

// TestTickSeveralPathsOnDeviceBranch: with a branch per device, every
// source path is read on the device's branch.
func TestTickSeveralPathsOnDeviceBranch(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("README.md", "fleet")
	repo.Commit("root")
	repo.Branch("devices/cam-017")
	repo.WriteFile("common/base.yaml", fmt.Sprintf(deviceFile, "/etc/infer/base", "branch"))
	repo.WriteFile("own/d.yaml", fmt.Sprintf(deviceFile, "/etc/infer/own", "own"))
	rev := repo.Commit("cam-017")
	repo.Checkout("main")
	c := newConfig(t, repo.Dir())
	c.Source.Ref, c.Source.Path, c.Source.Paths = "devices/{device}", "", []string{"common", "own"}
	require.NoError(t, c.Validate())

	res, err := (&Reconciler{Config: c}).Apply(context.Background())
	require.NoError(t, err)
	require.Equal(t, rev, res.Snapshot.Revision.Commit)
	require.Equal(t, 2, res.Plan.Summary().Add)
	b, err := os.ReadFile(filepath.Join(c.Root, "etc/infer/base"))
	require.NoError(t, err)
	require.Equal(t, "branch", string(b))
}
