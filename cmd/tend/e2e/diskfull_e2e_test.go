package e2e

// A disk another writer filled: the agent lets go of its reserve and
// still reverts a hand edit, and /status says the disk is full and where.

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// smallTmpfs mounts a tmpfs of size bytes on a new folder, unmounted when
// the test ends. It skips, saying why, where the test cannot mount.
func smallTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root: run the tests as root to cover a full disk")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s (%v): run the tests as root outside a container that forbids mounts to cover a full disk", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fillDisk appends to path until the filesystem has no block left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		b := make([]byte, chunk)
		for {
			if _, err := f.Write(b); err != nil {
				require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
				break
			}
		}
	}
}

func TestDiskFullStillRevertsAHandEdit(t *testing.T) {
	disk := smallTmpfs(t, 48<<20)
	content := strings.Repeat("threshold: 0.4\n", (256<<10)/15)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", content, "")))
	rev := repo.Commit("a config")
	n := newNode(t, repo.Dir(), "--schedule", "@every 1s",
		"--root", filepath.Join(disk, "root"), "--state-dir", filepath.Join(disk, "state"))
	n.root, n.state = filepath.Join(disk, "root"), filepath.Join(disk, "state")
	require.NoError(t, os.MkdirAll(n.root, 0o755))
	a := startAgent(t, n)
	eventually(t, func() bool { return a.status()["appliedRevision"] == "HEAD@sha1:"+rev })

	filler := filepath.Join(disk, "filler")
	fillDisk(t, filler)
	n.write("etc/infer/config.yaml", "hand edit\n") // frees the file's blocks
	fillDisk(t, filler)                             // and another writer takes them

	eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(n.root, "etc/infer/config.yaml"))
		return string(b) == content
	})
	full, _ := a.status()["diskFull"].(string)
	t.Logf("diskFull: %s", full)
	require.Contains(t, full, "disk full at "+n.state)
	require.Contains(t, full, "released its 8 MiB reserve "+filepath.Join(n.state, "reserve"))
	require.Contains(t, a.logs(), "disk full; released the disk reserve and ticking again")

	// Room again: the agent takes its reserve back and the status clears.
	require.NoError(t, os.Remove(filler))
	eventually(t, func() bool { _, ok := a.status()["diskFull"]; return !ok })
	fi, err := os.Stat(filepath.Join(n.state, "reserve"))
	require.NoError(t, err)
	require.Equal(t, int64(8<<20), fi.Size())
	a.stop()
}
