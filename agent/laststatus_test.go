package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tend-dev/tend/agent/status"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// The status file is written when the status changes, not at every no-op
// tick (each write is an fsync on the device's flash).
func TestLastStatusIsWrittenWhenItChanges(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "a"))
	repo.Commit("one")
	h := newHeldLoop(t, repo)
	file := statedir.Dir(h.r.Config.StateDir).Status()
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(file)
		require.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Ino
	}

	h.scheduled() // applies
	require.NoError(t, h.err)
	h.scheduled() // the first no-op: the result changed
	require.NoError(t, h.err)
	first := inode()
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, first, inode(), "a no-op tick leaves the file as it is")

	require.NoError(t, os.WriteFile(filepath.Join(h.r.Config.Root, "etc/infer/a"), []byte("edited"), 0o644))
	h.scheduled()
	require.NoError(t, h.err)
	require.NotEqual(t, first, inode(), "a tick that reverted drift is recorded")

	require.NoError(t, os.MkdirAll(filepath.Join(h.r.Config.Root, "etc/infer/b"), 0o755))
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "a")+"    - {path: /etc/infer/b, content: x}\n")
	repo.Commit("b in the way")
	h.scheduled()
	require.Error(t, h.err)
	data, _, err := status.ReadLast(h.r.Config.StateDir)
	require.NoError(t, err)
	require.Contains(t, string(data), "is a directory")
}
