package testdocker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// sweep removes the folder of an engine whose test binary is gone, and
// leaves those of live test binaries and folders that are not engines'.
func TestSweepRemovesOrphans(t *testing.T) {
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	mk := func(owner int) string {
		dir, err := os.MkdirTemp("/tmp", dirPrefix)
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(dir) })
		if owner > 0 {
			require.NoError(t, os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(owner)), 0o644))
		}
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "d", "x"), 0o755))
		return dir
	}
	orphan, live, other := mk(dead.Process.Pid), mk(os.Getpid()), mk(0)
	sweep()
	require.NoDirExists(t, orphan)
	require.DirExists(t, live)
	require.DirExists(t, other)
}
