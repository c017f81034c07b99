//go:build linux

package flock

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A missing lock file is a lock not held, and the probe never creates
// it; a shared lock is not the exclusive one that holds a release.
func TestProbe(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.lock")
	h, err := Probe(missing)
	require.NoError(t, err)
	require.False(t, h.Held)
	require.NoFileExists(t, missing)

	shared := filepath.Join(dir, "shared.lock")
	require.NoError(t, os.WriteFile(shared, nil, 0o644))
	f, err := os.Open(shared)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_SH))
	h, err = Probe(shared)
	require.NoError(t, err)
	require.False(t, h.Held)

	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_UN))
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	h, err = Probe(shared)
	require.NoError(t, err)
	require.Equal(t, Holder{Held: true, PID: os.Getpid()}, h, "held by this process, as /proc/locks says")

	_, err = Probe(filepath.Join(shared, "under-a-file.lock"))
	var pe *os.PathError
	require.ErrorAs(t, err, &pe, "a file that cannot be opened")
	require.Equal(t, "open", pe.Op)
}

func TestHolderPID(t *testing.T) {
	locks := "1: POSIX  ADVISORY  WRITE 10 fe:00:42 0 EOF\n" +
		"2: FLOCK  ADVISORY  READ  11 fe:00:42 0 EOF\n" +
		"3: FLOCK  ADVISORY  WRITE 12 fe:00:43 0 EOF\n" +
		"4: FLOCK  ADVISORY  WRITE 13 fe:00:42 0 EOF\n" +
		"4: -> FLOCK  ADVISORY  WRITE 14 fe:00:42 0 EOF\n"
	require.Equal(t, 13, holderPID(strings.NewReader(locks), 0xfe, 0, 42))
	require.Equal(t, 13, holderPID(strings.NewReader(locks), 0x1f, 3, 42), "the one lock on that inode, whatever its device")
	require.Equal(t, 0, holderPID(strings.NewReader(locks+"5: FLOCK  ADVISORY  WRITE 15 00:2c:42 0 EOF\n"), 0x1f, 3, 42),
		"two locks on the inode, on other devices: none is known")
	require.Equal(t, 0, holderPID(strings.NewReader(locks), 0xfe, 0, 44))
}
