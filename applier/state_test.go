package applier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
)

// LockWithin waits for the stateDir lock as long as it is told, then
// names the holder; an interrupted wait blames no second tend.
func TestLockWithin(t *testing.T) {
	stateDir := t.TempDir()
	unlock, err := Lock(t.Context(), stateDir)
	require.NoError(t, err)
	defer unlock()

	_, err = LockWithin(t.Context(), stateDir, 150*time.Millisecond)
	var locked *LockedError
	require.True(t, errors.As(err, &locked), "%v", err)

	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	_, err = LockWithin(ctx, stateDir, time.Hour)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, errors.As(err, &locked), "interrupted, not refused: %v", err)
}

// tend retry and tend state restore lock the stateDir the same way: the
// stateDir lock (restore: and no agent), and nothing at all when there is
// nothing to change.
func TestStateCommandsLock(t *testing.T) {
	t.Run("retry without a quarantine takes no lock and makes no stateDir", func(t *testing.T) {
		stateDir := filepath.Join(t.TempDir(), "state")
		got, err := Retry(t.Context(), stateDir, "", StateOptions{})
		require.NoError(t, err)
		require.Empty(t, got)
		require.NoDirExists(t, stateDir)
	})
	t.Run("retry waits for the stateDir lock, and runs beside an agent", func(t *testing.T) {
		stateDir := t.TempDir()
		require.NoError(t, Quarantine(stateDir, "aaaa", Quarantined{Revision: "main@sha1:aaaa", Reason: "unhealthy"}))
		unlock, err := Lock(t.Context(), stateDir)
		require.NoError(t, err)
		_, err = Retry(t.Context(), stateDir, "", StateOptions{LockTimeout: 150 * time.Millisecond})
		var locked *LockedError
		require.True(t, errors.As(err, &locked), "%v", err)
		require.NoError(t, unlock())

		unlockAgent, err := LockAgent(stateDir)
		require.NoError(t, err)
		defer unlockAgent()
		got, err := Retry(t.Context(), stateDir, "", StateOptions{})
		require.NoError(t, err)
		require.Len(t, got, 1)
	})
	t.Run("restore is refused while an agent runs", func(t *testing.T) {
		stateDir := t.TempDir()
		d := statedir.Dir(stateDir)
		_, err := d.Migrate("v1", "")
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(d.FormatCopy(statedir.Format-1), 0o700))
		unlockAgent, err := LockAgent(stateDir)
		require.NoError(t, err)
		defer unlockAgent()
		_, _, err = RestoreState(t.Context(), stateDir, StateOptions{})
		require.EqualError(t, err, fmt.Sprintf("an agent runs on %s (pid %d): stop it first (systemctl stop tend), then restore", stateDir, os.Getpid()))
	})
	t.Run("restore without a copy says what to do", func(t *testing.T) {
		stateDir := t.TempDir()
		_, _, err := RestoreState(t.Context(), stateDir, StateOptions{})
		require.ErrorContains(t, err, "holds no copy to restore (it is in state format 1)")
	})
}
